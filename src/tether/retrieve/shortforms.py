"""Short forms: how a question can name a word its passages write otherwise, and still
name it.

The distinctive terms of a question (:mod:`tether.retrieve.distinctive`) that its scope
lacks say it cannot answer, unless the question wrote the word short or wrong: misspelt
one typing slip away ("microenviroment"), clipped ("hex" of "hexadecimal"), abbreviated
("stdin" of "standard input"), or an acronym that a compound name of the passages starts
with (``CRLF`` of ``crlfDelay``). Each is checked against the passages found for the
question, never the whole scope.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def misspelt(word: str, texts: Iterable[str]) -> bool:
    """Whether ``word`` is one slip (one letter changed, added, dropped, or two swapped;
    two for a word of eight letters or more) from a word of ``texts`` that starts with
    the same letter: a typing error, not a term the texts lack."""
    word = word.lower()
    limit = 2 if len(word) >= 8 else 1
    seen: set[str] = set()
    for text in texts:
        for other in re.findall(r"[^\W\d_]+", text.lower()):
            if other in seen or other[:1] != word[:1] or abs(len(other) - len(word)) > limit:
                continue
            seen.add(other)
            if _distance(word, other, limit) <= limit:
                return True
    return False


#: Letters a clipped word keeps at least, and a full word adds to it at least.
_CLIP_KEPT = 3
_CLIP_ADDED = 3


def clipped(word: str, texts: Iterable[str]) -> bool:
    """Whether ``word`` is the start of a longer word of ``texts`` ("hex" of
    "hexadecimal", "repo" of "repository"): a short form, not a term the texts lack. The
    longer word adds at least three letters, so an inflection ("mistyped" of "mistype")
    is no full form: those are looked up in the index as the word's forms."""
    word = word.lower()
    if len(word) < _CLIP_KEPT or not word.isalpha():
        return False
    shortest = len(word) + _CLIP_ADDED
    pattern = re.compile(rf"\b{re.escape(word)}[^\W\d_]+")
    return any(len(found) >= shortest for text in texts for found in pattern.findall(text.lower()))


def writes(text: str, term: str) -> bool:
    """Whether ``text`` writes ``term`` (in any case) as a word or code of its own, not
    inside a longer one ("RAM" is not in "program")."""
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text, re.IGNORECASE) is not None


def leads_a_name(acronym: str, texts: Iterable[str]) -> bool:
    """Whether ``acronym`` (a word in capitals) begins a compound name of ``texts``, in any
    case, where a capital or an underscore starts the name's next part: ``crlfDelay`` and
    ``CRLF_MODE`` are named after CRLF, and a scope that documents them speaks of it;
    "crlfdelay" or "Crlfs" say nothing of it."""
    if not (acronym.isalpha() and acronym.isupper() and len(acronym) >= 2):
        return False
    pattern = re.compile(rf"(?<![^\W_])(?i:{re.escape(acronym)})(?=[A-Z_][A-Za-z0-9])")
    return any(pattern.search(text) for text in texts)


#: Letters each word of a phrase gives its abbreviation at least ("std" + "in").
_ABBREVIATED_PIECE = 2
#: Letters an abbreviation has at most: a longer word is no short form.
_ABBREVIATION_MAX = 12


def abbreviated(word: str, texts: Iterable[str]) -> bool:
    """Whether ``word`` shortens two or three words that follow each other in ``texts``:
    a piece of each, in order, that starts with the word's first two letters; the last
    piece is the start of its word, the others may skip letters ("stdin" of "standard
    input", "stderr" of "standard error"). A short form, not a term the texts lack."""
    word = word.lower()
    if not 2 * _ABBREVIATED_PIECE <= len(word) <= _ABBREVIATION_MAX or not word.isalpha():
        return False
    for text in texts:
        words = re.findall(r"[^\W\d_]+", text.lower())
        for i, first in enumerate(words):
            if first.startswith(word[:_ABBREVIATED_PIECE]) and _shortens(word, words[i : i + 3]):
                return True
    return False


def _shortens(word: str, phrase: list[str], pieces: int = 0) -> bool:
    """Whether ``word`` is a piece of ``phrase[0]``, then of the word after it, and so on
    (two pieces at least, as :func:`abbreviated` says)."""
    if not word:
        return pieces >= 2
    if not phrase:
        return False
    head = phrase[0]
    if pieces >= 1 and head.startswith(word):
        return True  # the last piece: the start of its word
    return any(
        head.startswith(word[:_ABBREVIATED_PIECE])
        and _in_order(word[:cut], head)
        and _shortens(word[cut:], phrase[1:], pieces + 1)
        for cut in range(_ABBREVIATED_PIECE, len(word) - _ABBREVIATED_PIECE + 1)
    )


def _in_order(piece: str, word: str) -> bool:
    """Whether the letters of ``piece`` occur in ``word`` in order."""
    letters = iter(word)
    return all(letter in letters for letter in piece)


def _distance(a: str, b: str, limit: int) -> int:
    """The optimal string alignment distance of ``a`` and ``b`` (a swap of two adjacent
    letters counts one), or ``limit + 1`` once it must exceed ``limit``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], previous2[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        previous2, previous = previous, row
    return previous[-1]
