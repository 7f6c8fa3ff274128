"""Requests about a document itself: "summarize this" reads its opening and outline,
"what does page 12 say?" reads that page. Both read inside the request's scope and
filters, in SQL like every search; what they return is what was asked for, so each
chunk's relevance is 1.0."""

from __future__ import annotations

from typing import Any

from tether.models import Exclusions
from tether.retrieve.request import Request
from tether.retrieve.rerank import Candidate
from tether.retrieve.turns import DocumentRequest
from tether.store import CandidateRow, Store

#: The opening of a document: its first chunks.
OPENING_CHUNKS = 3
#: An overview of a scope covers its newest documents, at most this many.
MAX_DOCUMENTS = 3
#: Section titles listed in a document's outline, at most.
MAX_OUTLINE = 40


def document_candidates(
    store: Store,
    request: Request,
    wanted: DocumentRequest,
    exclusions: Exclusions,
    *,
    max_chunks: int,
) -> tuple[list[Candidate], dict[str, list[str]]]:
    """The chunks ``wanted`` asks for (a page, or each document's opening), in reading
    order, and for an overview the outline (section titles) of each document."""
    if wanted.kind == "page":
        ids = store.document_chunk_ids(
            request.scope,
            page=wanted.page,
            limit=max_chunks,
            filters=request.filters,
            exclusions=exclusions,
        )
    else:
        ids = store.document_chunk_ids(
            request.scope,
            first=OPENING_CHUNKS,
            limit=OPENING_CHUNKS * MAX_DOCUMENTS,
            filters=request.filters,
            exclusions=exclusions,
        )
    rows = store.candidate_rows(ids, request.session_id)
    candidates = [_asked_for(rows[i]) for i in ids if i in rows]
    outline: dict[str, list[str]] = {}
    if wanted.kind == "overview":
        for document_id in dict.fromkeys(c.hit.document_id for c in candidates):
            titles = (c.section_title for c in store.chunks_of(document_id) if c.section_title)
            outline[document_id] = list(dict.fromkeys(titles))[:MAX_OUTLINE]
    return candidates, outline


def _asked_for(row: CandidateRow) -> Candidate:
    return Candidate(
        hit=row.hit,
        fused=1.0,
        relevance=1.0,
        recency=row.recency,
        token_count=row.token_count,
        score=1.0,
    )


def outline_text(candidates: list[Candidate], outline: dict[str, list[str]]) -> str:
    """The outline block put above an overview's context: one line per document that
    has section titles."""
    titles = {c.hit.document_id: c.hit.title for c in candidates}
    lines = [
        f"Outline of {titles.get(document_id, document_id)}: {' · '.join(sections)}"
        for document_id, sections in outline.items()
        if sections
    ]
    return "\n".join(lines)


def describe(wanted: DocumentRequest, candidates: list[Candidate]) -> dict[str, Any]:
    return {
        "kind": wanted.kind,
        "page": wanted.page,
        "chunks": len(candidates),
        "documents": list(dict.fromkeys(c.hit.document_id for c in candidates)),
    }
