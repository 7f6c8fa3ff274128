"""Reranking the fused candidates against the original question.

The heuristic rerank starts from the fused order and applies five factors, each set in
``[rag.rerank]`` and each reported in ``debug``:

``base``
    ``(1 - evidence_weight) * fused + evidence_weight * match``: the fused score and the
    candidate's match with the question (its cosine plus half its coverage of the
    question's weighted terms in its best two sentences, see
    :mod:`tether.retrieve.evidence`), each min-max scaled over the candidates to 0..1.
    RRF keeps only ranks; the match brings back how much closer one candidate is.
    Without vectors there is no match, and the base is the fused score alone.
``title``
    ``+ title_weight * (share of the question's terms found in the chunk's section
    title)``: a chunk under the heading "Returns and refunds" answers "how do refunds
    work" more often than one that mentions refunds in passing.
``priority``
    ``+ priority_weight * priority``, where ``priority`` is the document's metadata
    ``priority`` (a number, clamped to -1..1; absent means 0).
``recency``
    ``+ recency_margin * r``, where ``r`` is 1 for the session's most recently attached
    (or indexed) document among the candidates and falls linearly to 0 for the oldest. It
    can only reorder candidates whose scores are within ``recency_margin``: recent
    documents of the session win (near-)ties, nothing more. Outside a session scope it
    is 0.

Then source diversity: walking down the order, a document's chunks beyond
``max_per_document`` are deferred behind every other document's, not dropped.

The LLM rerank asks a chat model to score the first ``llm_candidates`` of that order
0-10, as JSON, and sorts them by score (ties keep the heuristic order); the rest follow
unchanged. Any failure keeps the heuristic order and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field

from tether.errors import LLMError
from tether.ingest.chunking import section_under_title
from tether.llm import ChatModel, parse_json_reply
from tether.models import Hit
from tether.retrieve.fts import query_terms
from tether.settings import RerankSettings
from tether.text import DEFAULT_LANGUAGE

SNIPPET_CHARS = 600


@dataclass(frozen=True)
class Candidate:
    """A fused candidate with what reranking and the context need to know about it."""

    hit: Hit
    fused: float  # the fusion score (higher is better)
    relevance: float  # 0..1, comparable across queries (see pipeline)
    match: float | None = None  # for ordering: cosine + half the coverage (see evidence)
    priority: float = 0.0  # document metadata "priority", clamped to -1..1
    recency: str | None = None  # ISO time the document joined the session (or was indexed)
    token_count: int | None = None
    score: float = 0.0  # after reranking
    #: The words of the sentence the chunk starts inside, from the chunk before it, shown
    #: before it when it opens a passage (see :func:`~tether.retrieve.context.begin_sentences`).
    head: str = ""


def metadata_priority(metadata: dict[str, Any] | None, default: float = 0.0) -> float:
    """The document's metadata ``priority`` (clamped to -1..1) when it is a number, else
    ``default`` (the policy's priority for the document's source type)."""
    value = (metadata or {}).get("priority")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    return max(-1.0, min(1.0, float(value)))


def heuristic_rerank(
    question: str,
    candidates: list[Candidate],
    settings: RerankSettings,
    *,
    in_session: bool,
    language: str = DEFAULT_LANGUAGE,
) -> tuple[list[Candidate], dict[str, Any]]:
    """The candidates in reranked order (each with its ``score``), and the debug record."""
    if not candidates:
        return [], {"method": "heuristic", "candidates": 0}
    terms = set(query_terms(question, language))
    lo = min(c.fused for c in candidates)
    hi = max(c.fused for c in candidates)
    matches = [c.match for c in candidates if c.match is not None]
    # Without a match for every candidate (no vectors) the fused score is the base.
    weight = settings.evidence_weight if len(matches) == len(candidates) else 0.0
    match_lo, match_hi = min(matches, default=0.0), max(matches, default=0.0)
    times = sorted({c.recency for c in candidates if c.recency}) if in_session else []

    factors: dict[int, dict[str, float]] = {}
    scored: list[Candidate] = []
    for c in candidates:
        fused = (c.fused - lo) / (hi - lo) if hi > lo else 1.0
        match = 1.0
        if c.match is not None and match_hi > match_lo:
            match = (c.match - match_lo) / (match_hi - match_lo)
        base = (1.0 - weight) * fused + weight * match
        title = c.hit.section_title
        title_terms = set(query_terms(title, language)) if title else set()
        overlap = len(terms & title_terms) / len(terms) if terms else 0.0
        recency = 0.0
        if c.recency and times:
            recency = 1.0 if len(times) == 1 else times.index(c.recency) / (len(times) - 1)
        f = {
            "base": base,
            "title": settings.title_weight * overlap,
            "priority": settings.priority_weight * c.priority,
            "recency": settings.recency_margin * recency,
        }
        factors[c.hit.chunk_id] = f
        scored.append(replace(c, score=sum(f.values())))

    fused_order = [c.hit.chunk_id for c in candidates]
    position = {cid: i for i, cid in enumerate(fused_order)}
    scored.sort(key=lambda c: (-c.score, position[c.hit.chunk_id]))
    ordered, deferred = _diversify(scored, settings.max_per_document)

    return ordered, _rerank_debug(candidates, ordered, fused_order, factors, deferred)


def _rerank_debug(
    candidates: list[Candidate],
    ordered: list[Candidate],
    fused_order: list[int],
    factors: dict[int, dict[str, float]],
    deferred: list[int],
) -> dict[str, Any]:
    """What the heuristic rerank did: how many candidates each factor moved, which were
    deferred for diversity, and every factor of every candidate."""
    effects = {
        name: sum(1 for f in factors.values() if f[name] != 0.0)
        for name in ("title", "priority", "recency")
    }
    return {
        "method": "heuristic",
        "candidates": len(candidates),
        "boosted": effects,
        "deferred_for_diversity": deferred,
        "moved": sum(1 for i, c in enumerate(ordered) if fused_order[i] != c.hit.chunk_id),
        "factors": {
            c.hit.chunk_id: {k: round(v, 4) for k, v in factors[c.hit.chunk_id].items()}
            for c in ordered
        },
    }


def _diversify(ordered: list[Candidate], cap: int) -> tuple[list[Candidate], list[int]]:
    taken: dict[str, int] = {}
    first: list[Candidate] = []
    later: list[Candidate] = []
    for c in ordered:
        n = taken.get(c.hit.document_id, 0)
        (first if n < cap else later).append(c)
        taken[c.hit.document_id] = n + 1
    return first + later, [c.hit.chunk_id for c in later]


class _Score(BaseModel):
    id: int
    score: float = Field(ge=0, le=10)


class _Scores(BaseModel):
    scores: list[_Score] = Field(min_length=1)


def numbered_passages(candidates: list[Candidate], chars: int) -> str:
    """The candidates as a chat model is shown them: ``[n] Title — Section``, then the
    first ``chars`` characters of the text with its whitespace collapsed."""
    return "\n\n".join(
        f"[{i}] {c.hit.title}"
        + (
            f" — {section}"
            if (section := section_under_title(c.hit.title, c.hit.section_title))
            else ""
        )
        + "\n"
        + " ".join(c.hit.text.split())[:chars]
        for i, c in enumerate(candidates, start=1)
    )


def _rerank_prompt(question: str, candidates: list[Candidate]) -> list[dict[str, str]]:
    passages = numbered_passages(candidates, SNIPPET_CHARS)
    return [
        {
            "role": "system",
            "content": (
                "You judge how well passages answer a question. Score every passage from 0"
                " (unrelated) to 10 (answers it directly). Answer with JSON only:"
                ' {"scores": [{"id": 1, "score": 7}, ...]}, one entry per passage.'
            ),
        },
        {"role": "user", "content": f"Question: {question[:2000]}\n\nPassages:\n\n{passages}"},
    ]


def _apply_scores(
    reply: str, ordered: list[Candidate], head: int
) -> tuple[list[Candidate], dict[str, Any]]:
    parsed = parse_json_reply(reply, _Scores)
    scores: dict[int, float] = {}
    for item in parsed.scores:
        if 1 <= item.id <= head and item.id not in scores:
            scores[item.id] = item.score
    if not scores:
        raise LLMError("the LLM rerank scored none of the passages it was shown")
    top = ordered[:head]
    ranked = sorted(range(head), key=lambda i: (-scores.get(i + 1, -1.0), i))
    reordered = [top[i] for i in ranked] + ordered[head:]
    return reordered, {
        "method": "llm",
        "scored": len(scores),
        "unscored": head - len(scores),
        "llm_scores": {top[i].hit.chunk_id: scores[i + 1] for i in range(head) if i + 1 in scores},
    }


async def allm_rerank(
    chat: ChatModel, question: str, ordered: list[Candidate], settings: RerankSettings
) -> tuple[list[Candidate], dict[str, Any]]:
    """The chat model's scores of the head of ``ordered``, applied. Raises
    :class:`LLMError` on any failure (the caller keeps the heuristic order)."""
    head = min(settings.llm_candidates, len(ordered))
    reply = await chat.acomplete(
        _rerank_prompt(question, ordered[:head]), max_tokens=40 + 16 * head
    )
    return _apply_scores(reply, ordered, head)
