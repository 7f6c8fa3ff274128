"""Variants of the grounding judgment, replayed on every candidate of every question.

    .venv/bin/python bench/judgment_variants.py [--cache FILE] [--collect]

A question is grounded when the best of its reranked candidates has ``rag.min_relevance``
evidence (``tether/retrieve/evidence.py``) and the wider scope holds no clearly closer
match. This script asks every question of the twelve real-document sets once, with
today's settings, and keeps what the judgment read: the question's weighted terms, and
for each candidate (in scope, and in the wider scope, whether or not the question was
grounded) its text, context header, cosine and fused score. It then replays the judgment
with variants of how a candidate's evidence is made, and prints each variant's balanced
accuracy per set, its mean, and the shares of answerable, unanswerable and cross-scope
questions judged right.

Any signal can buy balanced accuracy by refusing more answerable questions (it moves the
operating point, not what the model can tell apart), so each variant is also shown at
the bias that grounds the most answerable questions without grounding fewer than
today's judgment does: a variant that helps raises the mean there.

The signals are kept in ``--cache`` (default ``../bench-results/judgment-variants.pkl``)
and collected again only with ``--collect`` or when the file is missing (a few minutes:
each set is indexed into a temporary store).
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import re
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from fit_evidence import DOCUMENT_SOURCES

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE.parent.parent / "bench-results" / "judgment-variants.pkl"
KINDS = ("answerable", "unanswerable", "cross_scope")
THRESHOLD = 0.4
MARGIN = 0.05  # rag.wider_scope_margin's default

# -- collecting ---------------------------------------------------------------------------


def collect(path: Path) -> list[dict[str, Any]]:
    """Every question of every set, with what its judgment read (see the docstring)."""
    import tether.retrieve.grounding as grounding
    from tether import Tether
    from tether.eval.documents import index_documents, load_question_set
    from tether.ingest.chunking import context_header

    calls: list[dict[str, Any]] = []
    original = grounding.Grounder.candidates

    def recorded(self: Any, question: str, vector: Any, top: Any, scope: Any, **kw: Any) -> Any:
        found, judged = original(self, question, vector, top, scope, **kw)
        rows = [
            {
                "document": c.hit.document_id,
                "text": c.hit.text,
                "header": context_header(c.hit.title, c.hit.section_title),
                "cosine": getattr(judged.evidence.get(c.hit.chunk_id), "cosine", None),
                "fused": c.fused,
            }
            for c in found
        ]
        call = {"question": question, "terms": judged.terms, "agreed": kw.get("agreed")}
        calls.append(call | {"rows": rows, "found": found})
        return found, judged

    grounding.Grounder.candidates = recorded  # type: ignore[method-assign]
    questions = []
    try:
        for name, questions_path in DOCUMENT_SOURCES.items():
            qset = load_question_set(questions_path)
            with (
                tempfile.TemporaryDirectory(prefix="tether-variants-") as tmp,
                Tether(Path(tmp) / "t.db") as t,
            ):
                index_documents(t, qset)
                for q in qset.questions:
                    calls.clear()
                    questions.append(_asked(t, name, q, calls))
            print(f"  {name}: {len(qset.questions)} questions", file=sys.stderr)
    finally:
        grounding.Grounder.candidates = original  # type: ignore[method-assign]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(questions))
    return questions


def _asked(t: Any, name: str, q: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One question asked, and the wider scope compared even when it was not grounded
    (the pipeline compares it only for a grounded answer)."""
    from tether.models import Scope

    level, where = q.asked_in
    session = where if level == "session" else None
    workspace = where if level != "session" else None
    result = t.retrieve(q.question, scope=level, session_id=session, workspace_id=workspace)
    scope = Scope.resolve(level, session_id=session, workspace_id=workspace)
    if len(calls) == 1 and calls[0]["found"]:
        t._retrieval().grounder.closer_elsewhere(
            q.question, scope, calls[0]["found"], vectors=True, session_id=session, filters=None
        )
    for call in calls:
        del call["found"]
    return {
        "set": name,
        "id": q.id,
        "kind": q.kind,
        "level": level,
        "grounded": result.grounded,
        "inside": set(t.store.scope_document_ids(scope)),
        "calls": list(calls),
    }


# -- replaying ----------------------------------------------------------------------------

#: A candidate's signals under one variant: (cosine, coverage, document, extra).
Signals = tuple[float | None, float, str, float]


def signals(
    questions: list[dict[str, Any]],
    coverage: Callable[[Any, dict[str, Any], str], float],
    extra: Callable[[dict[str, Any]], float] = lambda row: 0.0,
    absent_factor: float | None = None,
) -> list[list[dict[str, Any]]]:
    """Per question and call (in scope, then the wider scope): the question's missing
    share, agreement and distinctive factor (``absent_factor``, else evidence.py's), and
    each candidate's :data:`Signals`."""
    from tether.retrieve.evidence import DISTINCTIVE_ABSENT_FACTOR

    absent = DISTINCTIVE_ABSENT_FACTOR if absent_factor is None else absent_factor

    out = []
    for q in questions:
        calls = []
        for call in q["calls"]:
            terms = call["terms"]
            rows = [
                (row["cosine"], coverage(terms, row, call["question"]), row["document"], extra(row))
                for row in call["rows"]
            ]
            factor = absent if terms.distinctive_absent else 1.0
            calls.append(
                {"missing": terms.missing, "agreed": call["agreed"] or 0.0, "factor": factor}
                | {"rows": rows}
            )
        out.append(calls)
    return out


