"""BEIR-format evaluation: nDCG@10, Recall@100 and query latency, through the normal paths.

A BEIR directory holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``).
Each corpus entry is indexed as one document (title, a blank line, then text) with the
default ingestion path and settings; each entry is ranked by its best chunk.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tether import MAX_K, InvalidArgument, Scope, SearchMode, Settings, Tether, TextSource
from tether.settings import RagSettings


@dataclass(frozen=True)
class CorpusEntry:
    id: str
    title: str
    text: str

    def source(self, document_id: str) -> TextSource:
        """The entry as one document: title, a blank line, then text."""
        text = f"{self.title}\n\n{self.text}" if self.title else self.text
        return TextSource(text, self.title or self.id, document_id=document_id)


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus_path: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    def corpus(self) -> Iterator[CorpusEntry]:
        with self.corpus_path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    yield CorpusEntry(
                        str(row["_id"]), row.get("title") or "", row.get("text") or ""
                    )


#: Relevance thresholds of the trade table (``tether eval --pipeline``).
DEFAULT_THRESHOLDS = (0.0, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6)


@dataclass(frozen=True)
class PipelineReport:
    """The full pipeline (``Tether.retrieve``) on the same queries.

    ``ndcg_at_10`` ranks documents in the reranked order of the pipeline's candidates
    (``rag.rerank_top_n`` chunks), then in hybrid order beyond them. ``context_recall``
    is the share of queries whose context block cites at least one relevant document;
    ``grounded`` the share with any context at all; ``skipped`` the queries the decision
    let through without retrieval; ``thresholds`` the trade table of
    :func:`threshold_table`."""

    ndcg_at_10: float
    context_recall: float
    grounded: float
    mean_context_chunks: float
    skipped: int
    latency_ms_p50: float
    latency_ms_p95: float
    thresholds: list[dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ndcg@10": round(self.ndcg_at_10, 4),
            "context_recall": round(self.context_recall, 4),
            "grounded": round(self.grounded, 4),
            "mean_context_chunks": round(self.mean_context_chunks, 2),
            "skipped": self.skipped,
            "latency_ms_p50": round(self.latency_ms_p50, 3),
            "latency_ms_p95": round(self.latency_ms_p95, 3),
            "thresholds": self.thresholds,
        }


@dataclass(frozen=True)
class EvalReport:
    dataset: str
    method: str
    queries: int
    documents: int
    ndcg_at_10: float
    recall_at_100: float
    latency_ms_p50: float
    latency_ms_p95: float
    pipeline: PipelineReport | None = None
    #: Corpus entries that could not be indexed (they count as never retrieved).
    unindexed: int = 0
    #: ``rag.key=value`` for every setting that is not tether's default.
    settings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        pipeline = {"pipeline": self.pipeline.to_dict()} if self.pipeline else {}
        return {
            "dataset": data["dataset"],
            "method": data["method"],
            "queries": data["queries"],
            "documents": data["documents"],
            "ndcg@10": round(self.ndcg_at_10, 4),
            "recall@100": round(self.recall_at_100, 4),
            "latency_ms_p50": round(self.latency_ms_p50, 3),
            "latency_ms_p95": round(self.latency_ms_p95, 3),
            "unindexed": self.unindexed,
            "settings": list(self.settings),
        } | pipeline


def load_beir(directory: str | Path, *, split: str = "test") -> BeirDataset:
    root = Path(directory)
    corpus = root / "corpus.jsonl"
    queries_path = root / "queries.jsonl"
    qrels_path = root / "qrels" / f"{split}.tsv"
    for required in (corpus, queries_path, qrels_path):
        if not required.is_file():
            raise InvalidArgument(f"{root} is not a BEIR dataset: {required} is missing")
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh):
            fields = line.rstrip("\n").split("\t")
            if (number == 0 and fields[0] == "query-id") or len(fields) < 3:
                continue
            qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    queries = {}
    with queries_path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if str(row["_id"]) in qrels:
                    queries[str(row["_id"])] = row["text"]
    return BeirDataset(root.resolve().name, corpus, queries, qrels)


def eval_workspace(dataset: BeirDataset) -> str:
    return f"eval-{dataset.name}"


@dataclass(frozen=True)
class CorpusIndexing:
    """What indexing a corpus did: ``entries`` seen, and the ``failed`` ones as
    ``(corpus id, reason)`` (an empty entry, say); these count as never retrieved."""

    entries: int
    failed: tuple[tuple[str, str], ...]


def index_dataset(
    tether: Tether,
    dataset: BeirDataset,
    *,
    progress: Callable[[int], None] | None = None,
    batch: int = 256,
) -> CorpusIndexing:
    """Index every corpus entry as a document of the dataset's workspace.

    Entries already stored with the same content are skipped by hash (so a second run on
    the same ``--db`` reuses the stored chunks and embeddings). An entry that cannot be
    indexed is reported, not fatal: the evaluation still runs over the others."""
    workspace = eval_workspace(dataset)
    count = 0
    failed: list[tuple[str, str]] = []
    pending: list[TextSource] = []

    def flush() -> None:
        nonlocal count
        results = tether.add(pending, workspace_id=workspace, on_error="collect")
        failed.extend(
            (source.document_id.removeprefix(f"{workspace}:"), str(result.error))  # type: ignore[union-attr]
            for source, result in zip(pending, results, strict=True)
            if result.error is not None
        )
        count += len(pending)
        pending.clear()
        if progress:
            progress(count)

    for entry in dataset.corpus():
        pending.append(entry.source(f"{workspace}:{entry.id}"))
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    embed_missing(tether)
    return CorpusIndexing(count, tuple(failed))


def embed_missing(tether: Tether) -> int:
    """Give the chunks a store holds without vectors for the configured model theirs
    (a store first filled by a ``--lexical-only`` run: its unchanged documents are skipped
    by hash, and would otherwise be searched hybrid without vectors); how many chunks
    were embedded. Nothing to do without an embedder."""
    if tether.embedder is None:
        return 0
    return tether.reembed().chunks_embedded


def non_default_settings(settings: Settings) -> tuple[str, ...]:
    """The ``[rag]`` settings that differ from tether's defaults, as ``rag.key=value``: an
    evaluation says what it measured (a tether.toml or TETHER_RAG__* variables apply)."""
    return tuple(
        f"rag.{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in _flat(settings.rag.model_dump(mode="json"))
        if value != dict(_flat(RagSettings().model_dump(mode="json"))).get(key)
    )


def _flat(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def rank_documents(
    tether: Tether, query: str, scope: Scope, depth: int, mode: SearchMode = "hybrid"
) -> list[str]:
    """Document ids ranked by their best chunk, ``depth`` of them when there are enough."""
    k = min(MAX_K, depth * 3)
    while True:
        hits = tether.search(query, scope=scope, k=k, mode=mode)
        ranked = list(dict.fromkeys(hit.document_id for hit in hits))
        if len(ranked) >= depth or len(hits) < k or k == MAX_K:
            return ranked[:depth]
        k = min(MAX_K, k * 2)


def ndcg_at(ranked: list[str], relevant: dict[str, int], cutoff: int) -> float:
    gains = sorted((g for g in relevant.values() if g > 0), reverse=True)
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:cutoff]))
    if ideal == 0:
        return 0.0
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:cutoff]))
    return dcg / ideal


def recall_at(ranked: list[str], relevant: dict[str, int], cutoff: int) -> float:
    wanted = {d for d, g in relevant.items() if g > 0}
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked[:cutoff])) / len(wanted)


#: ``progress(stage, done, total)``: ``"Indexing <dataset>"`` with the corpus entries
#: indexed so far (no total), then ``"Scoring <dataset>"`` with the queries scored so far
#: of the judged ones. Each stage is first announced with ``done=0``.
EvalProgress = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class EvalRun:
    """What :func:`run` did: the ``report``, and the ``indexing`` of the corpus whose
    failed entries the report counts as ``unindexed`` (never retrieved)."""

    report: EvalReport
    indexing: CorpusIndexing


def run(
    directory: str | Path,
    *,
    split: str = "test",
    db: str | Path | None = None,
    settings: Settings | None = None,
    lexical_only: bool = False,
    pipeline: bool = False,
    progress: EvalProgress | None = None,
) -> EvalRun:
    """Index the BEIR dataset in ``directory`` into ``db`` and score its ``split``: the
    whole of ``tether eval``.

    ``db`` defaults to a temporary file, removed afterwards; a stored one is reused (see
    :func:`index_dataset`). ``settings`` default to :meth:`Settings.load`.
    ``lexical_only`` scores FTS5 alone, with embeddings turned off so that no vectors
    are computed; ``pipeline`` also scores :meth:`Tether.retrieve` (see
    :func:`evaluate`)."""
    settings = settings if settings is not None else Settings.load()
    if lexical_only:
        settings = _without_embeddings(settings)
    with tempfile.TemporaryDirectory(prefix="tether-eval-") as tmp:
        store = db if db is not None else Path(tmp) / "eval.db"
        with Tether(store, settings=settings) as tether:
            dataset = load_beir(directory, split=split)
            indexing = index_dataset(
                tether, dataset, progress=_stage(progress, f"Indexing {dataset.name}", None)
            )
            report = evaluate(
                tether,
                dataset,
                mode="lexical" if lexical_only else "hybrid",
                pipeline=pipeline,
                progress=_stage(progress, f"Scoring {dataset.name}", len(_judged_queries(dataset))),
            )
    return EvalRun(replace(report, unindexed=len(indexing.failed)), indexing)


def _without_embeddings(settings: Settings) -> Settings:
    rag = settings.rag
    embeddings = rag.embeddings.model_copy(update={"enabled": False})
    return settings.model_copy(update={"rag": rag.model_copy(update={"embeddings": embeddings})})


def _stage(
    progress: EvalProgress | None, stage: str, total: int | None
) -> Callable[[int], None] | None:
    """``progress`` for one stage, told now that the stage starts."""
    if progress is None:
        return None
    progress(stage, 0, total)
    return lambda done: progress(stage, done, total)


@dataclass(frozen=True)
class _SearchScore:
    """One judged query through :meth:`Tether.search`; ``ranked`` holds corpus ids."""

    ranked: list[str]
    ndcg_at_10: float
    recall_at_100: float
    latency_ms: float


@dataclass(frozen=True)
class _PipelineScore:
    """One judged query through :meth:`Tether.retrieve`; ``relevances`` as in
    :func:`threshold_table`."""

    ndcg_at_10: float
    context_recall: float
    grounded: float
    context_chunks: int
    skipped: bool
    latency_ms: float
    relevances: list[tuple[float, bool]]


def evaluate(
    tether: Tether,
    dataset: BeirDataset,
    *,
    mode: SearchMode = "hybrid",
    pipeline: bool = False,
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS,
    progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Run every query with a relevance judgement and score the rankings.

    ``mode`` is the search mode; the report's ``method`` is what actually ran (hybrid
    degrades to lexical when there are no embeddings). With ``pipeline``, each query
    also runs through :meth:`Tether.retrieve` with the settings as they are (see
    :class:`PipelineReport`). ``progress(queries scored)`` is called after each query."""
    judged = _judged_queries(dataset)
    scope = Scope.workspace(eval_workspace(dataset))
    searches: list[_SearchScore] = []
    runs: list[_PipelineScore] = []
    for text, relevant in judged:
        # Each query is searched, then retrieved, before the next: as a user would.
        searches.append(_score_search(tether, dataset, scope, mode, text, relevant))
        if pipeline:
            runs.append(_score_pipeline(tether, dataset, scope, text, relevant, searches[-1]))
        if progress:
            progress(len(searches))
    method = tether.search(next(iter(dataset.queries.values())), scope=scope, k=1, mode=mode)
    return EvalReport(
        settings=non_default_settings(tether.settings),
        dataset=dataset.name,
        method=method.debug["method"],
        queries=len(searches),
        documents=len(tether.documents(workspace_id=eval_workspace(dataset))),
        ndcg_at_10=statistics.fmean(s.ndcg_at_10 for s in searches),
        recall_at_100=statistics.fmean(s.recall_at_100 for s in searches),
        latency_ms_p50=_percentile([s.latency_ms for s in searches], 50),
        latency_ms_p95=_percentile([s.latency_ms for s in searches], 95),
        pipeline=_pipeline_report(runs, thresholds) if pipeline else None,
    )


