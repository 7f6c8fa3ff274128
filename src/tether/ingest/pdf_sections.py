"""Sections of a PDF's text: one per page at least, so that every chunk keeps its page,
cut where the outline's entries start and titled by their outline path.

An outline (bookmarks) entry points at a page; it starts its section at its title's line
on that page (:func:`outline_headings`), found however the outline and the page differ in
case, spacing, punctuation and numbering: the outline's "2.13. Nonregular files" is the
page's "2.13. Non-regular files", "R and statistics" is "1.3 R and statistics", "A Copying
Information" is "Appendix A Copying Information", and a long title may wrap onto a second
line, or begin a line of text (a run-in heading). An entry whose title is not found
starts where the previous entry on its page starts, else at the page's start.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
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


def titled_sections(text: str, spans: list[Section], outline: list[OutlineEntry]) -> list[Section]:
    """The page ``spans`` cut where outline entries start, titled by their outline path."""
    if not outline:
        return spans
    titled = heading_sections(text, outline_headings(text, spans, outline))
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
    files", its "The ... argument" the page's "The '...' argument"), an underscore a space
    (a PDF's text often loses the underscores it draws: "Tm_week" reads "Tm week")."""
    key = " ".join(title.casefold().split())
    key = _NUMBERING.sub("", key, count=1) if _NUMBERING.match(key) else key
    if bare and _BARE_NUMBERING.match(key):
        key = _BARE_NUMBERING.sub("", key, count=1)
    return " ".join(re.sub(r"[^\w\s]+", "", key.replace("_", " ")).split())


def outline_headings(text: str, spans: list[Section], outline: list[OutlineEntry]) -> list[Heading]:
    """Outline entries placed in ``text``, in text order: at their title's line (or two
    lines, a long title wrapped) on their page, else at a line that begins with the title
    (a run-in heading), else where the previous entry on that page starts, else at the
    page start. An entry on a page without text (or left out) starts at the next page
    with text."""
    pages = [span.page or 0 for span in spans]
    headings: list[Heading] = []
    lines = _PageLines({}, {})
    current = -1  # the index in ``spans`` whose lines are in ``lines``
    for entry in sorted(outline, key=lambda e: e.page):
        at = bisect_left(pages, entry.page)
        if at == len(spans):
            break
        span = spans[at]
        if current != at:
            current, lines = at, _page_lines(text, span)
        previous = headings[-1] if headings and headings[-1].start >= span.start else None
        start = body = previous.start if previous else span.start
        after = (previous.body if previous else span.start, 0)
        keys = tuple(dict.fromkeys((title_key(entry.title), title_key(entry.title, bare=True))))
        for key in keys:
            starts = lines.whole.get(key, []) if span.page == entry.page and key else []
            found = bisect_left(starts, after)
            if found < len(starts):
                start, body = starts[found]
                break
        else:
            if span.page == entry.page and (run_in := lines.run_in(keys[0], after[0])):
                start, body = run_in
        headings.append(Heading(start, body, entry.level, entry.title))
    return headings


#: Lines longer than this are text, not a title (nor the first line of one).
_TITLE_LINE = 200


@dataclass(frozen=True)
class _PageLines:
    #: Where each line (short lines only) starts and its body begins, by its
    #: :func:`title_key`; and the same of each short line with the next one.
    whole: dict[str, list[tuple[int, int]]]
    #: Where each line starts and the key of its start, by the key's first word.
    by_first_word: dict[str, list[tuple[int, str]]]

    def run_in(self, key: str, after: int) -> tuple[int, int] | None:
        """Where a run-in heading with the title ``key`` starts at or after ``after``, and
        a point inside it (its text goes on on the same line): the first line that begins
        with the title's words and goes on with text ("Column The column(x) function may
        be used only in ...", as LaTeX sets a ``\\paragraph``). None when no line does,
        or none of the first :data:`_RUN_IN_LINES` lines that begin with its first word
        (a bound on the work a page of thousands of like lines can cost)."""
        if not key:
            return None
        lines = self.by_first_word.get(key.partition(" ")[0], [])
        first = bisect_left(lines, (after, ""))
        for offset, line in lines[first : first + _RUN_IN_LINES]:
            if line.startswith(key + " "):
                return offset, offset + 1
        return None


#: Lines looked at for a run-in heading, of those that begin with its title's first word.
_RUN_IN_LINES = 64


def _page_lines(text: str, span: Section) -> _PageLines:
    """The lines of ``span`` by their :func:`title_key`: whole (a short line, and a short
    line with the next one: a long title wraps, "7.38 How can I put error bars or
    confidence bands on my" / "plot?"), and by the first word of their start."""
    whole: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
    by_first_word: defaultdict[str, list[tuple[int, str]]] = defaultdict(list)
    offset = span.start
    lines = text[span.start : span.end].split("\n")
    for i, line in enumerate(lines):
        after = offset + len(line) + 1
        key = title_key(line[:_TITLE_LINE])
        if key:
            by_first_word[key.partition(" ")[0]].append((offset, key))
        if key and len(line) <= _TITLE_LINE:
            whole[key].append((offset, min(after, span.end)))
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if key and following.strip() and len(following) <= _TITLE_LINE:
                body = min(after + len(following) + 1, span.end)
                whole[f"{key} {title_key(following)}"].append((offset, body))
        offset = after
    for found in whole.values():
        found.sort()
    return _PageLines(dict(whole), dict(by_first_word))


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
