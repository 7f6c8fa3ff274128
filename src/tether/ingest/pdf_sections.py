"""Sections of a PDF's text: one per page at least, so that every chunk keeps its page,
cut where the outline's entries start and titled by their outline path.

An outline (bookmarks) entry points at a page; it starts its section at its title's line
on that page (:func:`outline_headings`), found however the outline and the page differ in
case, spacing, punctuation and numbering: the outline's "2.13. Nonregular files" is the
page's "2.13. Non-regular files", "R and statistics" is "1.3 R and statistics", "A Copying
Information" is "Appendix A Copying Information", and a long title may wrap onto a second
line. An entry whose title is not found starts where the previous entry on its page
starts, else at the page's start.

A PDF without an outline (a Word or Google Docs export, a paper) is cut at its headings
by size (:func:`font_headings`): the lines drawn larger than the body text, placed the
same way, and left out where their line is not found.
"""

from __future__ import annotations

import logging
import math
import re
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tether.ingest.chunking import Heading, Section, heading_sections

if TYPE_CHECKING:
    from pypdf import PdfReader

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutlineEntry:
    page: int  # physical, from 1
    level: int  # from 1
    title: str


def join_pages(texts: list[str]) -> tuple[str, list[Section]]:
    """The document text (pages joined by a blank line) and one untitled span per page."""
    parts: list[str] = []
    spans: list[Section] = []
    offset = 0
    for number, text in enumerate(texts, start=1):
        if not text:
            continue
        if parts:
            offset += 2
        spans.append(Section(offset, offset + len(text), None, number))
        parts.append(text)
        offset += len(text)
    return "\n\n".join(parts), spans


def titled_sections(
    text: str, spans: list[Section], outline: list[OutlineEntry], *, guessed: bool = False
) -> list[Section]:
    """The page ``spans`` cut where outline entries start, titled by their outline path
    (``guessed``: entries read off the text's sizes, kept only where their line is found)."""
    if not outline:
        return spans
    titled = heading_sections(text, outline_headings(text, spans, outline, guessed=guessed))
    sections: list[Section] = []
    first = 0
    for part in titled:  # both in text order: one merge pass
        while first < len(spans) and spans[first].end <= part.start:
            first += 1
        at = first
        while at < len(spans) and spans[at].start < part.end:
            span = spans[at]
            at += 1
            start, end = max(part.start, span.start), min(part.end, span.end)
            piece = text[start:end]
            start, end = start + len(piece) - len(piece.lstrip()), start + len(piece.rstrip())
            if end > start:
                sections.append(Section(start, end, part.title, span.page))
    return sections


#: A heading's numbering: "2.1", "2.13.", "B.1", "IV.", "a)", or a keyword and a number or
#: letter ("Chapter 3", "Appendix A"). A letter alone is no numbering: "A specific
#: example" and "R and statistics" are titles.
_NUMBERING = re.compile(
    r"(?:(?:chapter|appendix|part|section)\s+(?:\d+(?:\.\d+)*|[a-z]|[ivxlc]+)[.:)]?"
    r"|(?:\d+|[a-z])(?:\.\d+)+\.?|\d+[.:)]?|[a-z][.:)]|[ivxlc]+[.:)])\s+(?=\S)"
)


#: A letter or a roman number alone before a title: numbering where the outline has it
#: ("A Copying Information", "II Plotting styles") and the page says "Appendix A".
_BARE_NUMBERING = re.compile(r"(?:[a-z]|[ivxlc]+)\s+(?=\S)")


def title_key(title: str, *, bare: bool = False) -> str:
    """A title as compared with a line: its words in lower case, without a leading "2.1",
    "B.1" or "Chapter 3" (with ``bare``, a leading letter or roman number too), and
    without punctuation (an outline's "Nonregular files" is the page's "Non-regular
    files", its "The ... argument" the page's "The '...' argument")."""
    key = " ".join(title.casefold().split())
    key = _NUMBERING.sub("", key, count=1) if _NUMBERING.match(key) else key
    if bare and _BARE_NUMBERING.match(key):
        key = _BARE_NUMBERING.sub("", key, count=1)
    return " ".join(re.sub(r"[^\w\s]+", "", key).split())


