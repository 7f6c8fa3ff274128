"""Text normalization and content hashing: the definition of "unchanged content"."""

from __future__ import annotations

import hashlib
import re
import unicodedata

from tether.errors import InvalidArgument

# A code point in U+D800..U+DFFF is a lone surrogate in a Python str (a str holds pairs as
# one code point): what surrogateescape makes of undecodable bytes, or "\ud800" typed
# in. UTF-8 cannot encode one, so SQLite, tokenizers and JSON refuse it.
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\ufeff]")
_TRAILING_SPACE = re.compile(r"[ \t\u00a0]+$", re.MULTILINE)
_BLANK_RUN = re.compile(r"\n{3,}")


def valid_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the replacement character):
    text that UTF-8, SQLite and tokenizers accept. Queries and document text pass
    through it, so such input works instead of failing deep inside."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def check_identifier(what: str, value: object) -> None:
    """Raise :class:`InvalidArgument` unless ``value`` is a str that can be stored: an id
    (document, workspace, session, source key) is matched exactly, so it is never
    rewritten, and one holding a lone surrogate or NUL is refused, naming where."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be str, not {type(value).__name__}")
    bad = _SURROGATE.search(value) or re.search("\x00", value)
    if bad:
        raise InvalidArgument(
            f"{what} {value!r} cannot be stored: it holds {bad.group()!r} at position"
            f" {bad.start()} (a lone surrogate or NUL is not text)"
        )


def normalize_text(text: str) -> str:
    """The canonical form that tether stores, chunks and hashes.

    NFC, ``\\n`` line endings, no control characters or zero-width marks, no lone
    surrogates (U+FFFD instead), no trailing spaces, at most one blank line in a row, no
    leading or trailing blank lines. Two files that differ only in these respects are
    the same content.
    """
    return _normalized(text, _PIECE_CHARS)


#: Text is normalized in pieces of about this many characters, whole lines each: each
#: step copies a piece, not the text, so normalizing takes the text and its result
#: (and a piece), where whole-text passes took three to six times the text.
_PIECE_CHARS = 1 << 20


def _normalized(text: str, piece_chars: int) -> str:
    """:func:`normalize_text`, a run of whole lines at a time. Every step but the blank
    runs is line-local (NFC too: nothing composes across a line break, a starter), so
    only the line breaks where two pieces meet are counted across them."""
    parts: list[str] = []
    breaks = 0  # line breaks that ``parts`` ends with: at most 2 (one blank line)
    start = 0
    while start < len(text):
        cut = text.find("\n", start + piece_chars)
        end = len(text) if cut < 0 else cut + 1
        part = _normalized_lines(text[start:end])
        start = end
        lead = len(part) - len(part.lstrip("\n"))
        # Leading blank lines go; a run of breaks across two pieces is one blank line.
        drop = lead if not parts else max(0, lead - (2 - breaks))
        part = part[drop:] if drop else part
        if not part:
            continue
        parts.append(part)
        trail = len(part) - len(part.rstrip("\n"))
        breaks = breaks + trail if trail == len(part) else trail
    while parts and not parts[-1].rstrip():
        parts.pop()  # (all white: trailing white space goes, as by rstrip)
    if parts:
        parts[-1] = parts[-1].rstrip()
    return "".join(parts)


def _normalized_lines(text: str) -> str:
    text = unicodedata.normalize("NFC", valid_text(text))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = _TRAILING_SPACE.sub("", text)
    return _BLANK_RUN.sub("\n\n", text)


def content_hash(normalized_text: str) -> str:
    """sha256 hex digest of already-normalized text."""
    return hashlib.sha256(normalized_text.encode("utf-8")).hexdigest()
