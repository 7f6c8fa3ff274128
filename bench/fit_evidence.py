"""Fit the evidence model's weights on every grounding source together, and say how well
a fit carries to a source it never saw.

    .venv/bin/python bench/fit_evidence.py [--features FILE] [--collect]

The judgment (``tether/retrieve/evidence.py``) is a logistic model over a candidate's
cosine and coverage and the question's missing share and agreement; a question is
grounded when its best candidate's evidence reaches ``rag.min_relevance``. This script:

1. asks every question of every source with today's settings and records, per question,
   those signals for each reranked candidate (from ``debug["grounding"]``), whether a
   distinctive term was absent, and whether a clearly closer match lay in the wider
   scope. The sources: the PDF manuals (``bench/manuals``), the eleven documentation
   sets of ``bench/docsets`` (HTML of six generators, Markdown, GNU Info, man pages,
   reStructuredText sources) and the SciFact-derived set (claims among their nearest
   uncited abstracts, as ``tether eval --grounding`` builds it). The signals are kept
   in ``--features`` (default ``../bench-results/evidence-features.json``) and
   collected again only with ``--collect`` or when the file is missing;
2. fits the weights by logistic regression with balanced classes, as today's were fitted:
   each source weighs the same and, inside a source, the answerable questions half, the
   unanswerable and the cross-scope ones a quarter each (weighing the three kinds the
   same instead buys balanced accuracy by refusing more answerable questions: it moves
   the operating point, not the frontier). A question's example is its best candidate
   under the weights being fitted (found again after each fit, until the choice
   settles);
3. prints, per source, the balanced accuracy at ``min_relevance`` 0.4 and 0.5 of today's
   weights (:data:`~tether.retrieve.evidence.CALIBRATED`), of the fit on all sources, and
   of the fit on the other sources only (leave one source out: how the weights carry to a
   kind of document they were not fitted on), with the spread between sources.

The accuracy here is the judgment's alone: a question counts as grounded when its best
candidate reaches the threshold and the wider scope held no clearly closer match (as
recorded with today's weights). ``tether eval --grounding`` measures the whole result.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_FEATURES = HERE.parent.parent / "bench-results" / "evidence-features.json"
SCIFACT = HERE.parent.parent / "shared" / "datasets" / "scifact"
#: The PDF manuals, then every documentation set of ``bench/docsets`` (each folder with
#: its ``questions.json``), in the order ``tether eval`` reports them.
DOCUMENT_SOURCES = {
    "manuals": HERE / "manuals" / "questions.json",
    **{
        name: HERE / "docsets" / name / "questions.json"
        for name in (
            "flask",
            "docker",
            "git",
            "rust-reference",
            "sqlite",
            "nodejs",
            "m4",
            "pytest",
            "sdl",
            "iproute2",
            "gnu-info",
        )
    },
}
KINDS = ("answerable", "unanswerable", "cross_scope")
#: Each kind's share of a source's weight in the fit: the classes balanced.
SHARES = {"answerable": 0.5, "unanswerable": 0.25, "cross_scope": 0.25}
#: cosine, coverage, missing, agreement: the order of a weight vector (then the bias).
SIGNALS = ("cosine", "coverage", "missing", "agreement")
L2 = 1e-3


def record(kind: str, result: Any) -> dict[str, Any]:
    """One question's signals, from its retrieval's debug record."""
    from tether.eval.grounding import closer_elsewhere

    grounding = result.debug.get("grounding", {})
    candidates = [
        [min(1.0, max(0.0, e["cosine"] or 0.0)), e["coverage"]]
        for e in grounding.get("evidence", {}).values()
    ]
    return {
        "kind": kind,
        "candidates": candidates,
        "missing": grounding.get("missing", 0.0),
        "agreement": grounding.get("agreement") or 0.0,
        "distinctive_absent": bool(grounding.get("distinctive_absent")),
        "closer_elsewhere": closer_elsewhere(result),
        "grounded": result.grounded,
    }


def collect_documents(name: str, path: Path) -> list[dict[str, Any]]:
    from tether import Tether
    from tether.eval.documents import index_documents, load_question_set

    qset = load_question_set(path)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tether-fit-") as tmp, Tether(Path(tmp) / "t.db") as t:
        index_documents(t, qset)
        for q in qset.questions:
            level, where = q.asked_in
            key = "session_id" if level == "session" else "workspace_id"
            result = t.retrieve(q.question, scope=level, **{key: where})
            rows.append(record(q.kind, result))
    print(f"  {name}: {len(rows)} questions", file=sys.stderr)
    return rows


def collect_scifact(directory: Path) -> list[dict[str, Any]]:
    from tether import Tether
    from tether.eval.beir import load_beir
    from tether.eval.grounding import index_layout, retrieve_claim, select_claims

    dataset = load_beir(directory, split="test")
    corpus = {entry.id: entry for entry in dataset.corpus()}
    layout = select_claims(dataset, corpus, claims=100, distractors=10)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tether-fit-") as tmp, Tether(Path(tmp) / "t.db") as t:
        index_layout(t, layout, corpus)
        for kind, claim, scope in layout.questions():
            rows.append(record(kind, retrieve_claim(t, claim, scope)))
    print(f"  scifact: {len(rows)} questions", file=sys.stderr)
    return rows


def collect(path: Path) -> dict[str, list[dict[str, Any]]]:
    started = time.perf_counter()
    print("collecting the signals of every question (a few minutes)", file=sys.stderr)
    sources = {name: collect_documents(name, p) for name, p in DOCUMENT_SOURCES.items()}
    sources["scifact"] = collect_scifact(SCIFACT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sources))
    print(f"  {time.perf_counter() - started:.0f} s; saved in {path}", file=sys.stderr)
    return sources


# -- the model --------------------------------------------------------------------------


def evidence(weights: np.ndarray, row: dict[str, Any]) -> tuple[float, int]:
    """The best candidate's evidence under ``weights`` and its index (-1: no candidate)."""
    if not row["candidates"]:
        return 0.0, -1
    c = np.asarray(row["candidates"], dtype=float)
    logits = (
        weights[0] * c[:, 0]
        + weights[1] * c[:, 1]
        + weights[2] * row["missing"]
        + weights[3] * row["agreement"]
        + weights[4]
    )
    best = int(np.argmax(logits))
    value = 1.0 / (1.0 + math.exp(-logits[best]))
    return value * (0.25 if row["distinctive_absent"] else 1.0), best


