"""Retrieval commands: search (ranked chunks) and context (the whole pipeline)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.markup import escape

from tether import MAX_K
from tether.cli._shell import (
    ConfigOption,
    DbOption,
    JsonOption,
    ScopeOption,
    SessionOption,
    WorkspaceOption,
    err,
    open_tether,
    out,
    place,
    print_degradations,
    print_json,
    say,
)

if TYPE_CHECKING:
    from tether import Citation, Hit, RetrievalResult, SearchResults


def search(
    query: Annotated[str, typer.Argument(help="What to look for (any text is safe).")],
    scope: ScopeOption = None,
    session: SessionOption = None,
    workspace: WorkspaceOption = None,
    k: Annotated[int, typer.Option("--k", "-k", help="How many chunks.", min=1, max=MAX_K)] = 10,
    mode: Annotated[
        Literal["hybrid", "lexical", "vector"],
        typer.Option("--mode", help="hybrid: FTS5 and vectors, fused; or one of them alone."),
    ] = "hybrid",
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search chunks inside a scope; print the cited hits."""
    with open_tether(db, config, must_exist=True) as tether:
        hits = tether.search(
            query, scope=scope, session_id=session, workspace_id=workspace, k=k, mode=mode
        )
    if as_json:
        print_json(hits.to_dict())
    else:
        _print_hits(hits)


def _print_hits(hits: SearchResults) -> None:
    scope = hits.scope
    print_degradations(hits.debug)
    if hits.debug.get("scope_exists") is False:
        listing = "sessions" if scope.kind == "session" else "docs"
        err.print(
            f"[yellow]note:[/] there is no {scope.kind} {escape(repr(scope.id))} in this"
            f" store (`tether {listing} list` shows what there is)",
            highlight=False,
        )
    if not hits:
        say(
            f"No matches in {scope.kind} {scope.id!r}. Try a wider scope"
            " (session -> workspace -> global) or add documents."
        )
    for number, hit in enumerate(hits, start=1):
        _print_hit(number, hit)


def _print_hit(number: int, hit: Hit) -> None:
    where = place(
        hit.section_title,
        f"page {hit.page}" if hit.page is not None else None,
        hit.source_path and Path(hit.source_path).name,
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
    with open_tether(db, config, must_exist=True) as tether:
        result = tether.retrieve(
            question,
            scope=scope,
            session_id=session,
            workspace_id=workspace,  # type: ignore[arg-type]
        )
    if as_json:
        print_json(result.to_dict())
    else:
        _print_context(result)


def _print_context(result: RetrievalResult) -> None:
    print_degradations(result.debug)
    if not result.retrieved:
        say(f"No retrieval: {result.debug['decision']['reason']}.")
    elif not result.grounded:
        say(f"Not grounded. {result.guidance}")
        why = result.debug.get("grounding", {}).get("why")
        if why:
            say(f"Why: {why}.")
    else:
        out.print(result.context, highlight=False, markup=False, soft_wrap=True)
        out.print()
        for citation in result.citations:
            _print_citation(citation)


def _print_citation(citation: Citation) -> None:
    where = place(
        citation.section_title,
        _pages(citation.pages, citation.page_label),
        citation.source_path and Path(citation.source_path).name,
    )
    chunks = ",".join(str(c) for c in citation.chunk_ids)
    out.print(
        f"[bold]{escape(citation.label)}[/] [cyan]{escape(citation.title)}[/]"
        f"  [dim]{escape(where)}[/]  [dim]{escape(citation.document_id)}#{chunks}"
        f" · evidence {citation.relevance:.2f}[/]",
        highlight=False,
        soft_wrap=True,
    )


def _pages(pages: tuple[int, ...], first_label: str | None = None) -> str | None:
    if not pages:
        return None
    if first_label:  # the printed page, then where a PDF viewer shows it
        return f"page {first_label} (PDF page {pages[0]})"
    return f"page {pages[0]}" if len(pages) == 1 else f"pages {pages[0]}-{pages[-1]}"
