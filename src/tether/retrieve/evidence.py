"""Evidence: how strongly a passage answers the question, as one number from 0 to 1.

"Something on the topic is in scope" is not "the answer is in scope". Cosine alone
cannot tell them apart (on real manuals its quartiles are the same for questions the
scope answers and for in-domain questions it does not), so the evidence of a candidate
combines three measured signals:

``cosine``
    between the original question and the chunk, clipped to 0..1 (without vectors the
    lexical calibration is used, which leaves it out);
``coverage``
    the IDF-weighted share of the question's search terms found inside the best *window*
    of the chunk: two consecutive sentences (a long sentence is cut into pieces of
    :data:`WINDOW_WORDS` words). The answer to a question sits in a sentence or two
    that name its specific terms; a chunk that mentions them across a page is on the
    topic. IDF is ``ln((N + 1) / (df + 0.5))`` over the whole store (``N`` chunks,
    ``df`` holding the term), so "libtasn1" in a store of libtasn1 manuals weighs
    little and "tracing" a lot. A question that opens with a statement ("The update
    route uses <int:id>. Which converter lets a variable hold slashes?") says what the
    asker already has before what they ask: a term only that premise names weighs
    :data:`PREMISE_SHARE` of its IDF, unless the question sentence names less than the
    premise ("... What should I call instead?"). A passage on the premise alone is the
    asker's own context, not the answer (Flask's cross-scope questions: one more sent to
    the workspace, no answerable question lost on the three document sets);
``missing``
    the IDF-weighted share of the question's terms that occur *nowhere in the scope*
    (one value per question). A question about a thing the scope never names is not
    answered by it, however close its neighbours are. An everyday word counts less, by
    how common it is (:meth:`~tether.retrieve.distinctive.CommonWords.absence_weight`): a
    manual that lacks "kept" or "instead" has said it in other words. With every absent
    word counted in full, the answerable questions of the three document sets were
    refused most often for such words ("gave", "meantime", "leaving out"). IDF over a
    handful of chunks says little (in a one-page note every word is rare): below
    :data:`BACKGROUND_CHUNKS` chunks the weights lean towards equal shares and the
    missing share is scaled down.

``distinctive``
    a question that names a code or a rare word (:mod:`tether.retrieve.distinctive`)
    which occurs nowhere in the scope is not answered there: every candidate's evidence
    is multiplied by :data:`DISTINCTIVE_ABSENT_FACTOR`, below any useful threshold.

Words that phrase a question rather than name its subject ("how *long* does it
*take*", "what does it *mean*": :data:`PHRASING`) are not evidence terms.

``agreement``
    whether the lexical and vector searches agree on what answers (one value per
    question): ``1 / log2(1 + r)``, where ``r`` is the lexical rank of the vector side's
    best chunk (1.0 when both put the same chunk first, 0 when the lexical side did not
    find it). An answer tends to be found by both; a topic, by each in a different place.

``evidence = 1 / (1 + exp(-(w_cosine * cosine + w_coverage * coverage + w_missing *
missing + w_agreement * agreement + bias)))`` with the weights of :data:`CALIBRATED` (or
:data:`LEXICAL` without vectors, which leaves out the cosine and the agreement). The
relative weights were chosen once, by the best balanced accuracy averaged over the two
sources ``tether eval --grounding`` measures (SciFact claims among their BM25
neighbours, and questions written for five Debian manuals), and the scale and bias by a
logistic fit with balanced class weights on both pooled, so that evidence reads as a
probability that the passage answers. They are not refitted per dataset.
``rag.min_relevance`` and ``policy.min_relevance`` are thresholds on this number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tether.retrieve.fts import _TERM, _stem, _terms, spellings
from tether.store import TermStatistics
from tether.text import DEFAULT_LANGUAGE, normalize_text

#: A sentence longer than this many words is cut into pieces of this size.
WINDOW_WORDS = 40
#: Sentences per window.
WINDOW_SENTENCES = 2
#: What a question's term counts, of its weight, when only the passage's context header
#: holds it (:func:`~tether.ingest.chunking.context_header`: its document's title and
#: section path, what the passage is embedded under). The header says what the passage
#: is about, not that the passage says it: in full, it raised SciFact's reranked nDCG@10
#: by 0.007 and grounded a session passage whose heading matched a question answered
#: elsewhere (Flask's cross-scope right answers 0.818 -> 0.773); at half, nDCG@10 +0.005
#: and the three document sets as before.
HEADER_SHARE = 0.5

#: Chunks a store needs before the share of missing terms counts in full.
BACKGROUND_CHUNKS = 200
#: Words that phrase a question rather than name its subject, left out of the evidence
#: terms (still searched for).
PHRASING = frozenset(
    "long take takes took much many often way ways mean means happen happens use used using"
    " need needs get gets make makes work works want know say said go goes find give keep"
    " let put see seem thing things something anything possible able there".split()
)

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n\s*\n")
#: What a term counts, of its weight, when only a statement around the question holds it
#: (its premise: "The update route uses <int:id>. Which converter allows slashes?").
PREMISE_SHARE = 0.5
_QUESTION_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'“‘(<`])")
#: Words a full stop follows without ending a sentence ("e.g. Path", "vs. Django").
_DOTTED = re.compile(r"(?:[A-Za-z]{1,3}\.)+[A-Za-z]{1,3}")
_ABBREVIATIONS = frozenset("vs etc dr mr mrs ms prof cf fig no nr st jr sr approx".split())


@dataclass(frozen=True)
class Weights:
    """One calibration of the evidence model (see the module docstring)."""

    cosine: float
    coverage: float
    missing: float
    bias: float
    agreement: float = 0.0


#: The weight of coverage beside the cosine in :attr:`Evidence.match`, the score the
#: rerank orders by. Ranking wants the cosine to lead (on SciFact's test queries, over
#: the top 20 RRF candidates: nDCG@10 0.716 fused, 0.713 by evidence, 0.730 by cosine +
#: 0.5 x coverage); telling answerable from unanswerable wants coverage to weigh more.
MATCH_COVERAGE = 0.5

#: What a candidate's evidence is multiplied by when a distinctive term of the question
#: (a code, a rare word) occurs nowhere in the scope: the passage may be on the topic, it
#: cannot be the answer. The order of the candidates is kept.
DISTINCTIVE_ABSENT_FACTOR = 0.25

#: Fitted on the pooled grounding questions with vectors (chunk cosine of
#: all-MiniLM-L6-v2, coverage, missing, agreement): see the module docstring.
CALIBRATED = Weights(cosine=1.132, coverage=1.132, missing=-0.849, agreement=0.34, bias=-1.34)
#: The same fit without the cosine, for stores searched without vectors.
LEXICAL = Weights(cosine=0.0, coverage=1.103, missing=-0.165, bias=-0.81)


@dataclass(frozen=True)
class QuestionTerms:
    """The question's search terms with their IDF weights, and which the scope lacks."""

    #: ``(stem, weight)`` per term, in the question's order; the weights sum to 1.
    weights: tuple[tuple[str, float], ...]
    #: The terms (as written) that occur nowhere in the scope.
    absent: tuple[str, ...]
    #: Their share of the total weight (0..1), scaled down in a store of fewer than
    #: :data:`BACKGROUND_CHUNKS` chunks.
    missing: float
    #: The question's distinctive terms (codes, rare words: see
    #: :mod:`tether.retrieve.distinctive`) that occur nowhere in the scope.
    distinctive_absent: tuple[str, ...] = ()
    #: The language of the question's stems (``rag.language``).
    language: str = DEFAULT_LANGUAGE
    #: The absent terms that counted at least half (not everyday words: see
    #: :func:`question_terms`); what the explanation names.
    telling: tuple[str, ...] | None = None

    @property
    def named_absent(self) -> tuple[str, ...]:
        """The absent terms worth naming to a user: :attr:`telling`, else all."""
        return self.absent if self.telling is None else self.telling

    @property
    def total(self) -> float:
        return sum(w for _, w in self.weights)


