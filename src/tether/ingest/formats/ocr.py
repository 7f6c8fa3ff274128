"""Scanned pages as images (PNG, JPEG, TIFF), read by OCR.

One page per image, or per frame of a multi-page TIFF (pages 1..n), each its own section
so that every chunk cites its page. The engine, its bounds and its options are
:mod:`tether.ingest.ocr_engine`'s (shared with the scanned pages of PDFs); its names are
here too, where the formats table points. A page that takes longer than
``rag.ocr_page_timeout`` is left out, and said so in ``metadata["warnings"]``.
"""

from __future__ import annotations

from tether.errors import EmptyDocument, UnsupportedFileType
from tether.ingest.loaders import FileBytes, LoadedDocument
from tether.ingest.ocr_engine import (
    OcrOptions,
    PageTimedOut,
    configure,
    current_options,
    frame_count,
    frames,
    ocr_image,
    ocr_off_advice,
    open_image,
)
from tether.ingest.pdf_sections import join_pages
from tether.text import normalize_text

__all__ = ["OcrOptions", "configure", "load_image", "ocr_image"]

#: Pillow's format name -> the file's MIME type (MPO: a camera's multi-picture JPEG).
MIME_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "TIFF": "image/tiff"}


def load_image(file: FileBytes) -> LoadedDocument:
    """The text OCR reads on the image (each frame of a TIFF a page); EmptyDocument when
    it reads none, UnsupportedFileType with ``rag.ocr`` off."""
    source = str(file.path)
    if not current_options().enabled:
        raise UnsupportedFileType(source, f"is an image, read only by OCR, and {ocr_off_advice()}")
    image = open_image(file.data, source)
    mime = MIME_TYPES.get(image.format or "", "image/png")
    count = frame_count(image)
    texts: list[str] = []
    warnings: list[str] = []
    for page, frame in enumerate(frames(image, source), start=1):
        try:
            texts.append(normalize_text(ocr_image(frame, source, page, page_count=count)))
        except PageTimedOut as exc:
            texts.append("")
            warnings.append(str(exc))
    text, sections = join_pages(texts)
    if not text:
        found = "; ".join(warnings) or "no text was found on it"
        raise EmptyDocument(source, f"OCR read no text from the image: {found}")
    metadata: dict[str, object] = {"ocr_pages": len(sections)}
    if warnings:
        metadata["warnings"] = warnings
    return LoadedDocument(
        title=file.stem, text=text, mime=mime, sections=tuple(sections), metadata=metadata
    )
