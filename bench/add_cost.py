"""What one `add` costs in a large store: the whole call, and its embedding-cache lookup.

    .venv/bin/python bench/add_cost.py --chunks 100000

Builds (once, kept under --workdir) a synthetic store of N chunks with 384-dim vectors,
written straight through the store as bench/bench.py does, then times `Tether.add` of a
new one-chunk document 20 times (an embedder that returns a random unit vector: no model
runs, so the store's own work is what is measured), and the statement that looks up
already-embedded chunks by hash (`vectors_for_hashes`) with its query plan.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as kit

from tether import Settings, Tether, TextSource
from tether.embed import Embedder
from tether.store.sql import vectors_for_hashes_sql


class RandomEmbedder(Embedder):
    """Random unit vectors under the synthetic store's model name and size."""

    def __init__(self) -> None:
        self.model = kit.MODEL_NAME
        self.rng = np.random.default_rng(1)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return self.rng.standard_normal((len(texts), kit.DIMS)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tether-add-cost"))
    parser.add_argument("--adds", type=int, default=20)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"store-{args.chunks}.db"
    texts = [f"chunk {i} about valves and seats {i % 977}" for i in range(args.chunks)]
    if not path.exists():
        vectors = np.random.default_rng(0).standard_normal((args.chunks, kit.DIMS))
        seconds = kit.build_tether_store(path, texts, vectors.astype(np.float32), 10, 500)
        print(f"built {args.chunks:,} chunks in {seconds:.1f} s")
    settings = Settings(rag={"chunk_by": "chars"})
    times = []
    with Tether(db=path, settings=settings, embedder=RandomEmbedder()) as t:
        stamp = time.time_ns()
        for i in range(args.adds):
            started = time.perf_counter()
            [result] = t.add([TextSource(f"a new note {stamp} {i} on the pump", f"note {i}")])
            times.append((time.perf_counter() - started) * 1000)
            assert result.status == "indexed", result
    conn = sqlite3.connect(path)
    hashes = [hashlib.sha256(text.encode()).hexdigest() for text in texts[-20:]]
    sql, params = vectors_for_hashes_sql(kit.MODEL_NAME, hashes)
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    lookups = []
    for _ in range(15):
        started = time.perf_counter()
        conn.execute(sql, params).fetchall()
        lookups.append((time.perf_counter() - started) * 1000)
    print(f"store of {args.chunks:,} chunks: add() of a one-chunk document, median of"
          f" {args.adds}: {statistics.median(times):.1f} ms")  # fmt: skip
    print(f"vectors_for_hashes (20 hashes), median of 15: {statistics.median(lookups):.3f} ms;"
          f" plan: {' / '.join(plan)}")  # fmt: skip


if __name__ == "__main__":
    main()
