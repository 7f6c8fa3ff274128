"""Grounding evaluation: does :meth:`Tether.retrieve` say "grounded" exactly when the
answer is in scope? (``tether eval DIR --grounding``)

A BEIR dataset's qrels name the entries that answer each query (SciFact: the abstracts
that support or refute a claim). Each sampled claim is asked three times, in three
scopes of ONE store, indexed once:

- ``answerable``: in workspace ``grounding-<dataset>-ans-<id>``, which holds the cited
  entries and ``distractors`` similar ones. Right: grounded.
- ``unanswerable``: in workspace ``grounding-<dataset>-un-<id>``, which holds the same
  distractors (its own copies: a document lies in one workspace) and no cited entry.
  Right: not grounded.
- ``cross_scope``: in session ``grounding-<dataset>-x-<id>`` of the answerable
  workspace, with the workspace's distractor copies attached: the session cannot answer,
  its workspace can. Right: not grounded, with a wider ``suggested_scope``.

Distractors are the claim's nearest lexical neighbours that it does not cite: the top of
a small Okapi BM25 (:class:`Bm25`: k1 0.9, b 0.4, lowercased alphanumeric words without
Lucene's English stopwords, no stemming) over the whole corpus, ties by corpus id. It is
written here, apart from tether's retrieval, so that the system under test does not
choose its own test. Similar abstracts are the hard case on purpose: "something on the
topic is in scope" is not "the answer is in scope". (Qrels are incomplete: now and then
a distractor may answer a claim, which counts against ``unanswerable``.)

Claims are a deterministic sample: the judged queries ordered by a hash of their id, so a
larger sample extends a smaller one. Distractor copies share chunk hashes, so their
vectors are computed once (and reused from a store ``tether eval`` already filled).

Balanced grounding accuracy is the mean of the three kinds' rates of right outcomes.
Every question is retrieved once, with the decision forced to "retrieve" (the decision is
not what is measured here), and its best relevance (``debug["relevance"]["best"]``) is
kept, so the threshold table can say what the accuracy would be if grounded meant "best
relevance >= t" without retrieving again.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any, Literal

from tether import (
    Decision,
    Embedder,
    InvalidArgument,
    RetrievalResult,
    Scope,
    Settings,
    Tether,
)
from tether.eval.beir import (
    BeirDataset,
    CorpusEntry,
    CorpusIndexing,
    EvalProgress,
    _percentile,
    _stage,
    _without_embeddings,
    embed_missing,
    load_beir,
    non_default_settings,
)

Kind = Literal["answerable", "unanswerable", "cross_scope"]
KINDS: tuple[Kind, ...] = ("answerable", "unanswerable", "cross_scope")

#: How many judged queries are asked, and how many similar entries sit beside each answer.
DEFAULT_CLAIMS, DEFAULT_DISTRACTORS = 100, 10
#: Candidate thresholds of the grounding table; ``rag.min_relevance`` is always added.
GROUNDING_THRESHOLDS = tuple(round(step * 0.05, 2) for step in range(21))

#: The scopes wider than each scope: what a useful ``suggested_scope`` names.
_WIDER = {"session": ("workspace", "global"), "workspace": ("global",), "global": ()}


def closer_elsewhere(result: RetrievalResult) -> bool:
    """Whether the retrieval found a clearly closer match in the wider scope."""
    wider = result.debug.get("wider_scope")
    if not wider or wider.get("margin") is None:
        return False
    return bool(wider["best_outside_scope"] >= wider["best_in_scope"] + wider["margin"])


def judged_right(kind: str, grounded: bool, *, suggests_wider: bool) -> bool:
    """Whether a retrieval's grounding was right for a question of ``kind``: grounded
    when answerable, not grounded when unanswerable, and not grounded with a wider
    scope suggested when the answer is only outside the scope asked."""
    if kind == "answerable":
        return grounded
    if kind == "unanswerable":
        return not grounded
    return not grounded and suggests_wider


_RETRIEVE = Decision(True, "question", "grounding evaluation: every question is retrieved")
_WORD = re.compile(r"[a-z0-9]+")
#: Lucene's default English stopwords, as Anserini's BM25 drops them.
_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their"
    " then there these they this to was will with".split()
)


def _words(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in _STOPWORDS]


class Bm25:
    """Okapi BM25 over a fixed corpus, in pure Python: the distractor picker.

    Words are lowercased runs of ``a-z0-9`` without Lucene's English stopwords; idf is
    Lucene's ``log(1 + (N - df + 0.5) / (df + 0.5))``; each distinct query word counts
    once."""

    def __init__(self, documents: dict[str, str], *, k1: float = 0.9, b: float = 0.4) -> None:
        self._postings: dict[str, list[tuple[str, int]]] = {}
        lengths: dict[str, int] = {}
        for doc_id, text in documents.items():
            counts = Counter(_words(text))
            lengths[doc_id] = sum(counts.values())
            for word, count in counts.items():
                self._postings.setdefault(word, []).append((doc_id, count))
        average = statistics.fmean(lengths.values()) if lengths else 1.0
        self._k1 = k1
        self._norm = {d: k1 * (1 - b + b * n / (average or 1.0)) for d, n in lengths.items()}
        self._ids = sorted(documents)

    def scores(self, query: str) -> dict[str, float]:
        """The score of every document sharing a word with ``query``."""
        scores: dict[str, float] = {}
        for word in set(_words(query)):
            postings = self._postings.get(word, [])
            idf = math.log(1 + (len(self._ids) - len(postings) + 0.5) / (len(postings) + 0.5))
            for doc_id, count in postings:
                gain = idf * count * (self._k1 + 1) / (count + self._norm[doc_id])
                scores[doc_id] = scores.get(doc_id, 0.0) + gain
        return scores

    def nearest(self, query: str, k: int, *, exclude: Iterable[str] = ()) -> list[str]:
        """The ``k`` best documents outside ``exclude``, ties by id; when fewer share a
        word with ``query``, the others follow in id order."""
        skip = set(exclude)
        scores = self.scores(query)
        ranked = chain(
            sorted(scores, key=lambda d: (-scores[d], d)),
            (d for d in self._ids if d not in scores),
        )
        return list(islice((d for d in ranked if d not in skip), k))


@dataclass(frozen=True)
class GroundingClaim:
    """A judged query, the ``cited`` entries that answer it, and its ``distractors``."""

    query_id: str
    text: str
    cited: tuple[str, ...]
    distractors: tuple[str, ...]


@dataclass(frozen=True)
class GroundingLayout:
    """Where each claim's questions are asked; every id derives from ``prefix``."""

    prefix: str
    claims: tuple[GroundingClaim, ...]

    def answerable_workspace(self, claim: GroundingClaim) -> str:
        return f"{self.prefix}-ans-{claim.query_id}"

    def unanswerable_workspace(self, claim: GroundingClaim) -> str:
        return f"{self.prefix}-un-{claim.query_id}"

    def session(self, claim: GroundingClaim) -> str:
        """The cross-scope session, in the answerable workspace."""
        return f"{self.prefix}-x-{claim.query_id}"

    @staticmethod
    def document_id(workspace: str, corpus_id: str) -> str:
        return f"{workspace}:{corpus_id}"

    def questions(self) -> Iterator[tuple[Kind, GroundingClaim, Scope]]:
        """Each claim's three questions, claim by claim."""
        for claim in self.claims:
            yield "answerable", claim, Scope.workspace(self.answerable_workspace(claim))
            yield "unanswerable", claim, Scope.workspace(self.unanswerable_workspace(claim))
            yield "cross_scope", claim, Scope.session(self.session(claim))

    def answer_ids(self, claim: GroundingClaim) -> set[str]:
        """The document ids of the claim's cited entries (in its answerable workspace)."""
        return {self.document_id(self.answerable_workspace(claim), c) for c in claim.cited}


