"""Vector search past a million rows: exact against the quantized two-pass scan.

    .venv/bin/python bench/vector_scale.py --store scifact.db --rows 1m
    .venv/bin/python bench/vector_scale.py --rows 1m          # embeds 3,000 abstracts first

Real embeddings give the data its shape: the vectors of a tether store (``--store``, e.g.
the SciFact store ``bench/backends.py --keep`` leaves) or, without one, 3,000 SciFact
abstracts embedded with the local model. ``--rows`` vectors are made from them (each a real
vector plus Gaussian noise, cosine about 0.9 to it, unit length), laid out as tether's
index lays them out, and the test claims (embedded) are the queries.

For the whole matrix and for a scope holding half of it (every other 20-row document),
it times the index's exact scan (``_score``) and its quantized scan
(``_score_quantized``: Hamming distance of sign bits, then float32 cosines of the best
``depth`` rows), each followed by the same top-k, and reports recall@10 of the quantized
answer against the exact one, p50/p95 ms, and memory per vector; then 10M rows on paper
from the measured per-row costs. A query whose first pool does not separate (its top 10
at the pool's edge) is widened, then scanned exactly, as ``VectorIndex`` does; the table
says how many were. ``--random`` uses random unit vectors and queries instead: they have
no near neighbours, so nearly every query falls back to the exact scan.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import parse_scale

from tether.retrieve import vector as vx
from tether.store import open_store


def real_vectors(store: str | None, dataset: Path, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(corpus vectors, claim vectors), unit length."""
    from tether.embed.local import LocalEmbedder
    from tether.embed.onnx import RUNTIME_SUFFIX, OnnxEmbedder
    from tether.eval.beir import load_beir

    data = load_beir(dataset)
    embedder: LocalEmbedder | OnnxEmbedder = LocalEmbedder()
    if store:
        opened = open_store(store)
        counts = opened.embedding_counts()
        if not counts:
            raise SystemExit(f"{store} holds no vectors: index it with embeddings on")
        model = max(counts, key=counts.__getitem__)  # the runtime that embedded the store
        if model.endswith(RUNTIME_SUFFIX):
            embedder = OnnxEmbedder()
        snapshot = opened.load_vectors(model)
        opened.close()
        claims = embedder.embed(list(data.queries.values()))
        dims = snapshot.rows[0][1]
        base = np.frombuffer(b"".join(r[2] for r in snapshot.rows), "<f4").reshape(-1, dims)
        return base.copy(), claims
    claims = embedder.embed(list(data.queries.values()))
    texts = []
    with open(data.corpus_path) as f:
        import json

        for line in f:
            entry = json.loads(line)
            texts.append(f"{entry.get('title', '')}. {entry['text']}")
            if len(texts) >= count:
                break
    return embedder.embed(texts), claims


def synthesize(base: np.ndarray, rows: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((rows, base.shape[1]), np.float32)
    noise = 0.45 / np.sqrt(base.shape[1])  # cosine about 0.9 to the real vector
    for start in range(0, rows, 100_000):
        n = min(100_000, rows - start)
        picked = base[rng.integers(0, len(base), n)]
        block = picked + rng.standard_normal(picked.shape, dtype=np.float32) * noise
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + n] = block
    return out


