"""Tables as text: spreadsheets (.xlsx), CSV and TSV files, and the tables inside office
documents, each row one line that names its columns: ``Item: Lamp; Price: 39 EUR``.

A row that names its columns still reads right wherever a chunk cuts the table, and it
matches a question that names a column ("the price of the lamp"). The first non-empty row
of a sheet or a CSV file is its header; single-cell rows above it (a sheet's title) are
kept as lines of their own. Rows are separated by blank lines, so a chunk ends between two
rows, never inside one. A file yields at most :data:`MAX_ROWS` rows in all and a row at
most :data:`MAX_COLUMNS` cells; past the first bound the rest is left out, and the
document says so in ``metadata["warnings"]`` and in the ``tether.ingest`` log.

An Excel workbook is a section per sheet, titled with the sheet's name; a CSV file is one
section (chunking splits it). Also here, for the office loaders: :class:`TextBlocks`,
text assembled block by block that keeps the offsets of its headings.
"""

from __future__ import annotations

import csv
import io
import itertools
import logging
import math
import re
import struct
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from types import ModuleType
from typing import Any

from tether.errors import EmptyDocument, UnreadableFile, UnsupportedFileType
from tether.ingest.chunking import Heading, Section, heading_sections
from tether.ingest.formats import _mimes
from tether.ingest.formats._zip import open_zip
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text
from tether.text import normalize_text

logger = logging.getLogger("tether.ingest")

#: Rows a file may yield, all its sheets together.
MAX_ROWS = 50_000
#: Cells read from a row (a sheet formatted out to column XFD has 16,384).
MAX_COLUMNS = 200
#: How much of a CSV file its dialect is guessed from.
SNIFF_CHARS = 8192


class TextBlocks:
    """Text assembled from blocks (paragraphs, rows, headings), each normalized on its own
    (:func:`~tether.text.normalize_text`) and joined by a blank line, or by a line break
    between the items of a list. The whole is then normalized as it stands, so the
    offsets recorded while it is built hold in the final text."""

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._tight = False
        self.length = 0
        self.headings: list[Heading] = []

    def add(self, block: str, *, tight: bool = False) -> int | None:
        """Append ``block``; where it starts, or None when it holds no text. Two ``tight``
        blocks in a row are joined by a line break (a list's items)."""
        text = normalize_text(block)
        if not text:
            return None
        separator = ("\n" if tight and self._tight else "\n\n") if self._blocks else ""
        start = self.length + len(separator)
        self._blocks.append(separator + text)
        self.length = start + len(text)
        self._tight = tight
        return start

    def heading(self, level: int, title: str) -> str | None:
        """Append a heading line; its title (white space collapsed), or None if empty."""
        title = " ".join(normalize_text(title).split())
        start = self.add(title)
        if start is None:
            return None
        self.headings.append(Heading(start, start + len(title) + 1, level, title))
        return title

    def text(self) -> str:
        return "".join(self._blocks)

    def sections(self, text: str) -> list[Section]:
        """Sections of ``text`` (this :meth:`text`) at the headings, by heading path."""
        return heading_sections(text, self.headings)


@dataclass
class RowBudget:
    """The rows a file may still yield; ``exhausted`` once a row was refused."""

    left: int
    exhausted: bool = False

    def take(self) -> bool:
        if self.left > 0:
            self.left -= 1
            return True
        self.exhausted = True
        return False