def verdicts(
    questions: list[dict[str, Any]],
    signals: list[list[dict[str, Any]]],
    weights: Any,
    beta: float,
    margin: float = MARGIN,
    threshold: float = THRESHOLD,
) -> list[bool]:
    """Whether each question is grounded: its best candidate at :data:`THRESHOLD`, and no
    candidate of the wider scope (outside the scope and the candidates' documents)
    :data:`MARGIN` (``margin``) better."""
    from tether.retrieve.evidence import LEXICAL

    def value(call: dict[str, Any], s: Signals) -> float:
        cosine, coverage, _, extra = s
        w = weights if cosine is not None else LEXICAL
        z = (
            w.cosine * max(0.0, min(1.0, cosine or 0.0))
            + w.coverage * coverage
            + w.missing * call["missing"]
            + (w.agreement * call["agreed"] + beta * extra if cosine is not None else 0.0)
            + w.bias
        )
        return call["factor"] / (1.0 + math.exp(-z))

    out = []
    for q, calls in zip(questions, signals, strict=True):
        if not calls:
            out.append(False)
            continue
        here = max((value(calls[0], s) for s in calls[0]["rows"]), default=0.0)
        grounded = here >= threshold
        if grounded and len(calls) > 1:
            seen = q["inside"] | {s[2] for s in calls[0]["rows"]}
            there = [value(calls[1], s) for s in calls[1]["rows"] if s[2] not in seen]
            grounded = max(there, default=0.0) < here + margin
        out.append(grounded)
    return out


def scores(questions: list[dict[str, Any]], grounded: list[bool]) -> dict[str, Any]:
    """Balanced accuracy per set, and the share of each kind judged right overall."""

    def right(q: dict[str, Any], g: bool) -> bool:
        if q["kind"] == "answerable":
            return g
        # (a cross-scope question is right when refused in its session, which then
        # suggests the workspace: every such question here is asked in a session)
        return not g and (q["kind"] == "unanswerable" or q["level"] == "session")

    per_set: dict[str, float] = {}
    for name in dict.fromkeys(q["set"] for q in questions):
        rates = []
        for kind in KINDS:
            group = [right(q, g) for q, g in zip(questions, grounded, strict=True)
                     if q["set"] == name and q["kind"] == kind]  # fmt: skip
            rates.append(sum(group) / len(group))
        per_set[name] = statistics.fmean(rates)
    kinds = {}
    for kind in KINDS:
        group = [right(q, g) for q, g in zip(questions, grounded, strict=True) if q["kind"] == kind]
        kinds[kind] = sum(group) / len(group)
    return {"sets": per_set, "kinds": kinds}


# -- the variants -------------------------------------------------------------------------


def _window(**constants: Any) -> Callable[[Any, dict[str, Any], str], float]:
    """The best window's coverage with some of evidence.py's constants changed."""
    import tether.retrieve.evidence as evidence

    def coverage(terms: Any, row: dict[str, Any], question: str) -> float:
        saved = {name: getattr(evidence, name) for name in constants}
        for name, value in constants.items():
            setattr(evidence, name, value)
        try:
            return evidence.best_window(terms, row["text"], row["header"])[0]
        finally:
            for name, value in saved.items():
                setattr(evidence, name, value)

    return coverage


def _top_word_required(share: float) -> Callable[[Any, dict[str, Any], str], float]:
    """Coverage times ``share`` when the question's highest-weighted word is neither in
    the best window nor in the header."""
    from tether.retrieve.evidence import _stems, best_window

    def coverage(terms: Any, row: dict[str, Any], question: str) -> float:
        value, window = best_window(terms, row["text"], row["header"])
        if not terms.weights:
            return value
        stem = max(terms.weights, key=lambda item: item[1])[0]
        held = _stems(window, terms.language) | _stems(row["header"] or "", terms.language)
        return value if stem in held else value * share

    return coverage


def _adjacent(bonus: float) -> Callable[[Any, dict[str, Any], str], float]:
    """Coverage plus ``bonus`` times the share of the question's consecutive terms that
    stand next to each other in the best window."""
    from tether.retrieve.evidence import best_window
    from tether.retrieve.fts import _TERM, _stem
    from tether.text import normalize_text

    def coverage(terms: Any, row: dict[str, Any], question: str) -> float:
        value, window = best_window(terms, row["text"], row["header"])
        stems = [stem for stem, _ in terms.weights]
        pairs = list(itertools.pairwise(stems))
        if not pairs:
            return value
        words = [_stem(w.casefold(), terms.language) for w in _TERM.findall(normalize_text(window))]
        beside = set(itertools.pairwise(words))
        return value + bonus * sum(pair in beside for pair in pairs) / len(pairs)

    return coverage