def _judged_queries(dataset: BeirDataset) -> list[tuple[str, dict[str, int]]]:
    """``(query text, relevance by corpus id)`` for every query with a judgement."""
    judged = [
        (text, dataset.qrels[query_id])
        for query_id, text in dataset.queries.items()
        if query_id in dataset.qrels
    ]
    if not judged:
        raise InvalidArgument(f"{dataset.name}: no query has a relevance judgement")
    return judged


def _score_search(
    tether: Tether,
    dataset: BeirDataset,
    scope: Scope,
    mode: SearchMode,
    text: str,
    relevant: dict[str, int],
) -> _SearchScore:
    started = time.perf_counter()
    ranked = rank_documents(tether, text, scope, depth=100, mode=mode)
    latency_ms = (time.perf_counter() - started) * 1000
    ranked = [_corpus_id(dataset, d) for d in ranked]
    return _SearchScore(
        ranked, ndcg_at(ranked, relevant, 10), recall_at(ranked, relevant, 100), latency_ms
    )


def _score_pipeline(
    tether: Tether,
    dataset: BeirDataset,
    scope: Scope,
    text: str,
    relevant: dict[str, int],
    search: _SearchScore,
) -> _PipelineScore:
    """The pipeline's documents rank in its reranked order, then in ``search``'s."""
    started = time.perf_counter()
    result = tether.retrieve(text, scope=scope)
    latency_ms = (time.perf_counter() - started) * 1000
    ranked_chunks = result.debug.get("ranked", [])
    reranked = [_corpus_id(dataset, doc) for _, doc, _ in ranked_chunks]
    cited = {_corpus_id(dataset, c.document_id) for c in result.citations}
    return _PipelineScore(
        ndcg_at_10=ndcg_at(list(dict.fromkeys(reranked + search.ranked)), relevant, 10),
        context_recall=1.0 if any(relevant.get(d, 0) > 0 for d in cited) else 0.0,
        grounded=1.0 if result.grounded else 0.0,
        context_chunks=len(result.selected_chunk_ids),
        skipped=not result.retrieved,
        latency_ms=latency_ms,
        relevances=[
            (rel, relevant.get(doc, 0) > 0)
            for doc, (_, _, rel) in zip(reranked, ranked_chunks, strict=True)
        ],
    )


