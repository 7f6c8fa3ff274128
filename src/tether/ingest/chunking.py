"""Chunking: split a loaded document into sections, then sections into bounded chunks.

A chunk's ``content`` is always exactly ``text[char_start:char_end]`` of the document's
normalized text, so offsets can be trusted for highlighting and for merging neighbours.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tether.store import NewChunk
from tether.text import content_hash


@dataclass(frozen=True)
class Section:
    """A span of the document text with one heading path and at most one page."""

    start: int
    end: int
    title: str | None = None
    page: int | None = None


_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*\s")


@dataclass(frozen=True)
class Heading:
    """A heading found in the text: where its line(s) start, where its body starts."""

    start: int
    body: int
    level: int
    title: str


def markdown_headings(text: str) -> list[Heading]:
    """ATX (``#``) and setext (``===``/``---``) headings, in order, ignoring fenced code."""
    headings: list[Heading] = []
    offset = 0
    in_fence: str | None = None
    previous: tuple[int, str] | None = None  # (offset, line) of a paragraph line just above
    for line in text.split("\n"):
        line_end = min(offset + len(line) + 1, len(text))
        fence = _FENCE.match(line)
        candidate: tuple[int, str] | None = (offset, line) if line.strip() else None
        if fence:
            marker = fence.group(1)
            in_fence = None if in_fence == marker else (in_fence or marker)
            candidate = None  # a fence line is never the text of a setext heading
        elif in_fence is not None:
            candidate = None
        else:
            atx = _ATX_HEADING.match(line)
            setext = _SETEXT_UNDERLINE.match(line)
            if atx:
                headings.append(Heading(offset, line_end, len(atx.group(1)), atx.group(2).strip()))
                candidate = None
            elif setext and previous is not None and previous[0] + len(previous[1]) + 1 == offset:
                level = 1 if setext.group(1).startswith("=") else 2
                headings.append(Heading(previous[0], line_end, level, previous[1].strip()))
                candidate = None  # the underline is not the text of a further heading
        previous = candidate
        offset += len(line) + 1
    return headings


def markdown_title(text: str) -> str | None:
    """The text of the first level-1 heading outside fenced code, if any."""
    return next((h.title for h in markdown_headings(text) if h.level == 1), None)


def markdown_sections(text: str) -> list[Section]:
    """Sections at Markdown headings (ATX ``#`` and setext), ignoring fenced code.

    The title of a section is its heading path, ``"Guide > Install > Linux"``. A heading
    with no body of its own (directly followed by a sub-heading) is folded into the next
    section, so no chunk is a bare heading.
    """
    return heading_sections(text, markdown_headings(text))


def heading_sections(text: str, headings: list[Heading]) -> list[Section]:
    """Sections of ``text`` at ``headings`` (in order), titled by their heading path."""
    boundaries: list[tuple[int, int, int, str | None]] = []
    if not headings or headings[0].start > 0:
        boundaries.append((0, 0, 0, None))
    boundaries += [(h.start, h.body, h.level, h.title) for h in headings]
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    pending_start: int | None = None
    for i, (start, body, level, title) in enumerate(boundaries):
        end = boundaries[i + 1][0] if i + 1 < len(boundaries) else len(text)
        if title is not None:
            path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
        section_title = " > ".join(t for _, t in path) or None
        has_body = text[min(body, end) : end].strip() != ""
        if not has_body and i + 1 < len(boundaries):
            pending_start = start if pending_start is None else pending_start
            continue
        section_start = start if pending_start is None else pending_start
        pending_start = None
        if text[section_start:end].strip():
            sections.append(Section(section_start, end, section_title))
    return sections


def split_span(
    text: str, start: int, end: int, size: int, overlap: int
) -> Iterator[tuple[int, int]]:
    """Character spans of at most ``size`` covering ``text[start:end]``.

    Cuts at the last paragraph break, else line break, else sentence end, else space in the
    second half of the window; a hard cut only for a word longer than half a chunk. Each
    span after the first starts up to ``overlap`` characters before the previous one ended,
    at a sentence or word boundary.
    """
    pos = _skip_space(text, start, end)
    while pos < end:
        stop = _trim_end(text, pos, end)
        if stop - pos <= size:
            if stop > pos:
                yield pos, stop
            return
        cut = _best_cut(text, pos + size // 2, pos + size)
        stop = _trim_end(text, pos, cut)
        yield pos, stop
        pos = _skip_space(text, _overlap_start(text, max(pos + 1, cut - overlap), cut), end)


def _skip_space(text: str, pos: int, end: int) -> int:
    while pos < end and text[pos].isspace():
        pos += 1
    return pos


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _best_cut(text: str, lo: int, hi: int) -> int:
    window = text[lo:hi]
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator)
        if at != -1:
            return lo + at + len(separator)
    sentence_ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if sentence_ends:
        return lo + sentence_ends[-1]
    at = max(window.rfind(" "), window.rfind("\t"))
    return lo + at + 1 if at != -1 else hi


def _overlap_start(text: str, lo: int, cut: int) -> int:
    """Where the next chunk starts: the first sentence or word start inside the overlap."""
    if lo >= cut:
        return cut
    window = text[lo:cut]
    sentence = _SENTENCE_END.search(window)
    if sentence and sentence.end() < len(window):
        return lo + sentence.end()
    if lo > 0 and not text[lo - 1].isspace():
        space = re.search(r"\s", window)
        return lo + space.end() if space else cut
    return lo


def embedding_text(title: str | None, section_title: str | None, content: str) -> str:
    """What gets embedded for a chunk: its content under a one-line context header.

    A chunk cut from the middle of a document often never names what it is about; the
    header (the section path, or the document title when there is none) puts that back,
    the way a reader sees the page. A chunk that already starts with its header (the first
    chunk of most documents) is embedded as it is.
    """
    header = section_title or title
    if not header or content.startswith(header):
        return content
    return f"{header}\n\n{content}"


def chunk_sections(
    text: str,
    sections: list[Section],
    *,
    size: int,
    overlap: int,
    title: str | None = None,
    count_tokens: Callable[[str], int | None] | None = None,
) -> list[NewChunk]:
    """Chunks for every section, numbered in document order.

    A chunk's ``content_hash`` is the hash of its :func:`embedding_text`: two chunks with
    the same hash get the same vector, so it is embedded once per model. ``count_tokens``
    gives each chunk its token count; one with a ``count_many(texts)`` method counts the
    document's chunks in one call (the packaged tokenizer's batch runs on every core).
    """
    spans: list[tuple[Section, int, int]] = [
        (section, start, end)
        for section in sections
        for start, end in split_span(text, section.start, section.end, size, overlap)
    ]
    contents = [text[start:end] for _, start, end in spans]
    counts: list[int | None] = [None] * len(spans)
    if count_tokens is not None:
        many = getattr(count_tokens, "count_many", None)
        counts = many(contents) if many else [count_tokens(c) for c in contents]
    return [
        NewChunk(
            ordinal=ordinal,
            content=content,
            section_title=section.title,
            char_start=start,
            char_end=end,
            page=section.page,
            content_hash=content_hash(embedding_text(title, section.title, content)),
            token_count=count,
        )
        for ordinal, ((section, start, end), content, count) in enumerate(
            zip(spans, contents, counts, strict=True)
        )
    ]
