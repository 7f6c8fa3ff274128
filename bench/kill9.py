#!/usr/bin/env python3
"""The kill-9 consistency check, for as many rounds as you give it.

Usage::

    .venv/bin/python bench/kill9.py [--rounds 200] [--files 60] [--change 20]
                                    [--lexical-only] [--seed 1] [--max-delay S] [--keep DIR]

Each round starts a fresh Python process that indexes a folder of text files into one
store (``Tether.add``, with the local embedder unless ``--lexical-only``), and kills it
with SIGKILL a random delay after its model has loaded (spread over the time a round's
work takes, measured first): while files are chunked and embedded, in the middle of a
write transaction. Then, in this
process, the store must be whole:

* ``PRAGMA integrity_check`` is ``ok`` and the FTS5 index matches the chunks exactly;
* every document has exactly ``chunk_count`` chunks, numbered 0..n-1, with no gap;
* every chunk of a document has a vector of the configured model, or none of the
  document's chunks has one (a document is never half-embedded; without embeddings,
  none has);
* no two documents hold the same file;
* the store opens, searches and takes the next round's writes.

Before each round ``--change`` percent of the files get new content, so every round has
documents to replace (chunks and vectors swapped in one transaction) as well as files
already indexed (skipped) and files left unfinished by the last kill; after the last
round one more run is let finish, and then every file must be indexed exactly once. It
prints one line per round and a summary; the exit status is 1 if any check failed.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WORDS = (
    "pump valve seal impeller coolant pressure gauge filter bearing motor shaft housing"
    " priming vent drain flow rate sensor relay fuse circuit battery charger terminal"
    " warranty refund service manual cleaning descaling boiler burner flame thermostat"
).split()

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tether import Settings, Tether
    db, folder, lexical = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
    settings = Settings.load(rag={"embeddings": {"enabled": not lexical}})
    with Tether(db=db, settings=settings) as t:
        t.warmup()
        print("ready", flush=True)
        t.add(sorted(folder.iterdir()), workspace_id="kill9", on_error="collect")
    print("finished", flush=True)
    """
)


def write_file(folder: Path, i: int, rng: random.Random) -> None:
    paragraphs = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))).capitalize() + "."
        for _ in range(rng.randint(2, 12))
    ]
    (folder / f"doc{i:04d}.md").write_text(f"# Document {i}\n\n" + "\n\n".join(paragraphs))


