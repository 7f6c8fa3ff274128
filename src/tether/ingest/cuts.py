"""Where a chunk ends and the next begins: cut points in a section's text.

A span ends where a sentence or a block does, so that an answer stays with its condition,
and never inside a fenced code block when the window allows a cut outside one: a command
or a function is kept whole with the sentence that introduces it, and no chunk opens with
the end of someone else's code and a stray closing fence. How far a chunk may reach is
the caller's (characters, or tokens: :mod:`tether.ingest.chunking`).
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator

_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*\s")
#: What opens a block on its line: a list item, a heading, a fence or a table row.
_BLOCK_HEAD = r"[ \t]*(?:[-*+•][ \t]|\d{1,3}[.)][ \t]|#{1,6}[ \t]|```|~~~|\|)"
#: Where a chunk may end besides a paragraph break: after a sentence, or at a line break
#: that starts a block or follows a colon.
_BOUNDARY = re.compile(rf"[.!?…][\"')\]]*\s|:[ \t]*\n|\n(?={_BLOCK_HEAD})")
#: Where a block starts after a line break: a paragraph, or a line that opens a block.
_BLOCK_START = re.compile(rf"\n[ \t]*\n\s*|\n(?={_BLOCK_HEAD})")
_AT_BLOCK = re.compile(_BLOCK_HEAD)
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n\s*\Z")
#: A fence line: three or more backticks or tildes, indented at most three spaces.
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_PARAGRAPH, _LINE, _SPACE = re.compile(r"(?<=\n)\n"), re.compile(r"\n"), re.compile(r"[ \t]")


def split_span(
    text: str, start: int, end: int, size: int, overlap: int
) -> Iterator[tuple[int, int]]:
    """Character spans of at most ``size`` covering ``text[start:end]``.

    A span ends where a sentence or a block does, so that an answer stays with its
    condition: at the last paragraph break, else the last sentence end or block start
    (a list item, a heading, a code fence, a table row, the line after a colon) in the
    second half of the window, else the last of those in its first half past an eighth;
    only a sentence longer than that falls back to a line break, then a space, and a
    word longer than half a chunk to a hard cut. A cut inside a fenced code block is
    taken only when the window holds no other. Each span after the first starts up to
    ``overlap`` characters before the previous one ended, at a sentence start, else at a
    block start (a table row, a record), outside code; where neither lies in the
    overlap, at the cut itself when the cut ends a paragraph or starts a block (after a
    cut inside code too: no overlap), else at a word.
    """
    return split_spans(text, start, end, lambda pos, _: pos + size, lambda _, cut: cut - overlap)


def split_spans(
    text: str,
    start: int,
    end: int,
    reach: Callable[[int, int], int],
    back: Callable[[int, int], int],
) -> Iterator[tuple[int, int]]:
    """The cutting loop of :func:`split_span`, whatever a chunk's size is measured in:
    ``reach(pos, stop)`` is how far a chunk starting at ``pos`` may go, ``back(pos, cut)``
    where the overlap before ``cut`` may start."""
    code = _Fences(text, start, end)
    pos = _skip_space(text, start, end)
    done = pos  # where the last chunk was cut: the next cut goes past it
    while pos < end:
        stop = _trim_end(text, pos, end)
        hi = reach(pos, stop)
        if stop <= hi:
            if stop > pos:
                yield pos, stop
            return
        cut = _best_cut(text, pos, hi, code, done)
        if cut is None:
            if pos < done:  # nothing past the last cut ends a sentence: start there instead
                pos = _skip_space(text, done, end)
                continue
            cut = _first_cut(text, pos, hi)
        yield pos, _trim_end(text, pos, cut)
        done = cut
        lo = code.out_of(_overlap_start(text, max(pos + 1, back(pos, cut)), cut), cut)
        pos = _skip_space(text, lo, end)


class _Fences:
    """The fenced code blocks of ``text[start:end]``: whether a point lies inside one."""

    def __init__(self, text: str, start: int, end: int) -> None:
        self.opens: list[int] = []
        self.closes: list[int] = []
        marker: str | None = None
        for m in _FENCE_LINE.finditer(text, start, end):
            run = m.group(1)
            line_end = text.find("\n", m.end(), end)
            line_end = end if line_end == -1 else line_end
            if marker is None:
                marker = run
                self.opens.append(m.start())
            elif (
                run[0] == marker[0]
                and len(run) >= len(marker)
                and not text[m.end() : line_end].strip()  # (```python opens, never closes)
            ):
                self.closes.append(line_end)
                marker = None
        if marker is not None:
            self.closes.append(end)  # an unclosed fence runs to the section's end

    def between(self, start: int, end: int) -> bool:
        """Whether a fenced block overlaps ``text[start:end]``."""
        i = bisect_right(self.opens, end - 1) - 1
        return i >= 0 and self.closes[i] > start

    def inside(self, at: int) -> int | None:
        """The end of the fenced block ``at`` lies strictly inside, else None."""
        i = bisect_right(self.opens, at) - 1
        if i >= 0 and self.opens[i] < at < self.closes[i]:
            return self.closes[i]
        return None

    def out_of(self, at: int, cut: int) -> int:
        """``at``, or where its fenced block ends when that is before ``cut``, else ``cut``:
        a chunk does not start inside code it does not need (a chunk after a cut inside
        code longer than a chunk starts at that cut, with no overlap)."""
        close = self.inside(at)
        if close is None:
            return at
        return close if close < cut else cut


def _skip_space(text: str, pos: int, end: int) -> int:
    while pos < end and text[pos].isspace():
        pos += 1
    return pos


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _best_cut(text: str, pos: int, hi: int, code: _Fences, done: int) -> int | None:
    """Where a chunk starting at ``pos`` that may reach ``hi`` ends (see :func:`split_span`):
    with fenced code in the window, the best cut of the first rule that has one outside it.

    The cut is past ``done``, where the chunk before ended: a chunk that starts in its
    overlap and ends where it did adds nothing (before a code block longer than a chunk,
    or a sentence longer than one, each such chunk started a word later: 447 of the PDF
    manuals' 2,342 chunks). None when no sentence or block ends past it: the chunk then
    starts at ``done``, without overlap, rather than end inside a sentence."""
    in_code = code.between(pos, hi)
    if in_code:
        for cuts in _cuts(text, pos, hi):
            outside = [c for c in cuts if c > done and code.inside(c) is None]
            if outside:
                return outside[-1]
    cut = _first_cut(text, pos, hi)
    if cut > done:
        return cut
    for cuts in itertools.islice(_cuts(text, pos, hi), None if in_code else 3):
        later = [c for c in cuts if c > done]
        if later:
            return later[-1]
    return None


def _first_cut(text: str, pos: int, hi: int) -> int:
    """The best cut of the first rule that has one, code or not."""
    middle = pos + (hi - pos) // 2
    window = text[middle:hi]
    at = window.rfind("\n\n")
    if at != -1:
        return middle + at + 2
    for lo in (middle, pos + (hi - pos) // 8):
        ends = [m.end() for m in _BOUNDARY.finditer(text, lo, hi) if m.end() < hi]
        if ends:
            return ends[-1]
    at = window.rfind("\n")
    if at != -1:
        return middle + at + 1
    at = max(window.rfind(" "), window.rfind("\t"))
    return middle + at + 1 if at != -1 else hi


def _cuts(text: str, pos: int, hi: int) -> Iterator[list[int]]:
    """The cut points of each rule of :func:`split_span`, in the rules' order of
    preference (each list computed when asked for); within a rule, the last is best."""
    middle = pos + (hi - pos) // 2
    yield [m.end() for m in _PARAGRAPH.finditer(text, middle, hi)]
    for lo in (middle, pos + (hi - pos) // 8):
        yield [m.end() for m in _BOUNDARY.finditer(text, lo, hi) if m.end() < hi]
    yield [m.end() for m in _LINE.finditer(text, middle, hi)]
    yield [m.end() for m in _SPACE.finditer(text, middle, hi)]


def _overlap_start(text: str, lo: int, cut: int) -> int:
    """Where the next chunk starts: the first sentence start inside the overlap, else the
    first block start (a list item, a table row, a spreadsheet's record: rows and records
    hold no sentence ends, and never start in the middle), else, when the cut itself ends
    a paragraph or starts a block, the cut (no overlap: the tail of a record is no
    context), else a word start."""
    if lo >= cut:
        return cut
    window = text[lo:cut]
    sentence = _SENTENCE_END.search(window)
    if sentence and sentence.end() < len(window):
        return lo + sentence.end()
    block = _BLOCK_START.search(window)
    if block and block.end() < len(window):
        return lo + block.end()
    if _PARAGRAPH_END.search(text, max(lo, cut - 16), cut) or (
        text[cut - 1] == "\n" and _AT_BLOCK.match(text, cut)
    ):
        return cut
    if lo > 0 and not text[lo - 1].isspace():
        space = re.search(r"\s", window)
        return lo + space.end() if space else cut
    return lo
