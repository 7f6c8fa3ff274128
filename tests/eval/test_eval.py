"""BEIR evaluation: metric arithmetic, a tiny dataset end to end, grounding, and the SciFact bar."""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from helpers import REPO_ROOT, SCIFACT
from tether import InvalidArgument, Scope, Settings, Tether
from tether.cli import app
from tether.eval.beir import load_beir, ndcg_at, recall_at, run
from tether.eval.grounding import (
    GROUNDING_THRESHOLDS,
    KINDS,
    Bm25,
    GroundingAnswer,
    grounding,
    select_claims,
    threshold_rows,
)
from tether.testing import HashEmbedder

runner = CliRunner()


def test_ndcg_and_recall_arithmetic() -> None:
    relevant = {"a": 1, "b": 1}
    assert ndcg_at(["a", "b", "c"], relevant, 10) == pytest.approx(1.0)
    expected = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert ndcg_at(["x", "a"], relevant, 10) == pytest.approx(expected)
    assert ndcg_at(["x", "y"], relevant, 10) == 0.0
    assert ndcg_at(["a"], {"a": 2, "b": 1}, 10) == pytest.approx(2 / (2 + 1 / math.log2(3)))
    assert recall_at(["a", "x"], relevant, 100) == 0.5
    assert recall_at(["x"] * 100 + ["a"], relevant, 100) == 0.0


def write_beir(root: Path) -> Path:
    corpus = [
        {"_id": "d1", "title": "Solar panels", "text": "Photovoltaic cells convert sunlight."},
        {"_id": "d2", "title": "Wind turbines", "text": "Blades turn a generator in wind."},
        {"_id": "d3", "title": "Hydro power", "text": "Dams use falling water for energy."},
        {"_id": "d4", "title": "Batteries", "text": "Lithium cells store energy chemically."},
    ]
    queries = [
        {"_id": "q1", "text": "How do photovoltaic cells use sunlight?"},
        {"_id": "q2", "text": "falling water dams"},
        {"_id": "q3", "text": "query without judgements"},
    ]
    root.mkdir()
    (root / "qrels").mkdir()
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n")
    return root


def test_tiny_dataset_end_to_end(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "tiny")
    dataset = load_beir(root)
    assert set(dataset.queries) == {"q1", "q2"}
    result = runner.invoke(app, ["eval", str(root), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ndcg@10"] == 1.0
    assert report["recall@100"] == 1.0
    assert report["queries"] == 2 and report["documents"] == 4
    assert report["latency_ms_p95"] >= report["latency_ms_p50"] > 0


def test_the_pipeline_is_scored_beside_search(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "tiny")
    result = runner.invoke(app, ["eval", str(root), "--pipeline", "--json"])
    assert result.exit_code == 0, result.output
    pipeline = json.loads(result.stdout)["pipeline"]
    assert pipeline["ndcg@10"] == 1.0 and pipeline["context_recall"] == 1.0
    assert pipeline["skipped"] == 0 and pipeline["mean_context_chunks"] >= 1
    assert [row["threshold"] for row in pipeline["thresholds"]][:2] == [0.0, 0.2]
    table = runner.invoke(app, ["eval", str(root), "--pipeline"])
    assert table.exit_code == 0, table.output
    assert "pipeline nDCG@10" in table.stdout and "relevance threshold" in table.stdout


def test_run_indexes_scores_and_reports_its_stages(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "tiny")
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "d5", "title": "", "text": ""}) + "\n")
    stages: list[tuple[str, int, int | None]] = []
    outcome = run(
        root,
        db=tmp_path / "eval.db",
        settings=Settings.load(),
        lexical_only=True,
        progress=lambda *stage: stages.append(stage),
    )
    assert outcome.report.method == "lexical" and outcome.report.unindexed == 1
    assert [entry for entry, _ in outcome.indexing.failed] == ["d5"]
    assert stages[0] == ("Indexing tiny", 0, None) and stages[-1] == ("Scoring tiny", 2, 2)


def test_eval_reuses_a_stored_index(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "tiny")
    db = tmp_path / "eval.db"
    first = runner.invoke(app, ["eval", str(root), "--db", str(db), "--json"])
    second = runner.invoke(app, ["eval", str(root), "--db", str(db), "--json"])
    assert first.exit_code == second.exit_code == 0
    assert json.loads(first.stdout)["ndcg@10"] == json.loads(second.stdout)["ndcg@10"]
    docs = runner.invoke(app, ["docs", "list", "--db", str(db), "--json"])
    assert len(json.loads(docs.stdout)["documents"]) == 4


