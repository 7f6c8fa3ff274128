"""OpenDocument spreadsheets (.ods) and presentations (.odp), read with odfpy as
OpenDocument text is (:mod:`tether.ingest.formats.office`: the same zip-bomb check before
odfpy unpacks anything, the same parser, defusedxml's, which refuses entity declarations).

- A spreadsheet is read as an Excel workbook is (:mod:`~tether.ingest.formats.tables`): a
  section per sheet, titled with its name, its rows through
  :func:`~tether.ingest.formats.tables.record_lines` under the same
  :class:`~tether.ingest.formats.tables.RowBudget` and warning. A cell's text is its
  paragraphs' (what the sheet shows: ``1,234.50 €``, not ``1234.5``), else its value;
  comments are dropped. A cell repeated across columns (``table:number-columns-repeated``)
  stands in each, up to :data:`~tether.ingest.formats.tables.MAX_COLUMNS`; a row repeated
  (``table:number-rows-repeated``) is read as often as it is repeated only when it holds
  text, lazily, so the million empty rows a sheet declares at its end cost nothing.
- A presentation is read as a PowerPoint file is: a section per slide (``page`` its
  number, cited as "slide 7"), titled with its title frame (else "Slide 7"). Its text is
  the title line, then its other frames in reading order, top then left, as a PowerPoint
  slide's shapes (page numbers, dates, headers and footers left out; a frame without a
  position where the file holds it; lists as ``- item`` lines; tables as rows, under
  a header when the table marks its first row), then ``Notes: ...`` with the speaker
  notes.
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable, Iterator
from typing import Any

from odf.namespaces import DCNS, DRAWNS, OFFICENS, PRESENTATIONNS, SVGNS, TABLENS

from tether.errors import EmptyDocument
from tether.ingest.formats import _mimes, tables
from tether.ingest.formats.office import (
    _attribute,
    _elements,
    _OdfReader,
    _opened,
    _parsed_odf,
    _title,
    slides_document,
)
from tether.ingest.formats.tables import (
    RowBudget,
    TextBlocks,
    _limit_warning,
    record_lines,
    table_lines,
)
from tether.ingest.loaders import FileBytes, LoadedDocument

#: Where a sheet's rows may stand: grouped, under a header, in a (printed) row range.
_ROW_CONTAINERS = frozenset(
    (TABLENS, name) for name in ("table-header-rows", "table-rows", "table-row-group")
)
_CELLS = frozenset({(TABLENS, "table-cell"), (TABLENS, "covered-table-cell")})
#: A cell's value where it has no paragraph (a file written by a program, not an editor).
_VALUE_ATTRIBUTES = ("string-value", "value", "date-value", "time-value", "boolean-value")
#: An ODF length: a number and its unit; centimetres per unit.
_LENGTH = re.compile(r"(-?\d+(?:\.\d+)?)\s*([a-zA-Z]+)")
_CENTIMETRES = {"cm": 1.0, "mm": 0.1, "in": 2.54, "pt": 2.54 / 72, "pc": 2.54 / 6, "px": 2.54 / 96}
#: Frames that are the slide's frame, not its content.
_FRAME_CLASSES = frozenset({"page-number", "footer", "header", "date-time"})


def _parsed(body: str) -> Callable[[io.BytesIO], Any]:
    """A reader of the file's bytes into odfpy's document, checked to hold ``body``."""
    return functools.partial(_parsed_odf, body=body)


def _meta_title(document: Any) -> str | None:
    return next((str(e) for e in _elements(document.meta) if e.qname == (DCNS, "title")), None)


def _repeats(element: Any, name: str) -> int:
    """How many times ``element`` stands (its ``table:number-*-repeated``), at least 1."""
    value = _attribute(element, TABLENS, name)
    # isascii: int() reads other digits too; the length: a number past int()'s digit limit.
    return int(value) if value.isascii() and value.isdigit() and len(value) < 10 else 1


# -- spreadsheets -------------------------------------------------------------------------


def _cell_text(reader: _OdfReader, cell: Any) -> str:
    text = " ".join(reader.inline(cell).split())
    if text:
        return text
    values = (_attribute(cell, OFFICENS, name) for name in _VALUE_ATTRIBUTES)
    return tables.cell_text(next((value for value in values if value), ""))


def _row_cells(reader: _OdfReader, row: Any) -> list[str]:
    """A row's cells, each repeated cell in every column it covers, at most
    :data:`~tether.ingest.formats.tables.MAX_COLUMNS` in all; trailing empty ones dropped."""
    cells: list[str] = []
    for cell in _elements(row):
        if cell.qname not in _CELLS:
            continue
        room = tables.MAX_COLUMNS - len(cells)
        if room <= 0:
            break
        text = _cell_text(reader, cell)
        cells.extend([text] * min(_repeats(cell, "number-columns-repeated"), room))
    while cells and not cells[-1]:
        cells.pop()
    return cells


def _sheet_rows(reader: _OdfReader, container: Any) -> Iterator[list[str]]:
    """A sheet's rows in order, lazily: a repeated row that holds text as often as it is
    repeated (the reader stops at its budget), an empty one not at all."""
    for child in _elements(container):
        if child.qname in _ROW_CONTAINERS:
            yield from _sheet_rows(reader, child)
        elif child.qname == (TABLENS, "table-row"):
            cells = _row_cells(reader, child)
            if cells:
                for _ in range(_repeats(child, "number-rows-repeated")):
                    yield cells


def _read_sheets(spreadsheet: Any, blocks: TextBlocks, budget: RowBudget) -> str | None:
    """Each sheet's name as a heading and its rows as lines into ``blocks``; the name of
    the sheet where ``budget`` ran out, if it did (as the Excel loader reads a workbook)."""
    reader = _OdfReader(set())
    for sheet in _elements(spreadsheet):
        if sheet.qname != (TABLENS, "table"):
            continue
        name = _attribute(sheet, TABLENS, "name")
        named = False
        for line in record_lines(_sheet_rows(reader, sheet), budget):
            if not named:
                named = blocks.heading(1, name or "Sheet") is not None
            blocks.add(line)
        if budget.exhausted:
            return name
    return None


def load_ods(file: FileBytes) -> LoadedDocument:
    """An OpenDocument spreadsheet: a section per sheet (see the module's docstring)."""
    document = _opened(file, "OpenDocument spreadsheet", _parsed("spreadsheet"))
    budget = RowBudget(tables.MAX_ROWS)
    blocks = TextBlocks()
    stopped_in = _read_sheets(document.spreadsheet, blocks, budget)
    text = blocks.text()
    if not text:
        raise EmptyDocument(str(file.path), "the spreadsheet's sheets are empty")
    where = f" (from sheet {stopped_in!r} on)" if stopped_in else ""
    return LoadedDocument(
        title=_title(_meta_title(document)) or file.stem,
        text=text,
        mime=_mimes.ODS,
        sections=tuple(blocks.sections(text)),
        metadata={"warnings": [_limit_warning(file, where)]} if budget.exhausted else {},
    )


# -- presentations ------------------------------------------------------------------------


class _SlideReader(_OdfReader):
    """A frame's text as OpenDocument text's body is read; a table's first row is its
    header when the table marks it (as PowerPoint's are read) and it is not empty."""

    def table(self, element: Any) -> None:
        header: list[list[str]] = []
        rows: list[list[str]] = []
        self._rows(element, rows, header)
        rows = header + rows
        marked = bool(header) or _attribute(element, TABLENS, "use-first-row-styles") == "true"
        marked = marked and bool(rows) and any(rows[0])
        for line in table_lines(rows, header=True if marked else None):
            self.blocks.add(line)


def _frame_text(element: Any) -> str:
    reader = _SlideReader(set())
    reader.body(element)
    return reader.blocks.text()


def _notes(notes: Any) -> str:
    """The speaker notes' text (the notes page's frames, not its picture of the slide)."""
    frames = (e for e in _elements(notes) if e.qname != (DRAWNS, "page-thumbnail"))
    return "\n".join(_frame_text(frame) for frame in frames).strip()


def _slide_blocks(page: Any) -> tuple[str, list[str]]:
    """(title, blocks) of a slide: its title line, its frames' text in reading order, its
    speaker notes."""
    title, frames, notes = "", [], ""
    for child in _elements(page):
        kind = _attribute(child, PRESENTATIONNS, "class")
        if child.qname == (PRESENTATIONNS, "notes"):
            notes = _notes(child)
        elif kind == "title" and not title:
            title = " ".join(_frame_text(child).split())
        elif kind not in _FRAME_CLASSES:
            frames.append(child)
    blocks = [_frame_text(frame) for frame in sorted(frames, key=_position)]
    return title, [title, *blocks] + ([f"Notes: {notes}"] if notes else [])


def _position(frame: Any) -> tuple[float, float]:
    """Where ``frame`` stands on its slide, (top, left) in centimetres; (0, 0) when it
    says none (it then keeps its place among the others at the top: the sort is stable)."""
    return (_length(_attribute(frame, SVGNS, "y")), _length(_attribute(frame, SVGNS, "x")))


def _length(value: str | None) -> float:
    """An ODF length ("2.5cm", "1in", "72pt") in centimetres; 0 for none or nonsense."""
    match = _LENGTH.fullmatch((value or "").strip())
    if match is None:
        return 0.0
    return float(match.group(1)) * _CENTIMETRES.get(match.group(2).lower(), 0.0)


def load_odp(file: FileBytes) -> LoadedDocument:
    """An OpenDocument presentation: a section per slide (see the module's docstring)."""
    document = _opened(file, "OpenDocument presentation", _parsed("presentation"))
    pages = [e for e in _elements(document.presentation) if e.qname == (DRAWNS, "page")]
    slides = [_slide_blocks(page) for page in pages]
    return slides_document(file, slides, _meta_title(document), _mimes.ODP)
