"""The FTS5 query compiler: any user text in, a safe FTS5 MATCH expression (or None) out.

User text is never passed to FTS5 as syntax. It is cut into terms (runs of letters and
digits, which is also where FTS5's unicode61 tokenizer cuts), case-folded, stripped of
stopwords, de-duplicated and capped; every term is then double-quoted and the terms are
joined with ``OR``, so bm25 ranks chunks by how many and how rare the terms they hold are.

FTS5 syntax in the input is dropped, never passed on: column filters (``col:term``,
``{a b}:term``, ``-col:term``) keep only their terms, ``NEAR(a b, 5)`` keeps ``a b``
without the keyword and the distance, and operators (``AND``, ``OR``, ``NOT``), prefix
stars, ``^``, ``+``, quotes and brackets are not terms. ("Note: see the manual" is
prose, not a filter: a filter has no space after its colon.)
"""

from __future__ import annotations

import re
import unicodedata

from tether.text import normalize_text

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
# FTS5 syntax that carries words which are not search terms.
_NEAR = re.compile(r"\bNEAR\s*\(([^()]*?)(?:,\s*\d+\s*)?\)")
_COLUMN_FILTER = re.compile(r"(?:(?<=\s)|^)-?(?:\{[^{}]*\}|[^\W\d_][\w]*)\s*:(?=[^\s:/])")


def query_terms(text: str) -> list[str]:
    """The search terms of ``text``: case-folded, stopwords removed (unless that leaves
    nothing), de-duplicated in order of first appearance, at most ``MAX_TERMS``."""
    return [key for key, _ in _terms(text)]


def compile_match(text: str) -> str | None:
    """A MATCH expression for ``text``, or None when it holds no searchable term."""
    terms = _terms(text)
    if not terms:
        return None
    return " OR ".join(_quote(surface) for _, surface in terms)


def _terms(text: str) -> list[tuple[str, str]]:
    """``(key, surface)`` per term. The key (case-folded) is what stopwords and
    de-duplication compare. The surface is what goes to FTS5: the key for ASCII terms,
    where case-folding is exactly FTS5's folding, else the term as written, so that FTS5
    folds it the same way it folded the documents. (``str.casefold`` and FTS5's
    Unicode 6.1 simple case folding disagree: "Straße" folds to "strasse", which does not
    match the indexed "straße"; likewise Georgian Mtavruli, Cherokee and others.)
    The query is normalized as documents are (NFC, no zero-width marks), so a decomposed
    query ("A" + combining grave, Hangul jamo) is cut into the same terms as the text."""
    if not isinstance(text, str):
        raise TypeError(f"query must be str, not {type(text).__name__}")
    plain = _COLUMN_FILTER.sub(" ", _NEAR.sub(r" \1 ", normalize_text(text[:MAX_QUERY_CHARS])))
    tokens = [(t.casefold(), t.casefold() if t.isascii() else t) for t in _TERM.findall(plain)]
    tokens = [(key, t) for key, t in tokens if len(key) <= MAX_TERM_CHARS]
    content = [(key, t) for key, t in tokens if key not in STOPWORDS] or tokens
    first: dict[str, str] = {}
    for key, t in content:
        first.setdefault(key, t)
    return list(first.items())[:MAX_TERMS]


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def term_coverage(question: str, text: str) -> float:
    """The share (0..1) of the question's search terms that occur in ``text``.

    Terms are cut as for search (stopwords dropped unless the question has nothing
    else), compared case-folded, without diacritics and lightly stemmed (plural -s/-es/
    -ies, -ing, -ed), as FTS5's porter tokenizer would match them. Every term of
    ``text`` counts, however long it is."""
    wanted = {_stem(key) for key in query_terms(question)}
    if not wanted:
        return 0.0
    found = {_stem(t.casefold()) for t in _TERM.findall(normalize_text(text))}
    return len(wanted & found) / len(wanted)


def _stem(term: str) -> str:
    term = "".join(c for c in unicodedata.normalize("NFKD", term) if not unicodedata.combining(c))
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
