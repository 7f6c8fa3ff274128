"""The FTS5 query compiler: any user text in, a safe FTS5 MATCH expression (or None) out.

User text is never passed to FTS5 as syntax. It is cut into terms (runs of letters and
digits, which is also where FTS5's unicode61 tokenizer cuts), case-folded, stripped of
the stopwords of its language (``rag.language``), de-duplicated and capped; every term
is then double-quoted and the terms are joined with ``OR``, so bm25 ranks chunks by how
many and how rare the terms they hold are. Beside them go, also quoted: in English the
other spelling of a word (:func:`spellings`), words joined by hyphens as one word
(:func:`joined`), and each compound as the phrase of its terms (:func:`compounds`).

FTS5 syntax in the input is dropped, never passed on: column filters (``col:term``,
``{a b}:term``, ``-col:term``) keep only their terms, ``NEAR(a b, 5)`` keeps ``a b``
without the keyword and the distance, and operators (``AND``, ``OR``, ``NOT``), prefix
stars, ``^``, ``+``, quotes and brackets are not terms. ("Note: see the manual" is
prose, not a filter: a filter has no space after its colon.)
"""

from __future__ import annotations

import functools
import re
import unicodedata

from tether.errors import ConfigurationError
from tether.retrieve.spelling import american, variants
from tether.text import DEFAULT_LANGUAGE, check_language, normalize_text, snowball

MAX_TERMS = 64
MAX_TERM_CHARS = 128
# Only this much of a query is read: enough for any real question, and a 100 kB paste
# costs no more than a long paragraph.
MAX_QUERY_CHARS = 8_192

# Lucene's English stopwords (what BM25 baselines such as Anserini use) plus the function
# words of questions put to a chat app ("what does the guide say about ...").
STOPWORDS = frozenset(
    (
        "a an and are as at be but by for if in into is it no not of on or such that the their"
        " then there these they this to was will with"
        " about am been being can could did do does doing from had has have having he her him"
        " his how i its me my our please she should so tell than them those us we were what"
        " when where which who whom whose why would you your"
    ).split()
)

_TERM = re.compile(r"[^\W_]+")
_COMPOUND = re.compile(r"[^\W_]+(?:[./:-][^\W_]+)+")
_HYPHENATED = re.compile(r"(?<![\w./:-])[^\W\d_]+(?:-[^\W\d_]+){1,2}(?![\w./:-])")
MAX_COMPOUNDS = 8
# FTS5 syntax that carries words which are not search terms.
_NEAR = re.compile(r"\bNEAR\s*\(([^()]*?)(?:,\s*\d+\s*)?\)")
_COLUMN_FILTER = re.compile(r"(?:(?<=\s)|^)-?(?:\{[^{}]*\}|[^\W\d_][\w]*)\s*:(?=[^\s:/])")


def stopwords(language: str = DEFAULT_LANGUAGE) -> frozenset[str]:
    """The words a query in ``language`` is searched without: :data:`STOPWORDS` for
    English, else Snowball's list for the language (from the ``stop-words`` package, the
    ``languages`` extra). Without it, ``ConfigurationError`` with the command to install."""
    if check_language(language) == DEFAULT_LANGUAGE:
        return STOPWORDS
    return _snowball_stopwords(language)


@functools.cache
def _snowball_stopwords(language: str) -> frozenset[str]:
    try:
        from stop_words import get_stop_words
    except ImportError as exc:
        raise ConfigurationError(
            f"rag.language {language!r} needs its stopwords from the stop-words package:"
            " pip install 'tether[languages]'"
        ) from exc
    return frozenset(word.casefold() for word in get_stop_words(language))


