"""Where text given in memory is prepared: in the calling thread (what ``Tether.add`` does)
against helper threads (what it did before), on SciFact's abstracts, runs taken in turn.

    .venv/bin/python bench/text_prepare.py [--corpus ../shared/datasets/scifact/corpus.jsonl]
        [--rounds 4] [--docs N] [--embeddings]

Each round indexes the abstracts into a new store once each way (the order alternating),
lexical only unless ``--embeddings`` (then the onnx-int8 runtime, warmed first). The
helper-thread arm gives the indexer a pool of ``rag.convert_workers`` threads where it
would prepare in the calling thread; nothing else differs. Prints each arm's seconds and
the median ratio.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import load_scifact_sources  # noqa: E402


def timed_add(sources: list, embeddings: bool, threads: bool) -> float:
    import tether.ingest.indexer as indexer
    from tether import Settings, Tether

    rag = {"embeddings": {"enabled": embeddings, "runtime": "onnx-int8"}}
    settings = Settings.load(rag=rag)
    inline = indexer.InlineExecutor
    if threads:  # the text's own executor becomes a pool of helper threads
        workers = settings.rag.convert_workers
        indexer.InlineExecutor = lambda: concurrent.futures.ThreadPoolExecutor(workers)  # type: ignore[assignment,misc]
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            Tether(db=Path(tmp) / "t.db", settings=settings) as t,
        ):
            if embeddings:
                t.embedder.embed_batch(["warm up"])
            started = time.perf_counter()
            t.add(sources)
            return time.perf_counter() - started
    finally:
        indexer.InlineExecutor = inline  # type: ignore[misc]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--corpus", type=Path, default=HERE.parent.parent / "shared/datasets/scifact/corpus.jsonl"
    )
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--docs", type=int, default=None, help="the first N abstracts (default all)")
    p.add_argument("--embeddings", action="store_true", help="embed too (onnx-int8)")
    args = p.parse_args(argv)
    sources = load_scifact_sources(args.corpus, args.docs)
    seconds: dict[str, list[float]] = {"calling thread": [], "helper threads": []}
    for round_ in range(args.rounds):
        arms = [False, True] if round_ % 2 == 0 else [True, False]
        for threads in arms:
            arm = "helper threads" if threads else "calling thread"
            seconds[arm].append(timed_add(sources, args.embeddings, threads))
    for arm, values in seconds.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"{arm:15} median {statistics.median(values):.2f} s  runs {runs}")
    ratio = statistics.median(seconds["helper threads"]) / statistics.median(
        seconds["calling thread"]
    )
    print(f"helper threads / calling thread = {ratio:.2f}x the time ({len(sources)} abstracts)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
