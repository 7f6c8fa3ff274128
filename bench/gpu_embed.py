"""Embedding on a GPU: tether's ``LocalEmbedder`` against a plain ``SentenceTransformer``.

    .venv/bin/python bench/gpu_embed.py [../shared/datasets/scifact] [--texts 5183]
        [--rounds 3] [--cpu-texts 500] [--eval] [--json OUT]

What it measures, on the machine it runs on (a CUDA GPU when torch sees one; it runs on
a CPU too, where it compares the same things there):

- **throughput**: SciFact abstracts (title and text, cut by the model at 256 tokens)
  through ``SentenceTransformer(path, device=D).encode(texts)`` with its defaults (float32,
  batches of 32) — the peer — and through ``LocalEmbedder(device="auto").embed(texts)``
  with its defaults (on a CUDA GPU: float16 weights, one pass per 256 texts), and with
  ``precision="float32"``; the median of ``--rounds`` rounds, in alternating order. The
  plain encode on the machine's CPU runs on ``--cpu-texts`` texts for the "against a
  CPU" ratio.
- **agreement**: the mean and minimum cosine of each tether vector with the peer's.
- ``--eval``: SciFact nDCG@10 and Recall@100 of hybrid search (``tether eval``) with the
  corpus embedded in float16 and in float32 on the same device, to show that half
  precision keeps retrieval quality (the goal: within 0.005 nDCG@10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def corpus_texts(directory: Path, limit: int) -> list[str]:
    texts = []
    with (directory / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            texts.append(f"{entry.get('title', '')}\n\n{entry.get('text', '')}".strip())
            if len(texts) == limit:
                break
    return texts


def cosines(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    ours = ours / np.linalg.norm(ours, axis=1, keepdims=True)
    return np.sum(ours * theirs, axis=1)


def throughput(texts: list[str], rounds: int, cpu_texts: int) -> dict[str, Any]:
    import torch
    from sentence_transformers import SentenceTransformer

    from tether.embed import LocalEmbedder, resolve_model_path
    from tether.embed.local import pick_device

    path = resolve_model_path()
    device = pick_device()
    gpu_name = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    log(f"device {device} ({gpu_name or 'CPU'}), torch {torch.__version__}, {len(texts)} texts")

    peer = SentenceTransformer(path, device=device, local_files_only=True)
    tether_auto = LocalEmbedder()
    tether_fp32 = LocalEmbedder(precision="float32")
    runs = {
        "sentence_transformers": lambda: np.asarray(peer.encode(texts), dtype=np.float32),
        "tether_auto": lambda: tether_auto.embed(texts),
        "tether_float32": lambda: tether_fp32.embed(texts),
    }
    seconds, outputs = alternating_rounds(runs, rounds)
    rates = {name: len(texts) / statistics.median(s) for name, s in seconds.items()}
    few = texts[:cpu_texts]
    cpu_rate = plain_cpu_rate(path, few)
    return {
        "device": device,
        "gpu": gpu_name,
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "texts": len(texts),
        "avg_chars": sum(map(len, texts)) / max(len(texts), 1),
        "rounds": rounds,
        "tether_auto_precision": tether_auto.precision,
        "tether_auto_encode_batch": tether_auto.encode_batch_size,
        "seconds": seconds,
        "texts_per_s": rates,
        "cpu_plain_encode_texts_per_s": cpu_rate,
        "cpu_texts": len(few),
        "ratio_tether_auto_over_plain_same_device": rates["tether_auto"]
        / rates["sentence_transformers"],
        "ratio_tether_auto_over_plain_cpu": rates["tether_auto"] / cpu_rate,
        "cosine_with_plain": agreement_with_plain(outputs),
    }


def alternating_rounds(
    runs: dict[str, Callable[[], np.ndarray]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """One warm-up call each (load, allocate, pick kernels), then ``rounds`` timed rounds,
    every other one in reverse order; each run's seconds and its last output."""
    for fn in runs.values():
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, np.ndarray] = {}
    for r in range(rounds):
        order = list(runs.items())
        if r % 2:
            order.reverse()
        for name, fn in order:
            started = time.perf_counter()
            outputs[name] = fn()
            seconds[name].append(time.perf_counter() - started)
            log(f"  round {r + 1} {name}: {seconds[name][-1]:.2f}s")
    return seconds, outputs


