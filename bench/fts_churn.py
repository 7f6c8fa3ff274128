"""An FTS5 index under churn, with and without tether's upkeep, in one run.

    .venv/bin/python bench/fts_churn.py [../shared/datasets/scifact] [--replacements 3000]

Indexes the SciFact corpus with embeddings off (about 9,300 chunks) into two temporary
stores, then replaces the same random documents in both, one ``add()`` each (a watched
folder whose files are edited): in one store the FTS5 upkeep is on (the default: an
``optimize`` after a write that leaves the index fragmented), in the other it is off.
Prints the index's segments and leaf pages, the file size, the write
time per replacement, and lexical p50 over the test claims (top 100, the store's whole
scope) before and after, for each store, and after a full ``optimize``.

    .venv/bin/python bench/fts_churn.py --store fragmented.db

A store that is already fragmented (one that went through churn before the upkeep
existed): a copy of it gets one write (the upkeep compacts it after that write when the
index is at most ``AUTO_PAGES``, else warns), then ``Tether.compact()`` (``tether
compact``); prints the shape and lexical p50 (the store's largest workspace, the best of
three rounds) before and after, and the time.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tether import Settings, Tether, TextSource
from tether.models import Scope
from tether.store.sqlite.fts_upkeep import fts_shape

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scifact_lexical import DEFAULT_DATASET, documents_and_matches, percentile


def lexical_p50(t: Tether, matches: list[str], workspace: str = "scifact") -> float:
    scope = Scope.workspace(workspace)
    for match in matches:  # warm
        t.store.search_lexical_scores(scope, match, 100)
    times = []
    for match in matches:
        started = time.perf_counter()
        t.store.search_lexical_scores(scope, match, 100)
        times.append((time.perf_counter() - started) * 1000)
    return percentile(times, 0.5)


def describe(t: Tether, path: Path, matches: list[str]) -> str:
    shape = fts_shape(t.store.db.connection())
    assert shape is not None
    return (f"{shape.segments:>4} segments {shape.pages:>6} leaf pages"
            f" {path.stat().st_size / 2**20:>6.1f} MB  lexical p50"
            f" {lexical_p50(t, matches):6.2f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATASET)
    parser.add_argument("--replacements", type=int, default=3000)
    parser.add_argument("--store", type=Path, help="compact a copy of this fragmented store")
    args = parser.parse_args()
    docs, matches = documents_and_matches(args.dataset)
    settings = Settings(rag={"embeddings": {"enabled": False}, "chunk_by": "chars"})
    if args.store:
        compact_a_copy(args.store, settings, matches)
        return
    sources = [TextSource(f"{d['title']}\n\n{d['text']}", d["title"], document_id=d["_id"])
               for d in docs]  # fmt: skip
    picks = random.Random(7).choices(range(len(sources)), k=args.replacements)
    with tempfile.TemporaryDirectory() as tmp:
        for label, upkeep in (("upkeep on", True), ("upkeep off", False)):
            path = Path(tmp) / f"{label.replace(' ', '_')}.db"
            with Tether(db=path, settings=settings) as t:
                if not upkeep:
                    t.store.db.fts_upkeep.enabled = False
                t.add(sources, workspace_id="scifact")
                print(f"{label:<11} indexed     {describe(t, path, matches)}")
                started = time.perf_counter()
                for n, i in enumerate(picks):
                    old = sources[i]
                    new = TextSource(f"{old.text}\n\nrevision {n}", old.title,
                                     document_id=old.document_id)  # fmt: skip
                    t.add(new, workspace_id="scifact")
                per = (time.perf_counter() - started) / len(picks) * 1000
                print(f"{label:<11} {len(picks):,} replaced {describe(t, path, matches)}"
                      f"  write {per:.2f} ms a replacement;"
                      f" {t.store.db.fts_upkeep.stats['optimized']} optimizes")  # fmt: skip
                t.store.fts_integrity_check()  # raises if the index does not match the chunks
                with t.store.db.write() as conn:
                    conn.execute("INSERT INTO rag_chunks_fts(rag_chunks_fts) VALUES ('optimize')")
                print(f"{label:<11} optimized   {describe(t, path, matches)}")


def compact_a_copy(store: Path, settings: Settings, matches: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "copy.db"
        shutil.copy(store, path)
        with Tether(db=path, settings=settings) as t:
            conn = t.store.db.connection()
            (workspace,) = conn.execute(
                "SELECT workspace_id FROM rag_documents GROUP BY 1 ORDER BY count(*) DESC"
            ).fetchone()

            def report(label: str) -> None:
                shape = fts_shape(conn)
                best = min(lexical_p50(t, matches, workspace) for _ in range(3))
                print(f"{label:<8} {shape}  lexical p50 {best:.2f} ms")

            report("before")
            upkeep = t.store.db.fts_upkeep
            started = time.perf_counter()
            t.add(TextSource("a note", "note", document_id="upkeep-note"), workspace_id="notes")
            print(
                f"one write, {time.perf_counter() - started:.2f} s with its upkeep: {upkeep.stats}"
            )
            report("then")
            compacted = t.compact()
            print(f"Tether.compact(): {compacted}")
            t.store.fts_integrity_check()
            report("after")


if __name__ == "__main__":
    main()
