"""Grounding on real documents: the harness over PDFs made here, with questions of the
three kinds, run through the real store and retrieval."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from helpers import REPO_ROOT, make_pdf, make_settings
from tether import InvalidArgument
from tether.eval.documents import (
    KINDS,
    _boilerplate_chunks,
    _joined,
    _shape,
    grounding_on_documents,
    holds_answer,
    prose_lines,
)


def question_set(tmp_path: Path) -> tuple[Path, Path]:
    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    make_pdf(pdfs / "pump.pdf", [
        "Pump manual. Contents and safety notes.",
        "Priming: open the vent screw and fill the housing with water before start.",
        "Seals: replace the shaft seal every two thousand hours of running.",
    ], title="Pump manual")  # fmt: skip
    make_pdf(pdfs / "boiler.pdf", [
        "Boiler manual. Contents and safety notes.",
        "Descaling: run the descaling cycle each spring with citric acid.",
    ], title="Boiler manual")  # fmt: skip
    data = {
        "documents": [{"name": "pump", "title": "Pump", "pages": 3},
                      {"name": "boiler", "title": "Boiler", "pages": 2}],
        "questions": [
            {"id": "a1", "kind": "answerable", "document": "pump", "pages": [2],
             "question": "How do I prime the pump housing with water?", "answer": "vent screw"},
            {"id": "a2", "kind": "answerable", "document": "boiler", "pages": [2],
             "question": "When should the descaling cycle run?", "answer": "each spring"},
            {"id": "u1", "kind": "unanswerable", "document": "pump",
             "question": "What colour is the warranty card?"},
            {"id": "x1", "kind": "cross_scope", "document": "boiler", "asked_in": "pump",
             "pages": [2], "question": "Which acid is used for descaling?",
             "answer": "citric acid"},
        ],
    }  # fmt: skip
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path, pdfs


def test_the_report_measures_every_kind(tmp_path: Path) -> None:
    questions, pdfs = question_set(tmp_path)
    seen: list[int] = []
    report = grounding_on_documents(
        questions, pdfs, db=tmp_path / "t.db", settings=make_settings(),
        progress=lambda done, total: seen.append(done),
    )  # fmt: skip
    data = report.to_dict()
    assert seen == [1, 2, 3, 4]
    assert data["documents"] == 2 and data["chunks"] >= 5
    assert data["questions"] == {"answerable": 2, "unanswerable": 1, "cross_scope": 1}
    assert set(data["rates"]) == set(KINDS)
    assert data["balanced_accuracy"] == pytest.approx(sum(data["rates"].values()) / 3, abs=1e-3)
    # Both answerable questions are found, on their answer page.
    assert data["rates"]["answerable"] == 1.0
    assert data["answer_page_in_context"] == 1.0 and data["hit_at_1"] == 1.0
    assert set(data["quality"]) == {"hyphen_breaks", "header_footer_lines", "over_window",
                                    "toc_chunks", "repeated_ends", "boilerplate_chunks",
                                    "open_passages", "open_starts"}  # fmt: skip
    assert data["quality"]["repeated_ends"] == 0
    assert data["lost"] == {"not_retrieved": 0, "ranked_below": 0, "judged_out": 0}
    rows = data["thresholds"]
    assert [r["answerable"] for r in rows] == sorted((r["answerable"] for r in rows), reverse=True)
    assert [r["unanswerable"] for r in rows] == sorted(r["unanswerable"] for r in rows)
    # The cross-scope question is asked where its answer is not: its right answer is
    # "not grounded, look in the workspace".
    [cross] = [o for o in report.outcomes if o.kind == "cross_scope"]
    assert cross.right == (not cross.grounded and cross.suggested_scope == "workspace")


def test_missing_manuals_and_bad_sets_are_clear_errors(tmp_path: Path) -> None:
    questions, _ = question_set(tmp_path)
    with pytest.raises(InvalidArgument, match="fetch the question set's documents first"):
        grounding_on_documents(questions, tmp_path / "nowhere", settings=make_settings())
    bad = tmp_path / "bad.json"
    bad.write_text("[]", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="not a question set"):
        grounding_on_documents(bad, tmp_path, settings=make_settings())


def test_tether_eval_grounding_reads_a_question_set_folder(tmp_path: Path) -> None:
    """``tether eval DIR --grounding`` on a folder with ``questions.json`` and ``pdfs/``
    (``bench/manuals``) measures the real documents."""
    from typer.testing import CliRunner

    from tether.cli import app

    questions, _ = question_set(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["eval", str(tmp_path), "--grounding", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["questions"] == {"answerable": 2, "unanswerable": 1, "cross_scope": 1}
    assert data["rates"]["answerable"] == 1.0
    text = runner.invoke(app, ["eval", str(tmp_path), "--grounding"])
    assert text.exit_code == 0, text.output
    assert "balanced accuracy" in text.output and "questions: 2 answerable" in text.output
    missing = runner.invoke(app, ["eval", str(questions.parent / "nope"), "--grounding"])
    assert missing.exit_code != 0


def test_the_oracle_judge_reads_the_judge_prompt_as_tether_writes_it(tmp_path: Path) -> None:
    """bench/manuals/oracle_judge.py parses the judge's real prompt: it finds the question
    and names exactly the passages holding the answer snippet."""
    import importlib.util

    from tether.models import Hit
    from tether.retrieve.judge import _prompt
    from tether.retrieve.rerank import Candidate

    path = REPO_ROOT / "bench" / "manuals" / "oracle_judge.py"
    spec = importlib.util.spec_from_file_location("oracle_judge", path)
    assert spec is not None and spec.loader is not None
    oracle_judge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle_judge)

    def candidate(n: int, text: str) -> Candidate:
        hit = Hit("d", n, "Manual", "Setup", 1, text, 0.0, n, 0, len(text), None, "w")
        return Candidate(hit, fused=1.0, relevance=0.5)

    question = "How do I prime the pump?"
    oracle = oracle_judge.Oracle([
        {"kind": "answerable", "question": question, "answer": "open the vent\nscrew"},
        {"kind": "unanswerable", "question": "What colour is the card?"},
    ])  # fmt: skip
    shown = [candidate(1, "Seals wear out."), candidate(2, "First, open the vent screw.")]
    reply = json.loads(oracle.reply(_prompt(question, shown)[-1]["content"]))
    assert reply == {"answerable": True, "passages": [2]}
    missing = json.loads(oracle.reply(_prompt(question, shown[:1])[-1]["content"]))
    assert missing == {"answerable": False, "passages": []}
    other = json.loads(oracle.reply(_prompt("What colour is the card?", shown)[-1]["content"]))
    assert other["answerable"] is False


def docset(tmp_path: Path) -> Path:
    """A documentation set (version 2): HTML and Markdown files, one session."""
    folder = tmp_path / "docs-set"
    (folder / "docs").mkdir(parents=True)
    page = (
        "<html><head><title>{t}</title></head><body><nav><a href='/'>Home</a> › Guide</nav>"
        "<main><h1>{t}</h1><p>{body}</p></main><footer>© Example docs</footer></body></html>"
    )
    (folder / "docs" / "install.html").write_text(page.format(
        t="Install", body="Run the installer with the --prefix option to choose the folder."
    ), encoding="utf-8")  # fmt: skip
    (folder / "docs" / "backup.md").write_text(
        "# Backup\n\nSnapshots are kept for 30 days unless the retention flag says otherwise.\n",
        encoding="utf-8",
    )
    (folder / "docs" / "network.md").write_text(
        "# Network\n\nThe daemon listens on port 7070 by default.\n", encoding="utf-8"
    )
    data = {
        "version": 2, "workspace": "example", "description": "test set",
        "session": {"id": "setup", "documents": ["install", "network"]},
        "documents": [{"name": n, "file": f"docs/{n}.{ext}", "title": n.title()}
                      for n, ext in (("install", "html"), ("backup", "md"), ("network", "md"))],
        "questions": [
            {"id": "a1", "kind": "answerable", "scope": "session", "document": "install",
             "question": "How do I pick the folder the installer writes to?",
             "answer": "with the --prefix option"},
            {"id": "a2", "kind": "answerable", "scope": "workspace", "document": "backup",
             "question": "How long are snapshots kept?", "answer": "kept for 30 days"},
            {"id": "u1", "kind": "unanswerable", "scope": "session",
             "question": "Which TLS cipher suites does the daemon accept?",
             "absent_terms": ["cipher"]},
            {"id": "x1", "kind": "cross_scope", "scope": "session", "document": "backup",
             "question": "How long are snapshots retained?", "answer": "kept for 30 days"},
        ],
    }  # fmt: skip
    (folder / "questions.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_a_documentation_set_is_asked_in_its_session_and_workspace(tmp_path: Path) -> None:
    folder = docset(tmp_path)
    report = grounding_on_documents(folder / "questions.json", settings=make_settings())
    data = report.to_dict()
    assert data["name"] == "docs-set" and data["documents"] == 3
    assert data["questions"] == {"answerable": 2, "unanswerable": 1, "cross_scope": 1}
    outcomes = {o.id: o for o in report.outcomes}
    assert outcomes["a1"].grounded and outcomes["a1"].answer_page_in_context
    assert outcomes["a1"].answer_text_cited
    assert outcomes["a2"].grounded and outcomes["a2"].answer_text_cited  # asked in the workspace
    assert data["rates"]["answerable"] == 1.0
    # Every answerable question grounded on its answer: nothing was lost anywhere.
    assert data["lost"] == {"not_retrieved": 0, "ranked_below": 0, "judged_out": 0}


def test_a_set_naming_a_missing_session_is_a_clear_error(tmp_path: Path) -> None:
    folder = docset(tmp_path)
    data = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
    del data["session"]
    (folder / "questions.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InvalidArgument, match="session the set does not have"):
        grounding_on_documents(folder / "questions.json", settings=make_settings())


def test_tether_eval_grounding_puts_several_sources_side_by_side(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tether.cli import app

    question_set(tmp_path)
    folder = docset(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["eval", str(tmp_path), str(folder), "--grounding"])
    assert result.exit_code == 0, result.output
    assert "side by side" in result.output
    assert tmp_path.name[:10] in result.output and "docs-set" in result.output
    assert "lost: not retrieved" in result.output
    as_json = runner.invoke(app, ["eval", str(tmp_path), str(folder), "--grounding", "--json"])
    sources = json.loads(as_json.stdout)["sources"]
    assert [s["questions"]["answerable"] for s in sources] == [2, 2]
    several = runner.invoke(app, ["eval", str(tmp_path), str(folder)])
    assert several.exit_code == 2 and "side by side with --grounding" in several.output


def test_boilerplate_is_site_chrome_not_code_or_headings() -> None:
    """A menu line repeated on every page counts; a usage block's ``--help`` row and a
    ``## Related commands`` heading, repeated on every page of a command reference, are
    the documents' own content."""
    page = "## Related commands\n\n```\nOptions:\n      --help   Print usage\n```\nRuns {}."
    menu = "Home | Guides | API reference\n"
    chunks = [page.format(n) for n in range(6)] + [menu + "Body text." for _ in range(6)]
    lines = [{_shape(x) for x in prose_lines(c)} for c in chunks]
    documents_with = Counter(line for one in lines for line in one)
    assert prose_lines(chunks[0]) == ["Runs 0."]
    assert _boilerplate_chunks(lines, documents_with, 12) == 6


