"""The ``tether`` command: a thin shell. Parse, make one library call, print, map errors."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from tether._tether import Tether
from tether.errors import TetherError
from tether.models import GLOBAL_WORKSPACE, Document
from tether.settings import Settings

app = typer.Typer(
    help="tether: scoped, cited retrieval over your documents, in one SQLite file.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
docs_app = typer.Typer(help="List, inspect and remove documents.", no_args_is_help=True)
sessions_app = typer.Typer(
    help="Create and close sessions; attach and detach documents.", no_args_is_help=True
)
app.add_typer(docs_app, name="docs")
app.add_typer(sessions_app, name="sessions")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="SQLite file to use (default: $TETHER_DB, then `db` in tether.toml, then tether.db).",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML settings file (default: $TETHER_CONFIG or ./tether.toml).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (stable keys, see README).")]
WorkspaceOption = Annotated[
    str | None, typer.Option("--workspace", "-w", help="Workspace id.", show_default=False)
]
ScopeOption = Annotated[
    Literal["session", "workspace", "global"] | None,
    typer.Option("--scope", help="Where to look (default: rag.scope).", show_default=False),
]
SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Session id.", show_default=False)
]

T = TypeVar("T")


@app.callback()
def _quiet_parsers() -> None:
    # pypdf logs each defect of a malformed PDF; the file's typed error already says it.
    logging.getLogger("pypdf").setLevel(logging.ERROR)


def main() -> None:
    app()


@contextmanager
def _tether(db: Path | None, config: Path | None, **overrides: Any) -> Iterator[Tether]:
    """Open the store; map library errors to a one-line message and exit code 1."""
    try:
        if db is not None:
            overrides["db"] = str(db)
        with Tether(settings=Settings.load(config, **overrides)) as tether:
            yield tether
    except TetherError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


@app.command()
def add(
    paths: Annotated[list[Path], typer.Argument(help="Files to index (.md .txt .pdf .html).")],
    workspace: WorkspaceOption = None,
    session: SessionOption = None,
    global_: Annotated[
        bool, typer.Option("--global", help="Add to the shared global library (the default).")
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
    """Index files into a workspace, attaching them to a session if given."""
    raw_tags = {
        "domain": domain,
        "source_type": source_type,
        "project_id": project,
        "last_verified": last_verified,
        "version": version,
    }
    tags = {k: v for k, v in raw_tags.items() if v is not None} or None
    if global_ and workspace not in (None, GLOBAL_WORKSPACE):
        err.print("[bold red]error:[/] --global and --workspace contradict each other")
        raise typer.Exit(2)
    workspace = GLOBAL_WORKSPACE if global_ else workspace
    with _tether(db, config) as tether:
        progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=as_json or not err.is_terminal,
        )
        with progress:
            task = progress.add_task("Indexing", total=len(paths))

            def advance(done: int, total: int, result: Any) -> None:
                name = escape(Path(result.source).name)
                kind = _KIND_NAMES.get(Path(result.source).suffix.lower(), "file")
                progress.update(
                    task, completed=done, description=f"{kind} {done} of {total} done ({name})"
                )

            results = tether.add(
                paths,
                workspace_id=workspace,
                session_id=session,
                tags=tags,
                status=status,  # type: ignore[arg-type]
                on_error="collect",
                progress=advance,
            )
    if as_json:
        _print_json({"results": [r.to_dict() for r in results]})
    else:
        for r in results:
            if r.error is not None:
                err.print(f"[red]failed[/]   {escape(str(r.error))}", highlight=False)
            else:
                out.print(
                    f"[green]{r.status:<8}[/] {escape(r.source)} -> {r.document_id}"
                    f" ({r.chunk_count} chunks)",
                    highlight=False,
                )
    if any(r.error is not None for r in results):
        raise typer.Exit(1)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for (any text is safe).")],
    scope: ScopeOption = None,
    session: SessionOption = None,
    workspace: WorkspaceOption = None,
    k: Annotated[int, typer.Option("--k", "-k", help="How many chunks.", min=1, max=1000)] = 10,
    mode: Annotated[
        Literal["hybrid", "lexical", "vector"],
        typer.Option("--mode", help="hybrid: FTS5 and vectors, fused; or one of them alone."),
    ] = "hybrid",
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search chunks inside a scope; print the cited hits."""
    with _tether(db, config) as tether:
        resolved = tether.resolve_scope(scope, session_id=session, workspace_id=workspace)
        hits = tether.search(query, scope=resolved, k=k, mode=mode)
    if as_json:
        debug = {key: value for key, value in hits.debug.items() if key != "ranks"}
        _print_json(
            {
                "query": query,
                "scope": resolved.to_dict(),
                "k": k,
                "hits": [hit.to_dict() for hit in hits],
                "debug": debug,
            }
        )
        return
    for degradation in hits.debug["degradations"]:
        err.print(f"[yellow]note:[/] {escape(str(degradation))}", highlight=False)
    if hits.debug.get("scope_exists") is False:
        err.print(
            f"[yellow]note:[/] there is no {resolved.kind} {escape(repr(resolved.id))} in this"
            f" store (`tether {'sessions' if resolved.kind == 'session' else 'docs'} list`"
            " shows what there is)",
            highlight=False,
        )
    if not hits:
        out.print(
            f"No matches in {resolved.kind} {resolved.id!r}. Try a wider scope"
            " (session -> workspace -> global) or add documents.",
            highlight=False,
            markup=False,
        )
        return
    for number, hit in enumerate(hits, start=1):
        where = " · ".join(
            part
            for part in (
                hit.section_title,
                f"page {hit.page}" if hit.page is not None else None,
                hit.source_path and Path(hit.source_path).name,
            )
            if part
        )
        out.print(
            f"[bold]\\[{number}][/] [cyan]{escape(hit.title)}[/]  [dim]{escape(where)}[/]  "
            f"[dim]score {hit.score:.3f} · {escape(hit.document_id)}#{hit.chunk_id}[/]",
            highlight=False,
            soft_wrap=True,
        )
        snippet = " ".join(hit.text.split())
        out.print(
            f"    {snippet[:300]}{'…' if len(snippet) > 300 else ''}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


@app.command()
def context(
    question: Annotated[str, typer.Argument(help="The user's question or message.")],
    scope: ScopeOption = None,
    session: SessionOption = None,
    workspace: WorkspaceOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build the cited context block an LLM would get for QUESTION (the whole pipeline)."""
    with _tether(db, config) as tether:
        result = tether.retrieve(
            question,
            scope=scope,
            session_id=session,
            workspace_id=workspace,  # type: ignore[arg-type]
        )
    if as_json:
        _print_json(result.to_dict())
        return
    for degradation in result.debug["degradations"]:
        err.print(f"[yellow]note:[/] {escape(str(degradation))}", highlight=False)
    if not result.retrieved:
        out.print(
            f"No retrieval: {result.debug['decision']['reason']}.", highlight=False, markup=False
        )
        return
    if not result.grounded:
        out.print(f"Not grounded. {result.guidance}", highlight=False, markup=False)
        return
    out.print(result.context, highlight=False, markup=False, soft_wrap=True)
    out.print()
    for citation in result.citations:
        where = " · ".join(
            part
            for part in (
                citation.section_title,
                _pages(citation.pages),
                citation.source_path and Path(citation.source_path).name,
            )
            if part
        )
        chunks = ",".join(str(c) for c in citation.chunk_ids)
        out.print(
            f"[bold]{escape(citation.label)}[/] [cyan]{escape(citation.title)}[/]"
            f"  [dim]{escape(where)}[/]  [dim]{escape(citation.document_id)}#{chunks}"
            f" · relevance {citation.relevance:.2f}[/]",
            highlight=False,
            soft_wrap=True,
        )


def _pages(pages: tuple[int, ...]) -> str | None:
    if not pages:
        return None
    return f"page {pages[0]}" if len(pages) == 1 else f"pages {pages[0]}-{pages[-1]}"


_KIND_NAMES = {".pdf": "PDF", ".md": "Markdown", ".txt": "text", ".html": "HTML", ".htm": "HTML"}
_KINDS = {"text/markdown": "md", "text/plain": "txt", "application/pdf": "pdf", "text/html": "html"}


def _cells(*values: str) -> list[Text]:
    """Table cells shown as they are: a title like ``[red] notes`` is text, not markup."""
    return [Text(value) for value in values]


def _documents_table(documents: list[Document]) -> Table:
    table = Table("title", "kind", "chunks", "workspace", "sessions")
    table.columns[0].ratio = 3
    table.add_column("id", no_wrap=True, min_width=16)
    for d in documents:
        kind = _KINDS.get(d.mime, d.mime)
        sessions = ", ".join(d.session_ids)
        table.add_row(*_cells(d.title, kind, str(d.chunk_count), d.workspace_id, sessions, d.id))
    return table


@docs_app.command("list")
def docs_list(
    workspace: WorkspaceOption = None,
    session: SessionOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List documents (optionally of one workspace or session)."""
    with _tether(db, config) as tether:
        documents = tether.documents(workspace_id=workspace, session_id=session)
    if as_json:
        _print_json({"documents": [d.to_dict() for d in documents]})
    elif documents:
        out.print(_documents_table(documents))
    else:
        out.print("No documents.")


@docs_app.command("show")
def docs_show(
    document_id: Annotated[str, typer.Argument(help="Document id.")],
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one document and its chunks."""
    with _tether(db, config) as tether:
        document = tether.get_document(document_id)
        chunks = tether.chunks(document_id)
    if as_json:
        _print_json(
            {
                "document": document.to_dict(),
                "chunks": [
                    {
                        "chunk_id": c.id,
                        "ordinal": c.ordinal,
                        "section_title": c.section_title,
                        "page": c.page,
                        "char_start": c.char_start,
                        "char_end": c.char_end,
                        "token_count": c.token_count,
                        "text": c.content,
                    }
                    for c in chunks
                ],
            }
        )
        return
    out.print(_documents_table([document]))
    if document.tags is not None:
        tags = " · ".join(f"{k} {v}" for k, v in document.tags.to_dict().items() if v)
        out.print(f"tags: {tags}", highlight=False, markup=False)
    if document.status != "active":
        out.print(f"status: {document.status} (not searched until approved)", highlight=False)
    for c in chunks:
        where = " · ".join(p for p in (c.section_title, c.page and f"page {c.page}") if p)
        out.print(
            f"[bold]#{c.id}[/] [dim]{c.char_start}-{c.char_end} {escape(where)}[/]", highlight=False
        )


@docs_app.command("rm")
def docs_rm(
    document_ids: Annotated[list[str], typer.Argument(help="Document ids to delete.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Delete documents with their chunks, embeddings and session attachments."""
    _each_document(db, config, document_ids, "deleted", lambda t, d: t.delete_document(d))


@docs_app.command("approve")
def docs_approve(
    document_ids: Annotated[list[str], typer.Argument(help="Document ids to approve.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Make draft or pending (user-submitted) documents active, i.e. searchable."""
    _each_document(db, config, document_ids, "approved", lambda t, d: t.approve(d))


def _each_document(
    db: Path | None,
    config: Path | None,
    document_ids: list[str],
    verb: str,
    action: Callable[[Tether, str], object],
) -> None:
    with _tether(db, config) as tether:
        for document_id in document_ids:  # all of them exist, or nothing is done
            tether.get_document(document_id)
        for document_id in document_ids:
            action(tether, document_id)
            out.print(f"{verb} {document_id}", highlight=False, markup=False)


@app.command()
def cleanup(
    retention: Annotated[
        str, typer.Option(help="How long a document stays stale before it goes: 7d, 12h, 2w.")
    ] = "7d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, delete nothing.")] = False,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete documents of closed sessions once they have been stale for --retention."""
    with _tether(db, config) as tether:
        report = tether.cleanup(retention, dry_run=dry_run)
    if as_json:
        _print_json(report.to_dict())
        return
    verb = "would delete" if dry_run else "deleted"
    if not report.documents:
        out.print(f"Nothing stale for longer than {retention}.", highlight=False, markup=False)
        return
    for d in report.documents:
        out.print(
            f"{verb} {d.id}  {d.title}  ({d.chunk_count} chunks, stale since {d.stale_at})",
            highlight=False,
            markup=False,
        )


LibraryWorkspaceOption = Annotated[
    str, typer.Option(help="Workspace the files go to (default: the global library).")
]
FolderArgument = Annotated[
    Path, typer.Argument(help="The library folder.", exists=True, file_okay=False)
]


@app.command()
def scan(
    folder: FolderArgument,
    workspace: LibraryWorkspaceOption = GLOBAL_WORKSPACE,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index FOLDER once: new and changed files, renames, removals, due retries."""
    with _tether(db, config) as tether:
        report = tether.scan(folder, workspace_id=workspace)
    if as_json:
        _print_json(report.to_dict())
    else:
        _print_sync(report)
    if report.failed:
        raise typer.Exit(1)


@app.command()
def watch(
    folder: FolderArgument,
    workspace: LibraryWorkspaceOption = GLOBAL_WORKSPACE,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Keep FOLDER indexed: scan it, then follow its changes until Ctrl-C."""
    import threading

    stop = threading.Event()
    with _tether(db, config) as tether:
        err.print(f"watching {folder.resolve()} (Ctrl-C to stop)", highlight=False, markup=False)
        try:
            tether.watch(folder, workspace_id=workspace, stop=stop, on_pass=_print_sync)
        except KeyboardInterrupt:
            stop.set()
            err.print("stopped", highlight=False)


def _print_sync(report: Any) -> None:
    for path in report.indexed:
        out.print(f"[green]indexed[/]  {escape(path)}", highlight=False)
    for old, new in report.renamed:
        out.print(f"[cyan]renamed[/]  {escape(old)} -> {escape(new)}", highlight=False)
    for path in report.deleted:
        out.print(f"[yellow]deleted[/]  {escape(path)}", highlight=False)
    for path in report.failed:
        err.print(f"[red]failed[/]   {escape(path)}", highlight=False)
    for path in report.refused:
        err.print(f"[red]refused[/]  {escape(path)} (leads outside the folder)", highlight=False)
    if report.unsettled:
        err.print(
            f"{len(report.unsettled)} file(s) still being written; next pass", highlight=False
        )
    if report.unchanged and not (report.indexed or report.renamed or report.deleted):
        out.print(f"{len(report.unchanged)} file(s) unchanged", highlight=False)


@app.command()
def status(
    folder: Annotated[
        Path | None, typer.Argument(help="Only files under this folder.", show_default=False)
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the library registry: each file's status, retries, times and last error."""
    with _tether(db, config) as tether:
        rows = tether.registry(folder)
    if as_json:
        _print_json({"files": rows})
        return
    if not rows:
        out.print("The library registry is empty (tether scan DIR fills it).")
        return
    table = Table()
    for column in ("file", "status", "retries", "last indexed", "document", "error"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            *_cells(
                row["source_path"],
                row["status"],
                str(row["retry_count"]),
                (row["last_indexed_at"] or "-")[:19].replace("T", " "),
                row["document_id"] or "-",
                row["error"] or "",
            )
        )
    out.print(table)


@app.command("log")
def log_(
    limit: Annotated[int, typer.Option(help="How many rows, newest first.", min=1)] = 20,
    outcome: Annotated[
        str | None,
        typer.Option(help="Only this outcome: grounded | ungrounded | skipped | blocked | error."),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the retrieval audit log (ids, sanitized queries and outcomes; never text)."""
    with _tether(db, config) as tether:
        rows = tether.retrieval_log(limit, outcome)
    if as_json:
        _print_json({"entries": rows})
        return
    if not rows:
        out.print("The audit log is empty.")
        return
    table = Table()
    for column in ("time", "outcome", "scope", "query", "chunks", "retrieval id"):
        table.add_column(column, overflow="fold")
    for row in rows:
        scope = f"{row['scope']['kind']}:{row['scope']['id']}"
        outcome_text = row["outcome"] + (f" ({row['reason']})" if row["reason"] else "")
        table.add_row(
            *_cells(
                row["created_at"][:19].replace("T", " "),
                outcome_text,
                scope,
                row["query"],
                ",".join(str(c) for c in row["chunk_ids"]) or "-",
                row["retrieval_id"],
            )
        )
    out.print(table)


def _session_call(db: Path | None, config: Path | None, call: Callable[[Tether], T]) -> T:
    with _tether(db, config) as tether:
        return call(tether)


@sessions_app.command("list")
def sessions_list(
    workspace: WorkspaceOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions (optionally of one workspace)."""
    sessions = _session_call(db, config, lambda t: t.sessions(workspace_id=workspace))
    if as_json:
        _print_json({"sessions": [s.__dict__ for s in sessions]})
        return
    table = Table("id", "workspace", "created", "closed")
    for s in sessions:
        table.add_row(*_cells(s.id, s.workspace_id, s.created_at[:19], (s.closed_at or "")[:19]))
    out.print(table if sessions else "No sessions.")


@sessions_app.command("create")
def sessions_create(
    session_id: Annotated[str, typer.Argument(help="New session id.")],
    workspace: Annotated[str, typer.Option("--workspace", "-w", help="Its workspace.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Create a session in a workspace."""
    s = _session_call(db, config, lambda t: t.create_session(session_id, workspace_id=workspace))
    out.print(f"session {s.id} in workspace {s.workspace_id}", highlight=False, markup=False)


@sessions_app.command("close")
def sessions_close(
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Mark a session closed."""
    s = _session_call(db, config, lambda t: t.close_session(session_id))
    out.print(f"session {s.id} closed at {s.closed_at}", highlight=False, markup=False)


@sessions_app.command("attach")
def sessions_attach(
    document_id: Annotated[str, typer.Argument(help="Document id.")],
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Attach a document to a session (its workspace's or a global document)."""
    new = _session_call(db, config, lambda t: t.attach(document_id, session_id))
    out.print(
        f"{'attached' if new else 'already attached'}: {document_id} -> {session_id}",
        highlight=False,
        markup=False,
    )


@sessions_app.command("detach")
def sessions_detach(
    document_id: Annotated[str, typer.Argument(help="Document id.")],
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Detach a document from a session; the document itself stays."""
    was = _session_call(db, config, lambda t: t.detach(document_id, session_id))
    out.print(
        f"{'detached' if was else 'was not attached'}: {document_id} -/- {session_id}",
        highlight=False,
        markup=False,
    )


@app.command()
def reembed(
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Embed every chunk that has no vector for the configured model (after a model switch)."""
    with _tether(db, config) as tether:
        if tether.embedder is None:
            err.print(
                f"[bold red]error:[/] {escape(str(tether.embeddings_unavailable))}",
                highlight=False,
            )
            raise typer.Exit(1)
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal,
        ) as progress:  # fmt: skip
            task = progress.add_task(f"Embedding with {tether.embedder.model}", total=None)
            report = tether.reembed(
                progress=lambda done, total: progress.update(task, completed=done, total=total)
            )
    out.print(
        f"{report.model}: embedded {report.chunks_embedded} new chunk texts across"
        f" {report.documents} documents",
        highlight=False,
    )


@app.command("eval")
def eval_(
    directory: Annotated[Path, typer.Argument(help="BEIR-format dataset directory.")],
    split: Annotated[str, typer.Option(help="qrels split to score.")] = "test",
    db: Annotated[
        Path | None,
        typer.Option(
            "--db",
            help="Store to index into and reuse (default: a temporary file).",
            show_default=False,
        ),
    ] = None,
    lexical_only: Annotated[
        bool, typer.Option("--lexical-only", help="Score FTS5 alone (no vectors are used).")
    ] = False,
    pipeline: Annotated[
        bool,
        typer.Option(
            "--pipeline",
            help="Also run the full pipeline (retrieve): its nDCG@10 and context recall.",
        ),
    ] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index a BEIR dataset and print nDCG@10, Recall@100 and query latency."""
    import tempfile

    from tether import eval as beir

    with tempfile.TemporaryDirectory(prefix="tether-eval-") as tmp:
        store = db if db is not None else Path(tmp) / "eval.db"
        # Lexical-only runs need no vectors: do not spend time computing them.
        overrides = {"rag": {"embeddings": {"enabled": False}}} if lexical_only else {}
        with _tether(store, config, **overrides) as tether:
            dataset = beir.load_beir(directory, split=split)
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
                disable=not err.is_terminal,
            ) as progress:
                task = progress.add_task(f"Indexing {dataset.name}", total=None)
                indexing = beir.index_dataset(
                    tether, dataset, progress=lambda n: progress.update(task, completed=n)
                )
            report = beir.evaluate(
                tether, dataset, mode="lexical" if lexical_only else "hybrid", pipeline=pipeline
            )
            report = dataclasses.replace(report, unindexed=len(indexing.failed))
    if indexing.failed:
        shown = "; ".join(f"{entry}: {reason}" for entry, reason in indexing.failed[:3])
        more = f" and {len(indexing.failed) - 3} more" if len(indexing.failed) > 3 else ""
        err.print(
            f"note: {len(indexing.failed)} corpus entries could not be indexed and count as"
            f" never retrieved ({shown}{more})",
            highlight=False,
            markup=False,
        )
    if as_json:
        _print_json(report.to_dict())
        return
    out.print(
        f"{report.dataset}: {report.queries} queries, {report.documents} documents,"
        f" {report.method} retrieval",
        markup=False,
    )
    out.print(
        "settings: "
        + (f"not the defaults: {', '.join(report.settings)}" if report.settings else "defaults"),
        markup=False,
        highlight=False,
    )
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("nDCG@10", f"{report.ndcg_at_10:.4f}")
    table.add_row("Recall@100", f"{report.recall_at_100:.4f}")
    table.add_row("latency p50", f"{report.latency_ms_p50:.1f} ms")
    table.add_row("latency p95", f"{report.latency_ms_p95:.1f} ms")
    if report.pipeline is not None:
        p = report.pipeline
        table.add_row("pipeline nDCG@10", f"{p.ndcg_at_10:.4f}")
        table.add_row("context recall", f"{p.context_recall:.4f}")
        table.add_row("grounded", f"{p.grounded:.4f}")
        table.add_row("chunks in context (mean)", f"{p.mean_context_chunks:.2f}")
        table.add_row("skipped by the decision", str(p.skipped))
        table.add_row("pipeline latency p50", f"{p.latency_ms_p50:.1f} ms")
        table.add_row("pipeline latency p95", f"{p.latency_ms_p95:.1f} ms")
    out.print(table)
    if report.pipeline is not None:
        trade = Table(title="relevance threshold: answered share vs precision@10")
        for column in ("threshold", "answered", "precision@10", "a relevant chunk kept"):
            trade.add_column(column, justify="right")
        for row in report.pipeline.thresholds:
            trade.add_row(
                f"{row['threshold']:.2f}",
                f"{row['answered']:.3f}",
                f"{row['precision_at_k']:.3f}",
                f"{row['recall_any']:.3f}",
            )
        out.print(trade)


if __name__ == "__main__":  # pragma: no cover
    main()
