"""The retrieval debugger's record (``retrieve(explain=True)``): each query's candidate
lists with their scores, the list fused across queries, and what each chunk named is."""

from __future__ import annotations

from typing import Any

from tether.retrieve.search import Candidates, Ranked
from tether.store import ScopedSearch

#: How many of each candidate list ``debug["explain"]`` records.
EXPLAIN_DEPTH = 50


def explain_candidates(
    store: ScopedSearch, queries: list[str], per_query: list[Candidates], fused: Ranked
) -> dict[str, Any]:
    """Each query's candidate lists (the top :data:`EXPLAIN_DEPTH` of each, as
    ``[chunk_id, score]`` best first: bm25 made higher-is-better, cosine, fused score),
    the list fused across queries, and the title, page and section of every chunk named.
    Every id comes from the scoped candidates, so nothing outside the scope is named."""

    def top(ranked: Ranked) -> list[list[float]]:
        return [[cid, float(f"{score:.6g}")] for cid, score in ranked[:EXPLAIN_DEPTH]]

    lists = [
        {
            "query": q,
            "lexical": top(found.lexical),
            "vector": top(found.vector),
            "fused": top(found.fused),
            "method": found.method,
        }
        for q, found in zip(queries, per_query, strict=True)
    ]
    across = top(fused)
    named = sorted(
        {
            int(cid)
            for entry in lists
            for side in ("lexical", "vector", "fused")
            for cid, _ in entry[side]
        }
        | {int(cid) for cid, _ in across}
    )
    chunks = {
        str(cid): {
            "document_id": h.document_id,
            "title": h.title,
            "section_title": h.section_title,
            "page": h.page,
            "page_label": h.page_label,
            "ordinal": h.ordinal,
        }
        for cid, h in store.hits_for_chunks(named).items()
    }
    return {"depth": EXPLAIN_DEPTH, "queries": lists, "fused": across, "chunks": chunks}
