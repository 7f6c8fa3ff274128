"""Indexing commands: add, scan, watch, status, reembed, cleanup and compact."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tether import GLOBAL_WORKSPACE, StoreError
from tether.cli._shell import (
    ConfigOption,
    DbOption,
    JsonOption,
    SessionOption,
    WorkspaceOption,
    cells,
    err,
    error_message,
    fail,
    flag,
    folded_table,
    load_model_visibly,
    open_tether,
    out,
    print_json,
    print_json_line,
    print_listing,
    progress_bar,
    say,
    short_time,
)

if TYPE_CHECKING:
    from tether import IndexResult, RegistryEntry, SyncReport, Tether

_KIND_NAMES = {".pdf": "PDF", ".md": "Markdown", ".txt": "text", ".html": "HTML", ".htm": "HTML"}


def add(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Files to index (PDF, Office, HTML, Markdown, text, e-books, mail, data,"
            " images: `tether formats` lists them), folders (the files of those formats"
            " under them), or web pages by their http(s) URL."
        ),
    ],
    workspace: WorkspaceOption = None,
    session: SessionOption = None,
    global_: Annotated[
        bool, flag("--global", help="Add to the shared global library (the default).")
    ] = False,
    domain: Annotated[str | None, typer.Option(help="Tag: domain (policy.domains).")] = None,
    source_type: Annotated[
        str | None, typer.Option(help="Tag: policy | guide | log | link | contract.")
    ] = None,
    project: Annotated[str | None, typer.Option(help="Tag: project id.")] = None,
    last_verified: Annotated[
        str | None, typer.Option(help="Tag: ISO-8601 date or time it was last verified.")
    ] = None,
    version: Annotated[str | None, typer.Option(help="Tag: document version.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            help="active | draft | pending (draft and pending are not searched);"
            " default: keep the document's, new ones active."
        ),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index files, folders and web pages into a workspace, attaching them to a session if
    given."""
    named = (domain, source_type, project, last_verified, version)
    tags = {k: v for k, v in zip(_TAGS, named, strict=True) if v is not None} or None
    if global_ and workspace not in (None, GLOBAL_WORKSPACE):
        fail("--global and --workspace contradict each other", code=2)
    workspace = GLOBAL_WORKSPACE if global_ else workspace
    with open_tether(db, config) as tether:
        load_model_visibly(tether, vectors=False)
        results = _index_paths(
            tether, paths, workspace, session, tags, status, show_progress=not as_json
        )
    # The store's own failure (a full disk, a read-only store) is no source's: one line.
    store_failure = next((r.error for r in results if isinstance(r.error, StoreError)), None)
    if as_json:
        print_json({"results": [r.to_dict() for r in results]})
    else:
        _print_index_results([r for r in results if not isinstance(r.error, StoreError)])
    if store_failure is not None:
        fail(error_message(store_failure))
    if any(r.error is not None for r in results):
        raise typer.Exit(1)


_TAGS = ("domain", "source_type", "project_id", "last_verified", "version")


def _index_paths(
    tether: Tether,
    paths: list[str],
    workspace: str | None,
    session: str | None,
    tags: dict[str, str] | None,
    status: str | None,
    *,
    show_progress: bool,
) -> list[IndexResult]:
    """Index the files among ``paths``, then fetch and index the web pages (http(s) URLs)."""
    urls = [p for p in paths if p.startswith(("http://", "https://"))]
    files = [Path(p) for p in paths if p not in urls]
    results = []
    if files:
        results = _index_files(
            tether, files, workspace, session, tags, status, show_progress=show_progress
        )
    for url in urls:
        results += tether.add_url(
            url,
            workspace_id=workspace,
            session_id=session,
            tags=tags,
            status=status,  # type: ignore[arg-type]
            on_error="collect",
        )
    return results


def _index_files(
    tether: Tether,
    paths: list[Path],
    workspace: str | None,
    session: str | None,
    tags: dict[str, str] | None,
    status: str | None,
    *,
    show_progress: bool,
) -> list[IndexResult]:
    with progress_bar("[progress.description]{task.description}", disable=not show_progress) as bar:
        task = bar.add_task("Indexing", total=len(paths))

        def advance(done: int, total: int, result: IndexResult) -> None:
            name = escape(Path(result.source).name)
            kind = _KIND_NAMES.get(Path(result.source).suffix.lower(), "file")
            bar.update(task, completed=done, description=f"{kind} {done} of {total} done ({name})")

        return tether.add(
            paths,
            workspace_id=workspace,
            session_id=session,
            tags=tags,
            status=status,  # type: ignore[arg-type]
            on_error="collect",
            progress=advance,
        )


def _print_index_results(results: list[IndexResult]) -> None:
    for r in results:
        if r.error is not None:
            err.print(f"[red]failed[/]   {escape(str(r.error))}", highlight=False)
        else:
            out.print(
                f"[green]{r.status:<8}[/] {escape(r.source)} -> {r.document_id}"
                f" ({r.chunk_count} chunks)",
                highlight=False,
            )


