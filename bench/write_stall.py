"""What the first vector search after a write costs, at scale.

    .venv/bin/python bench/write_stall.py --chunks 1m
    .venv/bin/python bench/write_stall.py --chunks 100k --writes 20     # a quicker look

Builds a store of N synthetic chunks (random unit vectors of 384 dims, one workspace,
20 chunks per document) in a temporary folder, loads tether's vector index, then times:

- a search with nothing written since the last one (the steady state, p50 and p95);
- the first search after adding one document of 20 chunks (in this process), and after
  another process (a second Tether on the same file) added one: the index reads the
  change as a delta (``rag_vector_changes``);
- the peer, measured in the same run: what every first search after a write paid before
  deltas, a full reload of the vectors from SQL (``VectorIndex.load`` on a new index).

It prints the extra cost of the first search after a write over the steady p50 (the goal
is < 50 ms at 1M chunks), and the ratio reload / delta. Query embedding is excluded
(precomputed vectors); the searches run in the whole-store scope (every vector).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import DIMS, MODEL_NAME, build_tether_store, log, parse_scale

from tether import Embedder, Scope, Settings, Tether
from tether.retrieve.vector import VectorIndex


class RandomEmbedder(Embedder):
    """Unit random vectors of the benchmark's model (so added documents join the same
    matrix); a query's vector is looked up, not computed."""

    def __init__(self, seed: int) -> None:
        self.model = MODEL_NAME
        self.rng = np.random.default_rng(seed)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        vectors = self.rng.standard_normal((len(texts), DIMS)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def ms(seconds: float) -> float:
    return seconds * 1000


@dataclass
class Timings:
    """Seconds of every timed search and reload, and the index's counters after them."""

    steady: list[float]
    own: list[float]
    other: list[float]
    reloads: list[float]
    stats: dict[str, Any]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=parse_scale, default=parse_scale("1m"))
    p.add_argument("--writes", type=int, default=10, help="writes timed (each way)")
    p.add_argument("--searches", type=int, default=50, help="steady searches timed")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", type=Path, help="also write every number here as JSON")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="tether-stall-") as tmp:
        db = Path(tmp) / "stall.db"
        build_random_store(db, args.chunks, rng)
        queries = [rng.standard_normal(DIMS).astype(np.float32) for _ in range(64)]
        timings = time_searches(db, queries, args)
    report(timings, args)
    return 0


def build_random_store(db: Path, n: int, rng: np.random.Generator) -> None:
    """``n`` chunks with random unit vectors, 20 to a document, in one workspace."""
    texts = [f"chunk {i} of the synthetic store" for i in range(n)]
    vectors = rng.standard_normal((n, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    log(f"building a store of {n:,} chunks")
    build_tether_store(db, texts, vectors, per_doc=20, docs_per_txn=500)


def time_searches(db: Path, queries: list[np.ndarray], args: argparse.Namespace) -> Timings:
    """Load the index, then time steady searches, the first search after each write (in
    this process and in another) and full reloads of the vectors."""
    settings = Settings.load(rag={"chunk_by": "chars"})
    with Tether(db=db, settings=settings, embedder=RandomEmbedder(args.seed)) as t:
        index = t._searcher.vectors
        assert index is not None
        started = time.perf_counter()
        index.load()
        log(f"loaded {len(index):,} vectors in {time.perf_counter() - started:.1f} s")
        scope = Scope.global_()

        def search(i: int) -> float:
            started = time.perf_counter()
            index.search(scope, queries[i % len(queries)], 10)
            return time.perf_counter() - started

        for i in range(5):
            search(i)
        steady = [search(i) for i in range(args.searches)]
        own, other = first_searches_after_writes(t, db, search, args, steady)
        return Timings(steady, own, other, full_reloads(t), dict(index.stats))


def first_searches_after_writes(
    t: Tether,
    db: Path,
    search: Callable[[int], float],
    args: argparse.Namespace,
    steady: list[float],
) -> tuple[list[float], list[float]]:
    """The first search after a document added by ``t`` (this process's index) and after
    one added by a second Tether on the same file (as another process would), ``--writes``
    times each; the three steady searches after each pair go into ``steady``."""
    own: list[float] = []
    other: list[float] = []
    body = " ".join(f"word{i}" for i in range(2000))  # 20 chunks of 100 words
    with Tether(db=db, settings=t.settings, embedder=RandomEmbedder(args.seed + 1)) as peer:
        for w in range(args.writes):
            t.add(text=body + f" own {w}", title=f"own {w}", document_id=f"own{w}")
            own.append(search(w))
            peer.add(text=body + f" other {w}", title=f"other {w}", document_id=f"other{w}")
            other.append(search(w))
            steady += [search(w + 1) for _ in range(3)]
    return own, other


def full_reloads(t: Tether) -> list[float]:
    """The peer: what every first search after a write paid before deltas."""
    reloads = []
    for _ in range(3):
        fresh = VectorIndex(t.store, MODEL_NAME)
        started = time.perf_counter()
        fresh.load()
        reloads.append(time.perf_counter() - started)
        del fresh
    return reloads


def report(timings: Timings, args: argparse.Namespace) -> None:
    """The table on stdout; with ``--json``, the numbers."""
    n, steady, own, other = args.chunks, timings.steady, timings.own, timings.other
    p50 = statistics.median(steady)
    p95 = float(np.percentile(steady, 95))
    own_p50, other_p50 = statistics.median(own), statistics.median(other)
    worst = max(own + other)
    reload = statistics.median(timings.reloads)
    print(f"\nfirst vector search after a write, {n:,} chunks ({DIMS} dims), whole-store scope")
    print(f"  steady search           p50 {ms(p50):8.1f} ms   p95 {ms(p95):8.1f} ms")
    print(f"  after own write         p50 {ms(own_p50):8.1f} ms   (+{ms(own_p50 - p50):.1f} ms)")
    print(
        f"  after another process   p50 {ms(other_p50):8.1f} ms   (+{ms(other_p50 - p50):.1f} ms)"
    )
    print(f"  worst first search          {ms(worst):8.1f} ms   (+{ms(worst - p50):.1f} ms;"
          " goal < +50 ms)")  # fmt: skip
    print(f"  peer: full reload (before deltas) {ms(reload):8.1f} ms + the search")
    print(f"  ratio reload / delta first-search extra: "
          f"{reload / max(max(own_p50, other_p50) - p50, 1e-4):,.0f}x")  # fmt: skip
    print(f"  index: {timings.stats}")
    if args.json:
        numbers = {"chunks": n, "steady_p50_ms": ms(p50), "steady_p95_ms": ms(p95),
                   "after_own_write_p50_ms": ms(own_p50),
                   "after_other_process_p50_ms": ms(other_p50), "worst_first_ms": ms(worst),
                   "full_reload_ms": ms(reload), "index": timings.stats}  # fmt: skip
        args.json.write_text(json.dumps(numbers, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