def random_vectors(rows: int, queries: int, dims: int, seed: int = 7):
    """(rows, queries) of random unit vectors: no row is near any query."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, dims), np.float32)
    for start in range(0, rows, 100_000):
        block = rng.standard_normal((min(100_000, rows - start), dims), dtype=np.float32)
        out[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    asked = rng.standard_normal((queries, dims), dtype=np.float32)
    return out, asked / np.linalg.norm(asked, axis=1, keepdims=True)


def matrix_of(vectors: np.ndarray) -> vx._Matrix:
    ids = np.arange(len(vectors), dtype=np.int64)
    segment = vx._Segment(vectors, ids)
    segment.codes  # noqa: B018 - made with the load, as VectorIndex does
    dead = np.zeros(len(ids), bool)
    return vx._Matrix((0, 0), 0, 1, vectors.shape[1], (segment,), (dead,), {}, len(ids))


def top(ids: np.ndarray, scores: np.ndarray, k: int) -> list[int]:
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    best = best[np.lexsort((ids[best], -scores[best]))]
    return ids[best].tolist()


def run(matrix: vx._Matrix, spans: vx._Spans, queries: np.ndarray, depth: int, k: int = 10):
    """Exact ms, quantized ms (its exact fallback included), recalls, and how many
    queries fell back to the exact scan."""
    exact_ms, quick_ms, recalls, fallbacks = [], [], [], 0
    for q in queries:
        started = time.perf_counter()
        truth = top(*vx._score(matrix, spans, q), k)
        exact_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        found = vx._score_quantized(matrix, spans, q, depth, k)
        if found is None:  # the pool did not separate: VectorIndex scans exactly
            fallbacks += 1
            found = vx._score(matrix, spans, q)
        got = top(*found, k)
        quick_ms.append((time.perf_counter() - started) * 1000)
        recalls.append(len(set(got) & set(truth)) / len(truth))
    return exact_ms, quick_ms, recalls, fallbacks


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1m", type=parse_scale)
    parser.add_argument("--store", help="a tether store whose local-model vectors to use")
    parser.add_argument("--dataset", default="../shared/datasets/scifact", type=Path)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depths", default="1000,2000,4000,8000")
    parser.add_argument(
        "--random",
        action="store_true",
        help="random unit vectors and queries instead of real-shaped ones",
    )
    parser.add_argument("--json", type=Path, help="also write every number here as JSON")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    vectors, queries, source = rows_and_queries(args)
    matrix = matrix_of(vectors)
    print(f"{args.rows:,} rows of {vectors.shape[1]} dims from {source}"
          f" ({time.perf_counter() - started:.1f} s); {len(queries)} queries")  # fmt: skip
    per_vector = vectors.shape[1] * 4, matrix.segments[0].codes.shape[0] * 8
    print(f"memory per vector: float32 {per_vector[0]} B + sign bits {per_vector[1]} B"
          f" (+{per_vector[1] / per_vector[0]:.1%})\n")  # fmt: skip
    results, rows_ms = print_scans(matrix, queries, args)
    if rows_ms:
        print(f"\n10M rows on paper (at depth {vx.QUANTIZED_DEPTH}): exact"
              f" {rows_ms['exact'] * 10:.0f} ms and {10e6 * per_vector[0] / 2**30:.1f} GiB;"
              f" quantized {rows_ms['quantized'] * 10:.0f} ms and"
              f" {10e6 * sum(per_vector) / 2**30:.1f} GiB (the float32 rows stay in memory"
              " for rescoring; only the candidates' rows are read)")  # fmt: skip
    out: dict[str, Any] = {"random": args.random, "rows": args.rows, "queries": args.queries,
                           "results": results}  # fmt: skip
    out["bytes_per_vector"] = {"float32": per_vector[0], "sign_bits": per_vector[1]}
    out["ten_million_on_paper_ms"] = {k: v * 10 for k, v in rows_ms.items()}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


def rows_and_queries(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, str]:
    """``--rows`` unit vectors, the query vectors, and where they came from in words."""
    if args.random:
        vectors, queries = random_vectors(args.rows, args.queries, 384)
        return vectors, queries, "random unit vectors (no structure: the worst case for sign bits)"
    base, claims = real_vectors(args.store, args.dataset, 3000)
    queries = claims[: args.queries].astype(np.float32)
    return synthesize(base, args.rows), queries, f"{len(base):,} real vectors"


def print_scans(
    matrix: vx._Matrix, queries: np.ndarray, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The exact and the quantized scan in both scopes at every depth, a line each; the
    rows as JSON, and the ms per million rows at the index's own depth (whole scope)."""
    whole = [(0, np.array([0]), np.array([args.rows]))]
    starts = np.arange(0, args.rows, 40)
    half = [(0, starts, np.minimum(starts + 20, args.rows))]
    print(f"{'scope':12} {'depth':>6} {'exact p50':>10} {'quant p50':>10} {'p95':>7}"
          f" {'speed-up':>9} {'recall@10':>10} {'min':>5} {'exact scan':>10}")  # fmt: skip
    results: list[dict[str, Any]] = []
    rows_ms: dict[str, float] = {}
    for name, spans in (("whole", whole), ("half", half)):
        for depth in (int(d) for d in args.depths.split(",")):
            exact_ms, quick_ms, recalls, fallbacks = run(matrix, spans, queries, depth)
            e, q = pct(exact_ms, 50), pct(quick_ms, 50)
            print(f"{name:12} {depth:6} {e:10.1f} {q:10.1f} {pct(quick_ms, 95):7.1f}"
                  f" {e / q:8.2f}x {np.mean(recalls):10.4f} {min(recalls):5.2f}"
                  f" {fallbacks / len(queries):9.0%}")  # fmt: skip
            results.append({
                "scope": name, "depth": depth, "exact_p50_ms": e, "quantized_p50_ms": q,
                "quantized_p95_ms": pct(quick_ms, 95), "recall_at_10": float(np.mean(recalls)),
                "recall_at_10_min": min(recalls),
                "exact_fallback_share": fallbacks / len(queries),
            })  # fmt: skip
            if name == "whole" and depth == vx.QUANTIZED_DEPTH:
                rows_ms = {"exact": e / args.rows * 1e6, "quantized": q / args.rows * 1e6}
    return results, rows_ms


if __name__ == "__main__":
    main()