def select_claims(
    dataset: BeirDataset, corpus: dict[str, CorpusEntry], *, claims: int, distractors: int
) -> GroundingLayout:
    """The first ``claims`` judged queries by a hash of their id, each with its cited
    entries and its ``distractors`` nearest uncited neighbours by :class:`Bm25`."""
    for name, value in (("claims", claims), ("distractors", distractors)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be a positive integer, not {value!r}")
    cited = {query_id: _cited(dataset, query_id, corpus) for query_id in dataset.queries}
    judged = sorted((q for q in dataset.queries if cited[q]), key=_sample_order)[:claims]
    if not judged:
        raise InvalidArgument(f"{dataset.name}: no query's judgement names a corpus entry")
    bm25 = Bm25({entry_id: f"{e.title}\n\n{e.text}" for entry_id, e in corpus.items()})
    chosen = tuple(
        GroundingClaim(
            query_id,
            dataset.queries[query_id],
            cited[query_id],
            tuple(bm25.nearest(dataset.queries[query_id], distractors, exclude=cited[query_id])),
        )
        for query_id in judged
    )
    return GroundingLayout(f"grounding-{dataset.name}", chosen)


def _cited(dataset: BeirDataset, query_id: str, corpus: dict[str, CorpusEntry]) -> tuple[str, ...]:
    judged = dataset.qrels.get(query_id, {})
    return tuple(sorted(c for c, gain in judged.items() if gain > 0 and c in corpus))


def _sample_order(query_id: str) -> str:
    return hashlib.blake2b(query_id.encode(), digest_size=8).hexdigest()


def index_layout(
    tether: Tether,
    layout: GroundingLayout,
    corpus: dict[str, CorpusEntry],
    *,
    progress: Callable[[int], None] | None = None,
) -> CorpusIndexing:
    """Index each claim's two workspaces and attach the distractors to its session;
    ``progress(documents added)`` after each claim. Unchanged documents are skipped by
    hash, so a stored ``db`` is reused; failed ones are reported, not fatal."""
    count = 0
    failed: list[tuple[str, str]] = []
    for claim in layout.claims:
        answerable = layout.answerable_workspace(claim)
        for workspace, entries in (
            (answerable, claim.cited + claim.distractors),
            (layout.unanswerable_workspace(claim), claim.distractors),
        ):
            tether.create_workspace(workspace)  # an empty one must exist to be asked
            sources = [corpus[c].source(layout.document_id(workspace, c)) for c in entries]
            results = tether.add(sources, workspace_id=workspace, on_error="collect")
            failed.extend(
                (str(source.document_id), str(result.error))
                for source, result in zip(sources, results, strict=True)
                if result.error is not None
            )
            count += len(sources)
        session = layout.session(claim)
        tether.create_session(session, workspace_id=answerable)
        unindexed = {document_id for document_id, _ in failed}
        for corpus_id in claim.distractors:
            document_id = layout.document_id(answerable, corpus_id)
            if document_id not in unindexed:
                tether.attach(document_id, session)
        if progress:
            progress(count)
    embed_missing(tether)
    return CorpusIndexing(count, tuple(failed))


@dataclass(frozen=True)
class GroundingAnswer:
    """One question's outcome. ``best_relevance`` is None when retrieval found no
    candidate at all; ``cites_answer`` whether the context cites a cited entry."""

    kind: Kind
    query_id: str
    scope: Scope
    grounded: bool
    suggested_scope: str | None
    best_relevance: float | None
    relevance: str | None
    cites_answer: bool
    #: Whether the wider scope held a clearly closer match (which ungrounds the answer
    #: whatever the threshold); False when that check did not run.
    closer_elsewhere: bool = False

    @property
    def suggests_wider(self) -> bool:
        return self.suggested_scope in _WIDER[self.scope.kind]

    @property
    def right(self) -> bool:
        return judged_right(self.kind, self.grounded, suggests_wider=self.suggests_wider)

    def right_at(self, threshold: float) -> bool:
        """Whether the outcome would be right if grounded meant best relevance >=
        ``threshold`` (and no closer match lay in the wider scope). A session or
        workspace retrieval that is not grounded always suggests the next wider scope
        (``tether.retrieve.guidance``), so a cross-scope question is then right exactly
        when it is not grounded. The wider scope is only searched when the result
        cleared the configured threshold: below it, the table cannot know."""
        grounded = (
            self.best_relevance is not None
            and self.best_relevance >= threshold
            and not self.closer_elsewhere
        )
        return grounded if self.kind == "answerable" else not grounded


def retrieve_claim(tether: Tether, claim: GroundingClaim, scope: Scope) -> RetrievalResult:
    """``claim`` asked in ``scope``, always retrieved (the decision step is skipped)."""
    return tether.retrieve(
        claim.text,
        scope=scope,
        session_id=scope.id if scope.kind == "session" else None,
        decision=_RETRIEVE,
    )


def ask(
    tether: Tether, layout: GroundingLayout, *, progress: Callable[[int], None] | None = None
) -> list[GroundingAnswer]:
    """Retrieve every question of ``layout`` once; ``progress(questions asked)``."""
    answers = []
    for kind, claim, scope in layout.questions():
        result = retrieve_claim(tether, claim, scope)
        relevance = result.debug.get("relevance", {})
        found = result.debug.get("candidates", {}).get("reranked", 0)
        answers.append(
            GroundingAnswer(
                kind=kind,
                query_id=claim.query_id,
                scope=scope,
                grounded=result.grounded,
                suggested_scope=result.suggested_scope,
                best_relevance=float(relevance["best"]) if found else None,
                relevance=relevance.get("definition"),
                cites_answer=bool(
                    layout.answer_ids(claim) & {c.document_id for c in result.citations}
                ),
                closer_elsewhere=closer_elsewhere(result),
            )
        )
        if progress:
            progress(len(answers))
    return answers


@dataclass(frozen=True)
class KindReport:
    """One kind's questions: how many were ``grounded``, were not grounded with a
    ``suggested_wider`` scope, cited an answering entry (``cites_answer``), and the share
    ``right``; ``best_relevance`` summarizes the best relevances (``n``, ``mean``,
    ``min``, ``p10`` ... ``p90``, ``max``) of the ``questions - no_candidates`` questions
    whose retrieval found anything."""

    questions: int
    grounded: int
    suggested_wider: int
    cites_answer: int
    no_candidates: int
    right: float
    best_relevance: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "grounded": self.grounded,
            "suggested_wider": self.suggested_wider,
            "cites_answer": self.cites_answer,
            "no_candidates": self.no_candidates,
            "right": round(self.right, 4),
            "best_relevance": self.best_relevance,
        }