def test_a_code_fence_split_between_chunks_is_seen_whole() -> None:
    text = "Usage below.\n```\nOptions:\n  --help   Print usage\n```\nThe end."
    cut = text.index("Options")
    first = SimpleNamespace(content=text[: cut + 8], char_start=0, char_end=cut + 8)
    second = SimpleNamespace(content=text[cut:], char_start=cut, char_end=len(text))
    assert _joined([first, second]) == text
    assert prose_lines(_joined([first, second])) == ["Usage below.", "The end."]
    assert "  --help   Print usage" in prose_lines(second.content)  # alone, it looks like prose


def test_a_passage_that_ends_its_paragraph_or_section_is_not_open(tmp_path: Path) -> None:
    from dataclasses import replace

    from tether import Citation, Settings, Tether, TextSource
    from tether.eval.documents import stops_inside_a_sentence

    long = " ".join(f"Word{i} follows word{i} in a sentence that runs on" for i in range(30))
    text = (
        "# Tool\n\n## NAME\n\ntool - Make an empty store or open an existing one\n\n"
        f"## USAGE\n\nThe tool reads its input. {long} and ends here.\n"
    )
    settings = Settings.load(rag={"embeddings": {"enabled": False}, "chunk_by": "chars",
                                  "chunk_size": 300, "chunk_overlap": 40})  # fmt: skip
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        [result] = t.add([TextSource(text, "Tool", source="tool.md", mime="text/markdown")])
        chunks = t.chunks(result.document_id)
        name = next(c for c in chunks if c.section_title == "Tool > NAME")
        cut = next(c for c in chunks if c.section_title == "Tool > USAGE")

        def cited(chunk: Any, text: str | None = None) -> Citation:
            return Citation(1, result.document_id, "Tool", chunk.section_title, None, (),
                            (chunk.id,), None, "GLOBAL", 0.5, chunk.content if text is None
                            else text)  # fmt: skip

        # The NAME line has no full stop, but its section ends there: whole.
        assert not stops_inside_a_sentence(t, cited(name))
        # The first USAGE chunk stops inside the long sentence: open.
        assert cut.content.rstrip()[-1] != "."
        assert stops_inside_a_sentence(t, cited(cut))
        assert not stops_inside_a_sentence(t, replace(cited(cut), text="The tool reads it."))


def test_an_answer_is_held_whatever_inline_markup_either_side_keeps() -> None:
    # A snippet copied from a reStructuredText or Markdown source against the text the
    # page was indexed as (emphasis and code marks dropped, a table's cells barred).
    chunk = "It also ensures that a stack trace is printed on\nKeyboardInterrupt (Ctrl+C)."
    assert holds_answer(chunk, "printed on **KeyboardInterrupt** (Ctrl+C)")
    assert holds_answer("pytest version | min. Python version\n6.2 - 7.0 | 3.6+", "6.2 - 7.0 3.6+")
    assert holds_answer("will raise the error during `call`", "during ``call``")
    assert not holds_answer(chunk, "printed on SystemExit (Ctrl+C)")
