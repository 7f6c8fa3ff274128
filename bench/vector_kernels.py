"""Which exact vector scan should tether use? Measures the candidates on the same data.

    python bench/vector_kernels.py [--scales 10k,100k,1m] [--queries 30] [--json PATH]

Candidates, all exact top-10 by cosine over unit float32 vectors (dims 384):

- ``float32 matrix``: tether's approach: an in-memory float32 matrix, one BLAS matrix-vector
  product over the in-scope rows (contiguous slices), then ``argpartition``.
- ``int8 + rescoring``: vectors quantized to int8 (4x less memory to stream), an int8 scan
  for the top 200, rescored exactly in float32.
- ``sqlite-vec``: the ``vec0`` virtual table's brute-force KNN inside SQLite (float32), when
  the ``sqlite-vec`` package is installed.

Two scopes: the whole matrix, and a scope of 10% of the rows made of 100 separate blocks
(documents spread through the matrix), which is what a session or a small workspace is.
Latency is p50/p95 in milliseconds; the int8 recall@10 against the exact answer is shown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

DIMS = 384
SCALES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}


def unit_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty((n, DIMS), dtype=np.float32)
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - start), DIMS), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out


def timed(fn: Callable[[np.ndarray], np.ndarray], queries: np.ndarray) -> tuple[float, float]:
    fn(queries[0])  # warm-up
    samples = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def top10(scores: np.ndarray) -> np.ndarray:
    idx = np.argpartition(-scores, 9)[:10]
    return idx[np.argsort(-scores[idx])]


def float32_scan(matrix: np.ndarray, spans: list[tuple[int, int]]) -> Callable:
    rows = np.concatenate([np.arange(s, e) for s, e in spans])

    def run(q: np.ndarray) -> np.ndarray:
        scores = np.concatenate([matrix[s:e] @ q for s, e in spans])
        return rows[top10(scores)]

    return run


def int8_scan(matrix: np.ndarray, spans: list[tuple[int, int]]) -> Callable:
    quantized = np.clip(np.rint(matrix * 127), -127, 127).astype(np.int8)
    rows = np.concatenate([np.arange(s, e) for s, e in spans])

    def run(q: np.ndarray) -> np.ndarray:
        q8 = np.clip(np.rint(q * 127), -127, 127).astype(np.int8)
        rough = np.concatenate(
            [quantized[s:e].astype(np.int32) @ q8.astype(np.int32) for s, e in spans]
        )
        shortlist = np.argpartition(-rough, 199)[:200]
        exact = matrix[rows[shortlist]] @ q
        return rows[shortlist[top10(exact)]]

    return run


def sqlite_vec_scan(matrix: np.ndarray) -> Callable | None:
    try:
        import sqlite3

        import sqlite_vec
    except ImportError:
        return None
    conn = sqlite3.connect(":memory:")
    if not hasattr(conn, "enable_load_extension"):
        # Many Python builds (pyenv's default, macOS's system Python) cannot load SQLite
        # extensions at all: a reason on its own not to depend on one.
        print("sqlite-vec: skipped, this Python's sqlite3 cannot load extensions")
        return None
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.execute(
        f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIMS}] distance_metric=cosine)"
    )
    with conn:
        conn.executemany(
            "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
            ((i + 1, matrix[i].tobytes()) for i in range(len(matrix))),
        )

    def run(q: np.ndarray) -> np.ndarray:
        rows = conn.execute(
            "SELECT rowid FROM v WHERE embedding MATCH ? AND k = 10 ORDER BY distance",
            (q.astype(np.float32).tobytes(),),
        ).fetchall()
        return np.array([r[0] - 1 for r in rows])

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="10k,100k,1m")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    results = []
    print(f"{'scale':>6} {'scope':>10} {'kernel':>18} {'p50 ms':>9} {'p95 ms':>9} {'recall':>7}")
    for name in args.scales.split(","):
        n = SCALES[name]
        matrix = unit_rows(n, rng)
        queries = unit_rows(args.queries, rng)
        block = n // 1000
        scoped = [(i * n // 100, i * n // 100 + block * 10) for i in range(100)]
        for scope_name, spans in (("all", [(0, n)]), ("10%/100", scoped)):
            exact = float32_scan(matrix, spans)
            truth = [set(exact(q).tolist()) for q in queries]
            kernels = {"float32 matrix": exact, "int8 + rescoring": int8_scan(matrix, spans)}
            if scope_name == "all":
                vec = sqlite_vec_scan(matrix)
                if vec is not None:
                    kernels["sqlite-vec"] = vec
            for kernel, fn in kernels.items():
                p50, p95 = timed(fn, queries)
                recall = statistics.fmean(
                    len(set(fn(q).tolist()) & t) / 10 for q, t in zip(queries, truth, strict=True)
                )
                results.append({"scale": name, "scope": scope_name, "kernel": kernel,
                                "p50_ms": p50, "p95_ms": p95, "recall@10": recall})  # fmt: skip
                print(
                    f"{name:>6} {scope_name:>10} {kernel:>18} {p50:9.2f} {p95:9.2f} {recall:7.3f}"
                )
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
