"""The retrieval pipeline's overhead above hybrid search, at SciFact scale.

For every SciFact query, in alternating order, times ``Tether.search(q)`` (hybrid, k=10)
and ``Tether.retrieve(q)`` (decide, one query, retrieve, rerank, context; rewrite off,
heuristic rerank) on the same store. Query embeddings are computed once beforehand
(the embedder's query cache), so both sides measure retrieval, not the model. Prints
p50/p95 of each, and the p50 of the per-query difference, which is the overhead.

    .venv/bin/tether eval ../shared/datasets/scifact --db scifact.db    # index + embed once
    .venv/bin/python bench/pipeline_overhead.py ../shared/datasets/scifact --db scifact.db
"""

from __future__ import annotations

import argparse
import statistics
import time

from tether import Settings, Tether
from tether.eval.beir import eval_workspace, load_beir
from tether.models import Scope


def _pct(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--db", required=True, help="a store `tether eval --db` filled")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the queries")
    args = parser.parse_args()

    dataset = load_beir(args.dataset)
    settings = Settings.load(rag={"enable_query_rewrite": False, "enable_llm_rerank": False})
    t = Tether(db=args.db, settings=settings)
    if t.embedder is None:
        raise SystemExit(f"error: embeddings are unavailable: {t.embeddings_unavailable}")
    scope = Scope.workspace(eval_workspace(dataset))
    if not t.documents(workspace_id=scope.id):
        raise SystemExit(f"error: {args.db} has no {scope.id}; run `tether eval --db` first")
    queries = list(dataset.queries.values())
    for q in queries:  # warm: query vectors cached, matrix loaded, pages in cache
        t.search(q, scope=scope)
        t.retrieve(q, scope=scope)

    search_ms: list[float] = []
    retrieve_ms: list[float] = []
    diffs: list[float] = []
    for round_ in range(args.rounds):
        for i, q in enumerate(queries):
            pair = {}
            order = ("search", "retrieve") if (i + round_) % 2 == 0 else ("retrieve", "search")
            for which in order:
                started = time.perf_counter()
                if which == "search":
                    t.search(q, scope=scope)
                else:
                    t.retrieve(q, scope=scope)
                pair[which] = (time.perf_counter() - started) * 1000
            search_ms.append(pair["search"])
            retrieve_ms.append(pair["retrieve"])
            diffs.append(pair["retrieve"] - pair["search"])
    t.close()

    n = len(diffs)
    print(f"{dataset.name}: {len(queries)} queries x {args.rounds} rounds = {n} pairs")
    print("| | p50 ms | p95 ms |")
    print("| --- | --- | --- |")
    print(f"| search (hybrid, k=10) | {_pct(search_ms, 50):.2f} | {_pct(search_ms, 95):.2f} |")
    print(f"| retrieve (pipeline) | {_pct(retrieve_ms, 50):.2f} | {_pct(retrieve_ms, 95):.2f} |")
    print(f"| per-query difference | {_pct(diffs, 50):.2f} | {_pct(diffs, 95):.2f} |")
    print(
        f"\noverhead (p50 of retrieve - search): {statistics.median(diffs):.2f} ms;"
        f" ratio of p50s {_pct(retrieve_ms, 50) / _pct(search_ms, 50):.2f}x"
    )


if __name__ == "__main__":
    main()
