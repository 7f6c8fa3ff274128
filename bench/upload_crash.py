#!/usr/bin/env python3
"""What a 202 is worth: uploads to ``tether serve``, the server killed with SIGKILL at a
random moment, restarted, again and again; at the end every file answered 202 must be
indexed, or its job must say it failed. None may be lost silently.

Usage::

    .venv/bin/python bench/upload_crash.py [--rounds 20] [--clients 4] [--files 3]
                                           [--seed 1] [--lexical-only] [--keep DIR]

Each round starts ``tether serve`` over one store (loopback), lets ``--clients`` threads
upload batches of ``--files`` Markdown files each (distinct content, so each file is one
document) as fast as the server takes them, and kills the server with SIGKILL after a
random delay — mid-upload, mid-indexing or between. An upload cut off before its answer
promised nothing; one answered 202 is remembered with its job id. After the last round
the server is started once more and left to finish; then each remembered job is read
back (``GET /v1/jobs/{id}``) and each remembered file looked up in the store.

It prints one line per round, then the totals: files answered 202, indexed, reported
failed, silently lost (answered 202, not indexed, not reported), job ids unknown after
restart, and leftover files in the upload spool. The exit status is 1 if any was lost.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

WORDS = (
    "pump valve seal impeller coolant pressure gauge filter bearing motor shaft housing"
    " priming vent drain flow rate sensor relay fuse circuit battery charger terminal"
).split()


@dataclass
class Ledger:
    """What the server promised: job id -> the file names it accepted."""

    jobs: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cut_off: int = 0

    def accepted(self, job_id: str, names: list[str]) -> None:
        with self.lock:
            self.jobs[job_id] = names


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(db: Path, port: int, lexical: bool) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "TETHER_RAG__EMBEDDINGS__ENABLED": "false" if lexical else "true",
        "TETHER_SERVER__UPLOADS_PER_KEY": "1000",
    }
    command = [
        sys.executable,
        "-m",
        "tether.cli",
        "serve",
        "--db",
        str(db),
        "--port",
        str(port),
        "--no-mcp",
        "--log-level",
        "error",
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(url: str, server: subprocess.Popen[bytes], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server did not start")


def uploader(
    url: str, ledger: Ledger, stop: threading.Event, prefix: str, files: int, words: tuple[int, int]
) -> None:
    rng = random.Random(prefix)
    n = 0
    while not stop.is_set():
        names = [f"{prefix}-{n}-{i}" for i in range(files)]
        n += 1
        parts = []
        for name in names:
            body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(*words)))
            parts.append(("files", (f"{name}.md", f"# {name}\n\n{body}\n".encode())))
        try:
            response = httpx.post(url + "/v1/documents", files=parts, timeout=30)
        except httpx.HTTPError:
            ledger.cut_off += 1  # no answer: nothing was promised
            continue
        if response.status_code == 202:
            ledger.accepted(response.json()["job"]["id"], names)


def round_(
    url: str,
    server: subprocess.Popen[bytes],
    ledger: Ledger,
    args: argparse.Namespace,
    number: int,
    rng: random.Random,
) -> None:
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=uploader,
            args=(url, ledger, stop, f"r{number}c{c}", args.files, tuple(args.words)),
        )
        for c in range(args.clients)
    ]
    before = len(ledger.jobs)
    for thread in threads:
        thread.start()
    time.sleep(rng.uniform(0.2, args.max_delay))
    server.send_signal(signal.SIGKILL)
    server.wait()
    stop.set()
    for thread in threads:
        thread.join()
    print(
        f"round {number:3d}: {len(ledger.jobs) - before:3d} uploads answered 202, then kill -9",
        flush=True,
    )


def settle(url: str, ledger: Ledger, seconds: float = 900) -> dict[str, dict]:
    deadline = time.monotonic() + seconds
    out: dict[str, dict] = {}
    while time.monotonic() < deadline:
        out = {}
        for job_id in ledger.jobs:
            response = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=30)
            out[job_id] = response.json().get("job", {}) if response.status_code == 200 else {}
        if all(j.get("status") in ("succeeded", "failed", "cancelled", None) for j in out.values()):
            return out
        time.sleep(1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--max-delay", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--words",
        type=int,
        nargs=2,
        default=(2_000, 20_000),
        metavar=("MIN", "MAX"),
        help="words per file",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=900,
        help="seconds to wait for the last run to index everything",
    )
    parser.add_argument("--lexical-only", action="store_true")
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="tether-upload-crash-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "t.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ledger = Ledger()
    for number in range(1, args.rounds + 1):
        server = start(db, port, args.lexical_only)
        wait_ready(url, server)
        round_(url, server, ledger, args, number, rng)
    server = start(db, port, args.lexical_only)
    try:
        wait_ready(url, server)
        jobs = settle(url, ledger, args.settle)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    return report(db, ledger, jobs, folder, keep=args.keep is not None)


def report(db: Path, ledger: Ledger, jobs: dict[str, dict], folder: Path, *, keep: bool) -> int:
    from tether import Tether

    with Tether(db=db) as t:
        stored = {d.title for d in t.documents()}
    files = indexed = failed = lost = pending = 0
    for job_id, names in ledger.jobs.items():
        job = jobs.get(job_id, {})
        results = {r["source"]: r for r in job.get("results", [])}
        for name in names:
            files += 1
            if name in stored:
                indexed += 1
            elif results.get(f"{name}.md", {}).get("status") == "failed":
                failed += 1
            elif job.get("status") in ("queued", "running"):
                pending += 1  # still being indexed when the wait ended: not lost, not done
            else:
                lost += 1
    unknown = sum(1 for job in jobs.values() if not job)
    spool = Path(f"{db}-uploads")
    leftover = [p for p in spool.rglob("*") if p.is_file() and p.name != "job.json"]
    print(
        f"\nfiles answered 202: {files} in {len(ledger.jobs)} jobs;"
        f" uploads cut off unanswered: {ledger.cut_off}"
    )
    print(
        f"indexed: {indexed}; reported failed: {failed}; silently lost: {lost};"
        f" job ids unknown after restart: {unknown}; files left in the spool: {len(leftover)}"
    )
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if lost or unknown or pending else 0


if __name__ == "__main__":
    sys.exit(main())
