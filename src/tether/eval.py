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
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tether import MAX_K, InvalidArgument, Scope, SearchMode, Settings, Tether, TextSource
from tether.settings import RagSettings


@dataclass(frozen=True)
class CorpusEntry:
    id: str
    title: str
    text: str


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
        text = f"{entry.title}\n\n{entry.text}" if entry.title else entry.text
        pending.append(
            TextSource(text, entry.title or entry.id, document_id=f"{workspace}:{entry.id}")
        )
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return CorpusIndexing(count, tuple(failed))


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


def evaluate(
    tether: Tether,
    dataset: BeirDataset,
    *,
    mode: SearchMode = "hybrid",
    pipeline: bool = False,
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS,
) -> EvalReport:
    """Run every query with a relevance judgement and score the rankings.

    ``mode`` is the search mode; the report's ``method`` is what actually ran (hybrid
    degrades to lexical when there are no embeddings). With ``pipeline``, each query
    also runs through :meth:`Tether.retrieve` with the settings as they are (see
    :class:`PipelineReport`)."""
    workspace = eval_workspace(dataset)
    scope = Scope.workspace(workspace)
    prefix = f"{workspace}:"
    ndcgs, recalls, latencies = [], [], []
    p_ndcgs, p_recalls, p_grounded, p_chunks, p_latencies = [], [], [], [], []
    relevances: list[list[tuple[float, bool]]] = []
    skipped = 0
    for query_id, text in dataset.queries.items():
        relevant = dataset.qrels.get(query_id)
        if relevant is None:
            continue
        started = time.perf_counter()
        ranked = rank_documents(tether, text, scope, depth=100, mode=mode)
        latencies.append((time.perf_counter() - started) * 1000)
        ranked = [d.removeprefix(prefix) for d in ranked]
        ndcgs.append(ndcg_at(ranked, relevant, 10))
        recalls.append(recall_at(ranked, relevant, 100))
        if not pipeline:
            continue
        started = time.perf_counter()
        result = tether.retrieve(text, scope=scope)
        p_latencies.append((time.perf_counter() - started) * 1000)
        if not result.retrieved:
            skipped += 1
        ranked_chunks = result.debug.get("ranked", [])
        reranked = [doc.removeprefix(prefix) for _, doc, _ in ranked_chunks]
        relevances.append(
            [(rel, relevant.get(doc.removeprefix(prefix), 0) > 0) for _, doc, rel in ranked_chunks]
        )
        order = list(dict.fromkeys(reranked + ranked))
        p_ndcgs.append(ndcg_at(order, relevant, 10))
        cited = {c.document_id.removeprefix(prefix) for c in result.citations}
        p_recalls.append(1.0 if any(relevant.get(d, 0) > 0 for d in cited) else 0.0)
        p_grounded.append(1.0 if result.grounded else 0.0)
        p_chunks.append(len(result.selected_chunk_ids))
    if not ndcgs:
        raise InvalidArgument(f"{dataset.name}: no query has a relevance judgement")
    documents = len(tether.documents(workspace_id=workspace))
    method = tether.search(next(iter(dataset.queries.values())), scope=scope, k=1, mode=mode)
    return EvalReport(
        settings=non_default_settings(tether.settings),
        dataset=dataset.name,
        method=method.debug["method"],
        queries=len(ndcgs),
        documents=documents,
        ndcg_at_10=statistics.fmean(ndcgs),
        recall_at_100=statistics.fmean(recalls),
        latency_ms_p50=_percentile(latencies, 50),
        latency_ms_p95=_percentile(latencies, 95),
        pipeline=PipelineReport(
            ndcg_at_10=statistics.fmean(p_ndcgs),
            context_recall=statistics.fmean(p_recalls),
            grounded=statistics.fmean(p_grounded),
            mean_context_chunks=statistics.fmean(p_chunks),
            skipped=skipped,
            latency_ms_p50=_percentile(p_latencies, 50),
            latency_ms_p95=_percentile(p_latencies, 95),
            thresholds=threshold_table(relevances, thresholds),
        )
        if pipeline
        else None,
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
