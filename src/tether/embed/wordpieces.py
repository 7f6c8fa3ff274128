"""Token offsets from a word cache, for tokenizers that cut words apart on their own.

A BERT-style tokenizer (all-MiniLM-L6-v2's) splits text at white space and at every
punctuation character before it looks at a word, and nothing it does to one word (case,
accents, word pieces) depends on another. A text's tokens are then its words' tokens laid
end to end, so each distinct word needs the tokenizer once: after that, measuring a text
is a regular-expression pass and dictionary lookups. Real text repeats its words (SciFact's
7.8 million characters hold 46,000 distinct ones), which makes measuring a library
several times faster than running the tokenizer over every text, with the same answers:
the cut points below are only ever a subset of the tokenizer's own.

Tokenizers that read across words (byte-level BPE, SentencePiece, anything with a
replacing normalizer) are never given this cache: :func:`word_local` says which are safe.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, overload

#: Where any BERT pre-tokenizer cuts, whatever the normalizer did: the four ASCII white
#: space characters, and each ASCII punctuation character (a token of its own).
_ASCII_PUNCTUATION = r"!-/:-@\[-`{-~"
_WORDS = re.compile(rf"[^ \t\n\r{_ASCII_PUNCTUATION}]+|[{_ASCII_PUNCTUATION}]")
_SPLIT = re.compile(f"({_WORDS.pattern})")
#: Normalizers that act on one character at a time (never join or move text across a cut).
_CHARACTER_NORMALIZERS = {
    "BertNormalizer",
    "Lowercase",
    "NFD",
    "NFC",
    "NFKD",
    "NFKC",
    "StripAccents",
}
_WORD_PRE_TOKENIZERS = {"BertPreTokenizer"}
#: A word of one token starting at its first character (most words): one shared value.
_ONE = (0,)
#: New words tokenized in one batch from this many (fewer: one by one, which costs less).
_BATCH = 16
#: Distinct words kept; the cache starts again past this (a few tens of megabytes at most).
MAX_WORDS = 200_000


def word_local(tokenizer_json: dict[str, Any]) -> bool:
    """Whether a ``tokenizer.json`` tokenizes each word on its own: a BERT pre-tokenizer,
    a WordPiece model and normalizers that act on single characters."""
    if (tokenizer_json.get("model") or {}).get("type") != "WordPiece":
        return False
    pre = tokenizer_json.get("pre_tokenizer") or {}
    if pre.get("type") not in _WORD_PRE_TOKENIZERS:
        return False
    normalizer = tokenizer_json.get("normalizer")
    if normalizer is None:
        return True
    sequence = normalizer.get("type") == "Sequence"
    steps = normalizer.get("normalizers", []) if sequence else [normalizer]
    return all(step.get("type") in _CHARACTER_NORMALIZERS for step in steps)


def read_word_local(path: str) -> bool:
    """:func:`word_local` for the ``tokenizer.json`` at ``path`` (False when unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            return word_local(json.load(f))
    except (OSError, ValueError):
        return False


class TokenStarts(Sequence[int]):
    """A text's token starts, read like a list of them (its length, an item, iteration)
    but kept as its words: where each word starts and its tokens' offsets in it, most
    words sharing one value. Building it costs a step per word, not a Python int per
    token; :meth:`bisect` finds a point among the tokens in two binary searches."""

    __slots__ = ("_at", "_before", "_pieces")

    def __init__(self, at: list[int], pieces: list[tuple[int, ...]]) -> None:
        self._at = at
        self._pieces = pieces
        #: Tokens before each word, then the total.
        self._before = list(accumulate(map(len, pieces), initial=0))

    def __len__(self) -> int:
        return self._before[-1]

    @overload
    def __getitem__(self, k: int) -> int: ...

    @overload
    def __getitem__(self, k: slice) -> list[int]: ...

    def __getitem__(self, k: int | slice) -> int | list[int]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError("token index out of range")
        word = bisect_right(self._before, k) - 1
        return self._at[word] + self._pieces[word][k - self._before[word]]

    def __iter__(self) -> Iterator[int]:
        return (a + r for a, rs in zip(self._at, self._pieces, strict=True) for r in rs)

    def bisect(self, pos: int) -> int:
        """How many tokens start before ``pos`` (``bisect_left`` over the starts)."""
        word = bisect_left(self._at, pos) - 1  # the last word that starts before pos
        if word < 0:
            return 0
        at, count = self._at[word], self._before[word]
        return count + sum(1 for r in self._pieces[word] if at + r < pos)


class WordPieces:
    """Token start offsets and counts of texts, each distinct word tokenized once.

    Safe across threads: two threads may both tokenize a new word, and agree."""

    def __init__(self, tokenizer: Any, max_words: int = MAX_WORDS) -> None:
        self.tokenizer = tokenizer
        self.max_words = max_words
        self._starts: dict[str, tuple[int, ...]] = {}
        self._ascii = _ascii_fold(tokenizer)

    def __len__(self) -> int:
        return len(self._starts)

    def starts(self, text: str, start: int = 0, end: int | None = None) -> TokenStarts:
        """Where each token of ``text[start:end]`` starts in ``text``, as the tokenizer
        would say of that slice."""
        parts = _SPLIT.split(text[start:end])  # white space, a word, white space, ...
        words = parts[1::2]
        known = self._learned(words)
        at = list(accumulate(map(len, parts), initial=start))[1:-1:2]  # where each word starts
        return TokenStarts(at, list(map(known.__getitem__, words)))

    def count(self, text: str) -> int:
        """How many tokens ``text`` has."""
        words = _WORDS.findall(text)
        known = self._learned(words)
        return sum(map(len, map(known.__getitem__, words)))

    def _learned(self, words: Iterable[str]) -> dict[str, tuple[int, ...]]:
        """The cache, holding every word of ``words`` (new ones tokenized: one by one when
        they are few, else in one batch spread over the cores)."""
        known = self._starts
        distinct = set(words)
        new = list(distinct.difference(known))
        if not new:
            return known
        if len(known) + len(new) > self.max_words:
            known = self._starts = {}
            new = list(distinct)
        if self._ascii is not None:  # plain ASCII words go to the model itself
            fold, tokenize = self._ascii, self.tokenizer.model.tokenize
            others = []
            for word in new:
                if not (word.isascii() and word.isprintable()):
                    others.append(word)
                    continue
                relative = tuple(token.offsets[0] for token in tokenize(fold(word)))
                known[word] = _ONE if relative == _ONE else relative
            if not others:
                return known
            new = others
        encode = self.tokenizer.encode
        encoded = (
            self.tokenizer.encode_batch(new, add_special_tokens=False)
            if len(new) >= _BATCH
            else [encode(word, add_special_tokens=False) for word in new]
        )
        for word, encoding in zip(new, encoded, strict=True):
            relative = tuple(start for start, _ in encoding.offsets)
            known[word] = _ONE if relative == _ONE else relative
        return known


#: Every printable ASCII character that is no cut of a BERT pre-tokenizer.
_ASCII_WORD = "".join(chr(c) for c in range(0x21, 0x7F) if _WORDS.fullmatch(chr(c) * 2))


def _ascii_fold(tokenizer: Any) -> Any:
    """What the normalizer does to a word of printable ASCII (``str.lower`` or nothing),
    when the model can then be asked directly (its ``tokenize``, 4x faster than the whole
    pipeline on one word); None when it cannot, or the normalizer does anything else."""
    model = getattr(tokenizer, "model", None)
    if not callable(getattr(model, "tokenize", None)):
        return None
    normalizer = getattr(tokenizer, "normalizer", None)
    try:
        folded = _ASCII_WORD if normalizer is None else normalizer.normalize_str(_ASCII_WORD)
    except (AttributeError, TypeError, ValueError):
        return None
    if folded == _ASCII_WORD:
        return str
    return str.lower if folded == _ASCII_WORD.lower() else None
