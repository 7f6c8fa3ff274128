"""Scoped lexical search on SciFact, against FTS5's own floor, in one run.

    .venv/bin/python bench/scifact_lexical.py [../shared/datasets/scifact]

Indexes the SciFact corpus with embeddings off (about 9,300 chunks) into a temporary store:
all of it in one workspace, and 20 of its documents again in a small workspace whose
session has them attached. Then times the store's scoped lexical search (the top
``--k`` by bm25; by default hybrid search's lexical depth for a top 10, 100 with RRF) for
every test claim in three scopes, against the floor: FTS5 ranking the whole index with no
scope at all (one statement, nothing joined). Prints p50/p95 ms, the ratio to the floor
(the cost of keeping the scope inside SQL), and how many chunks bm25 scored per claim:
FTS5 reads a scored chunk's length from its docsize table, one statement each, counted
through SQLite's trace hook (a count of work, which this machine's noise does not move).
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from tether import Settings, Tether, TextSource
from tether.models import Scope
from tether.retrieve.fts import compile_match

FLOOR_SQL = (
    "SELECT rowid, bm25(rag_chunks_fts, 1.0, 1.0) AS r FROM rag_chunks_fts"
    " WHERE rag_chunks_fts MATCH :match ORDER BY r, rowid LIMIT :k"
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scored(conn: sqlite3.Connection, run, matches: list[str]) -> float:
    """Chunks bm25 scored per match (mean): FTS5's reads of its docsize table on ``conn``."""
    reads = 0

    def count(sql: str) -> None:
        nonlocal reads
        reads += "_docsize" in sql

    conn.set_trace_callback(count)
    try:
        for match in matches:
            run(match)
    finally:
        conn.set_trace_callback(None)
    return reads / len(matches)


def timed(run, matches: list[str], rounds: int = 2) -> list[float]:
    for _ in range(rounds - 1):  # warm the page cache
        for match in matches:
            run(match)
    times = []
    for match in matches:
        started = time.perf_counter()
        run(match)
        times.append((time.perf_counter() - started) * 1000)
    return times


DEFAULT_DATASET = Path(__file__).resolve().parent.parent.parent / "shared/datasets/scifact"


def documents_and_matches(dataset: Path) -> tuple[list[dict], list[str]]:
    """SciFact's corpus documents, and its test claims as FTS5 MATCH expressions."""
    with (dataset / "corpus.jsonl").open() as fh:
        docs = [json.loads(line) for line in fh]
    with (dataset / "qrels" / "test.tsv").open() as fh:
        wanted = {row["query-id"] for row in csv.DictReader(fh, delimiter="\t")}
    with (dataset / "queries.jsonl").open() as fh:
        claims = [q["text"] for q in map(json.loads, fh) if q["_id"] in wanted]
    return docs, [m for m in map(compile_match, claims) if m]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATASET)
    parser.add_argument(
        "--k",
        type=int,
        default=Settings().rag.depths(10)[0],
        help="chunks asked for (default: hybrid's lexical depth for a top 10)",
    )
    args = parser.parse_args()
    if args.k < 1:
        parser.error("--k must be >= 1")
    k = args.k
    docs, matches = documents_and_matches(args.dataset)
    settings = Settings(rag={"embeddings": {"enabled": False}, "chunk_by": "chars"})
    with (
        tempfile.TemporaryDirectory() as tmp,
        Tether(db=Path(tmp) / "s.db", settings=settings) as t,
    ):
        sources = [TextSource(f"{d['title']}\n\n{d['text']}", d["title"], document_id=d["_id"])
                   for d in docs]  # fmt: skip
        t.add(sources, workspace_id="scifact")
        t.add([TextSource(s.text, s.title, document_id=f"s-{s.document_id}") for s in sources[:20]],
              workspace_id="small", session_id="chat")  # fmt: skip
        chunks = t.store.counts()["rag_chunks"]
        print(f"SciFact: {len(docs):,} documents, {chunks:,} chunks; {len(matches)} claims;"
              f" top {k} by bm25")  # fmt: skip
        conn = sqlite3.connect(t.store.location)

        def floor_run(m: str) -> None:
            conn.execute(FLOOR_SQL, {"match": m, "k": k}).fetchall()

        floor = timed(floor_run, matches)
        floor_p50 = percentile(floor, 0.5)
        rows = [("FTS5 alone, no scope (the floor)", floor, scored(conn, floor_run, matches))]
        for label, scope in (
            ("workspace: all 9k chunks in scope", Scope.workspace("scifact")),
            ("workspace: 20 documents", Scope.workspace("small")),
            ("session: 20 documents attached", Scope.session("chat")),
        ):

            def run(m: str, s: Scope = scope) -> None:
                t.store.search_lexical_scores(s, m, k)

            with t.store.db.read() as store_conn:  # the connection the store's reads use
                work = scored(store_conn, run, matches)
            rows.append((label, timed(run, matches), work))
        print(f"{'scope':<36} {'p50 ms':>7} {'p95 ms':>7} {'p50 / floor':>11} {'scored':>7}")
        for label, times, work in rows:
            p50 = percentile(times, 0.5)
            print(f"{label:<36} {p50:>7.2f} {percentile(times, 0.95):>7.2f}"
                  f" {p50 / floor_p50:>10.2f}x {work:>7,.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
