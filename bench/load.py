"""Load on a real `tether serve`: N concurrent clients doing mixed search, retrieve and
uploads for M minutes, on loopback only.

    .venv/bin/python bench/load.py --clients 16 --minutes 5
    .venv/bin/python bench/load.py --clients 4 --minutes 0.5          # a quick look

It builds a store (SciFact abstracts from ../shared/datasets/scifact, or synthetic text
with --synthetic) in a temporary folder, makes one API key per workspace, starts
`tether serve` as its own process on 127.0.0.1 and a free port, waits for /readyz, then
runs the clients: each picks, per request, a search (60%), a retrieve (30%) or an upload
of a small Markdown file (10%) in one of the workspaces its key is bound to. It prints
requests/s, p50/p95 per route, every error (the goal is 0), and the server's RSS (now and
peak, from /proc). The server is stopped at the end; the request loop is bounded in time
and in count (--max-requests), and only ever talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "datasets" / "scifact"
WORKSPACES = ("alpha", "beta", "gamma", "delta")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def corpus(args: argparse.Namespace) -> tuple[list[tuple[str, str]], list[str]]:
    """(title, text) documents and the questions the clients ask."""
    rng = random.Random(args.seed)
    if not args.synthetic and (SCIFACT / "corpus.jsonl").is_file():
        with (SCIFACT / "corpus.jsonl").open() as fh:
            docs = [json.loads(line) for line in fh][: args.documents]
        with (SCIFACT / "queries.jsonl").open() as fh:
            questions = [json.loads(line)["text"] for line in fh]
        return [(d["title"] or d["_id"], f"{d['title']}\n\n{d['text']}") for d in docs], questions
    words = [f"w{i}" for i in range(5000)]
    docs = [(f"doc {i}", " ".join(rng.choices(words, k=120))) for i in range(args.documents)]
    return docs, [" ".join(rng.choices(words, k=6)) for _ in range(500)]


def build_store(db: Path, docs: list[tuple[str, str]], embeddings: bool) -> dict[str, str]:
    """The store, its documents spread over the workspaces, and one key per workspace."""
    from tether import Settings, Tether, TextSource

    settings = Settings.load(
        None, **({} if embeddings else {"rag": {"embeddings": {"enabled": False}}})
    )
    with Tether(db=db, settings=settings) as t:
        for n, workspace in enumerate(WORKSPACES):
            mine = docs[n :: len(WORKSPACES)]
            t.add([TextSource(text, title) for title, text in mine], workspace_id=workspace)
        return {w: t.keys.create(workspaces=[w], name=f"load {w}")[1] for w in WORKSPACES}


def rss_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident memory of ``pid`` in MB, from /proc."""
    values = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, amount, _unit = line.split()
                values[key] = int(amount) / 1024
    return values.get("VmRSS:", 0.0), values.get("VmHWM:", 0.0)


class Recorder:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.samples: list[str] = []

    def record(self, route: str, seconds: float, problem: str | None) -> None:
        self.latencies[route].append(seconds * 1000)
        if problem is not None:
            self.errors[route] += 1
            if len(self.samples) < 10:
                self.samples.append(f"{route}: {problem}")


async def client_loop(
    n: int, url: str, key: str, workspace: str, questions: list[str], deadline: float,
    budget: list[int], rec: Recorder, seed: int,
) -> None:  # fmt: skip
    rng = random.Random(seed + n)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
        while time.monotonic() < deadline and budget[0] > 0:
            budget[0] -= 1
            roll = rng.random()
            question = rng.choice(questions)
            scoped = {"scope": "workspace", "workspace_id": workspace}
            started = time.perf_counter()
            try:
                if roll < 0.6:
                    route = "POST /v1/search"
                    response = await http.post("/v1/search", json={"query": question, **scoped})
                elif roll < 0.9:
                    route = "POST /v1/retrieve"
                    response = await http.post("/v1/retrieve", json={"query": question, **scoped})
                else:
                    route = "POST /v1/documents"
                    name = f"note-{n}-{budget[0]}.md"
                    text = f"# Note {n} {budget[0]}\n\n{question}\n\nChecked by client {n}.\n"
                    response = await http.post(
                        "/v1/documents",
                        data={"workspace_id": workspace, "wait": "true"},
                        files={"files": (name, text.encode(), "text/markdown")},
                    )
                problem = None if response.status_code < 400 else (
                    f"{response.status_code} {response.text[:200]}")  # fmt: skip
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            rec.record(route, time.perf_counter() - started, problem)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_clients(
    args: argparse.Namespace, url: str, keys: dict[str, str], questions: list[str], pid: int
) -> tuple[Recorder, float, list[float]]:
    rec = Recorder()
    started = time.monotonic()
    deadline = started + args.minutes * 60
    budget = [args.max_requests]
    memory: list[float] = []

    async def sample_memory() -> None:
        while time.monotonic() < deadline and budget[0] > 0:
            memory.append(rss_mb(pid)[0])
            await asyncio.sleep(1)

    sampler = asyncio.create_task(sample_memory())
    await asyncio.gather(*(
        client_loop(n, url, keys[WORKSPACES[n % len(WORKSPACES)]], WORKSPACES[n % len(WORKSPACES)],
                    questions, deadline, budget, rec, args.seed)
        for n in range(args.clients)
    ))  # fmt: skip
    sampler.cancel()
    return rec, time.monotonic() - started, memory