def write_corpus(folder: Path, files: int, rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        write_file(folder, i, rng)


def check(db: Path, model: str | None) -> list[str]:
    """What is wrong with the store (nothing: an empty list)."""
    problems: list[str] = []
    conn = sqlite3.connect(db)
    try:
        (result,) = conn.execute("PRAGMA integrity_check").fetchone()
        if result != "ok":
            problems.append(f"integrity_check: {result}")
        try:
            conn.execute(
                "INSERT INTO rag_chunks_fts (rag_chunks_fts, rank) VALUES ('integrity-check', 1)"
            )
        except sqlite3.DatabaseError as exc:
            problems.append(f"FTS index does not match the chunks: {exc}")
        docs = conn.execute(
            "SELECT d.id, d.source_path, count(c.id), min(c.ordinal), max(c.ordinal)"
            " FROM rag_documents d LEFT JOIN rag_chunks c ON c.document_id = d.id GROUP BY d.id"
        ).fetchall()
        for doc_id, _, n, lo, hi in docs:
            if n == 0 or lo != 0 or hi != n - 1:
                problems.append(f"document {doc_id}: {n} chunks numbered {lo}..{hi}")
            embedded = conn.execute(
                "SELECT count(*) FROM rag_chunks c JOIN rag_embeddings e ON e.chunk_id = c.id"
                " WHERE c.document_id = ?" + (" AND e.model = ?" if model else ""),
                (doc_id, model) if model else (doc_id,),
            ).fetchone()[0]
            if model and embedded not in (0, n):
                problems.append(f"document {doc_id}: {embedded} of {n} chunks embedded")
            if not model and embedded:
                problems.append(f"document {doc_id}: vectors without embeddings")
        paths = [p for _, p, *_ in docs]
        if len(paths) != len(set(paths)):
            problems.append("two documents hold the same file")
    finally:
        conn.close()
    return problems


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--lexical-only", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--max-delay",
        type=float,
        default=0.0,
        help="most seconds from the model load to the kill (default: 1.2 x a round's work)",
    )
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("--change", type=int, default=20, help="%% of files rewritten a round")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from tether import Settings

    work = args.keep or Path(tempfile.mkdtemp(prefix="tether-kill9-"))
    folder, db = work / "docs", work / "kill9.db"
    rng = random.Random(args.seed)
    write_corpus(folder, args.files, rng)
    model = None if args.lexical_only else (Settings.load().rag.embeddings.model or
                                             "all-MiniLM-L6-v2")  # fmt: skip
    failures = 0
    started = time.perf_counter()
    child_args = [sys.executable, "-c", CHILD, str(db), str(folder),
                  "1" if args.lexical_only else "0"]  # fmt: skip
    span = calibrate(child_args, folder, args, rng)
    for round_ in range(1, args.rounds + 1):
        # New content for a share of the files: every round has documents to replace
        # (an atomic swap of chunks and vectors) as well as new ones to finish.
        rewrite_some(folder, args, rng)
        outcome = run_and_kill(child_args, rng.uniform(0.0, span))
        problems, count = check_and_use(db, model)
        failures += bool(problems)
        print(f"round {round_:4d}: {outcome:26s} {count:4d} documents  "
              + ("ok" if not problems else "; ".join(problems[:3])), flush=True)  # fmt: skip
    problems, documents = finish_and_check(child_args, db, model, args.files)
    failures += bool(problems)
    print(
        f"\n{args.rounds} rounds in {time.perf_counter() - started:.0f}s"
        f" ({'lexical only' if args.lexical_only else 'local embedder'}): "
        f"{failures} with a problem; after a final run, {documents} documents for"
        f" {args.files} files" + ("" if not problems else f"; {'; '.join(problems)}")
    )
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def rewrite_some(folder: Path, args: argparse.Namespace, rng: random.Random) -> None:
    """New content for ``--change`` percent of the files (at least one)."""
    for i in rng.sample(range(args.files), k=max(1, args.files * args.change // 100)):
        write_file(folder, i, rng)


def calibrate(
    child_args: list[str], folder: Path, args: argparse.Namespace, rng: random.Random
) -> float:
    """One whole run, then one round's work timed from "ready" to the end, so that the
    kills are spread over the time a round really takes on this machine; the span the
    kills are drawn from (``--max-delay`` if given)."""
    subprocess.run(child_args, capture_output=True, check=True)
    rewrite_some(folder, args, rng)
    child = subprocess.Popen(child_args, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    child.stdout.readline()
    ready = time.perf_counter()
    child.wait()
    span = args.max_delay or 1.2 * (time.perf_counter() - ready)
    print(f"a round's work takes {time.perf_counter() - ready:.2f}s after the model loads;"
          f" kills land 0-{span:.2f}s after it", flush=True)  # fmt: skip
    return span


def run_and_kill(child_args: list[str], delay: float) -> str:
    """Start an indexing process and SIGKILL it ``delay`` seconds after its model loaded
    (the kill lands in indexing); what happened, in words."""
    child = subprocess.Popen(
        child_args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert child.stdout is not None
        child.stdout.readline()
        child.wait(timeout=delay)
        return "finished before the kill"
    except subprocess.TimeoutExpired:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        return f"killed after {delay:.2f}s"


def check_and_use(db: Path, model: str | None) -> tuple[list[str], int]:
    """The store's problems after a kill, and its documents, once it has opened and
    searched (no store yet: none of either)."""
    from tether import Settings, Tether

    if not db.exists():
        return [], 0
    problems = check(db, model)
    with Tether(db=db, settings=Settings.load(rag={"embeddings": {"enabled": False}})) as t:
        count = len(t.documents())
        t.search("pump seal", scope="workspace", workspace_id="kill9")
    return problems, count


def finish_and_check(
    child_args: list[str], db: Path, model: str | None, files: int
) -> tuple[list[str], int]:
    """One more run, let finish: then every file is indexed exactly once, with vectors;
    the problems, and the documents the store holds."""
    finish = subprocess.run(child_args, capture_output=True, text=True, check=False)
    problems = check(db, model)
    conn = sqlite3.connect(db)
    indexed = conn.execute("SELECT count(DISTINCT source_path) FROM rag_documents").fetchone()[0]
    documents = conn.execute("SELECT count(*) FROM rag_documents").fetchone()[0]
    missing_vectors = (
        conn.execute(
            "SELECT count(*) FROM rag_chunks c LEFT JOIN rag_embeddings e ON e.chunk_id = c.id"
            " AND e.model = ? WHERE e.chunk_id IS NULL",
            (model,),
        ).fetchone()[0]
        if model
        else 0
    )
    conn.close()
    if finish.returncode != 0:
        problems.append(f"the final run failed: {finish.stderr.strip()[-300:]}")
    if indexed != files or documents != files:
        problems.append(f"{documents} documents for {indexed} of {files} files")
    if missing_vectors:
        problems.append(f"{missing_vectors} chunks left without vectors after the final run")
    return problems, documents


if __name__ == "__main__":
    sys.exit(main())
