"""Jupyter notebooks (``.ipynb``) as a reader of the rendered notebook sees them.

A notebook is JSON: a list of cells. Its Markdown cells are its prose and headings, read
as any Markdown file is (:func:`tether.ingest.loaders.read_markdown`), so its headings
make its sections. A code cell is a fenced code block in the notebook's language, and
what it printed follows as a fenced block of its own: the text of its streams, its
results (their ``text/plain`` form) and the name and message of an error, each cut at
:data:`MAX_OUTPUT_CHARS` (a training log or a printed table can run to megabytes).
Pictures, HTML and widget state are left out; raw cells (text for a converter, such as
LaTeX) are too. Format 4 notebooks and format 3 ones (cells in worksheets) are read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tether.errors import EmptyDocument, UnreadableFile
from tether.ingest.chunking import markdown_sections, markdown_title
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text, read_markdown
from tether.text import normalize_text

MIME = "application/x-ipynb+json"
#: Characters of one output kept (the rest is cut, and the cut said).
MAX_OUTPUT_CHARS = 2_000
#: A terminal's colour and cursor codes (tracebacks and progress bars print them).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_BACKTICKS = re.compile(r"`{3,}")


def load_notebook(file: FileBytes) -> LoadedDocument:
    source = str(file.path)
    try:
        notebook = json.loads(decode_text(file))
    except RecursionError as exc:
        raise UnreadableFile(source, "nests too deeply to read (a damaged file?)") from exc
    except ValueError as exc:
        raise UnreadableFile(source, f"is not valid JSON ({exc})") from exc
    cells = _cells(notebook)
    if cells is None:
        raise UnreadableFile(source, "is not a Jupyter notebook: it holds no list of cells")
    language = _language(notebook.get("metadata"))
    parts = [part for cell in cells if isinstance(cell, dict) for part in _cell(cell, language)]
    title, text = read_markdown(normalize_text("\n\n".join(parts)))
    if not text:
        raise EmptyDocument(source, "the notebook has no text")
    return LoadedDocument(
        title=title or markdown_title(text) or file.stem,
        text=text,
        mime=MIME,
        sections=tuple(markdown_sections(text)),
    )


def _cells(notebook: Any) -> list[Any] | None:
    """The cells of a format 4 notebook, or of a format 3 one's worksheets."""
    if not isinstance(notebook, dict):
        return None
    cells = notebook.get("cells")
    if isinstance(cells, list):
        return cells
    sheets = notebook.get("worksheets")
    if isinstance(sheets, list):
        return [c for s in sheets if isinstance(s, dict) for c in s.get("cells") or []]
    return None


def _language(metadata: Any) -> str:
    """The notebook's language, for its code blocks ("python"), or ""."""
    if not isinstance(metadata, dict):
        return ""
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        entry = metadata.get(key)
        name = entry.get(field) if isinstance(entry, dict) else None
        if isinstance(name, str) and re.fullmatch(r"[\w+#.-]{1,30}", name):
            return name.lower()
    return ""


def _cell(cell: dict[str, Any], language: str) -> list[str]:
    """What one cell shows: its Markdown, or its code and what the code printed."""
    kind = cell.get("cell_type")
    text = _text(cell.get("source", cell.get("input")))
    if kind == "markdown":
        return [text]
    if kind == "heading":  # format 3
        level = cell.get("level")
        hashes = "#" * (level if isinstance(level, int) and 1 <= level <= 6 else 1)
        return [f"{hashes} {' '.join(text.split())}"]
    if kind != "code":
        return []  # raw cells: text for a converter
    parts = [_fenced(text, language)] if text.strip() else []
    outputs = cell.get("outputs")
    outputs = outputs if isinstance(outputs, list) else []
    shown = "\n".join(p for o in outputs if isinstance(o, dict) and (p := _output(o)).strip())
    if shown.strip():
        parts.append(_fenced(_cut(shown), "text"))
    return parts


def _output(output: dict[str, Any]) -> str:
    """The text of one output: a stream's, a result's plain text, an error's message."""
    kind = output.get("output_type")
    if kind == "stream":
        return _text(output.get("text"))
    if kind == "error":
        return f"{output.get('ename', '')}: {output.get('evalue', '')}".strip(": ")
    data = output.get("data")
    if isinstance(data, dict):  # execute_result, display_data (format 3: the keys at top)
        return _text(data.get("text/plain"))
    return _text(output.get("text"))


def _text(value: Any) -> str:
    """A cell's or an output's text (a list of lines, or one string), without terminal
    codes."""
    if isinstance(value, list):
        value = "".join(v for v in value if isinstance(v, str))
    return _ANSI.sub("", value) if isinstance(value, str) else ""


def _cut(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return f"{text[:MAX_OUTPUT_CHARS]}\n[... {len(text) - MAX_OUTPUT_CHARS:,} characters more]"


def _fenced(text: str, info: str) -> str:
    """``text`` as a fenced code block, its fence longer than any run of backticks in it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.strip(chr(10))}\n{fence}"
