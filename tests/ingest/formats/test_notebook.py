"""Jupyter notebooks: made in the tests as the JSON Jupyter writes, loaded through the
format table, and indexed and searched through the real library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tether import EmptyDocument, Tether, UnreadableFile
from tether.ingest import load_path
from tether.ingest.formats import notebook


def write_notebook(path: Path, cells: list[dict[str, Any]], **top: Any) -> Path:
    document = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "language": "python"},
                     "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
        **top,
    }  # fmt: skip
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def markdown(*lines: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": list(lines)}


def code(source: str, *outputs: dict[str, Any]) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": 1, "metadata": {},
            "source": source.splitlines(keepends=True), "outputs": list(outputs)}  # fmt: skip


CELLS = [
    markdown("# Tide tables\n", "\n", "We fit the *harmonic* model."),
    code("model.fit(heights)\nprint(model.score())",
         {"output_type": "stream", "name": "stdout", "text": ["score: 0.97\n"]}),
    markdown("## Results {#results}\n\nHigh tide comes at 06:12."),
    code("table.head()",
         {"output_type": "execute_result", "execution_count": 2, "metadata": {},
          "data": {"text/plain": ["  port  height\n", "0 Brest  7.1"],
                   "text/html": ["<table><tr><td>Brest</td></tr></table>"]}},
         {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0K"}}),
    code("1/0", {"output_type": "error", "ename": "ZeroDivisionError",
                 "evalue": "division by zero", "traceback": ["\x1b[0;31m---\x1b[0m"]}),
    {"cell_type": "raw", "metadata": {}, "source": ["\\LaTeX{} for the converter"]},
]  # fmt: skip


def test_a_notebook_is_its_markdown_its_code_and_what_the_code_printed(tmp_path: Path) -> None:
    doc = load_path(write_notebook(tmp_path / "tides.ipynb", CELLS))
    assert doc.title == "Tide tables" and doc.mime == "application/x-ipynb+json"
    assert [s.title for s in doc.sections] == ["Tide tables", "Tide tables > Results"]
    assert doc.text == (
        "# Tide tables\n\nWe fit the *harmonic* model.\n\n"
        "```python\nmodel.fit(heights)\nprint(model.score())\n```\n\n"
        "```text\nscore: 0.97\n```\n\n## Results\n\nHigh tide comes at 06:12.\n\n"
        "```python\ntable.head()\n```\n\n```text\n  port  height\n0 Brest  7.1\n```\n\n"
        "```python\n1/0\n```\n\n```text\nZeroDivisionError: division by zero\n```"
    )


def test_a_format_3_notebook_and_long_output_and_backticks_in_code(tmp_path: Path) -> None:
    """Format 3 keeps its cells in worksheets, with heading cells and code as ``input``;
    an output longer than :data:`~notebook.MAX_OUTPUT_CHARS` is cut, saying how much
    more there was; code holding a fence gets a longer one."""
    long_log = "epoch done\n" * 400
    cells = [
        {"cell_type": "heading", "level": 2, "source": "Training"},
        {"cell_type": "code", "input": "print('```')",
         "outputs": [{"output_type": "stream", "stream": "stdout", "text": long_log}]},
    ]  # fmt: skip
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps({"worksheets": [{"cells": cells}], "nbformat": 3}), "utf-8")
    doc = load_path(path)
    assert doc.text.startswith("## Training\n\n````\nprint('```')\n````\n\n```text\nepoch done")
    assert f"[... {len(long_log) - notebook.MAX_OUTPUT_CHARS:,} characters more]" in doc.text
    assert len(doc.text) < notebook.MAX_OUTPUT_CHARS + 200


@pytest.mark.parametrize(
    ("content", "error", "says"),
    [
        ("{not json", UnreadableFile, "is not valid JSON"),
        ('{"cells": "none"}', UnreadableFile, "holds no list of cells"),
        ("[1, 2]", UnreadableFile, "holds no list of cells"),
        ("[" * 100_000, UnreadableFile, "nests too deeply"),
        ('{"cells": [{"cell_type": "code", "source": "", "outputs": []}]}', EmptyDocument,
         "no text"),
    ],
)  # fmt: skip
def test_a_file_that_is_no_readable_notebook_says_why(
    tmp_path: Path, content: str, error: type[Exception], says: str
) -> None:
    path = tmp_path / "bad.ipynb"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(error, match=says):
        load_path(path)


def test_an_indexed_notebook_is_found_by_its_output_and_cited_by_section(tmp_path: Path) -> None:
    with Tether(db=tmp_path / "t.db") as t:
        [result] = t.add(write_notebook(tmp_path / "tides.ipynb", CELLS))
        assert result.status == "indexed"
        hits = t.search("Brest height", scope="global", mode="lexical")
        assert hits and hits[0].section_title == "Tide tables > Results"