def report(rec: Recorder, seconds: float, memory: list[float], pid: int,
           args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    total = sum(len(v) for v in rec.latencies.values())
    errors = sum(rec.errors.values())
    current, peak = rss_mb(pid)
    print(f"\n{args.clients} clients for {seconds:.0f} s: {total:,} requests,"
          f" {total / seconds:.1f} requests/s, {errors} errors")  # fmt: skip
    print(f"{'route':<22} {'requests':>9} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'errors':>7}")
    rows = {}
    for route, values in sorted(rec.latencies.items()):
        row = {"requests": len(values), "per_second": len(values) / seconds,
               "p50_ms": statistics.median(values), "p95_ms": percentile(values, 0.95),
               "errors": rec.errors.get(route, 0)}  # fmt: skip
        rows[route] = row
        print(f"{route:<22} {row['requests']:>9,} {row['per_second']:>7.1f}"
              f" {row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} {row['errors']:>7}")  # fmt: skip
    print(
        f"server RSS: {current:,.0f} MB now, {peak:,.0f} MB peak"
        f" (median during the run {statistics.median(memory) if memory else 0:,.0f} MB)"
    )
    for sample in rec.samples:
        print(f"  error: {sample}")
    return {"clients": args.clients, "seconds": seconds, "requests": total, "errors": errors,
            "per_second": total / seconds, "routes": rows, "rss_mb": current,
            "peak_rss_mb": peak}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument(
        "--max-requests",
        type=int,
        default=200_000,
        help="stop after this many requests in all, whatever the time",
    )
    parser.add_argument("--documents", type=int, default=2000, help="documents in the store")
    parser.add_argument("--synthetic", action="store_true", help="synthetic text, not SciFact")
    parser.add_argument(
        "--lexical-only",
        action="store_true",
        help="no embeddings (no model load; measures the service, not MiniLM)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    if not 1 <= args.clients <= 256 or not 0 < args.minutes <= 60:
        parser.error("--clients must be 1-256 and --minutes in (0, 60]")

    docs, questions = corpus(args)
    with tempfile.TemporaryDirectory(prefix="tether-load-") as tmp:
        db = Path(tmp) / "load.db"
        log(f"building a store of {len(docs):,} documents in {len(WORKSPACES)} workspaces")
        keys = build_store(db, docs, embeddings=not args.lexical_only)
        port = free_port()
        # The server's capacity is measured, not the per-key limits (each key is one
        # workspace's clients, which together may pass a key's default rate).
        env = {**os.environ, "TETHER_SERVER__REQUESTS_PER_SECOND": "0",
               "TETHER_SERVER__UPLOADS_PER_KEY": "1000"}  # fmt: skip
        if args.lexical_only:
            env["TETHER_RAG__EMBEDDINGS__ENABLED"] = "false"
        server = subprocess.Popen(
            [sys.executable, "-m", "tether.cli", "serve", "--db", str(db), "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning"], env=env,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not become ready")
                time.sleep(0.5)
            log(f"server ready on {url} (pid {server.pid}); {args.clients} clients for"
                f" {args.minutes:g} min")  # fmt: skip
            rec, seconds, memory = asyncio.run(run_clients(args, url, keys, questions, server.pid))
            numbers = report(rec, seconds, memory, server.pid, args)
        finally:
            server.terminate()
            server.wait(timeout=60)
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2))


if __name__ == "__main__":
    main()
