"""OCR of page images, offline and bounded, by one of two engines (``rag.ocr_engine``):

- **Tesseract** (:mod:`tether.ingest.tesseract`), the system's ``tesseract`` program:
  the default when it is installed. On scanned pages of real manuals it read more answers
  word for word than RapidOCR, in half the time (``bench/ocr_manuals.md``).
- **RapidOCR** (ONNX models shipped in its wheel, the ``ocr`` extra): nothing to install
  outside Python. The engine is made once per process, on first use (0.5 s), and reads an
  A4 page of 40 lines in 2.5-4 s on two cores (``bench/ocr_speed.py``).

Both readers of scans use this module: images (:mod:`tether.ingest.formats.ocr`) and the
pages of a PDF without a text layer (:mod:`tether.ingest.pdf`). Nothing here imports
RapidOCR or Pillow until a scan is read.

Bounds, each a typed error or a page left out, never a hang:

- an image over :data:`MAX_PIXELS` (a decompression bomb: a few kB that decode to
  gigabytes) is :class:`~tether.errors.UnreadableFile` before it is decoded;
- text is looked for on a copy at most :data:`MAX_SIDE` pixels long (the detector's
  own bound), so its time does not grow with the scan's resolution; each line found is
  then read from the full image, one line at a time;
- a page that takes longer than ``rag.ocr_page_timeout`` is left out with a warning
  (:class:`PageTimedOut`). Tesseract's process is killed at that timeout. RapidOCR runs
  in a thread joined with it (the worker process already bounds the whole file with
  ``SIGALRM``, which a second alarm would clobber); a page given up on stops at its next
  line, and the next page waits for it within its own timeout.

The options are the process's own (:func:`configure`): a worker process is given them at
start (``rag.ocr``, ``rag.ocr_engine``, ``rag.ocr_page_timeout``); the in-process path
uses the defaults or what was configured there.
"""

from __future__ import annotations

import io
import logging
import math
import re
import subprocess
import threading
import time
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from tether.errors import InvalidArgument, UnreadableFile, UnsupportedFileType
from tether.ingest import tesseract
from tether.text import packaged_vocabulary

if TYPE_CHECKING:
    from PIL.Image import Image

logger = logging.getLogger("tether.ingest")

_LETTERS = re.compile(r"[A-Za-z]+")
#: What a ligature holds after its first "f" ("fi", "fl", "ffi", "ffl").
_LIGATURE_TAILS = ("i", "l", "fi", "fl")
#: Never a space before these, or after these (what print does).
_CLOSING = frozenset(",.;:!?)]}%")
_OPENING = frozenset("([{")
#: Between two digits, a blank is a space from this many word spaces on.
DIGIT_GAP = 2.0
#: Text read with less confidence than this is left out.
MIN_CONFIDENCE = 0.5
#: The longer side of the image text is looked for on, in pixels (larger ones are
#: scaled down for that; the lines are cut from the full image). 1,400 finds the lines of
#: 10 pt type scanned at 200 dpi as well as 2,000 did, in a third of the time and 0.4 GB
#: less memory (``bench/ocr_manuals.py``).
MAX_SIDE = 1400
#: The longest line image read, in pixels at :data:`LINE_HEIGHT`.
MAX_LINE = 2400
#: The height a line of text is cut at for the recognizer, in pixels.
LINE_HEIGHT = 48
#: Word spaces on a line are its blank gaps that are clearly wider than the others (on
#: average this many times), and at least this share of the line's height; a gap this
#: share of the height or wider always is one.
WORD_GAP_RATIO = 2.5
MIN_WORD_GAP = 0.15
WORD_GAP = 0.3
#: Pixels an image may have (a 60-megapixel page is A4 at 900 dpi); more: a bomb.
MAX_PIXELS = 60_000_000
#: Frames of a TIFF file read at most.
MAX_FRAMES = 2000
#: The image formats read (Pillow's names); others are refused unread.
IMAGE_FORMATS = ("PNG", "JPEG", "TIFF")
#: The values of ``rag.ocr_engine``.
ENGINES = ("auto", "tesseract", "rapidocr")