def cleanup(
    retention: Annotated[
        str, typer.Option(help="How long a document stays stale before it goes: 7d, 12h, 2w.")
    ] = "7d",
    dry_run: Annotated[bool, flag("--dry-run", help="List, delete nothing.")] = False,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete documents of closed sessions once they have been stale for --retention."""
    with open_tether(db, config) as tether:
        report = tether.cleanup(retention, dry_run=dry_run)
    if as_json:
        print_json(report.to_dict())
        return
    verb = "would delete" if dry_run else "deleted"
    if not report.documents:
        say(f"Nothing stale for longer than {retention}.")
        return
    for d in report.documents:
        say(f"{verb} {d.id}  {d.title}  ({d.chunk_count} chunks, stale since {d.stale_at})")


def compact(
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rewrite the full-text index compactly, after heavy churn (writes wait, reads go on)."""
    with open_tether(db, config) as tether:
        report = tether.compact()
    if as_json:
        print_json(report.to_dict())
        return
    if report.segments_before is None:
        say("Nothing to compact: this store keeps no full-text index segments.")
        return
    say(
        f"Full-text index: {report.segments_before} segments, {report.pages_before:,} pages"
        f" -> {report.segments_after} segment(s), {report.pages_after:,} pages"
        f" ({report.seconds:.1f} s)"
    )


LibraryWorkspaceOption = Annotated[
    str, typer.Option(help="Workspace the files go to (default: the global library).")
]
FolderArgument = Annotated[
    Path, typer.Argument(help="The library folder.", exists=True, file_okay=False)
]


def scan(
    folder: FolderArgument,
    workspace: LibraryWorkspaceOption = GLOBAL_WORKSPACE,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index FOLDER once: new and changed files, renames, removals, due retries."""
    with open_tether(db, config) as tether:
        report = tether.scan(folder, workspace_id=workspace)
    if as_json:
        print_json(report.to_dict())
    else:
        _print_sync(report)
    if report.failed:
        raise typer.Exit(1)


def watch(
    folder: FolderArgument,
    workspace: LibraryWorkspaceOption = GLOBAL_WORKSPACE,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Keep FOLDER indexed: scan it, then follow its changes until Ctrl-C."""
    stop = threading.Event()
    report_pass = _print_sync_line if as_json else _print_sync
    with open_tether(db, config) as tether:
        err.print(f"watching {folder.resolve()} (Ctrl-C to stop)", highlight=False, markup=False)
        try:
            tether.watch(folder, workspace_id=workspace, stop=stop, on_pass=report_pass)
        except KeyboardInterrupt:
            stop.set()
            err.print("stopped", highlight=False)


def _print_sync_line(report: SyncReport) -> None:
    print_json_line(report.to_dict())


def _print_sync(report: SyncReport) -> None:
    for path in report.indexed:
        out.print(f"[green]indexed[/]  {escape(path)}", highlight=False)
    for old, new in report.renamed:
        out.print(f"[cyan]renamed[/]  {escape(old)} -> {escape(new)}", highlight=False)
    for path in report.deleted:
        out.print(f"[yellow]deleted[/]  {escape(path)}", highlight=False)
    for path in report.failed:
        why = report.errors.get(path)
        err.print(
            f"[red]failed[/]   {escape(path)}{escape(f': {why}' if why else '')}", highlight=False
        )
    for path in report.refused:
        err.print(f"[red]refused[/]  {escape(path)} (leads outside the folder)", highlight=False)
    for path in report.unsupported:
        err.print(
            f"[yellow]unsupported[/] {escape(path)} (not a format tether reads)", highlight=False
        )
    if report.unsettled:
        err.print(
            f"{len(report.unsettled)} file(s) still being written; next pass", highlight=False
        )
    if report.unchanged and not (report.indexed or report.renamed or report.deleted):
        out.print(f"{len(report.unchanged)} file(s) unchanged", highlight=False)


def status(
    folder: Annotated[
        Path | None, typer.Argument(help="Only files under this folder.", show_default=False)
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the library registry: each file's status, retries, times and last error."""
    with open_tether(db, config, must_exist=True) as tether:
        entries = tether.registry(folder)
    print_listing(
        "files",
        entries,
        _registry_table,
        empty="The library registry is empty (tether scan DIR fills it).",
        as_json=as_json,
    )


def _registry_table(entries: list[RegistryEntry]) -> Table:
    table = folded_table("file", "status", "retries", "last indexed", "document", "error")
    for entry in entries:
        table.add_row(
            *cells(
                entry.source_path,
                entry.status,
                str(entry.retry_count),
                short_time(entry.last_indexed_at or "-"),
                entry.document_id or "-",
                entry.error or "",
            )
        )
    return table


def reembed(
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Embed every chunk that has no vector for the configured model (after a model switch)."""
    with open_tether(db, config) as tether:
        # The one command that needs the embedder itself: without one, say why.
        if tether.embedder is None:
            fail(str(tether.embeddings_unavailable))
        with progress_bar(disable=as_json) as bar:
            task = bar.add_task(f"Embedding with {tether.embedder.model}", total=None)
            report = tether.reembed(
                progress=lambda done, total: bar.update(task, completed=done, total=total)
            )
    if as_json:
        print_json(dataclasses.asdict(report))
        return
    out.print(
        f"{report.model}: embedded {report.chunks_embedded} new chunk texts across"
        f" {report.documents} documents",
        highlight=False,
    )


def formats(as_json: JsonOption = False) -> None:
    """List the kinds of file tether reads: extensions, what a citation points at, the
    library that reads each (and the extra it comes with)."""
    from tether.ingest.formats import FORMATS

    if as_json:
        print_json(
            {
                "formats": [
                    {
                        "name": f.name,
                        "extensions": list(f.extensions),
                        "mime": f.mime,
                        "cites": f.cites,
                        "reader": f.reader,
                        "extra": f.extra,
                    }
                    for f in FORMATS
                ]
            }
        )
        return
    table = folded_table("format", "files", "a citation points at", "read by")
    for f in FORMATS:
        reader = f.reader if f.extra is None else f"{f.reader} (extra {f.extra})"
        table.add_row(*cells(f.name, " ".join(f.extensions), f.cites, reader))
    out.print(table)
