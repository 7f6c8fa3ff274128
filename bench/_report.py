"""``bench/all.py``'s report: the summary's goal lines, and ``RESULTS.md`` rendered from
a run's ``--out`` folder (``summary.json``, each section's output and JSON). The numbers
all come from the run; the prose here only says how each section measures."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import machine_description, markdown_table, shown_command, shown_path
from tether_eval import eval_notes, eval_tables

SUMMARY_HEADER = ["measure", "tether", "peer", "ratio", "ratio of", "goal", "met"]


@dataclass
class Goal:
    """One line of the summary."""

    what: str
    tether: str
    peer: str
    ratio: float | None  # tether / peer, as ``unit`` says
    unit: str
    goal: str
    met: bool | None  # None: no goal, or not measured

    def cells(self) -> list[str]:
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}x"
        met = {True: "yes", False: "NO", None: ""}[self.met]
        return [self.what, self.tether, self.peer, ratio, self.unit, self.goal, met]


def table(header: list[str], rows: list[list[str]]) -> str:
    """The summary as text, its columns lined up."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


# -- RESULTS.md ---------------------------------------------------------------------------

INTRO = """\
Every number below comes from one run of `bench/all.py`, which wrote this file: do not
edit it by hand. `bench/all.py --render-only DIR` renders it again from a run's `--out`
folder. Rerun a section's command to check its numbers; compare ratios within one run,
not absolute times across machines (the same code has run 2.5-4.8x apart on two 2-core
machines). `bench/README.md` says what each script measures; `docs/evaluation.md` and
`docs/performance.md` say what the numbers mean for a user."""

#: Each section's heading and how it measures, in the order all.py runs them.
SECTION_NOTES: dict[str, tuple[str, str]] = {
    "scifact": ("SciFact against the peers, top 10", """\
SciFact: 5,183 abstracts, 300 claims. Every system works on the same chunks and the same
vectors (the local model's), query embedding excluded; each is asked for its top 10, and
nDCG@10 is scored on documents. LanceDB hybrid is FTS + a flat vector search fused by
RRF; Chroma is HNSW (approximate)."""),
    "scifact-k100": ("SciFact against the peers, top 100", """\
The same, each system asked for its top 100 (for recall@100)."""),
    "scifact-chars": ("SciFact chunked by characters, top 100", """\
SciFact chunked by characters (`rag.chunk_by = "chars"`), each system asked for its top
100: the setup the absolute goals (hybrid <= 7 ms, lexical <= 4 ms) were set on."""),
    "scale": ("Indexing, embedding and synthetic retrieval at scale", """\
1a: `Tether.add` of SciFact with embeddings off against bm25s and LangChain's BM25
indexing the ready-made chunks. 1b: `LocalEmbedder` (and the onnx-int8 runtime) against a
plain `SentenceTransformer.encode`, same model and texts. 2: retrieval over synthetic
chunks (Zipfian words, random 384-dimensional vectors, query vectors precomputed, one
BLAS thread for every system) against bm25s, numpy, faiss and LangChain."""),
    "cold": ("The first call", """\
A cold `tether search` (a new process, hybrid) on SciFact's chunks under each local
runtime, against a new process that loads all-MiniLM-L6-v2 with sentence-transformers and
embeds the query; `Tether.add` with embeddings on under each runtime."""),
    "stall": ("A write does not stall the next search", """\
Synthetic chunks of 384 dimensions, the whole store in scope: the first vector search
after a write, in this process and in another, against a steady search and against a
full reload of the vectors (what a first search paid before change tracking)."""),
    "vectors": ("Vectors at scale: the quantized scan", """\
Vectors made from SciFact's real vectors plus noise, real claims as queries: the
quantized scan (sign bits, then float32 rescoring of the best rows) against the exact
scan, in the whole store and in every other 20-row document."""),
    "backends": ("SQLite against PostgreSQL", """\
SciFact on SQLite and on PostgreSQL + pgvector (the pgserver wheel), vectors copied,
query embedding included; then reader processes and one writer on each backend."""),
    "gpu": ("Embedding on a GPU", """\
Where torch sees a CUDA GPU: `LocalEmbedder` against a plain encode on the same GPU and
on the machine's CPU, and SciFact hybrid nDCG@10 with the corpus embedded in float16
and in float32."""),
    "eval": ("`tether eval`: retrieval quality and grounding", """\
`tether eval` with the defaults (the local all-MiniLM-L6-v2, no LLM): SciFact's BEIR test
split, each document ranked by its best chunk; grounding on the real-document question
sets (PDF manuals, Flask's HTML, Docker's Markdown), where balanced grounding accuracy is
the mean of the answerable, unanswerable and cross-scope rates."""),
}  # fmt: skip

