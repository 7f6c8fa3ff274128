"""How the lexical and vector lists are fused, compared on a BEIR dataset.

Prints the fusion table (bench/RESULTS.md): nDCG@10 (and Recall@100) of RRF, min-max and z-score
fusion variants at several candidate depths, all on the same per-query lists, plus a
split-half check of the chosen fusion against RRF k=60.

    .venv/bin/tether eval ../shared/datasets/scifact --db scifact.db    # index + embed once
    .venv/bin/python bench/fusion_study.py ../shared/datasets/scifact --db scifact.db

The lists come from tether itself (FTS5 bm25 and exact cosine, inside the dataset's
workspace, 300 deep); documents are ranked by their best chunk, as `tether eval` does.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable

from tether import Tether
from tether.eval.beir import BeirDataset, eval_workspace, load_beir, ndcg_at, recall_at
from tether.models import Scope
from tether.retrieve.fts import compile_match
from tether.retrieve.fusion import reciprocal_rank_fusion, zscore_fusion

Scored = list[tuple[int, float]]
Fuse = Callable[[Scored, Scored], Scored]
DEPTHS = (20, 50, 100, 200, 300)


def rrf(lexical: Scored, vector: Scored) -> Scored:
    return reciprocal_rank_fusion([[c for c, _ in lexical], [c for c, _ in vector]], k=60)


def _spread(scored: Scored, floor: Callable[[list[float]], tuple[float, float]]) -> dict:
    if not scored:
        return {}
    lo, hi = floor([s for _, s in scored])
    return {c: (s - lo) / ((hi - lo) or 1.0) for c, s in scored}


def minmax(lexical: Scored, vector: Scored) -> Scored:
    return _sum(*(_spread(x, lambda v: (min(v), max(v))) for x in (lexical, vector)), 0.0)


def zscore_absent_min(lexical: Scored, vector: Scored) -> Scored:
    out = []
    for scored in (lexical, vector):
        z = dict(zscore_fusion([scored]))
        out.append((z, min(z.values(), default=0.0)))
    (zl, ml), (zv, mv) = out
    return sorted(((c, zl.get(c, ml) + zv.get(c, mv)) for c in {*zl, *zv}), key=lambda x: -x[1])


def dbsf_clipped(lexical: Scored, vector: Scored) -> Scored:
    def clip(values: list[float]) -> tuple[float, float]:
        mean, std = statistics.fmean(values), statistics.pstdev(values)
        return mean - 3 * std, mean + 3 * std

    parts = []
    for scored in (lexical, vector):
        if not scored:
            parts.append({})
            continue
        lo, hi = clip([s for _, s in scored])
        parts.append({c: (min(max(s, lo), hi) - lo) / ((hi - lo) or 1.0) for c, s in scored})
    return _sum(*parts, 0.0)


def _sum(a: dict, b: dict, absent: float) -> Scored:
    return sorted(((c, a.get(c, absent) + b.get(c, absent)) for c in {*a, *b}), key=lambda x: -x[1])


BASELINE_FUSION = "RRF k = 60"
TETHER_FUSION = "z-score sum, absent = mean - 3 std (tether)"
FUSIONS: dict[str, Fuse] = {
    BASELINE_FUSION: rrf,
    "min-max normalized sum": minmax,
    "z-score sum, absent = list minimum": zscore_absent_min,
    TETHER_FUSION: lambda a, b: zscore_fusion([a, b]),
    "same, clipped to mean ± 3 std (DBSF)": dbsf_clipped,
}


#: Per query: its lexical and its vector list, each (chunk id, score), best first.
Lists = dict[str, tuple[Scored, Scored]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--db", required=True, help="a store `tether eval --db` filled")
    parser.add_argument("--split", default="test")
    args = parser.parse_args()

    dataset = load_beir(args.dataset, split=args.split)
    lists, document_of = candidate_lists(Tether(db=args.db), dataset, args.db)
    results = print_fusion_table(dataset, lists, document_of)
    print_split_half(results)


def candidate_lists(t: Tether, dataset: BeirDataset, db: str) -> tuple[Lists, dict[int, str]]:
    """Every judged query's lexical and vector lists, ``max(DEPTHS)`` deep, in the
    dataset's workspace; and each chunk's document id (as the qrels name it)."""
    if t.embedder is None:
        raise SystemExit(f"error: embeddings are unavailable: {t.embeddings_unavailable}")
    workspace = eval_workspace(dataset)
    if not t.documents(workspace_id=workspace):
        raise SystemExit(f"error: {db} has no {workspace}; run `tether eval --db` first")
    scope = Scope.workspace(workspace)
    with t.store.db.read() as conn:
        chunk_doc = dict(conn.execute("SELECT id, document_id FROM rag_chunks"))
    searcher = t._searcher
    assert searcher.vectors is not None

    lists: Lists = {}
    for query_id, text in dataset.queries.items():
        if query_id not in dataset.qrels:
            continue
        match = compile_match(text)
        lexical = t.store.search_lexical_scores(scope, match, max(DEPTHS)) if match else []
        vector = searcher.vectors.search(scope, t.embedder.embed_query(text), max(DEPTHS))
        lists[query_id] = (lexical, vector)
    prefix = f"{workspace}:"
    return lists, {c: d.removeprefix(prefix) for c, d in chunk_doc.items()}


def score(
    fuse: Fuse, depth: int, dataset: BeirDataset, lists: Lists, document_of: dict[int, str]
) -> dict[str, tuple[float, float]]:
    """Per query: nDCG@10 and Recall@100 of ``fuse`` over both lists cut at ``depth``."""
    out = {}
    for query_id, (lexical, vector) in lists.items():
        fused = fuse(lexical[:depth], vector[:depth])
        ranked = list(dict.fromkeys(document_of[c] for c, _ in fused))
        relevant = dataset.qrels[query_id]
        out[query_id] = (ndcg_at(ranked, relevant, 10), recall_at(ranked, relevant, 100))
    return out


def print_fusion_table(
    dataset: BeirDataset, lists: Lists, document_of: dict[int, str]
) -> dict[tuple[str, int], dict[str, tuple[float, float]]]:
    """The Markdown table of every fusion at every depth; the per-query scores."""
    print(f"{dataset.name}: {len(lists)} queries; nDCG@10 (Recall@100) by candidate depth")
    print("| fusion | " + " | ".join(f"{d} + {d}" for d in DEPTHS) + " |")
    print("| --- " * (len(DEPTHS) + 1) + "|")
    results: dict[tuple[str, int], dict[str, tuple[float, float]]] = {}
    for name, fuse in FUSIONS.items():
        cells = []
        for depth in DEPTHS:
            per_query = results[name, depth] = score(fuse, depth, dataset, lists, document_of)
            ndcg = statistics.fmean(v[0] for v in per_query.values())
            recall = statistics.fmean(v[1] for v in per_query.values())
            cells.append(f"{ndcg:.4f} ({recall:.3f})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return results


def print_split_half(results: dict[tuple[str, int], dict[str, tuple[float, float]]]) -> None:
    """tether's fusion against RRF at 300 + 300, query by query and on random halves."""
    chosen = results[TETHER_FUSION, 300]
    base = results[BASELINE_FUSION, 300]
    better = sum(chosen[q][0] > base[q][0] + 1e-9 for q in chosen)
    worse = sum(chosen[q][0] < base[q][0] - 1e-9 for q in chosen)
    queries, wins, rnd = list(chosen), 0, random.Random(0)
    for _ in range(1000):
        rnd.shuffle(queries)
        half = queries[: len(queries) // 2]
        wins += statistics.fmean(chosen[q][0] for q in half) > statistics.fmean(
            base[q][0] for q in half
        )
    print(
        f"\nz-score vs RRF k=60 at 300 + 300: {better} queries better, {worse} worse;"
        f" higher nDCG@10 on {wins / 10:.1f}% of 1,000 random half-splits of the queries"
    )


if __name__ == "__main__":
    main()
