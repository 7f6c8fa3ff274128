#!/usr/bin/env python
"""Does the onnx-int8 runtime keep retrieval quality? SciFact nDCG@10 with the float
model's vectors and with int8 vectors, on the same chunks, side by side.

Copies ``--store`` (a SciFact store that ``tether eval`` or ``bench/scifact_peers.py``
made; built here when missing), embeds its chunks again with the onnx-int8 runtime
(stored under their own model name, beside the float ones) and scores hybrid and
vector-only search with each runtime. The goal (issue 15): hybrid nDCG@10 within 0.005
of the float model's.

    .venv/bin/python bench/int8_quality.py ../shared/datasets/scifact --store scifact.db
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOAL = 0.005


def settings_for(runtime: str, cache: Path | None) -> Any:
    from tether import Settings

    embeddings: dict[str, Any] = {"enabled": True, "runtime": runtime}
    if cache is not None:
        embeddings["cache_dir"] = str(cache)
    return Settings.load(rag={"embeddings": embeddings})


def score(dataset: Path, store: Path, runtime: str, cache: Path | None) -> dict[str, Any]:
    """Index (a no-op on an indexed store), embed what this runtime lacks, and score."""
    from tether import Tether
    from tether.eval.beir import embed_missing, evaluate, index_dataset, load_beir

    beir = load_beir(dataset)
    out: dict[str, Any] = {"runtime": runtime}
    with Tether(store, settings=settings_for(runtime, cache)) as t:
        model = t.embedder.model if t.embedder else None
        before = t.store.embedding_counts().get(model or "", 0)
        started = time.perf_counter()
        index_dataset(t, beir)  # unchanged documents: only their missing vectors are made
        embed_missing(t)
        out["embed_seconds"] = time.perf_counter() - started
        out["chunks_embedded"] = t.store.embedding_counts().get(model or "", 0) - before
        out["model"] = model
        for mode in ("hybrid", "vector"):
            report = evaluate(t, beir, mode=mode)
            out[mode] = {"ndcg@10": report.ndcg_at_10, "recall@100": report.recall_at_100}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("dataset", type=Path, help="BEIR SciFact directory")
    p.add_argument(
        "--store",
        type=Path,
        required=True,
        help="SciFact store with the float model's vectors (built when missing)",
    )
    p.add_argument(
        "--onnx-cache",
        type=Path,
        default=None,
        help="the onnx-int8 export's cache (default: tether's, ~/.cache/tether)",
    )
    p.add_argument(
        "--keep", type=Path, default=None, help="keep the store with both runtimes' vectors here"
    )
    p.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tether-int8-") as tmp:
        work = args.keep or Path(tmp) / "both.db"
        if args.store.exists():
            shutil.copyfile(args.store, work)
        print(f"float model (torch) on {work} ...", file=sys.stderr)
        torch_run = score(args.dataset, work, "torch", None)
        print(f"int8 model (onnx-int8) on {work}: embedding the chunks again ...", file=sys.stderr)
        int8_run = score(args.dataset, work, "onnx-int8", args.onnx_cache)
        if args.keep is None and not args.store.exists():
            shutil.copyfile(work, args.store)  # the float store, for the next run

    delta = int8_run["hybrid"]["ndcg@10"] - torch_run["hybrid"]["ndcg@10"]
    print("| runtime | stored as | hybrid nDCG@10 | Recall@100 | vector nDCG@10 |")
    print("| --- | --- | --- | --- | --- |")
    for run in (torch_run, int8_run):
        print(
            f"| {run['runtime']} | {run['model']} | {run['hybrid']['ndcg@10']:.4f}"
            f" | {run['hybrid']['recall@100']:.4f} | {run['vector']['ndcg@10']:.4f} |"
        )
    if int8_run["chunks_embedded"]:
        rate = int8_run["chunks_embedded"] / int8_run["embed_seconds"]
        print(
            f"onnx-int8 embedded {int8_run['chunks_embedded']:,} chunks in"
            f" {int8_run['embed_seconds']:.0f} s ({rate:.1f} chunks/s, hashing the unchanged"
            " documents included; bench.py times embedding alone)"
        )
    met = abs(delta) <= GOAL
    verdict = "met" if met else "NOT met"
    print(f"hybrid nDCG@10 int8 - float: {delta:+.4f} (goal: within {GOAL}): {verdict}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"torch": torch_run, "onnx_int8": int8_run, "delta_hybrid_ndcg": delta, "met": met},
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
