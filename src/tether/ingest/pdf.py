"""PDF text as a reader sees it: page furniture gone, words whole, sections titled.

pypdf extracts each page in content-stream order (``extraction_mode="plain"``). Its
``"layout"`` mode was measured on eleven Debian manuals: it joins no more broken words,
removes no headers and takes up to 2.5 times as long, so plain it is. On that text, with
work linear in the number of pages:

1. Page furniture. The first and last :data:`ZONE` lines of a page are where running
   headers and footers live. A zone line is furniture when, with its digits (and a
   trailing roman numeral) replaced by ``#`` so that "Page 3" matches "Page 4", it recurs
   in the zone of at least half the pages with text (and at least 3), or of 3 pages within
   :data:`NEAR_PAGES` pages either side (a chapter's running header, often on every other
   page). A zone line that is only a page number ("12", "xiv", "Page 3", "3 of 40",
   "- 3 -") is furniture too, and so is a page's first or last line when it is short and
   starts or ends with the page's own printed number ("Chapter 2: Setup 15" on page 15:
   a short chapter's header that no other page repeats), if a quarter of the pages have
   such a line (one "1 Overview" at the top of page 1 is a heading), and so is a zone
   line between two furniture lines of one edge (:func:`_framed`). A line needs a letter
   to be a running header, so a "}" closing code on two pages stays.
2. Contents and index pages are left out (their numbers in ``dropped_pages``): pages
   whose lines are mostly page references, with dot leaders ("Introduction . . . 3") or
   as index entries ("term, 12, 45"), or, without leaders, end in rising page numbers.
   See :func:`is_contents_page`. A PDF that is nothing else keeps them.
3. Words broken at a line end, where a letter, a hyphen and a line break are followed by a
   letter or digit. The line break always goes; the hyphen goes too (``configu-\nration``
   becomes ``configuration``) when the next line starts with a lowercase letter, unless
   the document spells the word with that hyphen elsewhere and never without it
   ("well-\nknown"), or the part before the break is already a hyphenated compound
   ("state-of-the-\nart"). When it starts with an uppercase letter or a digit
   ("UTF-\n8", "Addison-\nWesley") the hyphen stays, unless the document spells the
   joined word elsewhere and never the hyphenated one ("INCLUD-\nING"). A soft hyphen
   always goes.
4. Sections. Every page is at least its own section, so every chunk keeps its page. With
   an outline (bookmarks), an entry starts a section at its title's line on its page (or
   a line it begins; else where the entry before it on that page starts, else at the
   page start), and a section's title is the entry's path,
   ``"Chapter 2 > Installation"``, as for Markdown headings
   (:mod:`tether.ingest.pdf_sections`).
5. Printed page labels (``reader.page_labels``), where they differ from the physical
   page number: front matter "i", "ii", appendix "A-1".
6. Scanned pages, read first: a page whose text layer has fewer than
   :data:`MIN_LAYER_CHARS` visible characters and that holds a scan (an image of
   :data:`MIN_SCAN_PIXELS` or more) is read by OCR (:mod:`tether.ingest.ocr_engine`,
   ``rag.ocr``), its text then cleaned as any page's. A scan over the page timeout, too
   large or unreadable leaves its page out, with a warning (``PdfText.warnings``).
"""

from __future__ import annotations

import io
import logging
import math
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from tether.errors import EmptyDocument, UnreadableFile, UnsupportedFileType
from tether.ingest.chunking import Section
from tether.ingest.ocr_engine import (
    PageTimedOut,
    check_pixels,
    current_options,
    ocr_image,
    ocr_off_advice,
)
from tether.ingest.pdf_sections import join_pages, read_outline, titled_sections
from tether.text import normalize_text

if TYPE_CHECKING:
    from pypdf import PdfReader

logger = logging.getLogger("tether.ingest")

#: Lines at the top and at the bottom of a page where headers and footers are looked for.
ZONE = 3
#: A line recurring in the zone of this share of the pages with text is a running line.
RUNNING_SHARE = 0.5
#: ... or recurring on this many pages within NEAR_PAGES pages either side.
NEAR_COUNT = 3
NEAR_PAGES = 4
#: Numbered headers are looked for when this share of the pages has one.
NUMBERED_SHARE = 0.25
#: A first or last line that holds the page's own number has at most this many words.
MAX_HEADER_WORDS = 12
#: A contents page has at least this many non-empty lines.
MIN_CONTENTS_LINES = 4