def query_terms(text: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """The search terms of ``text``: case-folded, stopwords of ``language`` removed
    (unless that leaves nothing), de-duplicated in order of first appearance, at most
    ``MAX_TERMS``."""
    return [key for key, _ in _terms(text, language)]


def compile_match(text: str, language: str = DEFAULT_LANGUAGE) -> str | None:
    """A MATCH expression for ``text`` (a query in ``language``: its stopwords are left
    out), or None when it holds no searchable term. Terms go to the store as written:
    the store stems them as it stemmed its text (FTS5's porter tokenizer for English)."""
    terms = _terms(text, language)
    if not terms:
        return None
    phrases = [_quote(" ".join(parts)) for parts in compounds(text)]
    words = [surface for _, surface in terms]
    spelt = [_quote(v) for v in spellings(words, language) + joined(text) if v not in words]
    return " OR ".join([_quote(surface) for _, surface in terms] + spelt + phrases)


def joined(text: str) -> list[str]:
    """The words of ``text`` joined by hyphens (two or three, letters only), written as
    one word: "e-mail" is also searched as "email", "built-in" as "builtin", "multi-host"
    as "multihost", since documents write such words both ways."""
    found = (m.group().replace("-", "").casefold() for m in _HYPHENATED.finditer(_plain(text)))
    return list(dict.fromkeys(w for w in found if len(w) <= MAX_TERM_CHARS))


def spellings(terms: list[str], language: str = DEFAULT_LANGUAGE) -> list[str]:
    """The other spellings of ``terms`` that are not among them: in English, the British
    or American spelling of each (:mod:`tether.retrieve.spelling`), searched for too, so
    that "licence" finds the "license" of a manual; none in other languages."""
    if language != DEFAULT_LANGUAGE:
        return []
    have = set(terms)
    found = [v for t in terms for v in variants(t) if v not in have]
    return list(dict.fromkeys(found))


def compounds(text: str) -> list[list[str]]:
    """The terms of each compound of ``text`` (at most :data:`MAX_COMPOUNDS`, distinct): a
    number, code or name whose terms are joined by ``.``, ``-``, ``/`` or ``:`` without
    space ("6.4", "ZX-9047", "v2.1.3", "10:30"). FTS5 cuts it into terms, as it cut the
    text; searched also as the phrase of those terms in order, it ranks the chunks that
    hold the whole of it above those that hold its parts apart (a "6" here, a "4" there)."""
    found: dict[str, list[str]] = {}
    for match in _COMPOUND.finditer(_plain(text)):
        parts = [t.casefold() if t.isascii() else t for t in _TERM.findall(match.group())]
        if all(len(t) <= MAX_TERM_CHARS for t in parts):
            found.setdefault(" ".join(t.casefold() for t in parts), parts)
    return list(found.values())[:MAX_COMPOUNDS]


def _terms(text: str, language: str = DEFAULT_LANGUAGE) -> list[tuple[str, str]]:
    """``(key, surface)`` per term. The key (case-folded) is what stopwords and
    de-duplication compare. The surface is what goes to FTS5: the key for ASCII terms,
    where case-folding is exactly FTS5's folding, else the term as written, so that FTS5
    folds it the same way it folded the documents. (``str.casefold`` and FTS5's
    Unicode 6.1 simple case folding disagree: "Straße" folds to "strasse", which does not
    match the indexed "straße"; likewise Georgian Mtavruli, Cherokee and others.)
    The query is normalized as documents are (NFC, no zero-width marks), so a decomposed
    query ("A" + combining grave, Hangul jamo) is cut into the same terms as the text.
    An English question's contractions are read whole (:func:`uncontracted`): "I'm" is
    not the terms "i" and "m"."""
    plain = _plain(text)
    if language == DEFAULT_LANGUAGE:
        plain = uncontracted(plain)
    tokens = [(t.casefold(), t.casefold() if t.isascii() else t) for t in _TERM.findall(plain)]
    tokens = [(key, t) for key, t in tokens if len(key) <= MAX_TERM_CHARS]
    unwanted = stopwords(language)
    content = [(key, t) for key, t in tokens if key not in unwanted] or tokens
    first: dict[str, str] = {}
    for key, t in content:
        first.setdefault(key, t)
    return list(first.items())[:MAX_TERMS]


def uncontracted(text: str) -> str:
    """``text`` with its English contractions undone, as far as its terms go: "doesn't"
    is "does not", "can't" "can not", and the endings of "I'm", "we've", "you'll",
    "she'd", "it's" and "Python's" go. Cut at the apostrophe, they would be the terms
    "doesn" and "t", "m", "ve": words the documents never use, which a question would
    then seem to ask about (straight and curly apostrophes alike)."""
    text = _IRREGULAR_NOT.sub(lambda m: _IRREGULAR[m.group(1).lower()] + " not", text)
    text = _NOT_ENDING.sub(r"\1 not", text)
    return _ENDING.sub(r"\1", text)


_IRREGULAR = {"can": "can", "won": "will", "shan": "shall"}
_IRREGULAR_NOT = re.compile(r"\b(can|won|shan)[’']t\b", re.IGNORECASE)
_NOT_ENDING = re.compile(r"(\w)n[’']t\b", re.IGNORECASE)
_ENDING = re.compile(r"(\w)[’'](?:m|re|ve|ll|d|s)\b", re.IGNORECASE)


def _plain(text: str) -> str:
    """``text`` as queries are read: its first :data:`MAX_QUERY_CHARS`, normalized as
    documents are, without FTS5's column filters and ``NEAR`` keywords."""
    if not isinstance(text, str):
        raise TypeError(f"query must be str, not {type(text).__name__}")
    return _COLUMN_FILTER.sub(" ", _NEAR.sub(r" \1 ", normalize_text(text[:MAX_QUERY_CHARS])))


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def term_coverage(question: str, text: str, language: str = DEFAULT_LANGUAGE) -> float:
    """The share (0..1) of the question's search terms that occur in ``text``.

    Terms are cut as for search (stopwords dropped unless the question has nothing
    else), compared case-folded, without diacritics and stemmed (:func:`_stem`). Every
    term of ``text`` counts, however long it is."""
    wanted = {_stem(key, language) for key in query_terms(question, language)}
    if not wanted:
        return 0.0
    found = {_stem(t.casefold(), language) for t in _TERM.findall(normalize_text(text))}
    return len(wanted & found) / len(wanted)


def _stem(term: str, language: str = DEFAULT_LANGUAGE) -> str:
    """``term`` (case-folded) without diacritics and stemmed: in English in its American
    spelling and lightly (plural -s/-es/-ies, -ing, -ed), as FTS5's porter tokenizer
    would match it; in another language by its Snowball stemmer, as its store indexes
    words (:func:`~tether.text.stemmed_text`)."""
    term = "".join(c for c in unicodedata.normalize("NFKD", term) if not unicodedata.combining(c))
    if language != DEFAULT_LANGUAGE:
        return snowball(language)([term])[0]
    term = american(term)  # "colours" and "colors" alike
    for suffix, replacement, shortest in (
        ("ies", "y", 2),
        ("sses", "ss", 2),
        ("ing", "", 3),
        ("ed", "", 3),
        ("es", "", 3),
        ("s", "", 3),
    ):
        if term.endswith(suffix) and len(term) - len(suffix) >= shortest:
            if suffix == "s" and term.endswith(("ss", "us", "is")):
                continue
            if suffix == "es" and not term.endswith(("ches", "shes", "xes", "zes", "sses")):
                continue
            return term[: len(term) - len(suffix)] + replacement
    return term
