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
not even the best chunk fits, it is cut at its last sentence end within the budget (a
word boundary when one sentence is longer than that).

A chunk whose text stops inside a sentence (a page ended there, or the next section
began) is finished first (:func:`finish_sentences`): the words up to the sentence's end
are taken from the document's next chunk, so no passage ends on "damaged by heat above
60 degrees" without the condition that follows. One that starts inside a sentence (its
overlap with the chunk before it began at a word) is begun from that chunk
(:func:`begin_sentences`). One that a page break cut short goes on with the next page's
first chunk (:func:`continue_over_pages`).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tether.ingest.chunking import section_under_title
from tether.models import Citation, Hit
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


def _cut_path(path: str) -> str:
    """A long section path cut from the left, at a ``>`` where it can be: its last
    headings say where the passage is ("… > Storage > Cold weather")."""
    if len(path) <= HEADER_PART_CHARS:
        return path
    tail = path[-(HEADER_PART_CHARS - 2) :]
    at = tail.find(" > ")
    return "… " + (tail[at + 3 :] if at >= 0 and at + 3 < len(tail) else tail).lstrip()


def _header(number: int, group: list[Candidate]) -> str:
    first = group[0].hit
    label = f"[{number}] {_cut(first.title)}"
    section = section_under_title(first.title, _section(group))
    if section:
        label += f" — {_cut_path(section)}"
    pages = sorted({(c.hit.page, c.hit.page_label or "") for c in group if c.hit.page is not None})
    if pages and pages[0][1].startswith("slide "):  # a presentation's page is a slide
        first, last = pages[0][0], pages[-1][0]
        label += f" (slide {first})" if first == last else f" (slides {first}-{last})"
    elif pages:
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


def _section(group: list[Candidate]) -> str | None:
    """The section a passage is cited by: that of its most relevant chunk (a passage of
    neighbouring chunks may span sections; the answer is where the best of them is)."""
    return max(group, key=lambda c: c.relevance).hit.section_title


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


