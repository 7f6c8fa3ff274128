"""Chunking: split a loaded document into sections, then sections into bounded chunks.

A chunk's ``content`` is always exactly ``text[char_start:char_end]`` of the document's
normalized text, so offsets can be trusted for highlighting and for merging neighbours.
Chunks are sized in the embedder's tokens when its window and a tokenizer are known (every
chunk, under its context header, then fits the window whole), else in characters.
"""

from __future__ import annotations

import functools
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from tether.ingest.cuts import split_span, split_spans
from tether.ingest.markup import heading_text
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
                title = heading_text(atx.group(2).strip())
                headings.append(Heading(offset, line_end, len(atx.group(1)), title))
                candidate = None
            elif setext and previous is not None and previous[0] + len(previous[1]) + 1 == offset:
                level = 1 if setext.group(1).startswith("=") else 2
                title = heading_text(previous[1].strip())
                headings.append(Heading(previous[0], line_end, level, title))
                candidate = None  # the underline is not the text of a further heading
        previous = candidate
        offset += len(line) + 1
    return headings


#: A plain-text underline: a run of one punctuation character, three or more.
_UNDERLINE = re.compile(r"([=\-~*^#+])\1{2,}[ \t]*")


def underlined_headings(text: str) -> list[Heading]:
    """The headings of plain text: a line of words after a blank line (or the start),
    underlined by a run of ``=``, ``-``, ``~`` (or ``*``, ``^``, ``#``, ``+``) about as
    long as it (within a third). Each character is a level, in the order it first
    appears, as reStructuredText ranks its underlines; a line above the title made of the
    same run (an overline) is part of the heading. A row of dashes under a table's header
    (``Name    Value`` over ``----    -----``) has spaces in it: no heading."""
    headings: list[Heading] = []
    levels: dict[str, int] = {}
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for i in range(1, len(lines)):
        under = _UNDERLINE.fullmatch(lines[i])
        title = lines[i - 1].strip()
        if not under or not title or _UNDERLINE.fullmatch(title):
            continue
        width = len(lines[i].rstrip())
        if not 0.66 * len(title) <= width <= 1.34 * len(title) + 2:
            continue
        over = i >= 2 and lines[i - 2].rstrip() == lines[i].rstrip()
        first = i - 2 if over else i - 1
        if first > 0 and lines[first - 1].strip():
            continue  # a paragraph's last line, not a title
        level = levels.setdefault(under.group(1), len(levels) + 1)
        body = min(offsets[i + 1], len(text))
        headings.append(Heading(offsets[first], body, level, title))
    return headings


def markdown_title(text: str) -> str | None:
    """The text of the first level-1 heading outside fenced code, if any."""
    return next((h.title for h in markdown_headings(text) if h.level == 1), None)