@dataclass(frozen=True)
class OcrOptions:
    """Whether scans are read (``rag.ocr``), how long one page may take
    (``rag.ocr_page_timeout``, seconds), the text's language (``rag.language``) and the
    engine (``rag.ocr_engine``)."""

    enabled: bool = True
    page_timeout: float = 60.0
    #: ``rag.language``: in English, words missing a ligature's letters are mended.
    language: str = "english"
    #: ``auto`` (Tesseract when installed, else RapidOCR), ``tesseract`` or ``rapidocr``.
    engine: str = "auto"

    def __post_init__(self) -> None:
        if not self.page_timeout > 0:
            raise InvalidArgument(f"page_timeout must be positive, not {self.page_timeout!r}")
        if self.engine not in ENGINES:
            choices = ", ".join(ENGINES)
            raise InvalidArgument(f"engine must be one of {choices}, not {self.engine!r}")


class PageTimedOut(Exception):
    """OCR of one page took longer than ``rag.ocr_page_timeout``; the page is left out."""


_options = OcrOptions()
#: Called as each page's OCR starts (a worker process grants the file the page's time).
_page_hook: Callable[[], None] | None = None
_engine_lock = threading.Lock()
_engines: list[Any] = []  # the engine, once made


def configure(options: OcrOptions) -> None:
    """Set this process's OCR options (a worker process does so at start)."""
    global _options
    _options = options


def on_each_page(hook: Callable[[], None] | None) -> None:
    """Call ``hook`` as the OCR of each page starts, in this process."""
    global _page_hook
    _page_hook = hook


def current_options() -> OcrOptions:
    """This process's OCR options."""
    return _options


def ocr_off_advice() -> str:
    return "OCR is off: set rag.ocr = true to read scanned pages"


def engine_name(source: str) -> str:
    """``tesseract`` or ``rapidocr``: the engine ``rag.ocr_engine`` names, or for ``auto``
    Tesseract when it is installed and RapidOCR otherwise; :class:`UnsupportedFileType`
    when the one needed is missing."""
    choice = _options.engine
    if choice != "rapidocr" and tesseract.usable():
        return "tesseract"
    if choice == "tesseract":
        raise UnsupportedFileType(
            source,
            "rag.ocr_engine = 'tesseract' needs the tesseract program and its English model"
            " (apt-get install tesseract-ocr tesseract-ocr-eng, or set TETHER_TESSERACT)",
        )
    return "rapidocr"


def engine(source: str) -> Any:
    """The process's RapidOCR engine, made on first use; :class:`UnsupportedFileType`
    when RapidOCR is not installed."""
    with _engine_lock:
        if not _engines:
            try:
                from rapidocr_onnxruntime import RapidOCR
            except ImportError as exc:
                raise UnsupportedFileType(
                    source,
                    "reading scanned pages needs Tesseract (apt-get install tesseract-ocr"
                    f" tesseract-ocr-eng) or RapidOCR (pip install 'tether[ocr]'): {exc}",
                ) from exc
            _engines.append(RapidOCR())
        return _engines[0]


def ocr_image(
    image: Image,
    source: str,
    page: int,
    *,
    page_count: int | None = None,
    timeout: float | None = None,
) -> str:
    """The text of ``image`` (page ``page`` of ``source``), its lines in reading order.

    Raises :class:`PageTimedOut` past ``timeout`` (by default ``rag.ocr_page_timeout``),
    :class:`UnsupportedFileType` without an engine, :class:`UnreadableFile` when the
    engine fails on the image."""
    seconds = _options.page_timeout if timeout is None else timeout
    if _page_hook is not None:
        _page_hook()
    name = engine_name(source)
    started = time.monotonic()
    try:
        if name == "tesseract":
            found = _by_tesseract(image, seconds)
        else:
            ocr = engine(source)
            found = _bounded(lambda stop: read_lines(ocr, image, stop), seconds)
    except MemoryError:
        raise
    except Exception as exc:  # the engine's own failure on this image: the page's error
        problem = f"OCR failed on page {page} ({type(exc).__name__}: {exc})"
        raise UnreadableFile(source, problem) from exc
    file = Path(source).name
    of = f" of {page_count}" if page_count else ""
    if found is _TIMED_OUT:
        logger.warning("OCR page %d%s of %s: over %.3g s; left out", page, of, file, seconds)
        raise PageTimedOut(
            f"page {page}: OCR took longer than {seconds:g} s (rag.ocr_page_timeout); left out"
        )
    seconds_taken = time.monotonic() - started
    logger.info("OCR page %d%s of %s: %.1f s (%s)", page, of, file, seconds_taken, name)
    if name == "tesseract":
        return "\n".join(_finished(text) for text, _ in found)
    return "\n".join(reading_order(found))


def _by_tesseract(image: Image, seconds: float) -> Any:
    """Tesseract's lines of ``image``, or :data:`_TIMED_OUT` (its process killed)."""
    try:
        return tesseract.read_page(image, _options.language, seconds)
    except subprocess.TimeoutExpired:
        return _TIMED_OUT