def cell_text(value: Any) -> str:
    """A cell's value as plain text: whole numbers without ``.0``, dates as ISO dates
    (with the time only when there is one), white space collapsed to single spaces."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.15g}"
    if isinstance(value, datetime):
        if value.time() == time():
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds" if value.second else "minutes")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return " ".join(str(value).split())


def record_line(header: Sequence[str], cells: Sequence[str]) -> str:
    """``Header: value; Header2: value2`` for the non-empty cells of a row; a column
    without a header is ``Column N``."""
    parts = []
    for index, value in enumerate(cells):
        if value:
            name = header[index] if index < len(header) and header[index] else ""
            parts.append(f"{name or f'Column {index + 1}'}: {value}")
    return "; ".join(parts)


def plain_line(cells: Sequence[str]) -> str:
    """A row without a header: its non-empty cells joined by `` | ``."""
    return " | ".join(cell for cell in cells if cell)


_NUMBER = re.compile(r"[\d\s.,:/%$€£¥+-]+")


def looks_like_header(rows: Sequence[Sequence[str]]) -> bool:
    """Whether a table's first row names its columns: there are rows below it, and it has
    two or more cells, all filled, distinct (a name merged over neighbouring columns
    counts once), short and none of them a number or a date."""
    first = rows[0] if rows else ()
    names = [cell for i, cell in enumerate(first) if i == 0 or cell != first[i - 1]]
    return (
        len(rows) >= 2
        and len(first) >= 2
        and all(first)
        and len(set(names)) == len(names)
        and all(len(cell) <= 80 and not _NUMBER.fullmatch(cell) for cell in first)
    )


def table_lines(rows: Sequence[Sequence[str]], *, header: bool | None = None) -> list[str]:
    """A document table's rows as lines: under a header row (``header``, else when the
    first row :func:`looks_like_header`) ``Header: value`` lines. Without one, each row's
    cells joined (:func:`plain_line`), unless the table :func:`has_gaps`: then a value's
    column is all that places it, and rows read ``Column 3: value``."""
    rows = [row for row in rows if any(row)]
    if header is None:
        header = looks_like_header(rows)
    if not header or len(rows) < 2:
        if has_gaps(rows):
            return [record_line((), row) for row in rows]
        return [plain_line(row) for row in rows]
    return [record_line(rows[0], row) for row in rows[1:]]


def has_gaps(rows: Sequence[Sequence[str]]) -> bool:
    """Whether a table without a header has three or more columns and a row whose filled
    cells do not start in the first column or leave an empty one between them: joined,
    such a row's values would lose the columns they stand in (a layout table, each row
    filled from the left, has none)."""
    if max((len(row) for row in rows), default=0) < 3:
        return False
    for row in rows:
        filled = [i for i, cell in enumerate(row) if cell]
        if filled and (filled[0] > 0 or filled[-1] - filled[0] + 1 > len(filled)):
            return True
    return False


#: Rows looked at for the header: the first of them as wide as the table (notes and a
#: title above it are narrower).
HEADER_LOOKAHEAD = 20


def record_lines(rows: Iterable[Sequence[str]], budget: RowBudget) -> Iterator[str]:
    """A sheet's rows as lines: the rows above its header as they are (a title, notes),
    the header, then each later row a :func:`record_line`. The header is found among the
    first :data:`HEADER_LOOKAHEAD` rows (:func:`header_row`); a sheet of one column has
    its first row as the header. Stops when ``budget`` runs out."""
    rows = (cells for cells in rows if any(cells))
    ahead = list(itertools.islice(rows, HEADER_LOOKAHEAD))
    if not ahead:
        return
    at = header_row(ahead)
    yield from (plain_line(cells) for cells in ahead[:at])
    header, records = ahead[at], 0
    for cells in itertools.chain(ahead[at + 1 :], rows):
        if not budget.take():
            return
        records += 1
        yield record_line(header, cells)
    if not records:
        yield plain_line(header)


def header_row(rows: Sequence[Sequence[str]]) -> int:
    """Which of a sheet's first rows is its header: the first with at least three quarters
    as many filled cells as the widest (and two) that names every column most rows below
    it fill. Notes written across the cells above a table ("at | the | top | of | their
    spreadsheets") are as wide as a header, but leave a column of the table unnamed.
    A later row is taken over the first that wide only when no cell of it is a number or
    a date: a header that leaves a column unnamed (pandas' index) is still the header,
    not the first row of data under it."""
    filled = [{i for i, cell in enumerate(cells) if cell} for cells in rows]
    widths = [len(columns) for columns in filled]
    wide = max(2, math.ceil(0.75 * max(widths))) if max(widths) > 1 else 1
    candidates = [i for i, width in enumerate(widths) if width >= wide]
    for i in candidates:
        below = Counter(column for columns in filled[i + 1 :] for column in columns)
        most = {column for column, n in below.items() if 2 * n > len(filled) - i - 1}
        named = i == candidates[0] or not any(_NUMBER.fullmatch(cell) for cell in rows[i] if cell)
        if most <= filled[i] and named:
            return i
    return candidates[0]


def _limit_warning(file: FileBytes, where: str) -> str:
    warning = (
        f"read the first {MAX_ROWS:,} rows only (MAX_ROWS); the rows after them{where} are"
        " not indexed: split the file to index all of it"
    )
    logger.warning("%s: %s", file.path, warning)
    return warning


def load_csv(file: FileBytes) -> LoadedDocument:
    """A CSV or TSV file: its dialect guessed from its start (:data:`SNIFF_CHARS`), else
    commas for ``.csv`` and tabs for ``.tsv``/``.tab``; one section, titled with the
    file's name."""
    text = decode_text(file)
    suffix = file.path.suffix.lower()
    dialect, delimiter = _dialect(text[:SNIFF_CHARS], suffix)
    reader = csv.reader(io.StringIO(text, newline=""), dialect, delimiter=delimiter)
    budget = RowBudget(MAX_ROWS)
    blocks = TextBlocks()
    try:
        for line in record_lines(
            ([cell_text(c) for c in row[:MAX_COLUMNS]] for row in reader), budget
        ):
            blocks.add(line)
    except csv.Error as exc:
        raise UnreadableFile(
            str(file.path), f"is not readable as CSV at line {reader.line_num} ({exc})"
        ) from exc
    text = blocks.text()
    if not text:
        raise EmptyDocument(str(file.path), "the file has no rows")
    tabs = file.path.suffix.lower() in (".tsv", ".tab")
    return LoadedDocument(
        title=file.stem,
        text=text,
        mime=_mimes.TSV if tabs else _mimes.CSV,
        sections=(Section(0, len(text), file.stem),),
        metadata={"warnings": [_limit_warning(file, "")]} if budget.exhausted else {},
    )


def _dialect(sample: str, suffix: str) -> tuple[type[csv.Dialect] | csv.Dialect, str]:
    """(dialect, delimiter) of a CSV file that starts with ``sample``: tabs for a ``.tsv``
    or ``.tab`` file that has them; else the delimiter among ``,;\\t|`` that splits the
    most rows into as many columns as the first (at least two), :class:`csv.Sniffer`'s
    guess first on a tie (it also finds the quote character), then the extension's."""
    default = "\t" if suffix in (".tsv", ".tab") else ","
    if default == "\t" and "\t" in sample:
        return csv.excel_tab, default
    cut = sample.rfind("\n")  # whole lines: a cut line confuses the sniffer
    sample = sample[:cut] if cut > 0 else sample
    try:
        sniffed: csv.Dialect | None = csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        sniffed = None
    guesses = ([sniffed.delimiter] if sniffed else []) + [default, *_DELIMITERS]
    best = max(guesses, key=lambda delimiter: _consistency(sample, delimiter))
    if sniffed is not None and best == sniffed.delimiter:
        return sniffed, best
    return csv.excel, best


_DELIMITERS = ",;\t|"


def _consistency(sample: str, delimiter: str) -> int:
    """How many rows of ``sample`` split at ``delimiter`` have as many columns as the
    first, when that is two or more (else 0)."""
    try:
        widths = [
            len(row)
            for row in csv.reader(io.StringIO(sample, newline=""), delimiter=delimiter)
            if row
        ]
    except csv.Error:
        return 0
    if not widths or widths[0] < 2:
        return 0
    return sum(1 for width in widths if width == widths[0])


def _openpyxl(source: str) -> ModuleType:
    try:
        import openpyxl
    except ImportError as exc:
        raise UnsupportedFileType(
            source, f"reading Excel files needs openpyxl: pip install 'tether[formats]' ({exc})"
        ) from exc
    return openpyxl


def load_xlsx(file: FileBytes) -> LoadedDocument:
    """An Excel workbook: a section per sheet (titled with its name) of
    :func:`record_lines`; formulas read as the values they last computed."""
    source = str(file.path)
    openpyxl = _openpyxl(source)
    open_zip(file.data, source).close()  # its table of contents checked (zip bombs)
    errors = (KeyError, ValueError, zipfile.BadZipFile, OSError, EOFError, SyntaxError)
    errors += (openpyxl.utils.exceptions.InvalidFileException,)
    budget = RowBudget(MAX_ROWS)
    blocks = TextBlocks()
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(file.data), read_only=True, data_only=True)
        try:
            stopped_in = _read_sheets(workbook, blocks, budget)
            title = workbook.properties.title
        finally:
            workbook.close()
    except errors as exc:
        raise UnreadableFile(source, f"is not a readable Excel workbook ({exc})") from exc
    return _workbook(file, blocks, budget, stopped_in, title, _mimes.XLSX)


def load_xls(file: FileBytes) -> LoadedDocument:
    """An Excel 97-2003 workbook (``.xls``), read as :func:`load_xlsx` reads a newer one:
    a section per sheet of :func:`record_lines`, dates as dates."""
    source = str(file.path)
    try:
        import xlrd
    except ImportError as exc:
        raise UnsupportedFileType(
            source, f"reading Excel 97-2003 files needs xlrd: pip install 'tether[formats]' ({exc})"
        ) from exc
    if not file.data:
        raise EmptyDocument(source, "the file is empty")
    budget = RowBudget(MAX_ROWS)
    blocks = TextBlocks()
    # A damaged file breaks xlrd's parser in many ways, each its own exception.
    errors = (xlrd.XLRDError, xlrd.compdoc.CompDocError, struct.error, AssertionError)
    errors += (ValueError, KeyError, IndexError, TypeError, EOFError, OSError)
    try:  # (xlrd writes its warnings to a log file: not to this process's stdout)
        book = xlrd.open_workbook(file_contents=file.data, on_demand=True, logfile=io.StringIO())
        try:
            stopped_in = _read_xls_sheets(book, xlrd, blocks, budget)
        finally:
            book.release_resources()
    except errors as exc:
        raise UnreadableFile(source, f"is not a readable Excel 97-2003 workbook ({exc})") from exc
    return _workbook(file, blocks, budget, stopped_in, None, _mimes.XLS)


def _workbook(
    file: FileBytes,
    blocks: TextBlocks,
    budget: RowBudget,
    stopped_in: str | None,
    title: str | None,
    mime: str,
) -> LoadedDocument:
    """A workbook read into ``blocks``: its document, with a warning when the rows ran
    out (from the sheet ``stopped_in`` on)."""
    text = blocks.text()
    if not text:
        raise EmptyDocument(str(file.path), "the workbook's sheets are empty")
    where = f" (from sheet {stopped_in!r} on)" if stopped_in else ""
    return LoadedDocument(
        title=" ".join((title or "").split()) or file.stem,
        text=text,
        mime=mime,
        sections=tuple(blocks.sections(text)),
        metadata={"warnings": [_limit_warning(file, where)]} if budget.exhausted else {},
    )


def _read_xls_sheets(
    book: Any, xlrd: ModuleType, blocks: TextBlocks, budget: RowBudget
) -> str | None:
    """:func:`_read_sheets` for an xlrd workbook."""
    for index in range(book.nsheets):
        sheet = book.sheet_by_index(index)
        mode = book.datemode
        rows = (
            [cell_text(_xls_value(c, mode, xlrd)) for c in sheet.row(r)[:MAX_COLUMNS]]
            for r in range(sheet.nrows)
        )
        named = False
        for line in record_lines(rows, budget):
            if not named:
                named = blocks.heading(1, sheet.name or "Sheet") is not None
            blocks.add(line)
        if budget.exhausted:
            return str(sheet.name)
        book.unload_sheet(index)
    return None


def _xls_value(cell: Any, datemode: int, xlrd: ModuleType) -> Any:
    """A cell's value as openpyxl would give it: a date as a datetime, a boolean as a
    bool, an error or a blank as nothing."""
    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate_as_datetime(cell.value, datemode)
        except (xlrd.xldate.XLDateError, OverflowError, ValueError):
            return cell.value
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return None
    return cell.value


def _read_sheets(workbook: Any, blocks: TextBlocks, budget: RowBudget) -> str | None:
    """Each sheet's name as a heading and its rows as lines into ``blocks``; the name of
    the sheet where ``budget`` ran out, if it did."""
    for sheet in workbook.worksheets:
        # A sheet's own record of its size can be wrong ("A1" for a whole table): read
        # the rows it holds, not the ones it declares.
        sheet.reset_dimensions()
        rows = sheet.iter_rows(max_col=MAX_COLUMNS, values_only=True)
        named = False
        for line in record_lines(([cell_text(v) for v in row] for row in rows), budget):
            if not named:
                named = blocks.heading(1, sheet.title or "Sheet") is not None
            blocks.add(line)
        if budget.exhausted:
            return str(sheet.title)
    return None