#: A question asking for a quantity, a size, a version or a default value.
_QUANTITY = re.compile(
    r"\bhow (many|much|long|big|large|old|often|far)\b"
    r"|\bwhat (is|are) the (default|maximum|minimum|limit|size|port|value|number)\b"
    r"|\b(which|what) (version|release|year|port|size)\b",
    re.IGNORECASE,
)


def _quantity(share: float) -> Callable[[Any, dict[str, Any], str], float]:
    """Coverage times ``share`` when the asked sentence wants a quantity (how many, how
    long, which version, what is the default...) and the best window holds no digit: the
    answer-type check, in its simplest form."""
    from tether.retrieve.evidence import asked_sentence, best_window

    def coverage(terms: Any, row: dict[str, Any], question: str) -> float:
        value, window = best_window(terms, row["text"], row["header"])
        wants = _QUANTITY.search(asked_sentence(question) or question)
        return value * share if wants and not re.search(r"\d", window) else value

    return coverage


class Variant(NamedTuple):
    label: str
    coverage: Callable[..., float]
    extra: Callable[..., float] = lambda row: 0.0
    beta: float = 0.0  # the extra signal's weight in the logit
    absent_factor: float | None = None  # None: evidence.py's DISTINCTIVE_ABSENT_FACTOR
    margin: float = MARGIN
    threshold: float = THRESHOLD  # rag.min_relevance


def variants() -> list[Variant]:
    """Each variant, today's first."""
    today = _window()
    return [
        Variant("today's", today),
        Variant("header counts 1/4 of a word", _window(HEADER_SHARE=0.25)),
        Variant("header counts 3/4 of a word", _window(HEADER_SHARE=0.75)),
        Variant("header counts a whole word", _window(HEADER_SHARE=1.0)),
        Variant("one-sentence windows", _window(WINDOW_SENTENCES=1)),
        Variant("three-sentence windows", _window(WINDOW_SENTENCES=3)),
        Variant("25-word pieces", _window(WINDOW_WORDS=25)),
        Variant("60-word pieces", _window(WINDOW_WORDS=60)),
        Variant("top word required (x0.75)", _top_word_required(0.75)),
        Variant("adjacent terms (+0.1)", _adjacent(0.1)),
        Variant("a quantity needs a digit (x0.5)", _quantity(0.5)),
        Variant("fused score (+0.5 x RRF/max)", today, lambda row: row["fused"] * 61 / 2, 0.5),
        Variant("distinctive absent: x0.1", today, absent_factor=0.1),
        Variant("distinctive absent: x0.6", today, absent_factor=0.6),
        Variant("wider scope margin 0", today, margin=0.0),
        Variant("wider scope margin 0.1", today, margin=0.1),
        Variant("min_relevance 0.43", today, threshold=0.43),
        Variant("min_relevance 0.45", today, threshold=0.45),
    ]


def _row(label: str, result: dict[str, Any]) -> str:
    sets, kinds = result["sets"], result["kinds"]
    cells = "".join(f"{v:>7.3f}" for v in sets.values())
    return (
        f"{label:<36}{cells}{statistics.fmean(sets.values()):>7.3f}{min(sets.values()):>7.3f}"
        + "".join(f"{kinds[k]:>7.3f}" for k in KINDS)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--collect", action="store_true", help="ask every question again")
    args = parser.parse_args(argv)
    from tether.retrieve.evidence import CALIBRATED, Weights

    if args.collect or not args.cache.is_file():
        print("asking every question of every set (a few minutes)", file=sys.stderr)
        questions = collect(args.cache)
    else:
        questions = pickle.loads(args.cache.read_bytes())
    names = list(dict.fromkeys(q["set"] for q in questions))
    print(f"{'variant':<36}" + "".join(f"{n[:6]:>7}" for n in names)
          + f"{'mean':>7}{'min':>7}{'answ':>7}{'unans':>7}{'cross':>7}")  # fmt: skip
    for v in variants():
        found = signals(questions, v.coverage, v.extra, v.absent_factor)
        result = scores(
            questions, verdicts(questions, found, CALIBRATED, v.beta, v.margin, v.threshold)
        )
        if v.label == "today's":
            same = sum(
                g == q["grounded"]
                for q, g in zip(questions, verdicts(questions, found, CALIBRATED, 0.0), strict=True)
            )
            print(f"(today's replay gives the recorded verdict for {same} of {len(questions)})")
            floor = result["kinds"]["answerable"]
        print(_row(v.label, result))
        best = None
        for step in range(-50, 51):
            shifted = Weights(**{**vars(CALIBRATED), "bias": CALIBRATED.bias + step / 100})
            moved = scores(
                questions, verdicts(questions, found, shifted, v.beta, v.margin, v.threshold)
            )
            if moved["kinds"]["answerable"] >= floor - 1e-9:
                mean = statistics.fmean(moved["sets"].values())
                if best is None or mean > best[0]:
                    best = (mean, step / 100, moved)
        if best is not None and v.label != "today's":
            print(_row(f"  at today's answerable (bias {best[1]:+.2f})", best[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