def _finished(text: str) -> str:
    """A line as read, in the form both engines give: NFKC, ligatures mended in English."""
    read = unicodedata.normalize("NFKC", text)
    if _options.language == "english":
        read = mended_ligatures(read, packaged_vocabulary())
    return read


def read_lines(ocr: Any, image: Image, stop: threading.Event) -> list[tuple[Any, str, float]]:
    """``[box, text, score]`` of each line of text on ``image``, read by ``ocr``.

    The detector finds the lines on a copy at most :data:`MAX_SIDE` pixels long; each line
    is then cut from the full image, :data:`LINE_HEIGHT` pixels high, and recognised on its
    own. Recognised where RapidOCR cuts it (from its own copy, then stretched to its
    model's 48 px), a line of 10 pt type scanned at 150 dpi loses most of the spaces
    between its words ("Thecoolantpump"); cut so, none (``bench/ocr_speed.py``). RapidOCR's
    line orientation classifier is not used: it turns upright lines over (6 of 40 on a
    page at 300 dpi, read as garbage); a page mostly unreadable is read again upside
    down instead, and the better reading kept. ``stop`` set, no further line is read."""
    image = _rgb(image)
    found = _read_upright(ocr, image, stop)
    if 2 * _confident(found) < len(found) and len(found) >= 3 and not stop.is_set():
        turned = _read_upright(ocr, image.rotate(180), stop)
        found = turned if _confident(turned) > _confident(found) else found
    return found


def _confident(found: list[tuple[Any, str, float]]) -> int:
    return sum(1 for _, _, score in found if score >= MIN_CONFIDENCE)


def _read_upright(ocr: Any, image: Image, stop: threading.Event) -> list[tuple[Any, str, float]]:
    scale = min(1.0, MAX_SIDE / max(image.size))
    if scale < 1:
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        boxes, _ = ocr(image.resize(size, reducing_gap=3.0), use_cls=False, use_rec=False)
    else:
        boxes, _ = ocr(image, use_cls=False, use_rec=False)
    found: list[tuple[Any, str, float]] = []
    for box in boxes or []:
        if stop.is_set():
            break
        quad = [(float(x) / scale, float(y) / scale) for x, y in box]
        line = _line_image(image, quad)
        read = _recognise(ocr, line) if line is not None else None
        if read is not None and read[0]:
            found.append((quad, *read))
    return found


def _recognise(ocr: Any, line: Image) -> tuple[str, float] | None:
    """The text of one line image and its confidence, with the spaces between its words
    put back where the image shows them (:func:`_with_spaces`)."""
    import numpy as np

    pixels = np.asarray(line)[:, :, ::-1]  # (RapidOCR reads BGR, as OpenCV does)
    results, _ = ocr.text_rec([pixels], True)
    if not results:
        return None
    text, score, frames = results[0]
    return _finished(_with_spaces(line, str(text), frames)), float(score)


def mended_ligatures(text: str, vocabulary: frozenset[str]) -> str:
    """``text`` with each word that lost the letters of a ligature given them back: a
    word of three letters or more, lower-case or capitalised, that is not in
    ``vocabulary`` and becomes exactly one word of it with "i", "l", "fi" or "fl" after
    one of its "f"s ("fags" for "flags", "fle" for "file", "efcient" for "efficient").

    Printed English is set with "fi", "fl", "ffi" and "ffl" as one glyph each, which the
    recogniser often reads as a lone "f". Without a vocabulary nothing changes."""
    if not vocabulary:
        return text
    return _LETTERS.sub(lambda m: _mended(m.group(), vocabulary), text)


def _mended(word: str, vocabulary: frozenset[str]) -> str:
    lower = word.lower()
    if len(word) < 3 or "f" not in lower or lower in vocabulary:
        return word
    if not (word.islower() or (word[0].isupper() and word[1:].islower())):
        return word  # (capitals are never set with ligatures)
    known = {
        lower[: i + 1] + tail + lower[i + 1 :]
        for i, letter in enumerate(lower)
        if letter == "f"
        for tail in _LIGATURE_TAILS
    } & vocabulary
    if len(known) != 1:
        return word
    [mended] = known
    return mended if word.islower() else mended.capitalize()