def judged(weights: np.ndarray, rows: list[dict[str, Any]], threshold: float) -> dict[str, float]:
    """Per kind, the share judged right at ``threshold``."""
    right: dict[str, list[bool]] = {kind: [] for kind in KINDS}
    for row in rows:
        value, _ = evidence(weights, row)
        grounded = value >= threshold and not row["closer_elsewhere"]
        right[row["kind"]].append(grounded if row["kind"] == "answerable" else not grounded)
    return {kind: float(np.mean(v)) for kind, v in right.items() if v}


def balanced(weights: np.ndarray, rows: list[dict[str, Any]], threshold: float) -> float:
    """The mean over the kinds of the share judged right at ``threshold``."""
    return float(np.mean(list(judged(weights, rows, threshold).values())))


def fit(sources: dict[str, list[dict[str, Any]]], start: np.ndarray) -> np.ndarray:
    """Weights by logistic regression on each question's best candidate (see the module
    docstring), the choice of candidate found again after each fit."""
    weights = start.copy()
    for _ in range(6):
        x, y, w = [], [], []
        for rows in sources.values():
            counts = {k: sum(1 for r in rows if r["kind"] == k) for k in KINDS}
            for row in rows:
                if row["distinctive_absent"] or not row["candidates"]:
                    continue  # the factor decides these, whatever the weights
                _, best = evidence(weights, row)
                cos, cov = row["candidates"][best]
                x.append([cos, cov, row["missing"], row["agreement"], 1.0])
                y.append(1.0 if row["kind"] == "answerable" else 0.0)
                w.append(SHARES[row["kind"]] / (len(sources) * counts[row["kind"]]))
        new = _logistic(np.asarray(x), np.asarray(y), np.asarray(w), weights)
        if np.allclose(new, weights, atol=1e-4):
            return new
        weights = new
    return weights


def _logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Weighted logistic regression by Newton's method, a light L2 on all but the bias."""
    beta = start.copy()
    ridge = np.diag([L2] * (x.shape[1] - 1) + [0.0])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        gradient = x.T @ (w * (p - y)) + ridge @ beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + ridge
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=Path, default=DEFAULT_FEATURES)
    parser.add_argument("--collect", action="store_true", help="ask every question again")
    args = parser.parse_args(argv)
    from tether.retrieve.evidence import CALIBRATED

    if args.collect or not args.features.is_file():
        sources = collect(args.features)
    else:
        sources = json.loads(args.features.read_text())
    today = np.asarray(
        [CALIBRATED.cosine, CALIBRATED.coverage, CALIBRATED.missing, CALIBRATED.agreement,
         CALIBRATED.bias]
    )  # fmt: skip
    for name, rows in sources.items():  # today's weights must give today's verdicts
        same = sum(
            (evidence(today, r)[0] >= 0.4 and not r["closer_elsewhere"]) == r["grounded"]
            for r in rows
        )
        print(f"{name}: today's weights give the recorded verdict for {same} of {len(rows)}")
    pooled = fit(sources, today)
    held_out = {
        name: fit({n: r for n, r in sources.items() if n != name}, today) for name in sources
    }
    print("balanced accuracy of the judgment (best candidate >= threshold), per source")
    width = {n: max(9, len(n) + 1) for n in sources}  # a column per source, as wide as its name
    header = f"{'weights':<28}" + "".join(f"{n:>{width[n]}}" for n in sources)
    header += f"{'mean':>8}{'spread':>8}"
    for threshold in (0.4, 0.5):
        print(f"\nat min_relevance {threshold}")
        print(header)
        for label, by_source in (
            ("today's (CALIBRATED)", {n: today for n in sources}),
            ("fitted on all sources", {n: pooled for n in sources}),
            ("fitted on the others only", held_out),
        ):
            values = [balanced(by_source[n], sources[n], threshold) for n in sources]
            cells = "".join(f"{v:>{width[n]}.3f}" for n, v in zip(sources, values, strict=True))
            spread = max(values) - min(values)
            print(f"{label:<28}{cells}{np.mean(values):>8.3f}{spread:>8.3f}")
            grounded = [judged(by_source[n], sources[n], threshold)["answerable"] for n in sources]
            cells = "".join(f"{v:>{width[n]}.3f}" for n, v in zip(sources, grounded, strict=True))
            print(f"{'  answerable grounded':<28}{cells}")
    names = (*SIGNALS, "bias")
    first = max(8, *(len(n) + 2 for n in sources))
    print(f"\n{'weights':<{first}}" + " ".join(f"{n:>9}" for n in names))
    print(f"{'today':<{first}}" + " ".join(f"{v:>9.3f}" for v in today))
    print(f"{'all':<{first}}" + " ".join(f"{v:>9.3f}" for v in pooled))
    for name, weights in held_out.items():
        print(f"{'-' + name:<{first}}" + " ".join(f"{v:>9.3f}" for v in weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