@dataclass(frozen=True)
class PdfText:
    """A PDF's cleaned text; ``page_labels`` maps physical page numbers to printed labels
    where they differ, ``dropped_pages`` are the contents and index pages left out."""

    title: str  # from the PDF's metadata, "" when it has none
    text: str
    sections: tuple[Section, ...]
    page_labels: dict[int, str]
    dropped_pages: tuple[int, ...]
    #: The pages read by OCR (scans without a text layer), and what went wrong on others.
    ocr_pages: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()


def read_pdf(data: bytes, source: str) -> PdfText:
    """The cleaned text of the PDF ``data`` read from ``source`` (a path, for errors and logs).

    Raises UnreadableFile for a file pypdf cannot read, EmptyDocument for one without text."""
    reader, raw_pages, meta_title = _open(data, source)
    scans = read_scans(reader, raw_pages, source)
    pages = [normalize_text(page).split("\n") for page in scans.pages]
    if not any(_filled(lines) for lines in pages):
        raise EmptyDocument(source, scans.no_text())
    labels = _page_labels(reader, source) or [str(n) for n in range(1, len(pages) + 1)]
    stripped = strip_furniture(pages, labels)
    pages = stripped if any(_filled(lines) for lines in stripped) else pages
    dropped = tuple(
        n
        for n, lines in enumerate(pages, start=1)
        if is_contents_page([lines[i].strip() for i in _filled(lines)], len(pages))
    )
    if len(dropped) == sum(1 for lines in pages if _filled(lines)):
        dropped = ()  # a document that is all index keeps it: something beats nothing
    if dropped:
        logger.debug("%s: left out %d contents/index pages: %s", source, len(dropped), dropped)
    left_out = set(dropped)
    texts = ["" if n in left_out else "\n".join(ls) for n, ls in enumerate(pages, start=1)]
    texts = [normalize_text(t) for t in dehyphenate_pages(texts)]
    text, spans = join_pages(texts)
    sections = titled_sections(text, spans, read_outline(reader, source))
    printed = {n: label for n, label in enumerate(labels, start=1) if label != str(n)}
    return PdfText(meta_title, text, tuple(sections), printed, dropped, scans.read, scans.warnings)