def _with_spaces(line: Image, text: str, frames: Sequence[Any]) -> str:
    """``text`` with a space between two characters wherever the line image has a blank
    gap wider than a word space between them.

    RapidOCR's recogniser (trained mostly on text set without spaces) drops many of the
    spaces of printed English ("Noglobalvariables"), which lexical search cannot match.
    Each character comes with the column of the model's output it was read at; the line
    image's blank runs of columns (no ink from top to bottom) of at least
    :data:`WORD_GAP` of the line's height, and :data:`WORD_GAP_RATIO` times the typical
    gap between letters, are the word spaces. Measured on scanned pages of real manuals
    (``bench/ocr_manuals.py``)."""
    import numpy as np

    columns, words, positions = frames[0], frames[1], frames[2]
    chars = [c for word in words for c in word]
    at = [p for word in positions for p in word]
    if len(chars) != len(at) or not columns:
        return text
    ink = np.asarray(line.convert("L")) < 140
    height, width = ink.shape
    # Blank across the middle of the line: the edges may hold a neighbour line's
    # descenders or ascenders (a skewed scan), which no word space has in its middle.
    band = ink[height // 5 : height - height // 5]
    gaps = _blank_runs(band.sum(axis=0) == 0)
    if not gaps:
        return text
    wide = _word_gap([end - start for start, end in gaps], height)
    spaces = [((start + end) / 2, end - start) for start, end in gaps if end - start >= wide]
    scale = width / columns
    out: list[str] = []
    previous = None
    for char, column in zip(chars, at, strict=True):
        x = (column + 0.5) * scale
        if previous is not None and out and out[-1] != " " and char != " ":
            between = [w for s, w in spaces if previous < s < x]
            if between and _spaced(out[-1], char, max(between) / wide):
                out.append(" ")
        out.append(char)
        previous = x
    return "".join(out)


def _spaced(before: str, after: str, gap: float) -> bool:
    """Whether a blank ``gap`` (in word spaces) between two characters is a space.

    Never before closing punctuation or after an opening bracket, where print sets none
    (a full stop or comma sits low, its blank column reads as a gap: "idn2 .h"); between
    two digits only at twice a word space, as digits are set on one width and a narrow
    one ("1") stands in blank of its own ("card 1 6" for "card16")."""
    if after in _CLOSING or before in _OPENING:
        return False
    return gap >= DIGIT_GAP if before.isdigit() and after.isdigit() else True


def _word_gap(widths: list[int], height: int) -> float:
    """The narrowest blank gap that is a word space on a line ``height`` pixels high whose
    blank gaps are ``widths``: where the gaps split best in two groups (letter gaps and
    word spaces: the split of most variance between them), when the word spaces are
    clearly wider (:data:`WORD_GAP_RATIO` times on average) and at least
    :data:`MIN_WORD_GAP` of the height; else :data:`WORD_GAP` of the height (a line
    of one word, or of letters that touch)."""
    fallback = WORD_GAP * height
    ordered = sorted(widths)
    best, best_score = None, 0.0
    for cut in range(1, len(ordered)):
        low, high = ordered[:cut], ordered[cut:]
        if ordered[cut] == ordered[cut - 1] or ordered[cut] < MIN_WORD_GAP * height:
            continue
        mean_low, mean_high = sum(low) / len(low), sum(high) / len(high)
        score = len(low) * len(high) * (mean_high - mean_low) ** 2
        if mean_high >= WORD_GAP_RATIO * max(mean_low, 1.0) and score > best_score:
            best, best_score = float(ordered[cut]), score
    return min(best, fallback) if best is not None else fallback


def _blank_runs(blank: Any) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of blank columns between two inked ones."""
    runs, start = [], None
    for x, empty in enumerate(blank.tolist()):
        if empty and start is None:
            start = x
        elif not empty and start is not None:
            if start > 0:
                runs.append((start, x))
            start = None
    return runs


def _line_image(image: Image, quad: list[tuple[float, float]]) -> Image | None:
    """The line inside ``quad`` (clockwise from its top left) cut straight from
    ``image``, :data:`LINE_HEIGHT` pixels high (and at most :data:`MAX_LINE` long); a
    vertical line turned to run left to right, as RapidOCR does."""
    from PIL import Image as PILImage

    top_left, top_right, bottom_right, bottom_left = quad
    width = max(math.dist(top_left, top_right), math.dist(bottom_left, bottom_right))
    height = max(math.dist(top_left, bottom_left), math.dist(top_right, bottom_right))
    if width < 2 or height < 2:
        return None
    upright = height >= 1.5 * width
    across, along = (width, height) if upright else (height, width)
    scale = min(LINE_HEIGHT / across, MAX_LINE / along)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    corners = (*top_left, *bottom_left, *bottom_right, *top_right)
    line = image.transform(
        size, PILImage.Transform.QUAD, corners, resample=PILImage.Resampling.BICUBIC
    )
    return line.transpose(PILImage.Transpose.ROTATE_90) if upright else line


_TIMED_OUT = object()
_busy = threading.Lock()  # one page at a time: a page given up on is not raced


def _bounded(work: Callable[[threading.Event], Any], seconds: float) -> Any:
    """``work(stop)`` run in a thread, or :data:`_TIMED_OUT` when it takes longer than
    ``seconds`` (waiting for a page given up on counts); ``stop`` is then set, for the
    work to end at its next step. An error it raises is raised here."""
    outcome: list[tuple[bool, Any]] = []
    stop = threading.Event()

    def run() -> None:
        with _busy:
            if stop.is_set():
                return
            try:
                outcome.append((True, work(stop)))
            except BaseException as exc:  # raised in the caller's thread, below
                outcome.append((False, exc))

    thread = threading.Thread(target=run, name="tether-ocr", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        stop.set()
    if not outcome:  # (it may have ended between the join and the flag)
        return _TIMED_OUT
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def reading_order(results: Sequence[Any]) -> list[str]:
    """The lines of RapidOCR's ``results`` ([box of 4 points, text, score], ...): boxes
    top to bottom, those whose vertical centres lie within half a line height of a
    line's joined into it, left to right; text under :data:`MIN_CONFIDENCE` left out."""
    boxes = []
    for box, text, score in results:
        if float(score) < MIN_CONFIDENCE or not str(text).strip():
            continue
        ys = [float(point[1]) for point in box]
        left = min(float(point[0]) for point in box)
        boxes.append(((min(ys) + max(ys)) / 2, max(ys) - min(ys), left, str(text).strip()))
    lines: list[list[tuple[float, float, float, str]]] = []
    for box in sorted(boxes):
        if lines:
            line = lines[-1]
            centre = sum(b[0] for b in line) / len(line)
            if abs(box[0] - centre) <= median(b[1] for b in line) / 2:
                line.append(box)
                continue
        lines.append([box])
    return [" ".join(b[3] for b in sorted(line, key=lambda b: b[2])) for line in lines]


# -- images ------------------------------------------------------------------------------


def check_pixels(width: int, height: int, source: str, *, what: str = "is an image") -> None:
    """:class:`UnreadableFile` for an image over :data:`MAX_PIXELS`."""
    if width * height > MAX_PIXELS:
        raise UnreadableFile(source, _bomb(f"{width}x{height} pixels", what))


def _bomb(size: str, what: str = "is an image") -> str:
    return (
        f"{what} of {size}, over {MAX_PIXELS:,}: a decompression bomb, or a scan at a"
        " resolution too high to read (scan it at 300 dpi)"
    )


def open_image(data: bytes, source: str) -> Image:
    """The PNG, JPEG or TIFF image in ``data``, its header read and its size checked;
    :class:`UnreadableFile` for anything else or a decompression bomb."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        size = f"{int(pixels.group(1)):,} pixels" if pixels else "too many pixels"
        raise UnreadableFile(source, _bomb(size)) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        kinds = ", ".join(IMAGE_FORMATS)
        raise UnreadableFile(source, f"is not a readable image ({kinds}): {exc}") from exc
    check_pixels(*image.size, source)
    return image


def frame_count(image: Image) -> int:
    """The pages of ``image``: a TIFF's frames (:data:`MAX_FRAMES` at most), else one
    (an animated PNG's frames are no pages)."""
    return min(getattr(image, "n_frames", 1), MAX_FRAMES) if image.format == "TIFF" else 1


def frames(image: Image, source: str) -> Iterator[Image]:
    """Each page of ``image`` (:func:`frame_count`), decoded and checked in turn."""
    for index in range(frame_count(image)):
        try:
            image.seek(index)
            check_pixels(*image.size, source)
            image.load()
            frame = image.copy()
        except (OSError, ValueError, SyntaxError, EOFError) as exc:
            raise UnreadableFile(source, f"image frame {index + 1} is unreadable: {exc}") from exc
        yield frame


def _rgb(image: Image) -> Image:
    """``image`` as 8-bit RGB on white."""
    from PIL import Image as PILImage

    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        low, high = image.convert("F").getextrema()
        scale = 255 / (high - low) if high > low else 1.0
        image = image.convert("F").point(lambda v: (v - low) * scale).convert("L")
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = PILImage.new("RGBA", rgba.size, "white")
        image.alpha_composite(rgba)
    return image.convert("RGB")
