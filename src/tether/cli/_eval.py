"""``tether eval``: index a BEIR dataset and score retrieval (or grounding) on it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from tether import Settings, TetherError
from tether.cli._shell import (
    ConfigOption,
    JsonOption,
    err,
    error_message,
    fail,
    flag,
    folded_table,
    out,
    print_json,
    progress_bar,
    say,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from tether.eval.beir import EvalProgress, EvalReport, PipelineReport
    from tether.eval.documents import DocumentsReport
    from tether.eval.grounding import GroundingReport


DirectoriesArgument = Annotated[
    list[Path],
    typer.Argument(
        help="BEIR-format dataset directory; with --grounding, one or more of those or"
        " of question-set folders (questions.json), measured side by side.",
        show_default=False,
    ),
]
SplitOption = Annotated[str, typer.Option(help="qrels split to score.")]
EvalDbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Store to index into and reuse: a SQLite file or a PostgreSQL URL"
        " (default: a temporary file).",
        show_default=False,
    ),
]
LexicalOnlyOption = Annotated[
    bool, flag("--lexical-only", help="Score FTS5 alone (no vectors are used).")
]
PipelineOption = Annotated[
    bool,
    flag(
        "--pipeline",
        help="Also run the full pipeline (retrieve): its nDCG@10 and context recall.",
    ),
]
GroundingOption = Annotated[
    bool,
    flag(
        "--grounding",
        help="Measure grounding instead: answerable, unanswerable and cross-scope"
        " questions of sampled claims, with a relevance-threshold table.",
    ),
]
ClaimsOption = Annotated[
    int | None,
    typer.Option(
        "--claims",
        min=1,
        help="With --grounding: claims to ask (default 100).",
        show_default=False,
    ),
]
DistractorsOption = Annotated[
    int | None,
    typer.Option(
        "--distractors",
        min=1,
        help="With --grounding: similar entries beside each claim's answer (default 10).",
        show_default=False,
    ),
]


def eval_(
    directories: DirectoriesArgument,
    split: SplitOption = "test",
    db: EvalDbOption = None,
    lexical_only: LexicalOnlyOption = False,
    pipeline: PipelineOption = False,
    grounding: GroundingOption = False,
    claims: ClaimsOption = None,
    distractors: DistractorsOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index a BEIR dataset and print nDCG@10, Recall@100 and query latency (or, with
    --grounding, how well retrieval says whether the answer is in scope)."""
    from tether.eval import beir  # loaded only when evaluating

    if grounding:
        if pipeline:
            fail("--pipeline and --grounding are separate evaluations; give one", code=2)
        sample = (claims, distractors)
        _grounding_sources(directories, split, db, config, lexical_only, sample, as_json)
        return
    if claims is not None or distractors is not None:
        fail("--claims and --distractors go with --grounding", code=2)
    if len(directories) != 1:
        fail(
            "give one dataset directory (several are measured side by side with --grounding)",
            code=2,
        )
    (directory,) = directories
    try:
        with progress_bar() as bar:
            result = beir.run(
                directory,
                split=split,
                db=db,
                settings=Settings.load(config),
                lexical_only=lexical_only,
                pipeline=pipeline,
                progress=_one_bar_a_stage(bar),
            )
    except TetherError as exc:
        fail(error_message(exc))
    if result.indexing.failed:
        _note_unindexed(result.indexing.failed)
    if as_json:
        print_json(result.report.to_dict())
        return
    _print_report(result.report)
    if result.report.pipeline is not None:
        out.print(_threshold_table(result.report.pipeline))


def _grounding_sources(
    directories: list[Path],
    split: str,
    db: str | None,
    config: Path | None,
    lexical_only: bool,
    sample: tuple[int | None, int | None],
    as_json: bool,
) -> None:
    """Each folder's grounding report; with several folders, one table side by side."""
    show = len(directories) == 1 and not as_json
    reports = [
        _grounding(directory, split, db, config, lexical_only, sample, show=show)
        for directory in directories
    ]
    if as_json:
        data = [report.to_dict() for report in reports]
        print_json(data[0] if len(data) == 1 else {"sources": data})
    elif len(reports) > 1:
        out.print(_side_by_side(directories, reports))