def _head_tokens(c: Candidate) -> int:
    """The tokens of ``c``'s head: its share of the chunk's count, by characters."""
    if c.token_count is None:
        return estimate_tokens(c.head)
    return math.ceil(len(c.head) / max(1, len(c.hit.text)) * c.token_count)


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
            if previous is None and c.head:  # (the passage opens inside a sentence)
                tokens += _head_tokens(c)
                piece = c.head + piece
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
                section_title=_section(group),
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
    """``c`` cut at its last sentence end (else a word boundary) so that its passage
    fits ``budget`` tokens."""
    header = estimate_tokens(_header(1, [c])) + 1
    room = max(1, budget - header)
    total = c.token_count or estimate_tokens(c.hit.text)
    keep = int(len(c.hit.text) * min(1.0, room / max(total, 1)))
    text = c.hit.text[:keep]
    ends = [m.end() for m in _SENTENCE_END.finditer(text + " ")]
    if ends and ends[-1] > keep // 3:
        text = text[: ends[-1]].rstrip()
    else:
        if " " in text[keep // 2 :]:
            text = text[: text.rfind(" ")]
        text = text.rstrip() + " …"
    hit = replace(c.hit, text=text, char_end=c.hit.char_start + len(text))
    return replace(c, hit=hit, token_count=max(1, room - 1), head="")


#: A sentence's end: its stop, a Markdown link's target when the stop ends the link's
#: text (``[… instructions.](#env)``) and any closing quote or bracket, then a space (or
#: the end).
_SENTENCE_END = re.compile(r"[.!?…:;](?:\]\([^)\s]*\))?[\"')\]]*(?=\s)")
#: A line that is a block of its own, not a sentence: a table row, a list item, a
#: heading, a fence, or indented code; or columns: a table row without its outer pipes
#: (two cells apart), or output aligned in columns (two gaps of three spaces or more).
_BLOCK_LINE = re.compile(
    r"\s*(?:\||[-*+•]\s|\d{1,3}[.)]\s|#{1,6}\s|```|~~~)|\t| {4}"
    r"|.*\S \| .*\S \| |.*\S {3,}\S.*\S {3,}\S"
)
#: How far a chunk is followed into the next one for the end of its sentence.
MAX_TAIL_CHARS = 400


def ends_a_sentence(text: str) -> bool:
    """Whether ``text`` stops at a sentence's end, or at the end of a block that is not
    prose: a table row, a list item, a heading, a fence, a line of code (inside a fence,
    indented, or any line that does not read as words: a command, a URL, options)."""
    text = text.rstrip()
    ends = [m.end() for m in _SENTENCE_END.finditer(text + " ")]
    if ends and ends[-1] >= len(text):
        return True
    last = text.rsplit("\n", 1)[-1]
    in_fence = (text.count("```") + text.count("~~~")) % 2 == 1
    if in_fence or is_block_line(last):
        return True
    if "://" in last:
        return True
    return not _reads_as_prose(text[ends[-1] if ends else 0 :])


#: A line starting so is a command, a prompt, markup or an option: it ends a block.
_COMMAND_STARTS = frozenset("$><-*#|{}[")


def is_block_line(line: str) -> bool:
    """Whether ``line`` is a block of its own, not prose: a table row, a list item, a
    heading, a fence, code, columns, or a command, prompt, markup or option."""
    return bool(_BLOCK_LINE.match(line)) or line.lstrip()[:1] in _COMMAND_STARTS


def _reads_as_prose(fragment: str) -> bool:
    """Whether the words after the last sentence end read as a sentence (four or more,
    most of them plain words), not code, a command, a row of options, or a column of
    table cells ending at a short cell (a PDF table comes out a cell per line: lines of
    three words or fewer, where wrapped prose runs many words to a line)."""
    words = fragment.split()
    plain = sum(1 for w in words if w.strip(".,;:!?()\"'’”“").isalpha())
    if len(words) < 4 or plain < 0.7 * len(words):
        return False
    lines = [len(line.split()) for line in fragment.splitlines() if line.strip()]
    cells = len(lines) >= _CELL_LINES and statistics.median(lines) <= _CELL_WORDS
    return not (cells and lines[-1] <= _CELL_WORDS)


#: A run of at least this many lines of at most :data:`_CELL_WORDS` words (the median)
#: is a column of table cells or a list, which ends at any line.
_CELL_LINES = 4
_CELL_WORDS = 3


def finish_sentences(
    candidates: Sequence[Candidate], lookup: Callable[[Sequence[int]], dict[int, Hit]]
) -> list[Candidate]:
    """``candidates``, each one that stops inside a sentence extended to that sentence's
    end (at most :data:`MAX_TAIL_CHARS` more) with the text of its document's next chunk.

    ``lookup`` returns hits for chunk ids (the store's ``hits_for_chunks``). A document's
    chunks are written in one transaction, in order, so the next chunk's id is one more;
    the hit is used only when it is that document's next ordinal, else the candidate is
    left as it is. A next chunk in another section ends the sentence where it was.
    """
    open_ended = [c for c in candidates if not ends_a_sentence(c.hit.text)]
    if not open_ended:
        return list(candidates)
    following = lookup([c.hit.chunk_id + 1 for c in open_ended])
    finished = {}
    for c in open_ended:
        after = following.get(c.hit.chunk_id + 1)
        if after is None or after.document_id != c.hit.document_id:
            continue
        if after.ordinal != c.hit.ordinal + 1 or after.section_title != c.hit.section_title:
            continue
        finished[c.hit.chunk_id] = _extended(c, after)
    return [finished.get(c.hit.chunk_id, c) for c in candidates]


def continue_over_pages(
    candidates: Sequence[Candidate],
    lookup: Callable[[Sequence[int]], dict[int, Hit]],
    *,
    min_relevance: float,
    short_tokens: int,
    token_counts: Callable[[Sequence[int]], dict[int, int | None]] | None = None,
) -> list[Candidate]:
    """``candidates`` with, after each one at or above ``min_relevance`` that a page
    break cut short, the chunk that goes on with it on the next page.

    A page's last chunk ends where the page does, however little of its section it
    holds: "asn1_der_decoding_startEnd ... ider: vector that contains the DER encoding."
    ends page 23, and what the function does, and since which release, is on page 24.
    Such a chunk (fewer than ``short_tokens`` tokens; its document's next ordinal in the
    same section on the next page; in a PDF without sections, one that stops inside a
    sentence, as a page without an outline cannot say where its section goes on) is one
    passage with the chunk after it: that chunk is placed right after it, with its
    relevance (moved up when it was ranked below ``min_relevance``; left where it is when
    it is above), so that the context cites both pages as one passage when the budget has
    room; it never displaces a chunk ranked before it. ``token_counts`` gives a looked-up
    chunk's stored token count (else it is estimated from its length)."""
    above = {c.hit.chunk_id for c in candidates if c.relevance >= min_relevance}
    fragments = [c for c in candidates if _page_fragment(c, above, short_tokens)]
    if not fragments:
        return list(candidates)
    below = {c.hit.chunk_id: c for c in candidates if c.hit.chunk_id not in above}
    wanted = [c.hit.chunk_id + 1 for c in fragments if c.hit.chunk_id + 1 not in below]
    following = lookup(wanted) if wanted else {}
    counts = token_counts(wanted) if token_counts is not None and wanted else {}
    continued: dict[int, Candidate] = {}
    for c in fragments:
        ranked = below.get(c.hit.chunk_id + 1)
        after = ranked.hit if ranked is not None else following.get(c.hit.chunk_id + 1)
        if after is None or not _goes_on(c.hit, after):
            continue
        tokens = ranked.token_count if ranked is not None else counts.get(after.chunk_id)
        base = ranked if ranked is not None else replace(c, head="")
        continued[c.hit.chunk_id] = replace(
            base,
            hit=after,
            relevance=c.relevance,
            token_count=estimate_tokens(after.text) if tokens is None else tokens,
        )
    moved = {n.hit.chunk_id for n in continued.values()}
    out: list[Candidate] = []
    for c in candidates:
        if c.hit.chunk_id in moved and c.hit.chunk_id not in above:
            continue  # (placed after the chunk it goes on from)
        out.append(c)
        if c.hit.chunk_id in continued:
            out.append(continued[c.hit.chunk_id])
    return out


def _page_fragment(c: Candidate, above: set[int], short_tokens: int) -> bool:
    """Whether ``c`` (in the context, its next chunk not) is short and ends a page: the
    end of a section when it has one, else of a sentence."""
    return (
        c.hit.chunk_id in above
        and c.hit.chunk_id + 1 not in above
        and c.hit.page is not None
        and c.token_count is not None
        and c.token_count < short_tokens
        and (c.hit.section_title is not None or not ends_a_sentence(c.hit.text))
    )


def _goes_on(hit: Hit, after: Hit) -> bool:
    """Whether ``after`` is ``hit``'s document's next chunk, in its section, on the next
    page."""
    return (
        after.document_id == hit.document_id
        and after.ordinal == hit.ordinal + 1
        and after.section_title == hit.section_title
        and hit.page is not None
        and after.page == hit.page + 1
    )


def _extended(c: Candidate, after: Hit) -> Candidate:
    """``c`` with the start of ``after`` up to its first sentence end, if one is near."""
    overlap = max(0, c.hit.char_end - after.char_start)
    if len(after.text) != after.char_end - after.char_start or overlap > len(after.text):
        return c
    rest = after.text[overlap:]
    end = _SENTENCE_END.search(rest[:MAX_TAIL_CHARS] + " ")
    if end is None:
        return c
    gap = max(0, after.char_start - c.hit.char_end)  # whitespace between the two chunks
    if gap > 2:  # a blank line or more: a block ended there
        return c
    tail = " " * gap + rest[: end.end()]  # (so that offsets stay exact)
    hit = replace(c.hit, text=c.hit.text + tail, char_end=c.hit.char_end + len(tail))
    tokens = None
    if c.token_count is not None:
        tokens = c.token_count + math.ceil(len(tail) / max(1, len(c.hit.text)) * c.token_count)
    return replace(c, hit=hit, token_count=tokens)


def begin_sentences(
    candidates: Sequence[Candidate], lookup: Callable[[Sequence[int]], dict[int, Hit]]
) -> list[Candidate]:
    """``candidates``, each one that starts inside a sentence given that sentence's
    opening words (its ``head``, at most :data:`MAX_TAIL_CHARS`) from its document's
    previous chunk: a chunk's overlap with the one before it starts at a word when no
    sentence starts in it, and a passage that opens with "incorrect in this situation,
    because" has lost what it is about. The head is shown, and counted in the budget,
    where the chunk opens a passage (after the chunk before it, it is already there).
    The previous chunk is used only when it is that document's previous ordinal in the
    same section (see :func:`finish_sentences`)."""
    if not candidates:
        return []
    before = lookup([c.hit.chunk_id - 1 for c in candidates])
    begun = {}
    for c in candidates:
        prior = before.get(c.hit.chunk_id - 1)
        if prior is None or prior.document_id != c.hit.document_id:
            continue
        if prior.ordinal != c.hit.ordinal - 1 or prior.section_title != c.hit.section_title:
            continue
        head = _sentence_head(prior, c.hit)
        if head:
            begun[c.hit.chunk_id] = replace(c, head=head)
    return [begun.get(c.hit.chunk_id, c) for c in candidates]


def _sentence_head(prior: Hit, hit: Hit) -> str:
    """The words of ``prior`` (the chunk before ``hit``) from the start of the sentence
    ``hit`` opens inside, up to ``hit``'s start, with the white space between them (as
    spaces); empty when ``hit`` starts a sentence or a block, or the
    sentence starts too far back."""
    if len(prior.text) != prior.char_end - prior.char_start:
        return ""
    upto = min(hit.char_start, prior.char_end) - prior.char_start
    gap = max(0, hit.char_start - prior.char_end)
    if upto <= 0 or gap > (2 if hit.text[:1].islower() else 1):
        return ""  # (a blank line between them: a block ended there)
    prefix = prior.text[:upto] + " " * gap
    if not prefix.strip() or ends_a_sentence(prefix) or prefix.rstrip(" \t").endswith("\n\n"):
        return ""
    starts = [m.end() for m in _SENTENCE_START.finditer(prefix)]
    if not starts:
        return ""
    head = prefix[starts[-1] :]
    head = head[len(head) - len(head.lstrip()) :]
    return head if 0 < len(head) <= MAX_TAIL_CHARS else ""


#: Where a sentence or a block starts: after a sentence end and its white space, or a
#: line break that ends a block.
_SENTENCE_START = re.compile(r"[.!?…:;][\"')\]]*\s+|\n[ \t]*\n")
