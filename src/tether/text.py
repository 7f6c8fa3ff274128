"""Text normalization and content hashing: the definition of "unchanged content"."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\ufeff]")
_TRAILING_SPACE = re.compile(r"[ \t\u00a0]+$", re.MULTILINE)
_BLANK_RUN = re.compile(r"\n{3,}")


def normalize_text(text: str) -> str:
    """The canonical form that tether stores, chunks and hashes.

    NFC, ``\\n`` line endings, no control characters or zero-width marks, no trailing
    spaces, at most one blank line in a row, no leading or trailing blank lines. Two files
    that differ only in these respects are the same content.
    """
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = _TRAILING_SPACE.sub("", text)
    text = _BLANK_RUN.sub("\n\n", text)
    return text.strip("\n").rstrip()


def content_hash(normalized_text: str) -> str:
    """sha256 hex digest of already-normalized text."""
    return hashlib.sha256(normalized_text.encode("utf-8")).hexdigest()