@dataclass(frozen=True)
class Evidence:
    """One candidate's evidence and the signals it was made of."""

    evidence: float
    cosine: float | None
    coverage: float
    window: str

    @property
    def match(self) -> float | None:
        """How closely the passage matches the question, for ordering candidates:
        ``cosine + MATCH_COVERAGE * coverage``; None without vectors, where coverage
        alone orders worse than BM25 (SciFact, lexical: nDCG@10 0.652 vs 0.689)."""
        if self.cosine is None:
            return None
        return self.cosine + MATCH_COVERAGE * self.coverage

    def to_dict(self) -> dict[str, float | None]:
        return {
            "evidence": round(self.evidence, 4),
            "cosine": None if self.cosine is None else round(self.cosine, 4),
            "coverage": round(self.coverage, 4),
        }


def search_terms(question: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """The question's search terms as the full-text index is asked for them, with their
    other spellings (:func:`~tether.retrieve.fts.spellings`)."""
    terms = [surface for _, surface in _terms(question, language)]
    return terms + spellings(terms, language)


def question_terms(
    question: str,
    stats: TermStatistics,
    language: str = DEFAULT_LANGUAGE,
    absence: Callable[[str], float] | None = None,
) -> QuestionTerms:
    """The question's terms weighted by IDF over the store, and those the scope lacks.

    IDF over a handful of chunks says little (in a one-page note every absent word looks
    rare), so below :data:`BACKGROUND_CHUNKS` chunks the weights lean towards equal
    shares, and the missing share counts less, by ``min(1, N / BACKGROUND_CHUNKS)``.
    ``absence(word)`` (0..1) is how much lacking the word says about the scope (an
    everyday word says little: :meth:`~tether.retrieve.distinctive.CommonWords.absence_weight`);
    each absent term's share of the missing weight is multiplied by it."""
    n = max(stats.chunks, 1)
    confidence = min(1.0, n / BACKGROUND_CHUNKS)
    idf: dict[str, float] = {}
    surfaces: dict[str, str] = {}
    in_scope: dict[str, bool] = {}
    terms = _terms(question, language)
    subject = [(key, surface) for key, surface in terms if key not in PHRASING] or terms
    for key, surface in subject:
        stem = _stem(key, language)
        if stem not in idf:
            spelt = [surface, *spellings([surface], language)]
            held = max(stats.store.get(s, 0) for s in spelt)
            idf[stem] = math.log((n + 1) / (held + 0.5))
            surfaces[stem] = surface
            in_scope[stem] = any(stats.in_scope.get(s, False) for s in spelt)
    premise = premise_stems(question, language) & idf.keys()
    if sum(idf[stem] for stem in premise) <= sum(idf[s] for s in idf.keys() - premise):
        for stem in premise:  # (a question sentence that names little keeps its premise)
            idf[stem] *= PREMISE_SHARE
    total = sum(idf.values())
    if not idf or total <= 0:
        return QuestionTerms(weights=(), absent=(), missing=0.0, language=language)
    weights = {
        stem: confidence * value / total + (1.0 - confidence) / len(idf)
        for stem, value in idf.items()
    }
    absent = [stem for stem in weights if not in_scope[stem]]
    share = {stem: absence(surfaces[stem]) if absence else 1.0 for stem in absent}
    return QuestionTerms(
        weights=tuple(weights.items()),
        absent=tuple(surfaces[stem] for stem in absent),
        missing=confidence * sum(weights[stem] * share[stem] for stem in absent),
        language=language,
        telling=tuple(surfaces[stem] for stem in absent if share[stem] >= 0.5),
    )


def premise_stems(question: str, language: str = DEFAULT_LANGUAGE) -> set[str]:
    """The stems of the statements around a question's question sentences (its premise:
    what the asker has, not what they ask), less those the question sentences name; none
    when the question is one sentence, or all questions, or all statements."""
    parts = _premise_and_question(question)
    if parts is None:
        return set()
    premise, question_sentence = parts
    asked = {_stem(key, language) for key, _ in _terms(question_sentence, language)}
    said = {_stem(key, language) for part in premise for key, _ in _terms(part, language)}
    return said - asked


def asked_sentence(question: str) -> str | None:
    """What a question that also makes statements asks: its question sentences ("I ran
    sed -ni on app.conf and it ended up empty. What did I do wrong?": "What did I do
    wrong?"; "How does diff tell a binary file? It says so of my UTF-16 exports.": "How
    does diff tell a binary file?"); None when the question is one sentence, or all
    questions, or all statements."""
    parts = _premise_and_question(question)
    return None if parts is None else parts[1]


def _premise_and_question(question: str) -> tuple[list[str], str] | None:
    parts = _sentences(question.strip())
    asked = [part for part in parts if part.rstrip().endswith("?")]
    if len(parts) < 2 or not asked or len(asked) == len(parts):
        return None
    return [part for part in parts if part not in asked], " ".join(asked)


def _sentences(text: str) -> list[str]:
    """``text`` cut after each full stop, "!" or "?" that ends a sentence: not one after an
    abbreviation (:data:`_ABBREVIATIONS`, a single letter, short letters between full
    stops: "e.g.", "U.S.")."""
    parts, start = [], 0
    for m in _QUESTION_SENTENCES.finditer(text):
        word = text[: m.start()].rsplit(None, 1)[-1].rstrip(".!?")
        if _DOTTED.fullmatch(word) or len(word) < 2 or word.lower() in _ABBREVIATIONS:
            continue
        parts.append(text[start : m.start()])
        start = m.end()
    return [*parts, text[start:]]


def windows(text: str) -> list[str]:
    """The windows of ``text``: two consecutive sentences each (one, for a one-sentence
    text), long sentences cut into pieces of :data:`WINDOW_WORDS` words."""
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        words = sentence.split()
        for i in range(0, len(words), WINDOW_WORDS):
            pieces.append(" ".join(words[i : i + WINDOW_WORDS]))
    if len(pieces) <= 1:
        return pieces
    return [" ".join(pieces[i : i + WINDOW_SENTENCES]) for i in range(len(pieces) - 1)]


def best_window(terms: QuestionTerms, text: str, header: str | None = None) -> tuple[float, str]:
    """The highest weighted coverage of the question's terms in one window of ``text``,
    and that window. A term only ``header`` holds (the passage's context header: its
    document's title and section path) counts :data:`HEADER_SHARE` of its weight,
    in every window."""
    total = terms.total
    if total <= 0:
        return 0.0, ""
    above = _stems(header or "", terms.language)
    best, where = 0.0, ""
    for window in windows(text):
        found = _stems(window, terms.language)
        covered = sum(
            w if stem in found else HEADER_SHARE * w
            for stem, w in terms.weights
            if stem in found or stem in above
        )
        if covered / total > best:
            best, where = covered / total, window
    return best, where


def _stems(text: str, language: str) -> set[str]:
    return {_stem(t.casefold(), language) for t in _TERM.findall(normalize_text(text))}


def agreement(lexical: Sequence[int], vector: Sequence[int]) -> float | None:
    """How far the lexical side agrees with the vector side's best chunk: ``1 / log2(1 +
    r)`` for its lexical rank ``r``, 0 when the lexical side did not find it; None
    without a vector side."""
    if not vector:
        return None
    try:
        rank = list(lexical).index(vector[0]) + 1
    except ValueError:
        return 0.0
    return 1.0 / math.log2(1 + rank)


def evidence(
    terms: QuestionTerms,
    text: str,
    cosine: float | None,
    weights: Weights | None = None,
    *,
    agreed: float | None = None,
    header: str | None = None,
) -> Evidence:
    """The evidence that ``text`` (under its context ``header``) answers the question of
    ``terms``; ``agreed`` is the question's :func:`agreement` (None without vectors)."""
    coverage, window = best_window(terms, text, header)
    if weights is None:
        weights = CALIBRATED if cosine is not None else LEXICAL
    logit = (
        weights.cosine * max(0.0, min(1.0, cosine or 0.0))
        + weights.coverage * coverage
        + weights.missing * terms.missing
        + weights.agreement * (agreed or 0.0)
        + weights.bias
    )
    value = 1.0 / (1.0 + math.exp(-logit))
    if terms.distinctive_absent:
        value *= DISTINCTIVE_ABSENT_FACTOR
    return Evidence(evidence=value, cosine=cosine, coverage=coverage, window=window)


def explain(
    terms: QuestionTerms,
    best: Evidence | None,
    threshold: float,
    *,
    grounded: bool,
) -> str:
    """Why the result is grounded or not, in a sentence or two."""
    if best is None:
        return "not grounded: the search found nothing in scope"
    share = f"{best.coverage:.0%} of the question's weighted terms"
    where = f"the best passage (evidence {best.evidence:.2f}) holds {share} in two sentences"
    if best.cosine is not None:
        where += f", cosine {best.cosine:.2f}"
    absent = ""
    if terms.distinctive_absent:
        names = ", ".join(repr(t) for t in terms.distinctive_absent[:6])
        one = len(terms.distinctive_absent) == 1
        absent = f"; the question names {names}, which occur{'s' if one else ''} nowhere in scope"
    elif terms.named_absent:
        named = terms.named_absent
        names = ", ".join(repr(t) for t in named[:6])
        absent = f"; {names} occur{'s' if len(named) == 1 else ''} nowhere in scope"
    verdict = (
        f"grounded: {where}, at or above min_relevance {threshold:g}"
        if grounded
        else f"not grounded: {where}, below min_relevance {threshold:g}"
    )
    return verdict + absent


__all__: Sequence[str] = (
    "CALIBRATED",
    "LEXICAL",
    "Evidence",
    "QuestionTerms",
    "Weights",
    "agreement",
    "best_window",
    "evidence",
    "explain",
    "question_terms",
    "search_terms",
    "windows",
)
