"""Retrieval latency over real questions: the p50 and p90 of ``Tether.retrieve`` for every
question of one or more question sets, each on the store ``tether eval --db`` filled.

    .venv/bin/python bench/retrieve_latency.py bench/manuals=manuals.db \\
        bench/docsets/flask=flask.db bench/docsets/docker=docker.db [--rounds 2]

Each question is asked in its set's workspace (``rag`` defaults, local stack), after one
warm-up question, ``--rounds`` times. To compare two versions of tether on the same
stores, run it once from each checkout (or with ``PYTHONPATH`` at the other one's
``src``) in the same state of the machine, and compare the two p50s: the ratio is the
number, an absolute millisecond count depends on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def questions_of(set_dir: Path) -> tuple[str, list[str]]:
    """The set's workspace and its questions' texts."""
    data = json.loads((set_dir / "questions.json").read_text(encoding="utf-8"))
    return data.get("workspace", "manuals"), [q["question"] for q in data["questions"]]


def timed(set_dir: Path, db: str, rounds: int) -> list[float]:
    from tether import Settings, Tether

    workspace, questions = questions_of(set_dir)
    times = []
    with Tether(db=db, settings=Settings.load()) as t:
        t.retrieve(questions[0], scope="workspace", workspace_id=workspace)  # warm-up
        for _ in range(rounds):
            for question in questions:
                started = time.perf_counter()
                t.retrieve(question, scope="workspace", workspace_id=workspace)
                times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", help="SET_DIR=STORE pairs")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    every: list[float] = []
    for pair in args.sets:
        set_dir, _, db = pair.partition("=")
        if not db:
            parser.error(f"{pair!r}: give SET_DIR=STORE (a store tether eval --db filled)")
        times = timed(Path(set_dir), db, args.rounds)
        every += times
        p50 = statistics.median(times)
        print(f"{Path(set_dir).name}: p50 {p50:.1f} ms, {len(times)} retrievals")
    p90 = statistics.quantiles(every, n=10)[-1]
    print(f"all: p50 {statistics.median(every):.1f} ms, p90 {p90:.1f} ms, n={len(every)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