def _grounding(
    directory: Path,
    split: str,
    db: str | None,
    config: Path | None,
    lexical_only: bool,
    sample: tuple[int | None, int | None],
    *,
    show: bool,
) -> GroundingReport | DocumentsReport:
    # loaded only when evaluating
    from tether.eval.grounding import DEFAULT_CLAIMS, DEFAULT_DISTRACTORS, grounding

    if (directory / "questions.json").is_file():  # a question set over real documents
        return _documents_grounding(directory, db, config, lexical_only, show)
    claims, distractors = sample
    try:
        with progress_bar() as bar:
            report = grounding(
                directory,
                split=split,
                db=db,
                settings=Settings.load(config),
                lexical_only=lexical_only,
                progress=_one_bar_a_stage(bar),
                claims=claims if claims is not None else DEFAULT_CLAIMS,
                distractors=distractors if distractors is not None else DEFAULT_DISTRACTORS,
            )
    except TetherError as exc:
        fail(error_message(exc))
    if report.unindexed:
        err.print(f"note: {report.unindexed} documents could not be indexed", highlight=False)
    if show:
        _print_grounding(report)
    return report


def _documents_grounding(
    directory: Path, db: str | None, config: Path | None, lexical_only: bool, show: bool
) -> DocumentsReport:
    """Grounding on real documents: ``DIR/questions.json`` and its documents (the PDF
    manuals in ``DIR/pdfs``, a documentation set's files beside it)."""
    from tether.eval.documents import grounding_on_documents

    try:
        with progress_bar() as bar:
            task = bar.add_task(f"Asking {directory.name}", total=None)
            report = grounding_on_documents(
                directory / "questions.json",
                db=db if db is not None else ":memory:",
                settings=Settings.load(config),
                lexical_only=lexical_only,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
    except TetherError as exc:
        fail(error_message(exc))
    if not show:
        return report
    data = report.to_dict()
    table = folded_table("measure", "value")
    for label, value in _document_rows(data):
        table.add_row(label, value)
    asked = ", ".join(f"{n} {kind.replace('_', '-')}" for kind, n in data["questions"].items())
    say(f"{data['documents']} documents, {data['chunks']} chunks; questions: {asked}")
    out.print(table)
    return report


def _document_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The measures of a real-document report, labelled as the side-by-side table has them."""
    rates = data["rates"]
    rows = [
        ("balanced accuracy", f"{data['balanced_accuracy']:.4f}"),
        ("right on answerable (grounded)", f"{rates['answerable']:.4f}"),
        ("right on unanswerable (refused)", f"{rates['unanswerable']:.4f}"),
        ("right on cross-scope (refused, wider)", f"{rates['cross_scope']:.4f}"),
        ("answer cited (page / file)", f"{data['answer_page_in_context']:.4f}"),
        ("answer cited first", f"{data['hit_at_1']:.4f}"),
        ("answer in the first max_chunks ranked", f"{data['answer_page_ranked']:.4f}"),
    ]
    if data.get("answer_text_cited") is not None:
        rows.append(("answer's words in a cited passage", f"{data['answer_text_cited']:.4f}"))
    for loss, n in data["lost"].items():
        rows.append((f"lost: {loss.replace('_', ' ')}", str(n)))
    for name, count in data["quality"].items():
        rows.append((name.replace("_", " "), str(count)))
    rows.append(("latency p50 (ms)", f"{data['latency_ms_p50']}"))
    return rows


def _side_by_side(
    directories: list[Path], reports: list[GroundingReport | DocumentsReport]
) -> Table:
    """One row per measure, one column per source; '-' where a source has no such measure
    (a BEIR-derived set has no pages to cite)."""
    from tether.eval.grounding import GroundingReport

    columns: list[dict[str, str]] = []
    for report in reports:
        if isinstance(report, GroundingReport):
            kinds = report.kinds
            columns.append(
                {
                    "balanced accuracy": f"{report.balanced_accuracy:.4f}",
                    "right on answerable (grounded)": f"{kinds['answerable'].right:.4f}",
                    "right on unanswerable (refused)": f"{kinds['unanswerable'].right:.4f}",
                    "right on cross-scope (refused, wider)": f"{kinds['cross_scope'].right:.4f}",
                }
            )
        else:
            columns.append(dict(_document_rows(report.to_dict())))
    labels = list(dict.fromkeys(label for column in columns for label in column))
    table = Table(title="grounding, side by side")
    table.add_column("measure")
    for directory in directories:
        table.add_column(directory.name or str(directory), justify="right")
    for label in labels:
        table.add_row(label, *(column.get(label, "-") for column in columns))
    return table


def _one_bar_a_stage(bar: Progress) -> EvalProgress:
    def show(stage: str, done: int, total: int | None) -> None:
        if not bar.tasks or bar.tasks[0].description != stage:
            for task in bar.task_ids:
                bar.remove_task(task)
            bar.add_task(stage, total=total)
        bar.update(bar.task_ids[0], completed=done)

    return show


def _note_unindexed(failed: tuple[tuple[str, str], ...]) -> None:
    shown = "; ".join(f"{entry}: {reason}" for entry, reason in failed[:3])
    more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
    err.print(
        f"note: {len(failed)} corpus entries could not be indexed and count as"
        f" never retrieved ({shown}{more})",
        highlight=False,
        markup=False,
    )


def _print_settings(settings: tuple[str, ...]) -> None:
    changed = f"not the defaults: {', '.join(settings)}" if settings else "defaults"
    out.print(f"settings: {changed}", markup=False, highlight=False)


def _print_report(report: EvalReport) -> None:
    out.print(
        f"{report.dataset}: {report.queries} queries, {report.documents} documents,"
        f" {report.method} retrieval",
        markup=False,
    )
    _print_settings(report.settings)
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("nDCG@10", f"{report.ndcg_at_10:.4f}")
    table.add_row("Recall@100", f"{report.recall_at_100:.4f}")
    table.add_row("latency p50", f"{report.latency_ms_p50:.1f} ms")
    table.add_row("latency p95", f"{report.latency_ms_p95:.1f} ms")
    if report.pipeline is not None:
        p = report.pipeline
        table.add_row("pipeline nDCG@10", f"{p.ndcg_at_10:.4f}")
        table.add_row("context recall", f"{p.context_recall:.4f}")
        table.add_row("grounded", f"{p.grounded:.4f}")
        table.add_row("chunks in context (mean)", f"{p.mean_context_chunks:.2f}")
        table.add_row("skipped by the decision", str(p.skipped))
        table.add_row("pipeline latency p50", f"{p.latency_ms_p50:.1f} ms")
        table.add_row("pipeline latency p95", f"{p.latency_ms_p95:.1f} ms")
    out.print(table)


def _threshold_table(pipeline: PipelineReport) -> Table:
    trade = Table(title="relevance threshold: answered share vs precision@10")
    for column in ("threshold", "answered", "precision@10", "a relevant chunk kept"):
        trade.add_column(column, justify="right")
    for row in pipeline.thresholds:
        trade.add_row(
            f"{row['threshold']:.2f}",
            f"{row['answered']:.3f}",
            f"{row['precision_at_k']:.3f}",
            f"{row['recall_any']:.3f}",
        )
    return trade


def _print_grounding(report: GroundingReport) -> None:
    out.print(
        f"{report.dataset}: {report.claims} claims, {report.distractors} distractors each,"
        f" {report.documents} documents, {report.method} retrieval,"
        f" relevance by {report.relevance}",
        markup=False,
    )
    _print_settings(report.settings)
    names = {kind: kind.replace("_", "-") for kind in report.kinds}
    kinds = Table(title="outcome per kind of question")
    for column in ("kind", "questions", "grounded", "wider scope", "right"):
        kinds.add_column(column, justify="left" if column == "kind" else "right")
    for kind, row in report.kinds.items():
        kinds.add_row(
            names[kind],
            str(row.questions),
            str(row.grounded),
            str(row.suggested_wider),
            f"{row.right:.3f}",
        )
    out.print(kinds)
    quantiles = ("min", "p10", "p25", "p50", "p75", "p90", "max")
    spread = Table(title="best relevance per question")
    for column in ("kind", *quantiles):
        spread.add_column(column, justify="left" if column == "kind" else "right")
    for kind, row in report.kinds.items():
        best = row.best_relevance
        spread.add_row(names[kind], *(f"{best[q]:.2f}" if best["n"] else "-" for q in quantiles))
    out.print(spread)
    out.print(
        f"balanced grounding accuracy: {report.balanced_accuracy:.4f}"
        f" (rag.min_relevance = {report.min_relevance})",
        highlight=False,
    )
    trade = Table(title="share right if grounded meant best relevance >= t")
    for column in ("t", *names.values(), "balanced", ""):
        trade.add_column(column, justify="right")
    best_t = report.best_threshold["threshold"]
    for row in report.thresholds:
        marks = {
            "now": row["threshold"] == report.min_relevance,
            "best": row["threshold"] == best_t,
        }
        trade.add_row(
            f"{row['threshold']:.2f}",
            *(f"{row[kind]:.3f}" for kind in names),
            f"{row['balanced']:.3f}",
            " ".join(mark for mark, on in marks.items() if on),
        )
    out.print(trade)
