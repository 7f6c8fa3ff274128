"""What the LlamaIndex and Haystack adapters share: one call of :meth:`Tether.search` or
:meth:`Tether.retrieve` as :class:`Passage` records (text, score, metadata that carries
the citation), and, when there are none, the reason why.

The adapters only wrap these records in their framework's node or document type, so both
frameworks see the same passages, ids and metadata for the same query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tether import (
    Filters,
    InvalidArgument,
    RetrievalResult,
    Scope,
    SearchMode,
    SearchResults,
    Tether,
)

Method = Literal["retrieve", "search"]
ScopeName = Literal["session", "workspace", "global"]

#: The metadata a prompt should show of a passage; the ids and numbers stay out of it.
PROMPT_METADATA = ("citation", "title", "section_title", "page_label", "page")


@dataclass(frozen=True)
class PassageOptions:
    """How an adapter asks tether: ``method="retrieve"`` runs the grounded pipeline (only
    passages above ``rag.min_relevance``, none when the result is not grounded; ``k`` caps
    the passages, default ``rag.max_chunks``), ``"search"`` returns the ``k`` best chunks
    (default 10) ranked by ``mode``. ``scope`` is resolved; ``session_id`` also drives the
    session-recency factor of a retrieval in a wider scope."""

    scope: Scope
    method: Method = "retrieve"
    session_id: str | None = None
    k: int | None = None
    filters: Filters | None = None
    mode: SearchMode = "hybrid"

    def __post_init__(self) -> None:
        if self.method not in ("retrieve", "search"):
            raise InvalidArgument(f"method must be 'retrieve' or 'search', not {self.method!r}")
        if self.method == "retrieve" and self.mode != "hybrid":
            raise InvalidArgument(
                f"mode={self.mode!r} applies to method='search' only; retrieve always fuses"
            )

    @classmethod
    def build(
        cls,
        tether: Tether,
        *,
        method: Method,
        scope: Scope | ScopeName | None,
        session_id: str | None,
        workspace_id: str | None,
        k: int | None,
        filters: Filters | None,
        mode: SearchMode,
    ) -> PassageOptions:
        """An adapter's options, its scope resolved now (a ScopeError names
        the id it lacks), as :meth:`Tether.resolve_scope` resolves it."""
        resolved = tether.resolve_scope(scope, session_id=session_id, workspace_id=workspace_id)
        return cls(resolved, method, session_id, k, filters, mode)


@dataclass(frozen=True)
class Passage:
    """One passage for a framework: a citation of a grounded retrieval, or a search hit.

    ``id`` is stable (``document_id:chunk ids``); ``metadata`` holds the citation's or
    hit's fields (document id, title, section, page, source path, chunk ids) and the
    ``scope`` that was searched; a citation adds its label (``[1]``) and ``grounded``."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Passages:
    """The passages of one call, best first; ``reason`` says why there are none (``None``
    when there are some); ``result`` is what tether returned, for everything else."""

    passages: tuple[Passage, ...]
    reason: str | None
    result: RetrievalResult | SearchResults


def find_passages(tether: Tether, text: str, options: PassageOptions) -> Passages:
    if options.method == "search":
        return _from_search(tether.search(text, **_search_options(options)))
    return _from_retrieval(tether.retrieve(text, **_retrieve_options(options)))


async def afind_passages(tether: Tether, text: str, options: PassageOptions) -> Passages:
    """:func:`find_passages` for asyncio, through :meth:`Tether.aretrieve` or
    :meth:`Tether.asearch`."""
    if options.method == "search":
        results = await tether.asearch(text, **_search_options(options))
        return _from_search(results)
    return _from_retrieval(await tether.aretrieve(text, **_retrieve_options(options)))


def _search_options(options: PassageOptions) -> dict[str, Any]:
    k = {} if options.k is None else {"k": options.k}
    return {"scope": options.scope, "filters": options.filters, "mode": options.mode, **k}


def _retrieve_options(options: PassageOptions) -> dict[str, Any]:
    return {
        "scope": options.scope,
        "session_id": options.session_id,
        "filters": options.filters,
        "max_chunks": options.k,
    }


def _from_retrieval(result: RetrievalResult) -> Passages:
    if not result.grounded:
        return Passages((), _why_not_grounded(result), result)
    scope = result.scope.to_dict()
    passages = tuple(
        Passage(
            id=f"{c.document_id}:{'+'.join(map(str, c.chunk_ids))}",
            text=c.text,
            score=c.relevance,
            metadata={k: v for k, v in c.to_dict().items() if k != "text"}
            | {"citation": c.label, "grounded": True, "scope": scope},
        )
        for c in result.citations
    )
    return Passages(passages, None, result)


def _why_not_grounded(result: RetrievalResult) -> str:
    if not result.retrieved:
        decision = result.debug.get("decision") or {}
        return f"retrieval skipped: {decision.get('reason') or 'not needed'}"
    grounding = (result.debug.get("grounding") or {}).get("why")
    return result.guidance or grounding or "not grounded: no passage is relevant enough"


def _from_search(results: SearchResults) -> Passages:
    scope = results.scope.to_dict()
    passages = tuple(
        Passage(
            id=f"{hit.document_id}:{hit.chunk_id}",
            text=hit.text,
            score=hit.score,
            metadata={k: v for k, v in hit.to_dict().items() if k not in ("text", "score")}
            | {"scope": scope},
        )
        for hit in results
    )
    return Passages(passages, None if passages else _why_no_hits(results), results)


def _why_no_hits(results: SearchResults) -> str:
    scope = results.scope
    where = "the global library" if scope.kind == "global" else f"{scope.kind} {scope.id!r}"
    if results.debug.get("scope_exists") is False:
        return f"{where} does not exist: nothing was indexed into it"
    return f"no passage in {where} matches the query"
