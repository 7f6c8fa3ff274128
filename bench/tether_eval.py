"""``tether eval``'s numbers in one run, each beside the command that made it.

    .venv/bin/python bench/tether_eval.py ../shared/datasets/scifact --store scifact.db
    .venv/bin/python bench/tether_eval.py ../shared/datasets/scifact --store scifact.db \\
        --no-grounding --json eval.json

Runs, with the defaults (the local all-MiniLM-L6-v2 model, no LLM):

- ``tether eval DATASET --db STORE --json``: hybrid retrieval, nDCG@10 and Recall@100;
- the same with ``--lexical-only`` (FTS5 alone) and with ``--pipeline`` (``retrieve`` on
  every query: its nDCG@10, context recall, grounded share and threshold table);
- ``tether eval bench/manuals bench/docsets/flask ... bench/docsets/gnu-info --grounding
  --json``: grounding on the real-document question sets (the PDF manuals and the eleven
  documentation sets of ``bench/docsets``), over the sets whose documents are fetched
  (``bench/manuals/fetch.py``, ``bench/docsets/fetch.py --all``); a set without them is
  left out, and the output says so.

``--store`` is a tether store holding DATASET indexed with the local model (``tether eval
DATASET --db S`` or ``bench/backends.py --keep S`` makes one). It is only read: the
SciFact runs work on a copy of it (the pipeline writes audit rows), and the commands shown
name the store, since they measure the same. Each run's table is printed; ``--json``
keeps every run's command and its JSON (``tether eval --json``'s keys, docs/cli.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from _harness import REPO, Table, log, shown_command, shown_path  # noqa: E402

DEFAULT_DATASET = REPO.parent / "shared/datasets/scifact"
#: The real-document question sets of ``tether eval --grounding``, in column order.
DOCSETS = ("flask", "docker", "git", "rust-reference", "sqlite", "nodejs", "m4", "pytest",
           "sdl", "iproute2", "gnu-info")  # fmt: skip
GROUNDING_SETS = (BENCH / "manuals", *(BENCH / "docsets" / name for name in DOCSETS))
#: The SciFact runs: the flags each adds to ``tether eval DATASET --db STORE --json``.
RETRIEVAL_RUNS = {"hybrid": [], "lexical": ["--lexical-only"], "pipeline": ["--pipeline"]}
RUN_LABELS = {"hybrid": "hybrid (the default)", "lexical": "lexical-only (FTS5 bm25)",
              "pipeline": "hybrid stage of the --pipeline run"}  # fmt: skip


def tether_cli() -> Path:
    """The ``tether`` command of this Python's environment."""
    beside = Path(sys.executable).with_name("tether")
    return beside if beside.exists() else Path(shutil.which("tether") or "tether")


def missing_documents(question_set: Path) -> list[Path]:
    """The documents of a question set that are not fetched: the PDF manuals go in
    ``pdfs/<name>.pdf``, a documentation set's pages at each document's ``file``."""
    data = json.loads((question_set / "questions.json").read_text(encoding="utf-8"))
    paths = [
        question_set / d["file"] if "file" in d else question_set / "pdfs" / f"{d['name']}.pdf"
        for d in data["documents"]
    ]
    return [p for p in paths if not p.is_file()]


def fetched_sets(sets: list[Path]) -> tuple[list[Path], dict[str, str]]:
    """The sets whose documents are all there, and why each other one is left out."""
    ready, skipped = [], {}
    for question_set in sets:
        missing = missing_documents(question_set)
        if missing:
            skipped[f"grounding: {question_set.name}"] = (
                f"{len(missing)} of its documents are not fetched"
                f" (run: {fetch_command(question_set)})"
            )
        else:
            ready.append(question_set)
    return ready, skipped


def fetch_command(question_set: Path) -> str:
    """How to fetch a set's documents: the manuals' own ``fetch.py``, or the
    documentation sets' shared one given the set's folder."""
    own = question_set / "fetch.py"
    if own.is_file():
        return f"python3 {shown_path(own)}"
    return f"python3 {shown_path(question_set.parent / 'fetch.py')} {shown_path(question_set)}"