def plain_cpu_rate(path: str, texts: list[str]) -> float:
    """Texts per second of a plain encode on this machine's CPU, after a warm-up."""
    from sentence_transformers import SentenceTransformer

    cpu_peer = SentenceTransformer(path, device="cpu", local_files_only=True)
    cpu_peer.encode(texts[:16])
    started = time.perf_counter()
    cpu_peer.encode(texts)
    return len(texts) / (time.perf_counter() - started)


def agreement_with_plain(outputs: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    agreement = {}
    for name in ("tether_auto", "tether_float32"):
        cos = cosines(outputs[name], outputs["sentence_transformers"])
        agreement[name] = {"mean": float(cos.mean()), "min": float(cos.min())}
    return agreement


def quality(directory: Path) -> dict[str, Any]:
    from tether import Settings
    from tether.eval import beir

    results = {}
    for precision in ("auto", "float32"):
        started = time.perf_counter()
        settings = Settings.load(rag={"embeddings": {"enabled": True, "precision": precision}})
        report = beir.run(directory, settings=settings).report
        results[precision] = report.to_dict() | {"seconds": time.perf_counter() - started}
        log(f"  eval precision={precision}: nDCG@10 {report.ndcg_at_10:.4f}")
    results["ndcg_difference"] = results["auto"]["ndcg@10"] - results["float32"]["ndcg@10"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="../shared/datasets/scifact", type=Path)
    parser.add_argument("--texts", type=int, default=5183)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu-texts", type=int, default=500)
    parser.add_argument("--eval", action="store_true", help="also SciFact nDCG@10 per precision")
    parser.add_argument("--json", type=Path, help="write the numbers here as JSON")
    args = parser.parse_args()

    data: dict[str, Any] = {"throughput": throughput(
        corpus_texts(args.dataset, args.texts), args.rounds, args.cpu_texts
    )}  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(data, indent=2))
    t = data["throughput"]
    print(
        f"== Embedding on {t['device']} ({t['gpu'] or 'CPU'}): {t['texts']:,} SciFact abstracts,"
        f" {t['avg_chars']:.0f} chars avg, median of {t['rounds']} rounds"
    )
    rows = [
        ("SentenceTransformer(path, device).encode (defaults: float32, batch 32)",
         "sentence_transformers"),
        (f"tether LocalEmbedder().embed (auto: {t['tether_auto_precision']},"
         f" batch {t['tether_auto_encode_batch']})", "tether_auto"),
        ("tether LocalEmbedder(precision='float32').embed", "tether_float32"),
    ]  # fmt: skip
    for label, key in rows:
        cos = t["cosine_with_plain"].get(key)
        agree = f"  cosine with plain: mean {cos['mean']:.5f}, min {cos['min']:.5f}" if cos else ""
        print(f"  {label}: {t['texts_per_s'][key]:,.0f} texts/s{agree}")
    print(
        f"  plain encode on this machine's CPU ({t['cpu_threads']} threads, {t['cpu_texts']}"
        f" texts): {t['cpu_plain_encode_texts_per_s']:,.1f} texts/s"
    )
    same, cpu = t["ratio_tether_auto_over_plain_same_device"], t["ratio_tether_auto_over_plain_cpu"]
    print(
        f"ratio tether(auto)/plain encode, same device: {same:.2f}x;"
        f" against plain encode on the CPU: {cpu:.1f}x"
    )
    if args.eval:
        data["quality"] = quality(args.dataset)
        if args.json:
            args.json.write_text(json.dumps(data, indent=2))
        q = data["quality"]
        for precision in ("auto", "float32"):
            print(
                f"SciFact hybrid, corpus embedded with precision={precision}: nDCG@10"
                f" {q[precision]['ndcg@10']:.4f}, Recall@100 {q[precision]['recall@100']:.4f}"
                f" (indexed and scored in {q[precision]['seconds']:.0f} s)"
            )
        print(f"nDCG@10 auto - float32: {q['ndcg_difference']:+.4f} (goal: within 0.005)")


if __name__ == "__main__":
    main()