def _open(data: bytes, source: str) -> tuple[PdfReader, list[str], str]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFile(source, "is encrypted with a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except (UnreadableFile, MemoryError):  # out of memory: the loader's limit, not the PDF
        raise
    except Exception as exc:
        # pypdf raises more than PyPdfError on malformed files (NotImplementedError for an
        # unknown filter, AttributeError, ...); any of them means "this PDF cannot be read".
        raise UnreadableFile(source, f"is not a readable PDF ({exc})") from exc
    return reader, pages, str(meta_title).strip()


# -- 1. page furniture ----------------------------------------------------------------------

_DIGITS = re.compile(r"\d+")
_TRAILING_ROMAN = re.compile(r"\b[ivxlcdm]{1,7}$")
_LETTER = re.compile(r"[^\W\d_]")
_PAGE_NUMBER = re.compile(
    r"(?:page\s+)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:of|/)\s*\d{1,4})?|[-–—]\s*\d{1,4}\s*[-–—]",
    re.IGNORECASE,
)


def furniture_key(line: str) -> str:
    """The form in which a running header recurs: digits and a trailing numeral as ``#``."""
    key = _DIGITS.sub("#", " ".join(line.casefold().split()))
    return _TRAILING_ROMAN.sub("#", key)


def _filled(lines: list[str]) -> list[int]:
    """The indices of the lines with text."""
    return [i for i, line in enumerate(lines) if line.strip()]


def _zone(lines: list[str]) -> list[int]:
    """The indices of the first and last ZONE lines with text."""
    filled = _filled(lines)
    return filled if len(filled) <= 2 * ZONE else filled[:ZONE] + filled[-ZONE:]


def strip_furniture(pages: list[list[str]], labels: list[str]) -> list[list[str]]:
    """``pages`` (lists of lines) without running headers, footers and page numbers;
    ``labels`` are the pages' printed numbers, one per page."""
    running = _running_keys(pages)
    numbered = _numbered_edges(pages, labels)
    cleaned: list[list[str]] = []
    for lines, keys, edges in zip(pages, running, numbered, strict=True):
        furniture = {
            i
            for i in _zone(lines)
            if i in edges
            or _PAGE_NUMBER.fullmatch(lines[i].strip())
            or furniture_key(lines[i]) in keys
        }
        furniture |= _framed(lines, furniture, keys)
        cleaned.append([line for i, line in enumerate(lines) if i not in furniture])
    return cleaned


def _framed(lines: list[str], furniture: set[int], keys: set[str]) -> set[int]:
    """The zone lines between two furniture lines of one edge, one of them running (its
    key in ``keys``; a list's "vii" and "viii" frame nothing): "Appendix A" between "User
    Guide" and "Page 133" recurs on too few pages to be found alone."""
    filled, framed = _filled(lines), set()
    for part in (filled[:ZONE], filled[-ZONE:]):
        ends = [i for i in part if i in furniture]
        if len(ends) >= 2 and any(furniture_key(lines[i]) in keys for i in ends):
            framed.update(i for i in part if ends[0] < i < ends[-1])
    return framed


def _numbered_edges(pages: list[list[str]], labels: list[str]) -> list[set[int]]:
    """Per page, which of its first and last line hold the page's own number, where the
    document numbers its headers so: on a quarter of its pages (and at least 3)."""
    edges: list[set[int]] = []
    for lines, label in zip(pages, labels, strict=True):
        filled = _filled(lines)
        ends = {filled[0], filled[-1]} if filled else set()
        edges.append({i for i in ends if _numbered_by(lines[i], label)})
    with_text = sum(1 for lines in pages if _filled(lines))
    enough = max(NEAR_COUNT, math.ceil(with_text * NUMBERED_SHARE))
    return edges if sum(1 for e in edges if e) >= enough else [set() for _ in pages]


def _numbered_by(line: str, label: str) -> bool:
    """A short line starting or ending with the page's own number: "Chapter 2: Setup 15"
    heads page 15 even when no other page of a short chapter repeats it."""
    words = line.split()
    return 1 < len(words) <= MAX_HEADER_WORDS and label in (words[0], words[-1])


def _running_keys(pages: list[list[str]]) -> list[set[str]]:
    """For each page, the keys of its zone lines that are running headers or footers."""
    where: defaultdict[str, list[int]] = defaultdict(list)
    for number, lines in enumerate(pages):
        for key in {furniture_key(lines[i]) for i in _zone(lines)}:
            if _LETTER.search(key):
                where[key].append(number)
    with_text = sum(1 for lines in pages if _filled(lines))
    everywhere = max(NEAR_COUNT, math.ceil(with_text * RUNNING_SHARE))
    running: list[set[str]] = [set() for _ in pages]
    for key, numbers in where.items():
        found = numbers if len(numbers) >= everywhere else _clustered(numbers)
        for number in found:
            running[number].add(key)
    return running


def _clustered(numbers: list[int]) -> Iterator[int]:
    """The page numbers (sorted) with NEAR_COUNT of ``numbers`` within NEAR_PAGES of them."""
    low = high = 0
    for number in numbers:
        while numbers[low] < number - NEAR_PAGES:
            low += 1
        while high < len(numbers) and numbers[high] <= number + NEAR_PAGES:
            high += 1
        if high - low >= NEAR_COUNT:
            yield number


# -- 2. contents and index pages ------------------------------------------------------------

_REF = r"(?:\d{1,4}|[ivxlcdm]{1,7})"
_LEADER = re.compile(rf"(?:\.\s*){{3,}}{_REF}(?:\s*[-–,]\s*{_REF})*$|…\s*{_REF}$")
_INDEX_ENTRY = re.compile(r"[^\W\d_].*?,\s*(\d{1,4})(?:\s*[-–,]\s*\d{1,4})*$")
_TRAILING_NUMBER = re.compile(r"\S\s+(\d{1,4})$")
_BARE_NUMBER = re.compile(r"[0-9]{1,4}")


def is_contents_page(lines: list[str], page_count: int) -> bool:
    """Whether ``lines`` (non-empty) are a table of contents or an index.

    Either a quarter of the lines are page references (a dot leader and a page number, or
    an index entry "term, 12, 45") and 60% of them are a reference, a bare page number, or
    a title wrapped onto the line above a reference; or, for contents without leaders, 70%
    of the lines end in a page number and the numbers rise. A page number exceeds the page
    count by 10 at most, so a table of years or measurements is not taken for contents.
    """
    if len(lines) < MIN_CONTENTS_LINES:
        return False
    limit = page_count + 10
    references = [_is_reference(line, limit) for line in lines]
    covered = sum(
        1
        for i, line in enumerate(lines)
        if references[i]
        or (i + 1 < len(lines) and references[i + 1])
        or (_BARE_NUMBER.fullmatch(line) is not None and int(line) <= limit)
    )
    if 4 * sum(references) >= len(lines) and 10 * covered >= 6 * len(lines):
        return True
    numbers = [int(m.group(1)) for line in lines if (m := _TRAILING_NUMBER.search(line))]
    if 10 * len(numbers) < 7 * len(lines) or max(numbers) > limit:
        return False
    rising = sum(1 for a, b in pairwise(numbers) if a <= b)
    return 10 * rising >= 9 * (len(numbers) - 1)


def _is_reference(line: str, limit: int) -> bool:
    if _LEADER.search(line[-120:]):  # the tail only: a leader search is quadratic in dots
        return True
    entry = _INDEX_ENTRY.fullmatch(line)
    return entry is not None and int(entry.group(1)) <= limit


# -- 3. words broken at a line end ----------------------------------------------------------

# \b and the bounds keep the search linear: a long token is tried from its start only.
_BROKEN_WORD = re.compile(r"\b((?:\w{1,64}-){0,8}\w{0,64}[^\W\d_])([-\u2010\u00ad])\n([^\W_]\w*)")
_COMPOUND = re.compile(r"\w+(?:-\w+)+")
_WORD = re.compile(r"\w+")


def dehyphenate_pages(texts: list[str]) -> list[str]:
    """``texts`` with words broken at line ends joined, judged against the whole document."""
    if not any(_BROKEN_WORD.search(text) for text in texts):
        return texts
    whole = "\n".join(texts).casefold()
    compounds = set(_COMPOUND.findall(whole))
    words = set(_WORD.findall(whole))

    def join(match: re.Match[str]) -> str:
        left, hyphen, right = match.groups()
        hyphenated = f"{left}-{right}".casefold()
        joined_seen = hyphenated.replace("-", "") in words
        hyphen_seen = hyphenated in compounds
        if hyphen == "\u00ad":
            return left + right
        if right[0].islower():
            keep = "-" in left or (hyphen_seen and not joined_seen)
        else:
            keep = hyphen_seen or not joined_seen
        return f"{left}-{right}" if keep else left + right

    return [_BROKEN_WORD.sub(join, text) for text in texts]


# -- pypdf: page labels ---------------------------------------------------------------------


def _page_labels(reader: PdfReader, source: str) -> list[str]:
    """The printed label of every page ("i", "7", "A-1"); [] when they cannot be read."""
    try:
        labels = [str(label) for label in reader.page_labels]
    except MemoryError:
        raise
    except Exception as exc:
        logger.debug("%s: page labels not readable (%s)", source, exc)
        return []
    return labels if len(labels) == len(reader.pages) else []


# -- 6. scanned pages -----------------------------------------------------------------------

#: A page with fewer visible characters in its text layer is read by OCR, if it holds a scan.
MIN_LAYER_CHARS = 32
#: An image of fewer pixels is no scan of a page (a logo, a rule).
MIN_SCAN_PIXELS = 100_000
#: Images of one page read at most (a page scanned in strips has a few), and XObjects
#: looked at to find them (forms nest, and may refer to each other).
MAX_SCANS_PER_PAGE = 4
MAX_XOBJECTS = 200


@dataclass(frozen=True)
class Scans:
    """Every page's text, read by OCR where the page is a scan: ``read`` are those pages,
    ``scanned`` how many pages without a text layer held a scan, ``warnings`` what went
    wrong on the others."""

    pages: list[str]
    read: tuple[int, ...] = ()
    scanned: int = 0
    warnings: tuple[str, ...] = ()
    ocr_off: bool = False

    def no_text(self) -> str:
        """Why the PDF has no text at all."""
        if self.ocr_off:
            return f"the PDF has no text layer (a scan?), and {ocr_off_advice()}"
        if self.warnings:
            return f"the PDF has no text layer, and OCR read none: {'; '.join(self.warnings[:3])}"
        if self.scanned:
            return f"the PDF has no text layer, and OCR found no text on its {self.scanned} scans"
        return "the PDF has no text layer, and no page of it is a scanned image"


def read_scans(reader: PdfReader, pages: list[str], source: str) -> Scans:
    """``pages`` (the text layer of each page), with the text OCR reads on the scans of
    the pages that have (almost) none."""
    bare = [n for n, text in enumerate(pages, start=1) if _visible(text) < MIN_LAYER_CHARS]
    options = current_options()
    if not bare or not options.enabled:
        return Scans(pages, ocr_off=not options.enabled)
    texts, read, warnings, scanned = list(pages), [], [], 0
    for number in bare:
        try:
            text = _ocr_page(reader.pages[number - 1], source, number, len(pages))
        except PageTimedOut as exc:
            warnings.append(str(exc))
            continue
        except UnsupportedFileType as exc:  # no RapidOCR: the text layer is all there is
            warnings.append(f"scanned pages not read: {exc.reason}")
            break
        except UnreadableFile as exc:  # a scan too large, or one the engine failed on
            warnings.append(f"page {number}: {exc.reason}; left out")
            continue
        scanned += text is not None
        if text:  # after what little text layer it has: a caption, a scanner's stamp
            texts[number - 1] = f"{pages[number - 1].strip()}\n{text}".strip()
            read.append(number)
    for warning in warnings:
        logger.warning("%s: %s", source, warning)
    return Scans(texts, tuple(read), scanned, tuple(warnings))


def _visible(text: str) -> int:
    return sum(1 for c in text if not c.isspace())


def _ocr_page(page: Any, source: str, number: int, count: int) -> str | None:
    """The OCR text of the scans on ``page`` (within one page's time in all), or None
    when it holds none."""
    try:
        keys = _scan_keys(page, source)
    except (UnreadableFile, MemoryError):
        raise
    except Exception as exc:  # a broken resource dictionary: no scan to be found
        logger.debug("%s: page %d: images not listed (%s)", source, number, exc)
        return None
    if not keys:
        return None
    deadline = time.monotonic() + current_options().page_timeout
    parts = []
    for key in keys:
        try:
            image = page.images[key].image
        except MemoryError:
            raise
        except Exception as exc:  # a filter pypdf lacks (JBIG2 without jbig2dec), ...
            logger.debug("%s: page %d: image %s not decodable (%s)", source, number, key, exc)
            continue
        if image is not None:
            timeout = max(deadline - time.monotonic(), 0.001)
            parts.append(ocr_image(image, source, number, page_count=count, timeout=timeout))
    return "\n".join(parts)


def _scan_keys(page: Any, source: str) -> list[Any]:
    """The keys in ``page.images`` of its scans: images of :data:`MIN_SCAN_PIXELS` and at
    least a quarter of the largest's, as their dictionaries declare them (nothing is
    decoded); :class:`UnreadableFile` for one too large to decode."""
    found: list[tuple[tuple[str, ...], int]] = []
    forms: list[tuple[tuple[str, ...], Any]] = [((), page)]
    seen = 0
    while forms and seen < MAX_XOBJECTS:
        path, holder = forms.pop(0)
        xobjects = _resolved(_resolved(holder.get("/Resources")) or {}).get("/XObject")
        for name, ref in (_resolved(xobjects) or {}).items():
            seen += 1
            obj = _resolved(ref)
            if not isinstance(obj, dict) or seen > MAX_XOBJECTS:
                continue
            if obj.get("/Subtype") == "/Image":
                width, height = (int(_resolved(obj.get(key)) or 0) for key in ("/Width", "/Height"))
                check_pixels(width, height, source, what="it holds an image")
                found.append(((*path, str(name)), width * height))
            elif obj.get("/Subtype") == "/Form" and len(path) < 3:
                forms.append(((*path, str(name)), obj))
    largest = max((pixels for _, pixels in found), default=0)
    keys = [k for k, px in found if px >= max(MIN_SCAN_PIXELS, largest // 4)]
    return [k[0] if len(k) == 1 else k for k in keys[:MAX_SCANS_PER_PAGE]]


def _resolved(value: Any) -> Any:
    """``value`` with an indirect reference followed."""
    return value.get_object() if hasattr(value, "get_object") else value
