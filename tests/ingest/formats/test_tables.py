"""Tables: Excel workbooks made in the tests with openpyxl, CSV and TSV files written with
the csv module, loaded through the format table, and indexed and searched through the
real library."""

from __future__ import annotations

import csv
import logging
from datetime import date, datetime
from pathlib import Path

import openpyxl
import pytest

from helpers import make_settings
from tether import EmptyDocument, Tether, UnreadableFile
from tether.ingest import LoadedDocument, load_path, normalize_text
from tether.ingest.formats import tables


def titled(doc: LoadedDocument) -> list[tuple[str | None, str]]:
    return [(s.title, doc.text[s.start : s.end].strip()) for s in doc.sections]


def make_xlsx(path: Path, sheets: dict[str, list[list[object]]], *, title: str = "") -> Path:
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    workbook.properties.title = title or None
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    workbook.save(path)
    return path


CATALOGUE = {
    "Lamps": [
        ["Lamp catalogue 2024"],  # a title row above the header
        [],
        ["Item", "Price", "Stock", "Since", "Discontinued"],
        ["Desk lamp", "39 EUR", 120, date(2021, 3, 1), False],
        ["Floor lamp", "89 EUR", 7.5, datetime(2022, 5, 17, 9, 30), None],
    ],
    "Empty": [],
    "Suppliers": [
        ["Supplier", "Country"],
        ["Lumen GmbH", "Germany"],
        ["Luz SA", None],
    ],
}


def test_xlsx_is_a_section_per_sheet_of_header_named_rows(tmp_path: Path) -> None:
    doc = load_path(make_xlsx(tmp_path / "catalogue.xlsx", CATALOGUE))
    assert normalize_text(doc.text) == doc.text
    assert doc.title == "catalogue"
    assert doc.mime.endswith("spreadsheetml.sheet")
    assert titled(doc) == [
        (
            "Lamps",
            "Lamps\n\nLamp catalogue 2024\n\n"
            "Item: Desk lamp; Price: 39 EUR; Stock: 120; Since: 2021-03-01; Discontinued: FALSE"
            "\n\nItem: Floor lamp; Price: 89 EUR; Stock: 7.5; Since: 2022-05-17 09:30",
        ),
        (
            "Suppliers",
            "Suppliers\n\nSupplier: Lumen GmbH; Country: Germany\n\nSupplier: Luz SA",
        ),
    ]
    assert doc.metadata == {}


def test_notes_written_across_the_cells_above_a_sheets_table_are_not_its_header(
    tmp_path: Path,
) -> None:
    """A note spread over the cells above a table is nearly as wide as the table, but leaves
    one of its columns unnamed: the header is the row that names every column its rows
    fill, and the note stays a line of its own."""
    sheet = [
        ["Notes:", None, None],
        ["written", "across", None, "cells"],  # as wide as three quarters of the table
        ["Name", "Role", "Born", "Died"],
        ["Vera Rubin", "scientist", "1928-07-23", "2016-12-25"],
        ["Harper Lee", "author", "1926-04-28", "2016-02-19"],
        ["John Glenn", "astronaut", None, "2016-12-08"],
    ]
    doc = load_path(make_xlsx(tmp_path / "people.xlsx", {"People": sheet}))
    assert doc.text.split("\n\n") == [
        "People",
        "Notes:",
        "written | across | cells",
        "Name: Vera Rubin; Role: scientist; Born: 1928-07-23; Died: 2016-12-25",
        "Name: Harper Lee; Role: author; Born: 1926-04-28; Died: 2016-02-19",
        "Name: John Glenn; Role: astronaut; Died: 2016-12-08",
    ]
    # A header that leaves a column unnamed (pandas writes its index so) is still the
    # header: the rows below it hold numbers, and are no header.
    rows = [["", "name", "age", "city"], ["0", "Ann", "31", "Oslo"], ["1", "Bo", "45", "Rome"]]
    assert tables.header_row(rows) == 0
    assert tables.header_row([["a", "b", "c"], ["1", "2", None], ["3", "4", None]]) == 0