def test_an_entry_that_cannot_be_indexed_does_not_stop_the_eval(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "tiny")
    with (root / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "d5", "title": "", "text": "   "}) + "\n")
    result = runner.invoke(app, ["eval", str(root), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["unindexed"] == 1 and report["documents"] == 4
    assert report["ndcg@10"] == 1.0
    assert "1 corpus entries could not be indexed" in result.stderr
    assert "d5: " in result.stderr and "empty" in result.stderr


def test_eval_says_which_settings_are_not_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_beir(tmp_path / "tiny")
    monkeypatch.delenv("TETHER_RAG__EMBEDDINGS__ENABLED")  # the suite's own override
    lexical = runner.invoke(app, ["eval", str(root), "--lexical-only", "--json"])
    assert json.loads(lexical.stdout)["settings"] == ["rag.embeddings.enabled=false"]
    (tmp_path / "tether.toml").write_text("[rag]\nchunk_size = 500\n")  # the cwd's config
    result = runner.invoke(app, ["eval", str(root), "--lexical-only"])
    assert result.exit_code == 0, result.output
    assert (
        "settings: not the defaults: rag.chunk_size=500, rag.embeddings.enabled=false"
        in result.stdout
    )


def test_not_a_beir_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"corpus\.jsonl"):
        load_beir(tmp_path)
    result = runner.invoke(app, ["eval", str(tmp_path)])
    assert result.exit_code == 1 and "not a BEIR dataset" in result.output


# The SciFact data lives beside the repository (../shared/datasets/scifact), not in it.
# Without it these tests are skipped, and .ci/run prints a warning saying so; with CI=1 in
# the environment they run anyway and fail, for a CI that must never skip them.
needs_scifact = pytest.mark.skipif(
    not SCIFACT.is_dir() and not os.environ.get("CI"),
    reason="needs ../shared/datasets/scifact beside the repository (not shipped in it)",
)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@needs_scifact
def test_scifact_lexical_bar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The foundation's bar on its own, with no embedding model involved: FTS5 alone,
    through the normal ingestion path, with the settings the docs give a store without
    embeddings (chunks of 1,200 characters: ``chunk_by = "chars"``), reaches nDCG@10 >=
    0.68 on SciFact (Anserini's BM25: 0.679). Measured: 0.6891 (on the default chunks,
    sized for MiniLM's 256-token window: 0.6779)."""
    monkeypatch.setenv("TETHER_RAG__CHUNK_BY", "chars")
    result = runner.invoke(app, ["eval", str(SCIFACT), "--lexical-only", "--json"])
    assert result.exit_code == 0, result.output
    lexical = json.loads(result.stdout)
    assert lexical["method"] == "lexical" and lexical["settings"] == [
        "rag.chunk_by=chars",
        "rag.embeddings.enabled=false",
    ]
    assert lexical["queries"] == 300 and lexical["documents"] == 5183 and lexical["unindexed"] == 0
    assert lexical["ndcg@10"] >= 0.68, lexical
    assert lexical["recall@100"] >= 0.9, lexical


# Measured with the defaults (docs/evaluation.md, bench/cold_start.md): a new store runs
# the local model through ONNX Runtime with int8 weights; RRF k=60 over 300 + 300
# candidates 0.7102 / 0.961, the pipeline (its rerank by question match) 0.7297; z-score
# fusion of the same lists 0.7321 / 0.954. (With the torch runtime: 0.7153, 0.7338 and
# 0.7355; int8 vectors cost 0.003-0.005.)
RRF_NDCG_BAR = 0.705
PIPELINE_NDCG_BAR = 0.725
ZSCORE_NDCG_BAR = 0.728


@pytest.mark.slow
# It embeds 5,183 abstracts and runs 300 queries four ways: about 5 minutes on an idle
# 2-core machine, more on a busy one; the suite's 10-minute default is too tight for it.
@pytest.mark.timeout(2400)
@needs_scifact
def test_scifact_bars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SciFact with the default local embedder (int8, through ONNX Runtime): the RRF hybrid
    stage nDCG@10 >= 0.705 with Recall@100 >= 0.95, the pipeline above it (>= 0.725),
    z-score fusion above RRF (>= 0.728), and all of them above lexical-only, which itself
    reaches nDCG@10 >= 0.68 (Anserini BM25: 0.679). Later runs reuse the first one's store
    (--db), so nothing is indexed or embedded twice."""
    monkeypatch.setenv("TETHER_RAG__EMBEDDINGS__ENABLED", "true")
    db = str(tmp_path / "scifact.db")
    result = runner.invoke(app, ["eval", str(SCIFACT), "--db", db, "--pipeline", "--json"])
    assert result.exit_code == 0, result.output
    hybrid = json.loads(result.stdout)
    assert hybrid["method"] == "hybrid"
    assert not any("fusion" in s for s in hybrid["settings"])  # the default: RRF
    # The pipeline (decide, retrieve, rerank by question match, context) gains on the
    # hybrid stage, and its context cites a relevant abstract for most claims.
    pipeline = hybrid["pipeline"]
    assert pipeline["ndcg@10"] >= PIPELINE_NDCG_BAR, pipeline
    assert pipeline["ndcg@10"] > hybrid["ndcg@10"], hybrid
    # (0.74 before a question naming a rare word or a code that no abstract mentions stopped
    # being grounded by one on its topic; SciFact's claims often name a drug or a gene the
    # answering abstract spells otherwise: 0.66 since, the price of that rule, which the
    # real-document sets need. See docs/evaluation.md.)
    assert pipeline["context_recall"] >= 0.64, pipeline
    assert pipeline["skipped"] == 0 and pipeline["mean_context_chunks"] <= 8, pipeline
    assert hybrid["queries"] == 300 and hybrid["documents"] == 5183
    assert hybrid["ndcg@10"] >= RRF_NDCG_BAR, hybrid
    assert hybrid["recall@100"] >= 0.95, hybrid

    monkeypatch.setenv("TETHER_RAG__FUSION", "zscore")
    result = runner.invoke(app, ["eval", str(SCIFACT), "--db", db, "--json"])
    monkeypatch.delenv("TETHER_RAG__FUSION")
    assert result.exit_code == 0, result.output
    zscore = json.loads(result.stdout)
    assert zscore["method"] == "hybrid" and zscore["documents"] == 5183
    assert zscore["ndcg@10"] >= ZSCORE_NDCG_BAR, zscore
    assert zscore["ndcg@10"] > hybrid["ndcg@10"], (zscore, hybrid)

    # Lexical-only on the same store: the same chunks (nothing is chunked again).
    result = runner.invoke(app, ["eval", str(SCIFACT), "--db", db, "--lexical-only", "--json"])
    assert result.exit_code == 0, result.output
    lexical = json.loads(result.stdout)
    assert lexical["method"] == "lexical"
    assert lexical["ndcg@10"] >= 0.67, lexical
    assert lexical["recall@100"] >= 0.9, lexical
    assert hybrid["ndcg@10"] > lexical["ndcg@10"] and hybrid["recall@100"] > lexical["recall@100"]


# -- grounding: answerable, unanswerable and cross-scope questions ------------------------

GROUNDING_CORPUS = {
    "s1": ("Perovskite solar cells", "Perovskite layers raise photovoltaic efficiency."),
    "s2": ("Silicon solar cells", "Crystalline silicon photovoltaic cells dominate rooftops."),
    "s3": ("Solar cell degradation", "Photovoltaic cells lose output under heat and humidity."),
    "v1": ("Vitamin D and bones", "Vitamin D supplements reduce fractures in older adults."),
    "v2": ("Vitamin D and mood", "Vitamin D levels show no link with depression in adults."),
    "v3": ("Vitamin C and colds", "Vitamin C shortens colds in adults under heavy exercise."),
    "b1": ("Lithium battery fires", "Lithium cells overheat when the separator fails."),
    "b2": ("Sodium batteries", "Sodium cells store energy without lithium or cobalt."),
    "b3": ("Battery recycling", "Recycling recovers cobalt and lithium from spent cells."),
}
GROUNDING_QUERIES = {
    "c1": ("Perovskite layers raise the efficiency of photovoltaic cells.", "s1"),
    "c2": ("Vitamin D supplements reduce fractures in older adults.", "v1"),
    "c3": ("Lithium cells overheat when the separator fails.", "b1"),
}


def write_grounding_beir(root: Path) -> Path:
    root.mkdir()
    (root / "qrels").mkdir()
    corpus = [{"_id": i, "title": t, "text": x} for i, (t, x) in GROUNDING_CORPUS.items()]
    queries = [{"_id": q, "text": text} for q, (text, _) in GROUNDING_QUERIES.items()]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    qrels = "".join(f"{q}\t{doc}\t1\n" for q, (_, doc) in GROUNDING_QUERIES.items())
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return root


def test_bm25_picks_lexical_neighbours_deterministically() -> None:
    bm25 = Bm25({i: f"{t}\n\n{x}" for i, (t, x) in GROUNDING_CORPUS.items()})
    near = bm25.nearest("vitamin D in adults", 3, exclude=["v1"])
    assert near[:2] == ["v2", "v3"] and "v1" not in near
    # Documents sharing no word follow in id order, so k is always filled.
    assert bm25.nearest("zeppelin", 2) == ["b1", "b2"]
    assert bm25.nearest("vitamin", 3) == bm25.nearest("vitamin", 3)


def test_the_claim_sample_is_deterministic_and_grows_by_extension(tmp_path: Path) -> None:
    dataset = load_beir(write_grounding_beir(tmp_path / "g"))
    corpus = {entry.id: entry for entry in dataset.corpus()}
    two = select_claims(dataset, corpus, claims=2, distractors=3)
    three = select_claims(dataset, corpus, claims=3, distractors=3)
    assert three.claims[:2] == two.claims and len(select_claims(
        dataset, corpus, claims=50, distractors=3).claims) == 3  # fmt: skip
    for claim in three.claims:
        assert claim.cited == (GROUNDING_QUERIES[claim.query_id][1],)
        assert len(claim.distractors) == 3 and not set(claim.cited) & set(claim.distractors)
        assert claim.distractors[0][0] == claim.cited[0][0]  # the same topic comes first
    with pytest.raises(InvalidArgument, match="claims must be a positive integer"):
        select_claims(dataset, corpus, claims=0, distractors=3)
    with pytest.raises(InvalidArgument, match="not both"):
        grounding(tmp_path / "g", lexical_only=True, embedder=HashEmbedder())


@pytest.mark.parametrize("embedder", [None, HashEmbedder()], ids=["lexical", "hash-embedder"])
def test_grounding_report_over_one_store(tmp_path: Path, embedder: HashEmbedder | None) -> None:
    root = write_grounding_beir(tmp_path / "g")
    db = tmp_path / "grounding.db"
    stages: list[tuple[str, int, int | None]] = []
    report = grounding(root, db=db, embedder=embedder, lexical_only=embedder is None, claims=3,
                       distractors=3, progress=lambda *stage: stages.append(stage))  # fmt: skip
    assert report.method == ("lexical" if embedder is None else "hybrid")
    assert report.relevance == ("evidence (lexical)" if embedder is None else "evidence")
    assert report.claims == 3 and report.documents == 3 * (1 + 2 * 3) and report.unindexed == 0
    assert stages[-1] == ("Asking g", 9, 9)
    assert {kind: k.questions for kind, k in report.kinds.items()} == {
        "answerable": 3, "unanswerable": 3, "cross_scope": 3}  # fmt: skip
    for kind in report.kinds.values():
        assert 0.0 <= kind.right <= 1.0 and kind.best_relevance["n"] == 3
        assert 0.0 <= kind.best_relevance["min"] <= kind.best_relevance["max"] <= 1.0
    assert (
        report.kinds["unanswerable"].cites_answer == report.kinds["cross_scope"].cites_answer == 0
    )
    assert report.balanced_accuracy == pytest.approx(
        sum(k.right for k in report.kinds.values()) / 3)  # fmt: skip
    # An ungrounded session retrieval suggests its workspace.
    cross = report.kinds["cross_scope"]
    assert cross.suggested_wider == cross.questions - cross.grounded

    rows = report.thresholds
    assert [r["threshold"] for r in rows] == sorted({r["threshold"] for r in rows})
    for low, high in itertools.pairwise(rows):
        assert low["answerable"] >= high["answerable"]
        assert low["unanswerable"] <= high["unanswerable"]
        assert low["cross_scope"] <= high["cross_scope"]
    # The row at the configured threshold reproduces what retrieval actually did.
    now = next(r for r in rows if r["threshold"] == report.min_relevance)
    assert now["balanced"] == pytest.approx(report.balanced_accuracy, abs=1e-4)
    assert report.best_threshold["balanced"] == max(r["balanced"] for r in rows)
    assert json.loads(json.dumps(report.to_dict()))["kinds"]["cross_scope"]["questions"] == 3

    # Cross-scope questions are answerable in the workspace but not in the session.
    layout = select_claims(load_beir(root), {e.id: e for e in load_beir(root).corpus()},
                           claims=3, distractors=3)  # fmt: skip
    with Tether(db, settings=Settings.load(), embedder=embedder) as t:
        for claim in layout.claims:
            answers = layout.answer_ids(claim)
            workspace = t.search(claim.text, scope=Scope.workspace(
                layout.answerable_workspace(claim)), k=10)  # fmt: skip
            assert answers <= {hit.document_id for hit in workspace}
            session = t.search(claim.text, scope=Scope.session(layout.session(claim)), k=10)
            assert session and not answers & {hit.document_id for hit in session}
            unanswerable = t.documents(workspace_id=layout.unanswerable_workspace(claim))
            assert sorted(d.id.rpartition(":")[2] for d in unanswerable) == sorted(
                claim.distractors)  # fmt: skip


@given(st.lists(st.tuples(st.sampled_from(KINDS), st.none() | st.floats(0, 1)), max_size=30))
def test_threshold_rows_move_one_way(outcomes: list[tuple[str, float | None]]) -> None:
    answers = [
        GroundingAnswer(kind, "q", Scope.workspace("w"), False, "global", best, None, False)  # type: ignore[arg-type]
        for kind, best in outcomes
    ]
    rows = threshold_rows(answers, GROUNDING_THRESHOLDS)
    for low, high in itertools.pairwise(rows):
        assert low["answerable"] >= high["answerable"]
        assert low["unanswerable"] <= high["unanswerable"]
        assert low["cross_scope"] <= high["cross_scope"]
    assert all(0.0 <= row["balanced"] <= 1.0 for row in rows)


def test_eval_grounding_cli(tmp_path: Path) -> None:
    root = write_grounding_beir(tmp_path / "g")
    result = runner.invoke(app, ["eval", str(root), "--grounding", "--claims", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["claims"] == 2 and data["questions"] == 6 and data["distractors"] == 10
    readme = " ".join((REPO_ROOT / "docs" / "cli.md").read_text().split())
    documented = readme.split("`tether eval --grounding --json` prints", 1)[1].split(". ")[0]
    keys = {*data, *data["kinds"]["answerable"], *data["kinds"]["answerable"]["best_relevance"],
            *data["thresholds"][0]} - {"p25", "p50", "p75", "p90"}  # fmt: skip
    assert {key for key in keys if f"`{key}`" not in documented} == set()
    table = runner.invoke(app, ["eval", str(root), "--grounding", "--distractors", "2"])
    assert table.exit_code == 0, table.output
    assert "balanced grounding accuracy" in table.stdout and "best relevance" in table.stdout
    for args in (["--claims", "2"], ["--grounding", "--pipeline"]):
        usage = runner.invoke(app, ["eval", str(root), *args])
        assert usage.exit_code == 2 and "--grounding" in usage.output


def test_a_hybrid_run_on_a_store_a_lexical_run_filled_embeds_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eval --lexical-only --db X` then `eval --db X`: the second run reads the same
    chunks (nothing is chunked again) and embeds them, not hybrid search without vectors."""
    monkeypatch.setenv("TETHER_RAG__EMBEDDINGS__ENABLED", "true")
    root = write_beir(tmp_path / "beir")
    db = tmp_path / "eval.db"
    lexical = run(root, db=db, lexical_only=True)
    assert lexical.report.method == "lexical"
    with Tether(db, settings=Settings.load(rag={"embeddings": {"enabled": False}})) as t:
        counts = t.store.counts()
        chunking = {d.chunking for d in t.documents()}
    assert counts["rag_embeddings"] == 0 and counts["rag_chunks"] > 0
    hybrid = run(root, db=db)
    assert hybrid.report.method == "hybrid"
    with Tether(db) as t:
        after = t.store.counts()
        assert {d.chunking for d in t.documents()} == chunking == {"256/auto tokens"}
    assert after["rag_chunks"] == counts["rag_chunks"]
    assert after["rag_embeddings"] == after["rag_chunks"]