@dataclass(frozen=True)
class GroundingReport:
    """The grounding evaluation (see the module docstring). ``thresholds`` holds a row
    per candidate threshold ``t``: the share of right outcomes per kind and their mean,
    ``balanced``, had grounded meant best relevance >= ``t``; ``best_threshold`` is the
    first row with the highest ``balanced``."""

    dataset: str
    method: str
    relevance: str
    claims: int
    distractors: int
    documents: int
    min_relevance: float
    balanced_accuracy: float
    kinds: dict[str, KindReport]
    thresholds: list[dict[str, float]]
    unindexed: int = 0
    settings: tuple[str, ...] = ()

    @property
    def best_threshold(self) -> dict[str, float]:
        return max(self.thresholds, key=lambda row: row["balanced"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "method": self.method,
            "relevance": self.relevance,
            "claims": self.claims,
            "distractors": self.distractors,
            "questions": sum(k.questions for k in self.kinds.values()),
            "documents": self.documents,
            "unindexed": self.unindexed,
            "settings": list(self.settings),
            "min_relevance": self.min_relevance,
            "balanced_accuracy": round(self.balanced_accuracy, 4),
            "kinds": {kind: report.to_dict() for kind, report in self.kinds.items()},
            "thresholds": self.thresholds,
            "best_threshold": self.best_threshold,
        }


def kind_report(answers: list[GroundingAnswer]) -> KindReport:
    best = [a.best_relevance for a in answers if a.best_relevance is not None]
    return KindReport(
        questions=len(answers),
        grounded=sum(a.grounded for a in answers),
        suggested_wider=sum(not a.grounded and a.suggests_wider for a in answers),
        cites_answer=sum(a.cites_answer for a in answers),
        no_candidates=len(answers) - len(best),
        right=statistics.fmean(a.right for a in answers) if answers else 0.0,
        best_relevance=_distribution(best),
    )


def _distribution(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    quantiles = {f"p{pct}": round(_percentile(values, pct), 4) for pct in (10, 25, 50, 75, 90)}
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values), 4),
        "min": min(values),
        **quantiles,
        "max": max(values),
    }


