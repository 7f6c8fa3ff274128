"""Tesseract, the OCR program Debian and most systems package, as one of tether's two OCR
engines (:mod:`tether.ingest.ocr_engine` chooses; ``rag.ocr_engine``).

Each page runs in a ``tesseract`` process of its own, on one thread (the loaders already
read files side by side), killed when the page's time is up. The page goes in as an
uncompressed image on standard input (PPM, which carries no resolution: Tesseract
measures the type itself; a BMP's default 96 dpi header made it read worse), and its
words come back as TSV, each with its line and confidence. Every word is kept (dropping
those under a confidence of 10 or 30 lost answers on scanned manuals and gained none); a
page read with little confidence is read again upside down, the better reading kept, as
the RapidOCR path does. Text set small in pixels (a screenshot, a page scanned at low
resolution: words under :data:`SMALL_TEXT` pixels high) is read again from the image
enlarged to :data:`TEXT_HEIGHT`: Tesseract's recogniser misreads letters a few pixels
high ("Reconendat ion" for "Recomendation" in an e-mailed image whose words were 8 pixels
high; enlarged 2.5 times, it read every word).

Install it with the system's packages (``apt-get install tesseract-ocr tesseract-ocr-eng``;
``make test`` runs ``scripts/install-debian-packages.sh``) or point ``TETHER_TESSERACT`` at
the program. The language is ``rag.language``'s Tesseract model when it is installed
(``tesseract-ocr-deu`` for German, ...), otherwise English.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL.Image import Image

logger = logging.getLogger("tether.ingest")

#: ``rag.language`` -> the name of Tesseract's model for it.
LANGUAGES = {"english": "eng", "german": "deu", "french": "fra", "spanish": "spa"}
#: A page read with a lower mean line confidence (0-1) is read again upside down (the
#: scanned manual pages of ``bench/ocr_manuals.py`` read at 0.74-0.94, a page upside down
#: at about 0.4); the reading with the higher confidence is kept.
TURN_BELOW = 0.7
#: Words lower than this many pixels (the median of a page's word boxes) are read again
#: from the image enlarged so that they are :data:`TEXT_HEIGHT` pixels high (at most
#: :data:`MAX_ENLARGE` times). 10 pt type scanned at 200 dpi measures about 20 pixels.
SMALL_TEXT = 14
TEXT_HEIGHT = 20
MAX_ENLARGE = 4.0
#: Page segmentation: a page of columns, headings and paragraphs, no orientation check.
PAGE_SEGMENTATION = "3"


class TesseractFailed(Exception):
    """The program failed on a page (its message says how)."""


def program() -> str | None:
    """The ``tesseract`` program: ``TETHER_TESSERACT`` or the one on ``PATH``; None when
    there is none."""
    configured = os.environ.get("TETHER_TESSERACT")
    if configured:
        return shutil.which(configured) or None
    return shutil.which("tesseract")


@functools.cache
def installed_models(binary: str) -> frozenset[str]:
    """The language models ``binary`` finds (``tesseract --list-langs``)."""
    try:
        done = subprocess.run(
            [binary, "--list-langs"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    lines = (done.stdout or "").splitlines()
    return frozenset(line.strip() for line in lines[1:] if line.strip())


def usable() -> bool:
    """Whether Tesseract is installed with at least its English model."""
    binary = program()
    return binary is not None and "eng" in installed_models(binary)


def model_for(language: str, binary: str) -> str:
    """Tesseract's model for ``rag.language``, or English when that one is not installed."""
    wanted = LANGUAGES.get(language, "eng")
    if wanted in installed_models(binary):
        return wanted
    _warn_missing_model(language, wanted)
    return "eng"


@functools.cache
def _warn_missing_model(language: str, model: str) -> None:
    logger.warning(
        "Tesseract has no %r model for rag.language %r (install tesseract-ocr-%s); scans"
        " are read as English",
        model,
        language,
        model,
    )