def markdown_sections(text: str) -> list[Section]:
    """Sections at Markdown headings (ATX ``#`` and setext), ignoring fenced code.

    The title of a section is its heading path, ``"Guide > Install > Linux"``. A heading
    with no body of its own (directly followed by a sub-heading) is folded into the next
    section, so no chunk is a bare heading; so is a page's title line before its first
    heading, when its markup did not make it one.
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
        own = text[min(body, end) : end].strip()
        if title is None and _title_line(own):
            own = ""  # a page's title line before its first heading ("INSERT"), no section
        if not own and i + 1 < len(boundaries):
            pending_start = start if pending_start is None else pending_start
            continue
        section_start = start if pending_start is None else pending_start
        pending_start = None
        if text[section_start:end].strip():
            sections.append(Section(section_start, end, section_title))
    return sections


#: Words a line before the first heading holds at most to be taken as the page's title.
_TITLE_LINE_WORDS = 12


def _title_line(text: str) -> bool:
    """Whether the text before a document's first heading is one short line that ends no
    sentence (a page's title that its markup does not call a heading): it opens the first
    section instead of making a chunk of its own."""
    return (
        bool(text)
        and "\n" not in text
        and len(text.split()) <= _TITLE_LINE_WORDS
        and text[-1] not in ".!?:;"
    )


def context_header(title: str | None, section_title: str | None) -> str | None:
    """A chunk's one-line context header: its document's title, then its section path
    (``Guide > Install > Linux``), as a reader sees a page (the book's name and the
    chapter). A path that begins with a name the title holds (an HTML page's first heading
    is its title: "Blueprints" under "Blueprints — Flask Documentation") already names the
    document and stands alone; so does the title, without a section.

    On the PDF manuals (outline paths such as "4 Library Functions > 4.2 Parsing"),
    putting the manual's name before the path raised the balanced grounding accuracy from
    0.819 to 0.853; the HTML and Markdown sets, whose paths begin with their title, did not
    move."""
    if not section_title:
        return title or None
    if not title:
        return section_title
    first = section_title.split(" > ", 1)[0].casefold()
    folded = title.casefold()
    if first in folded or folded in first:
        return section_title
    return f"{title} > {section_title}"


def section_under_title(title: str | None, section_title: str | None) -> str | None:
    """A chunk's section path as it reads under its document's title (a citation's
    ``Title — Section``): without a first heading that repeats the title (a Markdown
    guide's H1, an HTML page's first heading), None when nothing else is left."""
    if not section_title or not title:
        return section_title or None
    first, _, rest = section_title.partition(" > ")
    folded = first.casefold()
    if folded in title.casefold() or title.casefold() in folded:
        return rest or None
    return section_title


def embedding_text(title: str | None, section_title: str | None, content: str) -> str:
    """What gets embedded for a chunk: its content under its :func:`context_header`.

    A chunk cut from the middle of a document often never names what it is about; the
    header puts that back, the way a reader sees the page. A chunk that already starts
    with its header (the first chunk of most documents) is embedded as it is.
    """
    header = context_header(title, section_title)
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
    max_tokens: int | None = None,
    overlap_tokens: int | None = None,
) -> list[NewChunk]:
    """Chunks for every section, numbered in document order.

    With ``count_tokens`` (which must count, not answer None) and ``max_tokens`` (the
    embedder's window), chunks are sized in tokens: each chunk's :func:`embedding_text`
    fits ``max_tokens`` with a few tokens to spare for the model's own markers (unless its
    header alone takes over three quarters of the window: the content keeps a quarter),
    neighbours share ``overlap_tokens`` (default 15% of a chunk), and cuts fall at the same
    boundaries as by characters. Without either, chunks are ``size`` characters with
    ``overlap``, as :func:`split_span` cuts them.

    A chunk's ``content_hash`` is the hash of its :func:`embedding_text`: two chunks with
    the same hash get the same vector, so it is embedded once per model. ``count_tokens``
    gives each chunk its token count; one with a ``count_many(texts)`` method counts the
    document's chunks in one call (the packaged tokenizer's batch runs on every core), and
    one with ``token_starts(text, start, end)`` (a word cache) or ``offsets_many(texts)``
    measures the document once to size its chunks.
    """
    counts: list[int | None] | None = None
    if count_tokens is None or max_tokens is None:
        spans = [
            (section, start, end)
            for section in sections
            for start, end in split_span(text, section.start, section.end, size, overlap)
        ]
    else:
        spans, counts = _token_spans(
            text, sections, count_tokens, title, max_tokens, overlap_tokens
        )
    contents = [text[start:end] for _, start, end in spans]
    if counts is None:
        counts = _count_all(count_tokens, contents)
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


#: At most this many characters go to the tokenizer in one batch: a batch's encodings
#: (ids, offsets, masks) cost about 70 times its text, so a document is measured in
#: batches and its memory stays proportional to its text, not to that multiple of it.
_BATCH_CHARS = 1 << 16


def _batches(texts: Iterable[str]) -> Iterator[list[str]]:
    """``texts`` in order, in batches of at most :data:`_BATCH_CHARS` characters (a
    longer text alone)."""
    batch: list[str] = []
    size = 0
    for text in texts:
        if batch and size + len(text) > _BATCH_CHARS:
            yield batch
            batch, size = [], 0
        batch.append(text)
        size += len(text)
    if batch:
        yield batch


def _count_all(
    count_tokens: Callable[[str], int | None] | None, texts: list[str]
) -> list[int | None]:
    if count_tokens is None:
        return [None] * len(texts)
    many = getattr(count_tokens, "count_many", None)
    if many is None:
        return [count_tokens(t) for t in texts]
    return [n for batch in _batches(texts) for n in many(batch)]


# -- sizing in tokens -----------------------------------------------------------------------

#: Tokens a chunk leaves free in the window: the model's own markers ([CLS], [SEP]) and a
#: token or two a tokenizer may merge where the header meets the content.
_TOKEN_MARGIN = 4
#: A chunk sized in tokens still has at most this many characters per token: a run the
#: tokenizer reads as one unknown token (a 5,000-character hash) is cut like a long word.
_MAX_CHARS_PER_TOKEN = 10
_OVERLAP_SHARE = 0.15


class _TokenStarts:
    """A section's tokens, measured once (the tokenizer's offsets): how far ``n`` tokens
    reach from a point, and where the last ``n`` tokens before a point start. The starts
    are a packed array (8 bytes a token, not a Python int and a list slot each)."""

    def __init__(self, starts: Sequence[int]) -> None:
        self.starts = starts
        #: How many tokens start before a point: the starts' own search when they have
        #: one (:class:`~tether.embed.wordpieces.TokenStarts`), else a binary search.
        self.before: Callable[[int], int] = getattr(
            starts, "bisect", functools.partial(bisect_left, starts)
        )

    def reach(self, pos: int, n: int, limit: int) -> int:
        after = self.before(pos) + n
        if after >= len(self.starts):
            return limit
        # Never short of one character: byte-level tokens of one character share a start.
        return max(pos + 1, min(limit, self.starts[after]))

    def back(self, pos: int, cut: int, n: int) -> int:
        if n == 0 or not self.starts:
            return cut
        return self.starts[max(self.before(cut) - n, 0)]

    def between(self, start: int, end: int) -> int:
        """How many tokens start in ``[start, end)``."""
        return self.before(end) - self.before(start)


class _TokenCounts:
    """The same two answers by counting ``text`` slices: a binary search over characters
    for a counter without offsets; with ``guess`` (the offsets), one count that checks
    its reach, to cut again a section whose cut split a word."""

    def __init__(
        self,
        text: str,
        count_tokens: Callable[[str], int | None],
        guess: _TokenStarts | None = None,
    ) -> None:
        self.text = text
        self.count_tokens = count_tokens
        self.guess = guess

    def _tokens(self, start: int, end: int) -> int:
        return self.count_tokens(self.text[start:end]) or 0

    def reach(self, pos: int, n: int, limit: int) -> int:
        if self.guess is not None:
            limit = self.guess.reach(pos, n, limit)
        if self._tokens(pos, limit) <= n:
            return limit
        return max(_narrow(pos, limit, lambda end: self._tokens(pos, end) <= n), pos + 1)

    def back(self, pos: int, cut: int, n: int) -> int:
        if self.guess is not None:
            return self.guess.back(pos, cut, n)
        if self._tokens(pos, cut) <= n:
            return pos
        return _narrow(cut, pos, lambda start: self._tokens(start, cut) <= n)


def _narrow(good: int, bad: int, ok: Callable[[int], bool]) -> int:
    """Binary search between ``good`` (``ok``) and ``bad`` (not): the ``ok`` point nearest
    ``bad``, from either side."""
    while abs(bad - good) > 1:
        middle = (good + bad) // 2
        if ok(middle):
            good = middle
        else:
            bad = middle
    return good


_Ruler = _TokenStarts | _TokenCounts


def _token_spans(
    text: str,
    sections: list[Section],
    count_tokens: Callable[[str], int | None],
    title: str | None,
    max_tokens: int,
    overlap_tokens: int | None,
) -> tuple[list[tuple[Section, int, int]], list[int | None]]:
    """Spans sized in tokens, and their token counts.

    Sections are measured with offsets in one batch when the counter has them. A cut
    inside a word (only a word longer than half a chunk is cut) can tokenize into more
    pieces on its own than in place; the counts show it, and such a section is cut again
    by counting.
    """
    sizes = _token_sizes(sections, count_tokens, title, max_tokens, overlap_tokens)
    rulers = _rulers(text, sections, count_tokens)
    cuts = [
        list(_token_split(text, section, ruler, *size))
        for section, ruler, size in zip(sections, rulers, sizes, strict=True)
    ]
    flat = [(i, start, end) for i, spans in enumerate(cuts) for start, end in spans]
    counts = _ruled_counts(text, rulers, flat, count_tokens)
    over = {i for (i, _, _), n in zip(flat, counts, strict=True) if (n or 0) > sizes[i][0]}
    if over:
        for i in over:
            guess = rulers[i] if isinstance(rulers[i], _TokenStarts) else None
            exact = _TokenCounts(text, count_tokens, guess)
            cuts[i] = list(_token_split(text, sections[i], exact, *sizes[i]))
        flat = [(i, start, end) for i, spans in enumerate(cuts) for start, end in spans]
        counts = _count_all(count_tokens, [text[start:end] for _, start, end in flat])
    return [(sections[i], start, end) for i, start, end in flat], counts


def _ruled_counts(
    text: str,
    rulers: Sequence[_Ruler],
    spans: list[tuple[int, int, int]],
    count_tokens: Callable[[str], int | None],
) -> list[int | None]:
    """Each span's token count: read off its section's token offsets when the span starts
    and ends at white space (it then tokenizes alone as it does in place), else counted."""
    counts: list[int | None] = []
    unruled: list[int] = []
    for at, (i, start, end) in enumerate(spans):
        ruler = rulers[i]
        if isinstance(ruler, _TokenStarts) and _clean_cut(text, start, end):
            counts.append(ruler.between(start, end))
        else:
            counts.append(None)
            unruled.append(at)
    if unruled:
        measured = _count_all(count_tokens, [text[spans[at][1] : spans[at][2]] for at in unruled])
        for at, n in zip(unruled, measured, strict=True):
            counts[at] = n
    return counts


def _clean_cut(text: str, start: int, end: int) -> bool:
    return (start == 0 or text[start - 1].isspace() or text[start].isspace()) and (
        end >= len(text) or text[end].isspace() or text[end - 1].isspace()
    )


def _token_sizes(
    sections: list[Section],
    count_tokens: Callable[[str], int | None],
    title: str | None,
    max_tokens: int,
    overlap_tokens: int | None,
) -> list[tuple[int, int]]:
    """Per section: the most tokens of a chunk's content (the window less its header and
    :data:`_TOKEN_MARGIN`; at least a quarter of the window, whatever the header), and the
    overlap in tokens (at most half of that)."""
    headers = sorted({h for s in sections if (h := context_header(title, s.title))})
    header_tokens = dict(zip(headers, _count_all(count_tokens, headers), strict=True))
    sizes = []
    for section in sections:
        header = context_header(title, section.title)
        used = (header_tokens[header] or 0) if header else 0
        budget = max(max_tokens - used - _TOKEN_MARGIN, max_tokens // 4, 1)
        overlap = round(budget * _OVERLAP_SHARE) if overlap_tokens is None else overlap_tokens
        sizes.append((budget, min(overlap, budget // 2)))
    return sizes


def _rulers(
    text: str, sections: list[Section], count_tokens: Callable[[str], int | None]
) -> Sequence[_Ruler]:
    """Each section's ruler: its token starts from the counter's word cache, else its
    token offsets when the counter gives them (measured in pieces of a few thousand
    characters, cut at spaces, so one batch spreads a long section over the cores), else
    counting."""
    token_starts = getattr(count_tokens, "token_starts", None)
    if token_starts is not None:
        measured = [token_starts(text, s.start, s.end) for s in sections]
        if all(starts is not None for starts in measured):
            return [_TokenStarts(starts) for starts in measured]
    offsets_many = getattr(count_tokens, "offsets_many", None)
    if offsets_many is None:
        return [_TokenCounts(text, count_tokens)] * len(sections)
    pieces = [_pieces(text, section.start, section.end) for section in sections]
    flat = [piece for section_pieces in pieces for piece in section_pieces]
    starts: list[array[int]] = []
    piece_starts = iter(a for a, _ in flat)
    for batch in _batches(text[a:b] for a, b in flat):
        measured = offsets_many(batch)
        if measured is None:
            return [_TokenCounts(text, count_tokens)] * len(sections)
        for offsets in measured:
            piece_start = next(piece_starts)
            starts.append(array("q", [piece_start + start for start, _ in offsets]))
    rulers: list[_Ruler] = []
    at = 0
    for section_pieces in pieces:
        section_starts = array("q")
        for piece_starts in starts[at : at + len(section_pieces)]:
            section_starts.extend(piece_starts)
        at += len(section_pieces)
        rulers.append(_TokenStarts(section_starts))
    return rulers


def _pieces(text: str, start: int, end: int, size: int = 4096) -> list[tuple[int, int]]:
    """``text[start:end]`` in pieces of at most ``size`` characters, cut before a space or
    a line break where there is one (a piece then tokenizes as it does in place)."""
    pieces = []
    while start < end:
        stop = end
        if end - start > size:
            window = (start + 1, start + size)
            stop = max(text.rfind(" ", *window), text.rfind("\n", *window))
            stop = stop if stop > start else start + size
        pieces.append((start, stop))
        start = stop
    return pieces


def _token_split(
    text: str, section: Section, ruler: _Ruler, budget: int, overlap: int
) -> Iterator[tuple[int, int]]:
    longest = budget * _MAX_CHARS_PER_TOKEN
    return split_spans(
        text,
        section.start,
        section.end,
        lambda pos, stop: ruler.reach(pos, budget, min(stop, pos + longest)),
        lambda pos, cut: ruler.back(pos, cut, overlap),
    )
