"""``tether eval``: index a BEIR dataset and score retrieval on it."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from tether.cli._shell import (
    ConfigOption,
    JsonOption,
    err,
    open_tether,
    out,
    print_json,
    progress_bar,
)

if TYPE_CHECKING:
    from tether.eval import EvalReport, PipelineReport


def eval_(
    directory: Annotated[Path, typer.Argument(help="BEIR-format dataset directory.")],
    split: Annotated[str, typer.Option(help="qrels split to score.")] = "test",
    db: Annotated[
        Path | None,
        typer.Option(
            "--db",
            help="Store to index into and reuse (default: a temporary file).",
            show_default=False,
        ),
    ] = None,
    lexical_only: Annotated[
        bool, typer.Option("--lexical-only", help="Score FTS5 alone (no vectors are used).")
    ] = False,
    pipeline: Annotated[
        bool,
        typer.Option(
            "--pipeline",
            help="Also run the full pipeline (retrieve): its nDCG@10 and context recall.",
        ),
    ] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index a BEIR dataset and print nDCG@10, Recall@100 and query latency."""
    with tempfile.TemporaryDirectory(prefix="tether-eval-") as tmp:
        store = db if db is not None else Path(tmp) / "eval.db"
        report, failed = _evaluate(directory, split, store, config, lexical_only, pipeline)
    if failed:
        _note_unindexed(failed)
    if as_json:
        print_json(report.to_dict())
        return
    _print_report(report)
    if report.pipeline is not None:
        out.print(_threshold_table(report.pipeline))


def _evaluate(
    directory: Path,
    split: str,
    store: Path,
    config: Path | None,
    lexical_only: bool,
    pipeline: bool,
) -> tuple[EvalReport, tuple[tuple[str, str], ...]]:
    """The report, and the corpus entries that could not be indexed (entry, reason)."""
    from tether import eval as beir  # loaded only when evaluating

    # Lexical-only runs need no vectors: do not spend time computing them.
    overrides: dict[str, Any] = {"rag": {"embeddings": {"enabled": False}}} if lexical_only else {}
    with open_tether(store, config, **overrides) as tether:
        dataset = beir.load_beir(directory, split=split)
        with progress_bar() as bar:
            task = bar.add_task(f"Indexing {dataset.name}", total=None)
            indexing = beir.index_dataset(
                tether, dataset, progress=lambda n: bar.update(task, completed=n)
            )
        report = beir.evaluate(
            tether, dataset, mode="lexical" if lexical_only else "hybrid", pipeline=pipeline
        )
    return dataclasses.replace(report, unindexed=len(indexing.failed)), indexing.failed


def _note_unindexed(failed: tuple[tuple[str, str], ...]) -> None:
    shown = "; ".join(f"{entry}: {reason}" for entry, reason in failed[:3])
    more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
    err.print(
        f"note: {len(failed)} corpus entries could not be indexed and count as"
        f" never retrieved ({shown}{more})",
        highlight=False,
        markup=False,
    )


def _print_report(report: EvalReport) -> None:
    out.print(
        f"{report.dataset}: {report.queries} queries, {report.documents} documents,"
        f" {report.method} retrieval",
        markup=False,
    )
    out.print(
        "settings: "
        + (f"not the defaults: {', '.join(report.settings)}" if report.settings else "defaults"),
        markup=False,
        highlight=False,
    )
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