def run_eval(argv: list[str], shown_as: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one ``tether eval ... --json``: its command, as a reader reruns it (each
    argument in ``shown_as`` replaced), and its JSON, or the end of its stderr when it
    failed."""
    command = shown_command([(shown_as or {}).get(a, a) for a in argv])
    log(f"eval: {command}")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        log(f"eval: FAILED (exit {done.returncode})")
        return {"command": command, "error": done.stderr.strip()[-2000:]}
    return {"command": command, "result": json.loads(done.stdout)}


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Every run, SciFact on a copy of the store; the JSON of ``--json``."""
    cli, dataset, store = str(tether_cli()), str(args.dataset.resolve()), args.store.resolve()
    data: dict[str, Any] = {"dataset": shown_path(dataset), "store": shown_path(store),
                            "runs": {}, "skipped": {}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tether-eval-") as tmp:
        copy = Path(tmp) / store.name
        for suffix in ("", "-wal"):
            if Path(f"{store}{suffix}").is_file():
                shutil.copyfile(f"{store}{suffix}", f"{copy}{suffix}")
        for name, flags in RETRIEVAL_RUNS.items():
            argv = [cli, "eval", dataset, "--db", str(copy), *flags, "--json"]
            data["runs"][name] = run_eval(argv, {str(copy): str(store)})
    if args.no_grounding:
        data["skipped"]["grounding"] = "--no-grounding"
        return data
    sets, data["skipped"] = fetched_sets(args.sets)
    if sets:
        argv = [cli, "eval", *(str(s.resolve()) for s in sets), "--grounding", "--json"]
        data["runs"]["grounding"] = run_eval(argv)
    return data


# -- the tables: one reader of the JSON, for this script's output and for RESULTS.md -----


def eval_tables(data: dict[str, Any]) -> list[Table]:
    """The tables of a run's JSON (``--json``), each with its command."""
    runs = {name: run for name, run in data["runs"].items() if "result" in run}
    tables = []
    if any(name in runs for name in RETRIEVAL_RUNS):
        tables.append(retrieval_table(runs))
    if "pipeline" in runs and runs["pipeline"]["result"].get("pipeline"):
        tables += pipeline_tables(runs["pipeline"])
    if "grounding" in runs:
        tables += grounding_tables(runs["grounding"])
    return tables


def eval_notes(data: dict[str, Any]) -> list[str]:
    """A line for each run that failed and each one left out."""
    failed = [f"{name}: FAILED: {run['command']}: {(run['error'].splitlines() or [''])[-1]}"
              for name, run in data["runs"].items() if "error" in run]  # fmt: skip
    return failed + [f"{what}: skipped, {why}" for what, why in data["skipped"].items()]


def retrieval_table(runs: dict[str, Any]) -> Table:
    rows = []
    for name in RETRIEVAL_RUNS:
        if name in runs:
            r = runs[name]["result"]
            rows.append([RUN_LABELS[name], f"{r['ndcg@10']:.4f}", f"{r['recall@100']:.4f}",
                         f"{r['latency_ms_p50']:.1f}", f"{r['latency_ms_p95']:.1f}",
                         runs[name]["command"]])  # fmt: skip
    first = next(runs[n]["result"] for n in RETRIEVAL_RUNS if n in runs)
    title = (f"Retrieval on {first['dataset']}: {first['queries']:,} queries,"
             f" {first['documents']:,} documents")  # fmt: skip
    return Table(title, ["run", "nDCG@10", "Recall@100", "p50 ms", "p95 ms", "command"], rows)


def pipeline_tables(run: dict[str, Any]) -> list[Table]:
    """The pipeline's measures, and its relevance threshold against answered queries."""
    r = run["result"]
    p = r["pipeline"]
    measures = [
        ["hybrid stage alone, nDCG@10", f"{r['ndcg@10']:.4f}"],
        ["pipeline (reranked order), nDCG@10", f"{p['ndcg@10']:.4f}"],
        ["context recall (a relevant document cited in the context)", f"{p['context_recall']:.4f}"],
        ["grounded (evidence >= min_relevance)", f"{p['grounded']:.4f}"],
        ["chunks in the context, mean", f"{p['mean_context_chunks']:.2f}"],
        ["queries skipped by the decision", f"{p['skipped']} of {r['queries']}"],
        ["pipeline p50 / p95 ms", f"{p['latency_ms_p50']:.1f} / {p['latency_ms_p95']:.1f}"],
    ]
    trade = [[f"{t['threshold']:.2f}", f"{t['answered']:.3f}", f"{t['precision_at_k']:.3f}",
              f"{t['recall_any']:.3f}"] for t in p["thresholds"]]  # fmt: skip
    k = p["thresholds"][0].get("k", 10) if p["thresholds"] else 10
    return [
        Table("The pipeline", ["measure", "value"], measures, run["command"]),
        Table("Relevance threshold: queries answered against precision",
              ["threshold", "answered", f"precision@{k}", "a relevant chunk kept"], trade,
              run["command"]),
    ]  # fmt: skip


#: The grounding measures of one real-document source, as ``tether eval`` labels them.
GROUNDING_MEASURES: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...] = (
    ("balanced grounding accuracy", lambda s: s["balanced_accuracy"]),
    ("right on answerable (grounded)", lambda s: s["rates"]["answerable"]),
    ("right on unanswerable (refused)", lambda s: s["rates"]["unanswerable"]),
    ("right on cross-scope (refused, wider)", lambda s: s["rates"]["cross_scope"]),
    ("answer cited (its page / file)", lambda s: s["answer_page_in_context"]),
    ("answer cited first", lambda s: s["hit_at_1"]),
    ("answer among the first max_chunks reranked", lambda s: s["answer_page_ranked"]),
    ("answer's words in a cited passage", lambda s: s["answer_text_cited"]),
)


def grounding_tables(run: dict[str, Any]) -> list[Table]:
    """One column per source: the measures, then the threshold table."""
    result = run["result"]
    sources = result.get("sources", [result])
    names = [s.get("name", "?") for s in sources]
    rows = [[label, *(_cell(read, s) for s in sources)] for label, read in GROUNDING_MEASURES]
    lost = [" / ".join(str(n) for n in s.get("lost", {}).values()) or "-" for s in sources]
    rows.append(["where lost: not retrieved / ranked below / judged out", *lost])
    for key in dict.fromkeys(k for s in sources for k in s.get("quality", {})):
        rows.append([key.replace("_", " "), *(s.get("quality", {}).get(key, "-") for s in sources)])
    rows.append(["latency p50 ms", *(s.get("latency_ms_p50", "-") for s in sources)])
    measures = Table("Grounding, side by side", ["measure", *names], rows, run["command"])
    return [measures, threshold_table(sources, names, run["command"])]


def threshold_table(sources: list[dict[str, Any]], names: list[str], command: str) -> Table:
    """Each source's rate per kind if grounded meant best relevance >= t."""
    by_t: dict[float, list[dict[str, float]]] = {}
    for source in sources:
        for row in source.get("thresholds", []):
            by_t.setdefault(row["threshold"], []).append(row)
    rows = []
    for t, per_source in by_t.items():
        balanced = [r["balanced"] for r in per_source]
        cells = [f"{r['answerable']:.2f} / {r['unanswerable']:.2f} / {r['cross_scope']:.2f}"
                 f" / {r['balanced']:.3f}" for r in per_source]  # fmt: skip
        rows.append([f"{t:.2f}", *cells, f"{statistics.fmean(balanced):.3f}",
                     f"{min(balanced):.3f}"])  # fmt: skip
    headers = ["t", *(f"{n}: answerable / unanswerable / cross / balanced" for n in names),
               "mean balanced", "min balanced"]  # fmt: skip
    return Table("Grounded if best relevance >= t", headers, rows, command)


def _cell(read: Callable[[dict[str, Any]], Any], source: dict[str, Any]) -> str:
    try:
        value = read(source)
    except (KeyError, TypeError):
        return "-"
    return "-" if value is None else f"{value:.4f}"


# -- main --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "dataset",
        nargs="?",
        type=Path,
        default=DEFAULT_DATASET,
        help="a BEIR dataset folder (default: SciFact)",
    )
    parser.add_argument(
        "--store",
        type=Path,
        required=True,
        help="DATASET indexed by tether with the local model (only read)",
    )
    parser.add_argument(
        "--sets",
        type=Path,
        nargs="+",
        default=list(GROUNDING_SETS),
        help="question-set folders for the grounding run",
    )
    parser.add_argument("--no-grounding", action="store_true", help="the SciFact runs only")
    parser.add_argument("--json", type=Path, help="write every run's command and JSON here")
    args = parser.parse_args(argv)
    if not args.store.is_file():
        parser.error(f"no store at {args.store}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = run_all(args)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    for found in eval_tables(data):
        print(found.text(), end="\n\n")
    for note in eval_notes(data):
        print(note)
    return 1 if any("error" in run for run in data["runs"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