def outline_headings(
    text: str, spans: list[Section], outline: list[OutlineEntry], *, guessed: bool = False
) -> list[Heading]:
    """Outline entries placed in ``text``, in text order: at their title's line (or two
    lines, a long title wrapped) on their page, else where the previous entry on that page
    starts, else at the page start. An entry on a page without text (or left out) starts
    at the next page with text. A ``guessed`` entry whose line is not found is left out."""
    pages = [span.page or 0 for span in spans]
    headings: list[Heading] = []
    lines: dict[str, list[tuple[int, int]]] = {}
    current = -1  # the index in ``spans`` whose lines are in ``lines``
    for entry in sorted(outline, key=lambda e: e.page):
        at = bisect_left(pages, entry.page)
        if at == len(spans):
            break
        span = spans[at]
        if current != at:
            current, lines = at, _line_starts(text, span)
        previous = headings[-1] if headings and headings[-1].start >= span.start else None
        start = body = previous.start if previous else span.start
        after = (previous.body if previous else span.start, 0)
        for key in dict.fromkeys((title_key(entry.title), title_key(entry.title, bare=True))):
            starts = lines.get(key, []) if span.page == entry.page else []
            found = bisect_left(starts, after)
            if found < len(starts):
                start, body = starts[found]
                break
        else:
            if guessed:
                continue
        headings.append(Heading(start, body, entry.level, entry.title))
    return headings


#: Lines longer than this are text, not a title (nor the first line of one).
_TITLE_LINE = 200


def _line_starts(text: str, span: Section) -> dict[str, list[tuple[int, int]]]:
    """Where the lines of ``span`` start and their body begins, by their :func:`title_key`
    (short lines only), and the same of each short line with the next one: a long title
    wraps ("7.38 How can I put error bars or confidence bands on my" / "plot?")."""
    starts: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
    offset = span.start
    lines = text[span.start : span.end].split("\n")
    for i, line in enumerate(lines):
        after = offset + len(line) + 1
        if len(line) <= _TITLE_LINE:
            key = title_key(line)
            starts[key].append((offset, min(after, span.end)))
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if key and following.strip() and len(following) <= _TITLE_LINE:
                body = min(after + len(following) + 1, span.end)
                starts[f"{key} {title_key(following)}"].append((offset, body))
        offset = after
    for found in starts.values():
        found.sort()
    return starts


def read_outline(reader: PdfReader, source: str) -> list[OutlineEntry]:
    """The outline in document order, with levels; [] when there is none or it is broken."""
    try:
        entries: list[OutlineEntry] = []
        stack: list[tuple[Iterator[Any], int]] = [(iter(reader.outline), 1)]
        while stack:
            items, level = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
            elif isinstance(item, list):
                stack.append((iter(item), level + 1))
            else:
                page = reader.get_destination_page_number(item)
                title = " ".join(str(item.title or "").split())
                if page is not None and page >= 0 and title:
                    entries.append(OutlineEntry(page + 1, level, title))
        return entries
    except MemoryError:
        raise
    except Exception as exc:  # a broken outline loses titles, never the text
        logger.debug("%s: outline not readable (%s); sections keep no titles", source, exc)
        return []


# -- headings by size, for a PDF without an outline ---------------------------------------

#: A run of text: its size (the font size the page is drawn with, in points), the height
#: of its baseline, and the text.
TextRun = tuple[float, float, str]
#: A line is a heading when it is drawn this much larger than the body text (the size
#: most letters are drawn in).
HEADING_SCALE = 1.07
#: A size this share of the letters is drawn in is text, not headings.
MAX_HEADING_SHARE = 0.2
#: A heading has at most this many words and characters.
MAX_HEADING_WORDS = 15
MAX_HEADING_CHARS = 150
#: A size is a heading size when this many lines drawn in it could be headings: fewer
#: are a figure's sample text ("SPUMONI" in a font specimen), a cover's, a banner's.
MIN_HEADINGS = 3
#: Heading sizes beyond this many deep share the deepest level.
MAX_LEVELS = 4


