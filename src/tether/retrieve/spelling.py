"""British and American spellings of a word, so that a question and a document that spell
it differently still meet: "licence" and "license", "colour" and "color", "initialise"
and "initialize", "catalogue" and "catalog", "travelled" and "traveled".

Two uses, both for English only:

- :func:`american` is the form both sides are compared in (the grounding check's
  coverage and missing terms): a question asking about the "behaviour" of a function
  finds the manual's "behavior" in a passage, and "licence" is not a term the scope lacks
  when the scope says "license";
- :func:`variants` are the other spellings a full-text query also searches for.

The endings "-ise"/"-ize" and "-yse"/"-yze" are spelled either way by rule (with their
inflections: "-ised", "-ising", "-isation"). The other pairs ("-our", "-re", "-ence",
"-ogue", a doubled "l" before "-ed", "-ing" and "-er") are listed word by word, because
the rule alone would take "four" for "for" and "filled" for "filed".
"""

from __future__ import annotations

import functools
import re

_OUR = (
    "ardour armour behaviour candour clamour colour endeavour favour fervour flavour harbour"
    " honour humour labour neighbour odour parlour rigour rumour saviour savour splendour"
    " tumour valour vapour vigour"
).split()
_RE = "calibre centre fibre litre lustre meagre metre sabre sombre spectre theatre".split()
_ENCE = "defence licence offence pretence".split()
_OGUE = "analogue catalogue dialogue epilogue monologue prologue".split()
_DOUBLED_L = (
    "cancel channel counsel dial equal fuel funnel jewel label level marshal marvel model"
    " panel pedal quarrel rival shovel signal total travel tunnel unravel"
).split()
_WORDS = {
    "acknowledgement": "acknowledgment",
    "ageing": "aging",
    "aluminium": "aluminum",
    "artefact": "artifact",
    "artefacts": "artifacts",
    "enrolment": "enrollment",
    "fulfil": "fulfill",
    "fulfils": "fulfills",
    "grey": "gray",
    "instalment": "installment",
    "judgement": "judgment",
    "judgements": "judgments",
    "manoeuvre": "maneuver",
    "mould": "mold",
    "plough": "plow",
    "programme": "program",
    "programmes": "programs",
    "sceptical": "skeptical",
    "skilful": "skillful",
}
#: "-ise" and "-yse" words and their inflections, spelled with a "z" in American English.
_SE = re.compile(r"^([a-z]{2,}?)([iy])s(e|es|ed|ing|ation|ations|er|ers|able)$")
_ZE = re.compile(r"^([a-z]{2,}?)([iy])z(e|es|ed|ing|ation|ations|er|ers|able)$")


def _pairs() -> dict[str, str]:
    """Every listed British spelling, inflected, with its American one."""
    pairs = dict(_WORDS)
    for word in _OUR:
        us = word[:-3] + "or"
        for ending in ("", "s", "ed", "ing", "ite", "ites", "able", "ful", "al", "less"):
            pairs[word + ending] = us + ending
    for word in _RE:
        us = word[:-2] + "er"
        pairs |= {word: us, word + "s": us + "s", word + "d": us + "ed"}
        pairs[word[:-1] + "ing"] = us + "ing"
    for word in _ENCE:
        us = word[:-2] + "se"
        pairs |= {word: us, word + "s": us + "s"}
    for word in _OGUE:
        pairs |= {word: word[:-2], word + "s": word[:-2] + "s"}
    for word in _DOUBLED_L:
        for ending in ("ed", "ing", "er", "ers"):
            pairs[word + "l" + ending] = word + ending
    return pairs


_AMERICAN = _pairs()
_BRITISH = {us: uk for uk, us in _AMERICAN.items()}


@functools.lru_cache(maxsize=8192)
def american(word: str) -> str:
    """``word`` (lower case) in its American spelling; as it is when it has no other."""
    listed = _AMERICAN.get(word)
    if listed is not None:
        return listed
    return _SE.sub(r"\1\2z\3", word)


def variants(word: str) -> list[str]:
    """The other spellings of ``word`` (lower case): its American one, or its British one
    (both "-ise" and "-ize" for a word that takes either); none for most words."""
    found = [american(word), _BRITISH.get(word, _ZE.sub(r"\1\2s\3", word))]
    return [v for v in dict.fromkeys(found) if v != word]