def make_xls(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    """An Excel 97-2003 workbook written by xlwt (dates with a date format, as Excel
    stores them: numbers that the format makes dates)."""
    import xlwt

    workbook = xlwt.Workbook()
    day, moment = (
        xlwt.easyxf(num_format_str="YYYY-MM-DD"),
        xlwt.easyxf(num_format_str="YYYY-MM-DD HH:MM"),
    )
    for name, rows in sheets.items():
        sheet = workbook.add_sheet(name)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if isinstance(value, datetime):
                    sheet.write(r, c, value, day if value.hour == value.minute == 0 else moment)
                elif isinstance(value, date):
                    sheet.write(r, c, datetime(value.year, value.month, value.day), day)
                elif value is not None:
                    sheet.write(r, c, value)
    workbook.save(str(path))
    return path


def test_xls_reads_as_the_same_workbook_saved_as_xlsx(tmp_path: Path) -> None:
    """An Excel 97-2003 file is read as its newer form is: a section per sheet, records
    named by the header, dates as dates, booleans as TRUE/FALSE."""
    old = load_path(make_xls(tmp_path / "catalogue.xls", CATALOGUE))
    new = load_path(make_xlsx(tmp_path / "catalogue.xlsx", CATALOGUE))
    assert old.mime == "application/vnd.ms-excel" and old.title == "catalogue"
    assert old.text == new.text
    assert titled(old) == titled(new)


@pytest.mark.parametrize(
    "data", [b"", b"not a workbook at all", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600]
)
def test_a_damaged_xls_fails_typed(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "damaged.xls"
    path.write_bytes(data)
    with pytest.raises((UnreadableFile, EmptyDocument)):
        load_path(path)


def test_xlsx_title_is_the_workbook_s_own(tmp_path: Path) -> None:
    path = make_xlsx(tmp_path / "c.xlsx", {"S": [["A", "B"], [1, 2]]}, title="Price List")
    assert load_path(path).title == "Price List"


def test_xlsx_reads_formulas_as_their_values(tmp_path: Path) -> None:
    """A formula reads as the value it last computed (openpyxl writes none: LibreOffice or
    Excel would), and never as its source text."""
    path = make_xlsx(tmp_path / "f.xlsx", {"S": [["Net", "Gross"], [10, "=A2*1.2"]]})
    assert "A2*1.2" not in load_path(path).text


def test_xlsx_stops_at_the_row_limit_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tables, "MAX_ROWS", 5)
    rows: list[list[object]] = [["Item", "Price"], *([f"item {n}", n] for n in range(4))]
    more: list[list[object]] = [["Part", "Count"], *([f"part {n}", n] for n in range(3))]
    path = make_xlsx(tmp_path / "big.xlsx", {"First": rows, "Second": more, "Third": more})
    with caplog.at_level(logging.WARNING, logger="tether.ingest"):
        doc = load_path(path)
    assert doc.text.count("Item: item") == 4
    assert doc.text.count("Part: part") == 1
    assert [s.title for s in doc.sections] == ["First", "Second"]
    [warning] = doc.metadata["warnings"]
    assert "first 5 rows" in warning and "'Second'" in warning
    assert [r.name for r in caplog.records if warning in r.getMessage()] == ["tether.ingest"]


def test_xlsx_reads_at_most_max_columns_cells_of_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "MAX_COLUMNS", 2)
    path = make_xlsx(tmp_path / "wide.xlsx", {"S": [["A", "B", "C"], [1, 2, 3]]})
    assert load_path(path).text == "S\n\nA: 1; B: 2"


def test_an_empty_workbook_is_empty(tmp_path: Path) -> None:
    with pytest.raises(EmptyDocument):
        load_path(make_xlsx(tmp_path / "empty.xlsx", {"One": [], "Two": [[None, None]]}))


def test_a_damaged_workbook_is_unreadable(tmp_path: Path) -> None:
    path = make_xlsx(tmp_path / "c.xlsx", {"S": [["A", "B"], [1, 2]]})
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(UnreadableFile, match=r"c\.xlsx"):
        load_path(path)


def write_csv(path: Path, rows: list[list[str]], **dialect: str) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, **dialect).writerows(rows)  # type: ignore[arg-type]
    return path