NOT_IN_THIS_RUN = """\
## Not part of this run

These scripts measure what `bench/all.py` does not run, and print their own numbers
(`bench/README.md` says what each measures): `fusion_study.py`, `int8_quality.py`,
`token_counts.py`, `add_cost.py`, `chunk_memory.py`, `vector_kernels.py`,
`fts_churn.py`, `scifact_lexical.py`, `pipeline_overhead.py`, `retrieve_latency.py`,
`load.py`, `kill9.py`, `upload_crash.py` (see `upload_crash.md`), `html_extraction.py`
(see `html_extraction.md`) and `manuals/oracle_judge.py`."""


def write_results(out: Path, target: Path) -> None:
    target.write_text(render_results(out), encoding="utf-8")


def render_results(out: Path) -> str:
    """``RESULTS.md`` of the run whose ``--out`` folder is ``out``."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    parts = [results_header(summary, out), summary_markdown(summary)]
    parts += [section_markdown(name, summary, out) for name in sections_of(summary, out)]
    parts.append(NOT_IN_THIS_RUN)
    return "\n\n".join(part.strip() for part in parts) + "\n"


def results_header(summary: dict[str, Any], out: Path) -> str:
    """The title, what the file is, and when, on what and with which command it ran."""
    machine = summary["machine"]
    dirty = machine.get("tree_dirty")
    if dirty is None:  # a summary.json from before tree_dirty was recorded
        dirty = bool(machine.get("src_changed_files"))
    date = summary.get("date") or time.strftime(
        "%Y-%m-%d %H:%M", time.localtime((out / "summary.json").stat().st_mtime)
    )
    python = shown_path(summary.get("python") or ".venv/bin/python")
    lines = [
        "# Results",
        "",
        INTRO,
        "",
        f"- **date**: {date}",
        f"- **commit**: `{machine.get('commit') or 'unknown'}`"
        + (" + local changes" if dirty else ""),
        f"- **machine**: {machine_description(machine)}",
        f"- **command**: `{shown_command([python, *summary['argv']])}`",
    ]
    reruns = summary.get("reruns") or {}
    for name, when in reruns.items():
        commit = f"`{when.get('commit') or 'unknown'}`" + (
            " + local changes" if when.get("tree_dirty") else ""
        )
        lines.append(
            f"- **rerun**: `{name}` on {when.get('date')}, commit {commit} (`bench/all.py --into`)"
        )
    if summary.get("failed"):
        lines.append(f"- **sections that failed**: {', '.join(summary['failed'])}")
    return "\n".join(lines)


def summary_markdown(summary: dict[str, Any]) -> str:
    goals = [Goal(**g).cells() for g in summary["goals"]]
    body = markdown_table(SUMMARY_HEADER, goals) if goals else "No section with goals ran."
    return (
        "## Summary: tether against its peers\n\n"
        "One line per goal: ratio = tether / peer, of time (below 1x: tether faster) or of\n"
        "speed (above 1x: tether faster); met says whether the goal was met.\n\n" + body
    )


def sections_of(summary: dict[str, Any], out: Path) -> list[str]:
    """The sections the run asked for (older summaries: those that left output)."""
    if "sections" in summary:
        return list(summary["sections"])
    left = {path.stem for path in [*out.glob("*.txt"), *out.glob("*.json")]}
    return [name for name in SECTION_NOTES if name in left]


def section_markdown(name: str, summary: dict[str, Any], out: Path) -> str:
    """A section's heading, how it measures, its command and its tables."""
    title, how = SECTION_NOTES.get(name, (name, ""))
    parts = [f"## {title} (`{name}`)", how]
    skipped = summary.get("skipped", {}).get(name)
    if skipped:
        return "\n\n".join([*parts, f"Skipped in this run: {skipped}."])
    command = summary.get("commands", {}).get(name)
    if command:
        parts.append(f"`{command}`")
    if name in summary.get("failed", []):
        parts.append(f"**This section failed**: its stderr is `{name}.err` in the `--out` folder.")
    parts.append(section_tables(name, out))
    return "\n\n".join(parts)


def section_tables(name: str, out: Path) -> str:
    """The eval section's tables in Markdown, each with its command; any other
    section's tables as the script printed them."""
    data_path = out / f"{name}.json"
    if name == "eval" and data_path.is_file():
        data = json.loads(data_path.read_text(encoding="utf-8"))
        tables = [found.markdown() for found in eval_tables(data)]
        notes = [f"- {note}" for note in eval_notes(data)]
        return "\n\n".join([*tables, "\n".join(notes)])
    text_path = out / f"{name}.txt"
    printed = text_path.read_text(encoding="utf-8").strip("\n") if text_path.is_file() else ""
    return f"```text\n{printed}\n```" if printed else "No output."