def read_page(image: Image, language: str, seconds: float) -> list[tuple[str, float]]:
    """The lines of ``image`` in reading order, each with its words' mean confidence
    (0-1); raises :class:`subprocess.TimeoutExpired` when the first reading takes longer
    than ``seconds`` (the process is killed) and :class:`TesseractFailed` when the
    program fails. The second readings (enlarged, upside down) share the same
    ``seconds``: one that runs out of time leaves the reading already made."""
    binary = program()
    if binary is None:
        raise TesseractFailed("the tesseract program is not installed")
    deadline = time.monotonic() + seconds
    lines, height = _read(binary, image, language, seconds)
    if lines and height < SMALL_TEXT:
        factor = min(MAX_ENLARGE, TEXT_HEIGHT / max(height, 1.0))
        size = (round(image.width * factor), round(image.height * factor))
        lines = _better(lines, binary, _resized(image, size), language, deadline)
    if lines and _confidence(lines) < TURN_BELOW:
        lines = _better(lines, binary, image.rotate(180), language, deadline)
    return lines


def _better(
    lines: list[tuple[str, float]], binary: str, image: Image, language: str, deadline: float
) -> list[tuple[str, float]]:
    """``image``'s reading if it is read more confidently than ``lines`` before
    ``deadline``, else ``lines``."""
    left = deadline - time.monotonic()
    if left <= 0:
        return lines
    try:
        other = _read(binary, image, language, left)[0]
    except subprocess.TimeoutExpired:
        return lines
    return other if _confidence(other) > _confidence(lines) else lines


def _resized(image: Image, size: tuple[int, int]) -> Image:
    from PIL import Image as PIL

    if image.mode not in ("L", "RGB"):
        image = image.convert("RGB")
    return image.resize(size, PIL.Resampling.LANCZOS)


def _confidence(lines: list[tuple[str, float]]) -> float:
    return sum(confidence for _, confidence in lines) / len(lines) if lines else 0.0


def _read(
    binary: str, image: Image, language: str, seconds: float
) -> tuple[list[tuple[str, float]], float]:
    """The lines of ``image`` and the median height of its words in pixels."""
    if image.mode not in ("1", "L", "RGB"):
        image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "PPM")
    command = [binary, "stdin", "stdout", "-l", model_for(language, binary)]
    command += ["--psm", PAGE_SEGMENTATION]
    dpi = image.info.get("dpi")
    if dpi and 70 <= float(dpi[0]) <= 2400:
        command += ["--dpi", str(round(float(dpi[0])))]
    command.append("tsv")
    environment = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    done = subprocess.run(
        command,
        input=buffer.getvalue(),
        capture_output=True,
        timeout=seconds,
        env=environment,
        check=False,
    )
    if done.returncode != 0:
        problem = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        raise TesseractFailed(f"tesseract exited with {done.returncode}: {problem[0]}")
    tsv = done.stdout.decode("utf-8", "replace")
    return lines_of(tsv), word_height(tsv)


def word_height(tsv: str) -> float:
    """The median height in pixels of the words in Tesseract's TSV (0 without words)."""
    heights = sorted(
        int(fields[9])
        for fields in (row.split("\t") for row in tsv.splitlines()[1:])
        if len(fields) >= 12 and fields[0] == "5" and fields[11].strip() and fields[9].isdigit()
    )
    return float(heights[len(heights) // 2]) if heights else 0.0


def lines_of(tsv: str) -> list[tuple[str, float]]:
    """Tesseract's TSV as lines of text, each with its words' mean confidence (0-1)."""
    lines: dict[tuple[str, ...], list[tuple[str, float]]] = {}
    for row in tsv.splitlines()[1:]:
        fields = row.split("\t")
        if len(fields) < 12 or fields[0] != "5":  # level 5: a word
            continue
        word = fields[11].strip()
        try:
            confidence = float(fields[10])
        except ValueError:
            continue
        if word:
            lines.setdefault(tuple(fields[1:5]), []).append((word, confidence))
    return [
        (" ".join(w for w, _ in words), sum(c for _, c in words) / len(words) / 100)
        for words in lines.values()
    ]