def font_headings(pages: Sequence[Sequence[TextRun]]) -> list[OutlineEntry]:
    """Headings read off the sizes text is drawn in, as outline entries (level 1 for the
    largest size): the lines of a page drawn at least :data:`HEADING_SCALE` times the body
    text's size, short, with letters (two such lines in a row at one size are one heading,
    wrapped). A size is a heading size when it is used on two pages or more for
    :data:`MIN_HEADINGS` lines that could be headings (a title page's sizes are the
    cover's, a figure's the sample's, not the document's structure; a one-page document
    keeps them) and for less than :data:`MAX_HEADING_SHARE` of the
    letters (a document in two sizes of text has no headings by size). A cover page's
    large lines are its title and names, not headings (:data:`COVER_SHARE`)."""
    lines = [_lines(runs) for runs in pages]
    letters: Counter[float] = Counter()
    on_pages: defaultdict[float, set[int]] = defaultdict(set)
    uses: Counter[float] = Counter()  # lines that could be headings, by size
    for number, page in enumerate(lines, start=1):
        for size, line in page:
            letters[size] += sum(c.isalpha() for c in line)
            on_pages[size].add(number)
            uses[size] += _heading_like(line)
    if not letters:
        return []
    body = letters.most_common(1)[0][0]
    if body <= 0:  # (no sizes known)
        return []
    total = sum(letters.values())
    sizes = sorted(
        (
            size
            for size, n in letters.items()
            if size >= body * HEADING_SCALE
            and n < MAX_HEADING_SHARE * total
            and ((len(on_pages[size]) > 1 and uses[size] >= MIN_HEADINGS) or len(pages) == 1)
        ),
        reverse=True,
    )
    level = {size: min(i + 1, MAX_LEVELS) for i, size in enumerate(sizes)}
    entries: list[OutlineEntry] = []
    for number, page in enumerate(lines, start=1):
        if _cover(page, body):
            continue
        wrapped = None  # the size of the heading the line before this one was
        for size, line in page:
            title = " ".join(line.split())
            if size not in level:
                wrapped = None
            elif wrapped == size and _heading_like(f"{entries[-1].title} {title}"):
                entries[-1] = replace(entries[-1], title=f"{entries[-1].title} {title}")
            elif _heading_like(title):
                entries.append(OutlineEntry(number, level[size], title))
                wrapped = size
            else:
                wrapped = None
    return entries


#: A page with at least this share of its letters drawn large is a cover, a title page or
#: a part's divider: its large lines are a title, names and dates, not headings.
COVER_SHARE = 0.5


def _cover(page: list[tuple[float, str]], body: float) -> bool:
    letters = [(size, sum(c.isalpha() for c in line)) for size, line in page]
    large = sum(n for size, n in letters if size >= body * HEADING_SCALE)
    return large >= COVER_SHARE * sum(n for _, n in letters)


def _heading_like(title: str) -> bool:
    words = title.split()
    return (
        0 < len(words) <= MAX_HEADING_WORDS
        and len(title) <= MAX_HEADING_CHARS
        and sum(c.isalpha() for c in title) >= 2
    )


def _lines(runs: Sequence[TextRun]) -> list[tuple[float, str]]:
    """A page's runs as lines, each at the smallest size of its runs (rounded to half a
    point): runs on one baseline at one size join, a line break or a new baseline or size
    starts another line."""
    lines: list[tuple[float, str]] = []
    parts: list[str] = []
    at: tuple[float, float] | None = None
    for size, baseline, text in runs:
        key = (round(size * 2) / 2, round(baseline, 1))
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            if (i or key != at) and parts:
                lines.append((at[0] if at else key[0], "".join(parts)))
                parts = []
            at = key
            if piece.strip():
                parts.append(piece)
    if parts and at is not None:
        lines.append((at[0], "".join(parts)))
    return [(size, line) for size, line in lines if line.strip()]


def run_of(text: str, cm: Sequence[float], tm: Sequence[float], font_size: float) -> TextRun:
    """The run pypdf's text visitor reports: ``text`` drawn at ``font_size`` scaled by the
    text and page matrices."""
    try:
        scale = math.sqrt(abs(tm[0] * tm[3] - tm[1] * tm[2])) * math.sqrt(
            abs(cm[0] * cm[3] - cm[1] * cm[2])
        )
        size = float(font_size) * scale
        baseline = float(tm[5]) * float(cm[3]) + float(cm[5])
    except (TypeError, ValueError, IndexError):
        return (0.0, 0.0, text)
    if not (math.isfinite(size) and math.isfinite(baseline)):
        return (0.0, 0.0, text)
    return (size, baseline, text)
