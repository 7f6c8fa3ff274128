"""The context block: selected chunks as numbered, cited passages within a token budget.

Chunks are taken best first. Chunks of one document with consecutive ordinals become one
passage and one citation, their overlapping text written once (chunks keep exact
character offsets, so the overlap is known, not guessed). Citations are numbered by
their best chunk's rank. The block looks like::

    [1] Warranty and returns — Refunds (p. 3)
    Refunds are issued to the original payment method within 14 days ...

    [2] Support FAQ
    ...

Headers show the title and section cut to 60 characters each. Token budget
(``rag.context_budget``): a chunk's tokens are the count stored at index
time with the embedding model's tokenizer (a part of a chunk counts its share of them,
by characters); headers and chunks stored without a count are estimated at one token
per 4 characters, rounded up (English text with a WordPiece or BPE tokenizer runs at 4
to 5). A chunk that does not fit is skipped and smaller later ones may still fit; if
not even the best chunk fits, it is cut at a word boundary to the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tether.models import Citation
from tether.retrieve.rerank import Candidate


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class Context:
    text: str
    citations: tuple[Citation, ...]
    chunk_ids: tuple[int, ...]  # the chunks in the block, best first
    tokens: int
    skipped_for_budget: tuple[int, ...]
    truncated: bool


# Header parts are cut to this many characters, so that a header never eats the budget
# (the smallest budget, 50 tokens, still holds a header and some text).
HEADER_PART_CHARS = 60


def _cut(text: str) -> str:
    return text if len(text) <= HEADER_PART_CHARS else text[: HEADER_PART_CHARS - 1] + "…"


def _header(number: int, group: list[Candidate]) -> str:
    first = group[0].hit
    label = f"[{number}] {_cut(first.title)}"
    if first.section_title and first.section_title != first.title:
        label += f" — {_cut(first.section_title)}"
    pages = sorted({(c.hit.page, c.hit.page_label or "") for c in group if c.hit.page is not None})
    if pages:
        (first_page, first_label), (last_page, last_label) = pages[0], pages[-1]
        one = first_page == last_page
        span = (
            f"p. {first_label or first_page}"
            if one
            else f"pp. {first_label or first_page}-{last_label or last_page}"
        )
        if first_label or last_label:  # the printed label, then where a PDF viewer has it
            span += f", PDF page {first_page}" if one else f", PDF pages {first_page}-{last_page}"
        label += f" ({span})"
    return label


def _piece(previous: Candidate | None, c: Candidate) -> tuple[str, float]:
    """The part of ``c`` not already written by ``previous`` (the chunk before it in the
    same passage), and the share of ``c``'s characters that part is."""
    text = c.hit.text
    exact = len(text) == c.hit.char_end - c.hit.char_start
    if previous is None or not exact or c.hit.char_start >= previous.hit.char_end:
        return text, 1.0
    cut = min(len(text), previous.hit.char_end - c.hit.char_start)
    rest = text[cut:]
    return rest, (len(rest) / len(text) if text else 0.0)


def _chunk_tokens(c: Candidate, share: float, piece: str) -> int:
    if c.token_count is None:
        return estimate_tokens(piece)
    return math.ceil(c.token_count * share)


def _groups(chosen: list[Candidate]) -> list[list[Candidate]]:
    """Passages: runs of consecutive ordinals of one document, ordered by best rank."""
    rank = {c.hit.chunk_id: i for i, c in enumerate(chosen)}
    by_doc: dict[str, list[Candidate]] = {}
    for c in chosen:
        by_doc.setdefault(c.hit.document_id, []).append(c)
    groups: list[list[Candidate]] = []
    for chunks in by_doc.values():
        chunks.sort(key=lambda c: c.hit.ordinal)
        run = [chunks[0]]
        for c in chunks[1:]:
            if c.hit.ordinal == run[-1].hit.ordinal + 1:
                run.append(c)
            else:
                groups.append(run)
                run = [c]
        groups.append(run)
    groups.sort(key=lambda g: min(rank[c.hit.chunk_id] for c in g))
    return groups


def _render(groups: list[list[Candidate]]) -> tuple[str, list[Citation], int]:
    blocks: list[str] = []
    citations: list[Citation] = []
    tokens = 0
    for number, group in enumerate(groups, start=1):
        header = _header(number, group)
        parts: list[str] = []
        previous: Candidate | None = None
        for c in group:
            piece, share = _piece(previous, c)
            tokens += _chunk_tokens(c, share, piece)
            if previous is not None and share == 1.0:
                parts.append("\n\n")
            parts.append(piece)
            previous = c
        body = "".join(parts).strip()
        tokens += estimate_tokens(header) + 1
        blocks.append(f"{header}\n{body}")
        first = group[0].hit
        citations.append(
            Citation(
                number=number,
                document_id=first.document_id,
                title=first.title,
                section_title=first.section_title,
                page=first.page,
                pages=tuple(sorted({c.hit.page for c in group if c.hit.page is not None})),
                chunk_ids=tuple(c.hit.chunk_id for c in group),
                source_path=first.source_path,
                workspace_id=first.workspace_id,
                relevance=round(max(c.relevance for c in group), 4),
                text=body,
                page_label=first.page_label,
            )
        )
    return "\n\n".join(blocks), citations, tokens + max(0, len(blocks) - 1)


def build_context(
    ranked: list[Candidate],
    *,
    max_chunks: int,
    budget: int,
) -> Context:
    """The block for ``ranked`` (best first, already filtered by relevance)."""
    chosen: list[Candidate] = []
    skipped: list[int] = []
    tokens = 0
    for c in ranked:
        if len(chosen) == max_chunks:
            break
        _, _, total = _render(_groups([*chosen, c]))
        if total <= budget:
            chosen.append(c)
            tokens = total
        else:
            skipped.append(c.hit.chunk_id)
    truncated = False
    if not chosen and ranked:
        chosen = [_truncate(ranked[0], budget)]
        skipped.remove(ranked[0].hit.chunk_id)
        truncated = True
    text, citations, tokens = _render(_groups(chosen)) if chosen else ("", [], 0)
    return Context(
        text=text,
        citations=tuple(citations),
        chunk_ids=tuple(c.hit.chunk_id for c in chosen),
        tokens=tokens,
        skipped_for_budget=tuple(skipped),
        truncated=truncated,
    )


def _truncate(c: Candidate, budget: int) -> Candidate:
    """``c`` cut at a word boundary so that its passage fits ``budget`` tokens."""
    header = estimate_tokens(_header(1, [c])) + 1
    room = max(1, budget - header)
    total = c.token_count or estimate_tokens(c.hit.text)
    keep = int(len(c.hit.text) * min(1.0, room / max(total, 1)))
    text = c.hit.text[:keep]
    if " " in text[keep // 2 :]:
        text = text[: text.rfind(" ")]
    text = text.rstrip() + " …"
    hit = replace(c.hit, text=text, char_end=c.hit.char_start + len(text))
    return replace(c, hit=hit, token_count=max(1, room - 1))