PRICES = [
    ["Item", "Price", "Note"],
    ["Desk lamp", "39 EUR", "bright, warm; dimmable"],
    ["Floor lamp", "89 EUR", "tall\nand heavy"],
]
EXPECTED = (
    "Item: Desk lamp; Price: 39 EUR; Note: bright, warm; dimmable\n\n"
    "Item: Floor lamp; Price: 89 EUR; Note: tall and heavy"
)


@pytest.mark.parametrize(
    ("name", "delimiter", "mime"),
    [
        ("prices.csv", ",", "text/csv"),
        ("prices.csv", ";", "text/csv"),
        ("prices.tsv", "\t", "text/tab-separated-values"),
        ("prices.tab", "\t", "text/tab-separated-values"),
    ],
)
def test_csv_rows_name_their_columns_whatever_the_delimiter(
    tmp_path: Path, name: str, delimiter: str, mime: str
) -> None:
    doc = load_path(write_csv(tmp_path / name, PRICES, delimiter=delimiter))
    assert (doc.title, doc.mime, doc.text) == ("prices", mime, EXPECTED)
    assert titled(doc) == [("prices", EXPECTED)]


def test_a_csv_file_that_the_sniffer_cannot_read_falls_back_to_commas(tmp_path: Path) -> None:
    path = tmp_path / "names.csv"
    path.write_text("Name\nAda\nGrace\n")
    assert load_path(path).text == "Name: Ada\n\nName: Grace"


def test_csv_stops_at_the_row_limit_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tables, "MAX_ROWS", 3)
    path = write_csv(
        tmp_path / "many.csv", [["N", "Square"], *([str(n), str(n * n)] for n in range(4))]
    )
    with caplog.at_level(logging.WARNING, logger="tether.ingest"):
        doc = load_path(path)
    assert doc.text == "N: 0; Square: 0\n\nN: 1; Square: 1\n\nN: 2; Square: 4"
    [warning] = doc.metadata["warnings"]
    assert "first 3 rows" in warning
    assert any(warning in r.getMessage() for r in caplog.records)


def test_csv_at_the_row_limit_has_no_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "MAX_ROWS", 3)
    path = write_csv(tmp_path / "three.csv", [["N"], ["1"], ["2"], ["3"]])
    assert load_path(path).metadata == {}


def test_an_empty_csv_file_is_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text(",,\n\n")
    with pytest.raises(EmptyDocument):
        load_path(tmp_path / "empty.csv")


def test_a_csv_file_of_binary_data_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_bytes(b"a,b\n\x00\x01\x02,\x00")
    with pytest.raises(UnreadableFile, match=r"data\.csv"):
        load_path(tmp_path / "data.csv")


def test_indexed_sheets_are_found_by_sheet_name(tmp_path: Path) -> None:
    path = make_xlsx(tmp_path / "catalogue.xlsx", CATALOGUE, title="Lamp Catalogue")
    prices = write_csv(tmp_path / "prices.csv", PRICES)
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        assert [r.status for r in t.add([path, prices])] == ["indexed", "indexed"]
        [hit, *_] = t.search("Lumen GmbH Germany", scope="global")
        assert (hit.title, hit.section_title, hit.page) == ("Lamp Catalogue", "Suppliers", None)
        assert "Supplier: Lumen GmbH; Country: Germany" in hit.text
        [hit, *_] = t.search("tall and heavy", scope="global")
        assert (hit.title, hit.section_title) == ("prices", "prices")


@pytest.mark.parametrize(
    ("rows", "lines"),
    [
        # Filled from the left, trailing cells empty: a layout table, joined.
        ([["Step", "Mix", ""], ["Wait", "", ""]], ["Step | Mix", "Wait"]),
        # Two columns: nothing to lose.
        ([["", "x"], ["y", ""]], ["x", "y"]),
        # A value away from the first column, or a hole between two: positions kept.
        ([["a", "", "c"], ["", "b", ""]], ["Column 1: a; Column 3: c", "Column 2: b"]),
    ],
)
def test_a_headerless_table_keeps_columns_only_where_its_rows_have_gaps(
    rows: list[list[str]], lines: list[str]
) -> None:
    assert tables.table_lines(rows, header=False) == lines