def threshold_rows(
    answers: list[GroundingAnswer], thresholds: Iterable[float]
) -> list[dict[str, float]]:
    """Per threshold ``t`` (ascending, once each): the share of right outcomes of each
    kind, and ``balanced``, their mean, had grounded meant best relevance >= ``t``."""
    by_kind = {kind: [a for a in answers if a.kind == kind] for kind in KINDS}
    rows = []
    for t in sorted(set(thresholds)):
        rates = {
            kind: statistics.fmean(a.right_at(t) for a in group) if group else 0.0
            for kind, group in by_kind.items()
        }
        row = {"threshold": t, **{kind: round(rate, 4) for kind, rate in rates.items()}}
        rows.append(row | {"balanced": round(statistics.fmean(rates.values()), 4)})
    return rows


def grounding(
    directory: str | Path,
    *,
    split: str = "test",
    db: str | Path | None = None,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    lexical_only: bool = False,
    claims: int = DEFAULT_CLAIMS,
    distractors: int = DEFAULT_DISTRACTORS,
    thresholds: Iterable[float] = GROUNDING_THRESHOLDS,
    progress: EvalProgress | None = None,
) -> GroundingReport:
    """The grounding evaluation of the BEIR dataset in ``directory``: the whole of
    ``tether eval --grounding``.

    ``claims`` judged queries of ``split`` are sampled, each with ``distractors``
    similar entries (see the module docstring). ``db`` defaults to a temporary file,
    removed afterwards; a stored one is reused. ``settings`` default to
    :meth:`Settings.load`; ``embedder`` replaces the one they describe, and
    ``lexical_only`` turns embeddings off (the two exclude each other). ``progress``
    hears the stages ``"Indexing <dataset> for grounding"`` (documents) and ``"Asking
    <dataset>"`` (questions)."""
    if lexical_only and embedder is not None:
        raise InvalidArgument("give lexical_only or an embedder, not both")
    settings = settings if settings is not None else Settings.load()
    if lexical_only:
        settings = _without_embeddings(settings)
    dataset = load_beir(directory, split=split)
    corpus = {entry.id: entry for entry in dataset.corpus()}
    layout = select_claims(dataset, corpus, claims=claims, distractors=distractors)
    documents = sum(len(c.cited) + 2 * len(c.distractors) for c in layout.claims)
    with tempfile.TemporaryDirectory(prefix="tether-grounding-") as tmp:
        store = db if db is not None else Path(tmp) / "grounding.db"
        with Tether(store, settings=settings, embedder=embedder) as tether:
            indexing = index_layout(
                tether,
                layout,
                corpus,
                progress=_stage(progress, f"Indexing {dataset.name} for grounding", documents),
            )
            answers = ask(
                tether,
                layout,
                progress=_stage(progress, f"Asking {dataset.name}", 3 * len(layout.claims)),
            )
            first = next(layout.questions())[2]
            method = tether.search(layout.claims[0].text, scope=first, k=1).debug["method"]
    return _report(
        dataset.name, method, layout, distractors, indexing, answers, settings, thresholds
    )


def _report(
    name: str,
    method: str,
    layout: GroundingLayout,
    distractors: int,
    indexing: CorpusIndexing,
    answers: list[GroundingAnswer],
    settings: Settings,
    thresholds: Iterable[float],
) -> GroundingReport:
    min_relevance = settings.rag.min_relevance
    kinds = {kind: kind_report([a for a in answers if a.kind == kind]) for kind in KINDS}
    return GroundingReport(
        dataset=name,
        method=method,
        relevance=" + ".join(sorted({a.relevance for a in answers if a.relevance})) or "none",
        claims=len(layout.claims),
        distractors=distractors,
        documents=indexing.entries - len(indexing.failed),
        min_relevance=min_relevance,
        balanced_accuracy=statistics.fmean(k.right for k in kinds.values()),
        kinds=kinds,
        thresholds=threshold_rows(answers, (*thresholds, min_relevance)),
        unindexed=len(indexing.failed),
        settings=non_default_settings(settings),
    )