def _corpus_id(dataset: BeirDataset, document_id: str) -> str:
    return document_id.removeprefix(f"{eval_workspace(dataset)}:")


def _pipeline_report(runs: list[_PipelineScore], thresholds: tuple[float, ...]) -> PipelineReport:
    return PipelineReport(
        ndcg_at_10=statistics.fmean(r.ndcg_at_10 for r in runs),
        context_recall=statistics.fmean(r.context_recall for r in runs),
        grounded=statistics.fmean(r.grounded for r in runs),
        mean_context_chunks=statistics.fmean(r.context_chunks for r in runs),
        skipped=sum(r.skipped for r in runs),
        latency_ms_p50=_percentile([r.latency_ms for r in runs], 50),
        latency_ms_p95=_percentile([r.latency_ms for r in runs], 95),
        thresholds=threshold_table([r.relevances for r in runs], thresholds),
    )


def threshold_table(
    relevances: list[list[tuple[float, bool]]], thresholds: tuple[float, ...], k: int = 10
) -> list[dict[str, float]]:
    """How a relevance threshold trades answered queries against precision.

    ``relevances`` holds, per query, the pipeline's reranked candidates in order as
    ``(relevance, is from a relevant document)``. At threshold ``t`` a query is
    answered when at least one candidate has relevance >= ``t``; its precision@k is the
    share of relevant ones among its first ``k`` such candidates. ``precision_at_k`` is
    the mean over answered queries; ``recall_any`` the share of all queries whose kept
    candidates include a relevant one."""
    rows = []
    for t in thresholds:
        answered, precisions, hits = 0, [], 0
        for candidates in relevances:
            kept = [is_rel for rel, is_rel in candidates if rel >= t][:k]
            if not kept:
                continue
            answered += 1
            precisions.append(sum(kept) / len(kept))
            hits += any(kept)
        n = len(relevances) or 1
        rows.append(
            {
                "threshold": t,
                "answered": round(answered / n, 4),
                "precision_at_k": round(statistics.fmean(precisions), 4) if precisions else 0.0,
                "recall_any": round(hits / n, 4),
                "k": k,
            }
        )
    return rows


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
