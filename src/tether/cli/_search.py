"""Retrieval commands: search (ranked chunks) and context (the whole pipeline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.markup import escape

from tether import MAX_K, Filters, GenerationBlocked, TetherError
from tether.cli._shell import (
    ConfigOption,
    DbOption,
    JsonOption,
    ScopeOption,
    SessionOption,
    WorkspaceOption,
    err,
    error_message,
    fail,
    flag,
    load_model_visibly,
    open_tether,
    out,
    place,
    print_degradations,
    print_json,
    say,
)
from tether.ingest.chunking import section_under_title
from tether.policy import require_grounding
from tether.retrieve.grounding import holds_more
from tether.retrieve.guidance import no_matches

if TYPE_CHECKING:
    from tether import Citation, Hit, RetrievalResult, SearchResults, Tether


def _filter_option(name: str, what: str) -> Any:
    """A repeatable filter: one value each time (its help shows ``<str>``, not Typer's
    ``<list[str]>``, which reads as if it took a list)."""
    return typer.Option(
        name,
        help=f"Only documents {what} (repeat the option for several).",
        show_default=False,
        metavar="<str>",
    )


DomainOption = Annotated[list[str] | None, _filter_option("--domain", "of this domain tag")]
ProjectOption = Annotated[list[str] | None, _filter_option("--project", "of this project id")]
SourceTypeOption = Annotated[
    list[str] | None, _filter_option("--source-type", "of this source type tag")
]
DocumentOption = Annotated[list[str] | None, _filter_option("--document", "with this id")]
MinRelevanceOption = Annotated[
    float | None,
    typer.Option(
        "--min-relevance",
        help="Keep only what has at least this evidence, 0 to 1 (context: default"
        " rag.min_relevance).",
        min=0.0,
        max=1.0,
        show_default=False,
    ),
]
# Where the wider scope that guidance names is searched from the command line.
_WIDER_HINTS: dict[str | None, str] = {
    "workspace": "`--workspace W` alone searches a workspace",
    "global": "`--scope global` alone searches it",
    None: "`tether add PATH` adds them",
}


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
    domain: DomainOption = None,
    project: ProjectOption = None,
    source_type: SourceTypeOption = None,
    document: DocumentOption = None,
    min_relevance: MinRelevanceOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search chunks inside a scope; print the cited hits with their evidence (0-1)."""
    filters = _filters(domain, project, source_type, document)
    with open_tether(db, config, must_exist=True) as tether:
        if mode != "lexical":
            load_model_visibly(tether, vectors=True)
        hits = tether.search(
            query,
            scope=scope,
            session_id=session,
            workspace_id=workspace,
            k=k,
            mode=mode,
            filters=filters,
            judge=True,
            min_relevance=min_relevance,
        )
        wider_holds_more = not hits and holds_more(tether.store, hits.scope)
    if as_json:
        print_json(hits.to_dict())
    else:
        _print_hits(hits, wider_holds_more=wider_holds_more)


def _filters(
    domain: list[str] | None,
    project: list[str] | None,
    source_type: list[str] | None,
    document: list[str] | None,
) -> Filters | None:
    """The filter options as the library's Filters (``None``: none given)."""
    if not (domain or project or source_type or document):
        return None
    try:
        return Filters(
            domains=tuple(domain) if domain else None,
            project_ids=tuple(project) if project else None,
            source_types=tuple(source_type) if source_type else None,
            document_ids=tuple(document) if document else None,
        )
    except TetherError as exc:
        fail(error_message(exc), code=2)


def _print_hits(hits: SearchResults, *, wider_holds_more: bool) -> None:
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
        advice, wider = no_matches(scope, wider_holds_more=wider_holds_more)
        say(f"{advice} ({_WIDER_HINTS[wider]}.)")
    evidence = hits.evidence or {}
    for number, hit in enumerate(hits, start=1):
        _print_hit(number, hit, evidence.get(hit.chunk_id))


def _print_hit(number: int, hit: Hit, evidence: float | None) -> None:
    where = place(
        section_under_title(hit.title, hit.section_title),
        f"page {hit.page}" if hit.page is not None else None,
        hit.source_path and Path(hit.source_path).name,
    )
    weight = f"evidence {evidence:.2f}" if evidence is not None else f"score {hit.score:.3f}"
    out.print(
        f"[bold]\\[{number}][/] [cyan]{escape(hit.title)}[/]  [dim]{escape(where)}[/]  "
        f"[dim]{weight} · {escape(hit.document_id)}#{hit.chunk_id}[/]",
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


HistoryOption = Annotated[
    Path | None,
    typer.Option(
        "--history",
        help='The chat before QUESTION, a JSON file: [{"role": "user", "content": "..."},'
        " ...], oldest first; a follow-up is then made a standalone question.",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
]
GuardedOption = Annotated[
    bool,
    flag(
        "--guarded",
        help="Retrieve as an agent's guard does (policy.max_chunks, policy.min_relevance,"
        " policy.timeout): a result that is not grounded, or a retrieval that fails or runs"
        " out of time, blocks (audited as blocked; exit status 1).",
    ),
]


def context(
    question: Annotated[str, typer.Argument(help="The user's question or message.")],
    scope: ScopeOption = None,
    session: SessionOption = None,
    workspace: WorkspaceOption = None,
    domain: DomainOption = None,
    project: ProjectOption = None,
    source_type: SourceTypeOption = None,
    document: DocumentOption = None,
    min_relevance: MinRelevanceOption = None,
    guarded: GuardedOption = False,
    history: HistoryOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build the cited context block an LLM would get for QUESTION (the whole pipeline)."""
    filters = _filters(domain, project, source_type, document)
    turns = _read_history(history) if history is not None else None
    where = {"scope": scope, "session_id": session, "workspace_id": workspace, "filters": filters}
    with open_tether(db, config, must_exist=True) as tether:
        load_model_visibly(tether, vectors=True)
        if guarded:
            result = _guarded(tether, question, where, min_relevance, turns, as_json)
        else:
            result = tether.retrieve(question, **where, min_relevance=min_relevance, history=turns)
    if as_json:
        print_json(result.to_dict())
    else:
        _print_context(result)


def _guarded(
    tether: Tether,
    question: str,
    where: dict[str, Any],
    min_relevance: float | None,
    turns: Any,
    as_json: bool,
) -> RetrievalResult:
    """The agent team's guard (:class:`~tether.policy.require_grounding`): the policy's
    limits, and a blocked generation is exit status 1 with the reason."""
    guard = require_grounding(tether, **where, min_relevance=min_relevance, history=turns)
    try:
        return guard.run(question).result
    except GenerationBlocked as blocked:
        result = blocked.result
        if as_json:
            why = {"reason": blocked.reason, "advisory": blocked.advisory}
            print_json({"blocked": why, **({} if result is None else result.to_dict())})
        else:
            if result is not None:
                print_degradations(result.debug)
            say(f"Blocked (--guarded): {blocked.advisory}")
            why = result and result.debug.get("grounding", {}).get("why")
            if why:
                say(f"Why: {why}.")
        raise typer.Exit(1) from None


def _read_history(path: Path) -> Any:
    """The turns in the ``--history`` file, as JSON (the library checks their shape)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"--history {path}: not a readable JSON file ({exc})", code=2)


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
        section_under_title(citation.title, citation.section_title),  # the title: once
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
