"""What chunking in worker processes would gain a lexical ``Tether.add``, measured.

    .venv/bin/python bench/chunk_processes.py [--workers 2] [--batch 32] [--rounds 3]

A lexical add of SciFact (embeddings off) spends most of its time chunking, in Python,
under the interpreter lock that the writer thread's SQLite work also needs. This script
times the add as tether runs it against the same add with its chunking done ahead in
``--workers`` forked processes (``--batch`` documents a task, all submitted when the add
starts; the add takes each document's chunks from them in order), the two in turn for
``--rounds`` rounds, and bm25s's tokenize and index on the same chunks as the peer. Both
adds store the same chunks under the same documents (checked).

This is a measurement of a design, not how tether indexes: a library cannot fork a
process that runs other threads (the writer's, the tokenizer's), and its workers would
have to start as fresh interpreters (``tether/ingest/workers.py``) and take documents in
batches through the indexer's per-document steps.
"""

from __future__ import annotations

import argparse
import multiprocessing
import pickle
import statistics
import sys
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench import load_scifact_sources, time_lexical_peers

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"
_WORKER: dict[str, Any] = {}


def _start_worker(db: str) -> None:
    from tether import Settings, Tether

    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    _WORKER["indexer"] = Tether(db=db, settings=settings)._index()


def _chunk(texts: list[tuple[str, str | None]]) -> bytes:
    from tether.ingest.indexer import Indexer
    from tether.ingest.loaders import load_text

    indexer = _WORKER["indexer"]
    chunks = [Indexer._chunks(indexer, load_text(text, title=title)) for text, title in texts]
    return pickle.dumps(chunks, protocol=pickle.HIGHEST_PROTOCOL)


def stored(t: Any) -> list[str]:
    """Every stored chunk as "document#ordinal: text", in that order."""
    with t.store.db.read() as conn:
        rows = conn.execute(
            "SELECT document_id, ordinal, content FROM rag_chunks ORDER BY document_id, ordinal"
        )
        return [f"{document}#{ordinal}: {content}" for document, ordinal, content in rows]


def plain_add(sources: list[Any], tmp: Path) -> tuple[float, list[str]]:
    from tether import Settings, Tether

    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    with Tether(db=tmp / "plain.db", settings=settings) as t:
        started = time.perf_counter()
        t.add(sources)
        seconds = time.perf_counter() - started
        return seconds, stored(t)


def pooled_add(sources: list[Any], tmp: Path, workers: int, batch: int) -> tuple[float, list[str]]:
    """The add with each document's chunks taken from worker processes, in order."""
    from tether import Settings, Tether
    from tether.ingest.indexer import Indexer, smallest_first

    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    context = multiprocessing.get_context("fork")
    original = Indexer._chunks
    with Tether(db=tmp / "pooled.db", settings=settings) as t:
        started = time.perf_counter()
        pool = ProcessPoolExecutor(
            workers, context, initializer=_start_worker, initargs=(str(tmp / "worker.db"),)
        )
        ordered = [sources[i] for i in smallest_first(sources)]  # the order add() takes
        tasks: list[Future[bytes]] = [
            pool.submit(_chunk, [(s.text, s.title) for s in ordered[i : i + batch]])
            for i in range(0, len(ordered), batch)
        ]
        taken: dict[int, list[Any]] = {}
        position = iter(range(len(sources)))

        def chunks(self: Indexer, loaded: Any) -> Any:
            i = next(position)
            if i // batch not in taken:
                taken[i // batch] = pickle.loads(tasks[i // batch].result())
            return taken[i // batch][i % batch]

        Indexer._chunks = chunks  # type: ignore[method-assign]
        try:
            t.add(sources)
        finally:
            Indexer._chunks = original  # type: ignore[method-assign]
            pool.shutdown()
        seconds = time.perf_counter() - started
        return seconds, stored(t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sources = load_scifact_sources(args.corpus, None)
    times: dict[str, list[float]] = {"plain": [], "pooled": [], "bm25s": []}
    for round_ in range(args.rounds):
        order = ("plain", "pooled") if round_ % 2 == 0 else ("pooled", "plain")
        texts: dict[str, list[str]] = {}
        for name in order:
            with tempfile.TemporaryDirectory(prefix="tether-chunkpool-") as tmp:
                if name == "plain":
                    seconds, texts[name] = plain_add(sources, Path(tmp))
                else:
                    seconds, texts[name] = pooled_add(sources, Path(tmp), args.workers, args.batch)
            times[name].append(seconds)
        if texts["plain"] != texts["pooled"]:
            print("the two adds stored different chunks", file=sys.stderr)
            return 1
        times["bm25s"].append(time_lexical_peers([t.split(": ", 1)[1] for t in texts["plain"]])[0])
        print(
            f"round {round_ + 1}: as tether runs it {times['plain'][-1]:.2f} s, chunked in"
            f" {args.workers} processes {times['pooled'][-1]:.2f} s, bm25s"
            f" {times['bm25s'][-1]:.2f} s ({len(texts['plain'])} chunks)",
            file=sys.stderr,
        )
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"SciFact, {len(sources)} documents, medians of {args.rounds} rounds in turn:")
    for name, label in (("plain", "as tether runs it"), ("pooled", "chunked in processes")):
        ratio = median["bm25s"] / median[name]
        print(f"  {label:<22} {median[name]:.2f} s  ({ratio:.2f}x bm25s's throughput)")
    print(f"  bm25s tokenize + index {median['bm25s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
