"""Office documents: Word, OpenDocument (text, spreadsheets, presentations) and PowerPoint
files made in the tests with python-docx, odfpy and python-pptx, loaded through the format
table, and indexed and searched through the real library."""

from __future__ import annotations

import logging
import time
import zipfile
from pathlib import Path

import docx
import pptx
import pytest
from docx.opc.constants import CONTENT_TYPE as CT
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from docx.oxml import parse_xml
from odf import dc
from odf.draw import Frame, Page, TextBox
from odf.namespaces import PRESENTATIONNS
from odf.office import Annotation
from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText
from odf.presentation import Notes
from odf.style import MasterPage, PageLayout
from odf.table import Table, TableCell, TableColumn, TableHeaderRows, TableRow
from odf.text import H, List, ListItem, Note, NoteBody, NoteCitation, P
from pptx.util import Inches

from helpers import make_settings
from tether import EmptyDocument, Tether, UnreadableFile
from tether.ingest import LoadedDocument, load_path, normalize_text
from tether.ingest.formats import tables

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
FOOTNOTES = (
    f'<w:footnotes xmlns:w="{W_NS}">'
    '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
    '<w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r>'
    '<w:r><w:t xml:space="preserve"> Prices exclude shipping to islands.</w:t></w:r></w:p>'
    "</w:footnote></w:footnotes>"
)


def titled(doc: LoadedDocument) -> list[tuple[str | None, str]]:
    return [(s.title, doc.text[s.start : s.end].strip()) for s in doc.sections]


def assert_well_formed(doc: LoadedDocument) -> None:
    """Normalized text, covered in order by its sections."""
    assert normalize_text(doc.text) == doc.text
    assert doc.sections[0].start == 0
    assert doc.sections[-1].end == len(doc.text)
    for before, after in zip(doc.sections, doc.sections[1:], strict=False):
        assert before.end == after.start


def add_footnote(document: docx.document.Document, paragraph: object) -> None:
    """A real footnotes part (python-docx writes none), cited at the end of ``paragraph``."""
    package = document.part.package
    part = Part(PackURI("/word/footnotes.xml"), CT.WML_FOOTNOTES, FOOTNOTES.encode(), package)
    document.part.relate_to(part, RT.FOOTNOTES)
    run = paragraph.add_run()  # type: ignore[attr-defined]
    run._r.append(parse_xml(f'<w:footnoteReference xmlns:w="{W_NS}" w:id="1"/>'))


PRICES = [("Item", "Price"), ("Desk lamp", "39 EUR"), ("Floor lamp", "89 EUR")]


def fill(table: object, rows: list[tuple[str, ...]]) -> None:
    """Write ``rows`` into a python-docx or python-pptx table of that shape."""
    for r, cells in enumerate(rows):
        for c, value in enumerate(cells):
            table.cell(r, c).text = value  # type: ignore[attr-defined]


def make_docx(path: Path, *, core_title: str = "", footnote: bool = True) -> Path:
    document = docx.Document()
    document.core_properties.title = core_title
    document.add_paragraph("Lamp Handbook", style="Title")
    document.add_heading("Pricing", 1)
    paragraph = document.add_paragraph("The desk lamp is sold in three colours.")
    document.add_comment(paragraph.runs, text="Check this with sales", author="Reviewer")
    if footnote:
        add_footnote(document, paragraph)
    document.add_heading("Colours", 2)
    document.add_paragraph("Graphite", style="List Bullet")
    document.add_paragraph("Sand", style="List Bullet")
    fill(document.add_table(rows=3, cols=2), PRICES)
    document.add_paragraph("Prices include VAT.")
    document.add_heading("Support", 1)
    document.add_paragraph("Write to the service desk.")
    document.save(path)
    return path


def test_docx_reads_headings_lists_and_tables_in_body_order(tmp_path: Path) -> None:
    doc = load_path(make_docx(tmp_path / "handbook.docx"))
    assert_well_formed(doc)
    assert doc.title == "Lamp Handbook"
    assert doc.mime.endswith("wordprocessingml.document")
    sections = titled(doc)
    assert [title for title, _ in sections] == [
        "Pricing",
        "Pricing > Colours",
        "Support",
        "Footnotes",
    ]
    colours = sections[1][1]
    assert colours.split("\n\n") == [
        "Colours",
        "- Graphite\n- Sand",
        "Item: Desk lamp; Price: 39 EUR",
        "Item: Floor lamp; Price: 89 EUR",
        "Prices include VAT.",
    ]


def test_docx_keeps_footnotes_and_drops_comments(tmp_path: Path) -> None:
    doc = load_path(make_docx(tmp_path / "handbook.docx"))
    assert "sold in three colours.[1]" in doc.text
    assert dict(titled(doc))["Footnotes"] == "Footnotes\n\n[1] Prices exclude shipping to islands."
    assert "Check this with sales" not in doc.text


@pytest.mark.parametrize(
    ("core_title", "expected"),
    [
        ("Official Title", "Official Title"),
        ("", "Lamp Handbook"),
        ("Untitled", "Lamp Handbook"),  # what a program made up is no title
        ("Microsoft Word - lamp_guide.docx", "lamp_guide"),
    ],
)
def test_docx_title_is_its_own_else_its_title_paragraph(
    tmp_path: Path, core_title: str, expected: str
) -> None:
    path = make_docx(tmp_path / "handbook.docx", core_title=core_title, footnote=False)
    assert load_path(path).title == expected


def test_docx_without_a_title_is_named_by_its_file(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("Only a paragraph about pumps.")
    document.save(tmp_path / "pumps.docx")
    doc = load_path(tmp_path / "pumps.docx")
    assert (doc.title, doc.text, [s.title for s in doc.sections]) == (
        "pumps",
        "Only a paragraph about pumps.",
        [None],
    )


def test_docx_table_without_a_header_row_joins_its_cells(tmp_path: Path) -> None:
    document = docx.Document()
    fill(document.add_table(rows=2, cols=3), [("2023", "12", "north"), ("2024", "15", "south")])
    document.save(tmp_path / "figures.docx")
    assert load_path(tmp_path / "figures.docx").text == "2023 | 12 | north\n\n2024 | 15 | south"


def test_docx_merged_cells_keep_every_value_under_its_column(tmp_path: Path) -> None:
    document = docx.Document()
    table = document.add_table(rows=3, cols=3)
    fill(table, [("Plant", "Petals", ""), ("Iris", "25", "18"), ("", "31", "22")])
    table.cell(0, 1).merge(table.cell(0, 2))  # "Petals" over two columns
    table.cell(1, 0).merge(table.cell(2, 0))  # "Iris" down two rows
    document.save(tmp_path / "merged.docx")
    text = load_path(tmp_path / "merged.docx").text
    assert "Plant: Iris; Petals: 25; Petals: 18" in text
    assert "Plant: Iris; Petals: 31; Petals: 22" in text


def test_docx_reads_tracked_changes_as_accepted(tmp_path: Path) -> None:
    document = docx.Document()
    paragraph = document.add_paragraph("The pump runs ")
    paragraph._p.append(
        parse_xml(
            f'<w:ins xmlns:w="{W_NS}" w:id="1" w:author="A"><w:r><w:t>quietly</w:t></w:r></w:ins>'
        )
    )
    paragraph._p.append(
        parse_xml(
            f'<w:del xmlns:w="{W_NS}" w:id="2" w:author="A"><w:r><w:delText>loudly</w:delText>'
            "</w:r></w:del>"
        )
    )
    document.save(tmp_path / "pump.docx")
    assert load_path(tmp_path / "pump.docx").text == "The pump runs quietly"


def make_odt(path: Path) -> Path:
    document = OpenDocumentText()
    document.meta.addElement(dc.Title(text="Garden Guide"))
    document.text.addElement(H(outlinelevel=1, text="Watering"))
    paragraph = P(text="Water the roses at dawn.")
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="Or at dusk in summer."))
    note.addElement(body)
    paragraph.addElement(note)
    comment = Annotation()
    comment.addElement(P(text="Is this right?"))
    paragraph.addElement(comment)
    document.text.addElement(paragraph)
    document.text.addElement(H(outlinelevel=2, text="Tools"))
    tools = List()
    for tool in ("Watering can", "Hose"):
        item = ListItem()
        item.addElement(P(text=tool))
        tools.addElement(item)
    document.text.addElement(tools)
    table = Table(name="Prices")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    header = TableHeaderRows()
    rows = [("Tool", "Price"), ("Hose", "25 EUR")]
    for index, cells in enumerate(rows):
        row = TableRow()
        for value in cells:
            cell = TableCell()
            cell.addElement(P(text=value))
            row.addElement(cell)
        (header if index == 0 else table).addElement(row)
        if index == 0:
            table.addElement(header)
    document.text.addElement(table)
    document.save(str(path))
    return path


def test_odt_reads_headings_lists_tables_and_notes(tmp_path: Path) -> None:
    doc = load_path(make_odt(tmp_path / "garden.odt"))
    assert_well_formed(doc)
    assert doc.title == "Garden Guide"
    assert doc.mime == "application/vnd.oasis.opendocument.text"
    assert titled(doc) == [
        ("Watering", "Watering\n\nWater the roses at dawn.[1]"),
        ("Watering > Tools", "Tools\n\n- Watering can\n- Hose\n\nTool: Hose; Price: 25 EUR"),
        ("Footnotes", "Footnotes\n\n[1] Or at dusk in summer."),
    ]
    assert "Is this right?" not in doc.text


def make_pptx(path: Path) -> Path:
    presentation = pptx.Presentation()
    first = presentation.slides.add_slide(presentation.slide_layouts[1])
    first.shapes.title.text = "Quarterly Review"
    first.placeholders[1].text = "Revenue grew\nChurn fell"
    first.notes_slide.notes_text_frame.text = "Thank the sales team."
    second = presentation.slides.add_slide(presentation.slide_layouts[5])
    second.shapes.title.text = "Price List"
    lower = second.shapes.add_textbox(Inches(1), Inches(4), Inches(3), Inches(1))
    lower.text_frame.text = "Prices valid until June."
    upper = second.shapes.add_textbox(Inches(1), Inches(2), Inches(3), Inches(1))
    upper.text_frame.text = "All prices in euros."
    table = second.shapes.add_table(2, 2, Inches(1), Inches(5), Inches(4), Inches(1)).table
    fill(table, PRICES[:2])
    presentation.slides.add_slide(presentation.slide_layouts[6])  # blank: no text
    untitled = presentation.slides.add_slide(presentation.slide_layouts[6])
    box = untitled.shapes.add_textbox(Inches(1), Inches(1), Inches(3), Inches(1))
    box.text_frame.text = "Questions welcome."
    presentation.save(path)
    return path


def test_pptx_is_a_section_per_slide_with_its_number_and_notes(tmp_path: Path) -> None:
    doc = load_path(make_pptx(tmp_path / "review.pptx"))
    assert_well_formed(doc)
    assert doc.title == "Quarterly Review"
    assert doc.mime.endswith("presentationml.presentation")
    assert [(s.title, s.page) for s in doc.sections] == [
        ("Quarterly Review", 1),
        ("Price List", 2),
        ("Slide 4", 4),
    ]
    assert doc.page_labels == {n: f"slide {n}" for n in (1, 2, 3, 4)}
    first, second, fourth = (t for _, t in titled(doc))
    assert first == "Quarterly Review\n\nRevenue grew\nChurn fell\n\nNotes: Thank the sales team."
    assert second.split("\n\n") == [
        "Price List",
        "All prices in euros.",
        "Prices valid until June.",
        "Item: Desk lamp; Price: 39 EUR",
    ]
    assert fourth == "Questions welcome."


def test_a_slide_table_whose_header_row_is_empty_has_no_header(tmp_path: Path) -> None:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Readings"
    shape = slide.shapes.add_table(3, 3, Inches(1), Inches(2), Inches(6), Inches(1))
    fill(shape.table, [("", "", ""), ("2023", "12", "north"), ("2024", "15", "south")])
    assert shape.table.first_row  # PowerPoint's default: the first row is the header
    presentation.save(tmp_path / "readings.pptx")
    ((_, text),) = titled(load_path(tmp_path / "readings.pptx"))
    # Not "2023: 2024; 12: 15; north: south": the data row is no header.
    assert text.split("\n\n")[1:] == ["2023 | 12 | north", "2024 | 15 | south"]


def test_a_slide_chart_reads_as_its_data(tmp_path: Path) -> None:
    """A chart is its title and a line per category naming each series' value, under the
    category axis's title; dates on a date axis read as dates; a scatter chart reads as
    its series' values; and the numbers are found by a question about them."""
    import datetime as dt

    from pptx.chart.data import CategoryChartData, XyChartData
    from pptx.enum.chart import XL_CHART_TYPE

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Results"
    data = CategoryChartData()
    data.categories = ["1st Qtr", "2nd Qtr", "3rd Qtr"]
    data.add_series("Sales", (8.2, 3.2, 1.4))
    data.add_series("Costs", (3.1, 2.0, 1.0))
    chart = slide.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(2), Inches(6), Inches(3), data
    ).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Sales by quarter"
    chart.category_axis.has_title = True
    chart.category_axis.axis_title.text_frame.text = "Quarter"
    second = presentation.slides.add_slide(presentation.slide_layouts[5])
    second.shapes.title.text = "Trend"
    dated = CategoryChartData()
    dated.categories = [dt.date(2024, 1, 1), dt.date(2024, 2, 1)]
    dated.add_series("Visitors", (120, 180))
    second.shapes.add_chart(XL_CHART_TYPE.LINE, Inches(1), Inches(2), Inches(6), Inches(3), dated)
    points = XyChartData()
    points.add_series("Load").add_data_point(1, 0.5)
    second.shapes.add_chart(
        XL_CHART_TYPE.XY_SCATTER, Inches(1), Inches(5), Inches(3), Inches(2), points
    )
    presentation.save(tmp_path / "results.pptx")

    (_, results), (_, trend) = titled(load_path(tmp_path / "results.pptx"))
    assert "Chart: Sales by quarter\nQuarter: 1st Qtr; Sales: 8.2; Costs: 3.1\n" in results
    assert "Quarter: 3rd Qtr; Sales: 1.4; Costs: 1" in results
    assert "Chart: Visitors\nCategory: 2024-01-01; Visitors: 120\n" in trend
    assert "Chart: Load\nLoad: 0.5" in trend
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(tmp_path / "results.pptx", workspace_id="w")
        hits = t.search("3rd Qtr sales", scope="workspace", workspace_id="w", mode="lexical")
    assert hits and hits[0].section_title == "Results" and "Sales: 1.4" in hits[0].text


def test_a_headerless_slide_table_with_gaps_keeps_each_value_in_its_column(
    tmp_path: Path,
) -> None:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Grid"
    shape = slide.shapes.add_table(4, 5, Inches(1), Inches(2), Inches(6), Inches(1))
    rows = [
        ("", "", "", "", ""),
        ("a", "", "", "", "d"),
        ("", "", "c", "", ""),
        ("b", "", "", "", ""),
    ]
    fill(shape.table, rows)
    presentation.save(tmp_path / "grid.pptx")
    ((_, text),) = titled(load_path(tmp_path / "grid.pptx"))
    # Joined, the rows would be "a | d", "c", "b": which column holds "c" would be lost.
    assert text.split("\n\n")[1:] == ["Column 1: a; Column 5: d", "Column 3: c", "Column 1: b"]


def empty_docx(path: Path) -> None:
    docx.Document().save(path)


def empty_odt(path: Path) -> None:
    OpenDocumentText().save(str(path))


def empty_pptx(path: Path) -> None:
    presentation = pptx.Presentation()
    presentation.slides.add_slide(presentation.slide_layouts[6])
    presentation.save(path)


@pytest.mark.parametrize(
    ("name", "make"), [("e.docx", empty_docx), ("e.odt", empty_odt), ("e.pptx", empty_pptx)]
)
def test_a_document_without_text_is_empty(tmp_path: Path, name: str, make: object) -> None:
    make(tmp_path / name)  # type: ignore[operator]
    with pytest.raises(EmptyDocument):
        load_path(tmp_path / name)


def rezip(source: Path, target: Path, replace: dict[str, bytes]) -> Path:
    """``source``'s members into ``target``, those named in ``replace`` replaced."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            new.writestr(info, replace.get(info.filename, old.read(info)))
    return target


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("garbage.docx", lambda p: p.write_bytes(b"PK\x03\x04 this is not a zip file")),
        ("cut.docx", lambda p: p.write_bytes(make_docx(p).read_bytes()[:3000])),
        (
            "broken.docx",
            lambda p: rezip(
                make_docx(p.with_suffix(".src")), p, {"word/document.xml": b"<w:document><w:body>"}
            ),
        ),
        ("cut.pptx", lambda p: p.write_bytes(make_pptx(p).read_bytes()[:5000])),
        (
            "broken.pptx",
            lambda p: rezip(
                make_pptx(p.with_suffix(".src")), p, {"ppt/presentation.xml": b"<p:presentation"}
            ),
        ),
        (
            "broken.odt",
            lambda p: rezip(
                make_odt(p.with_suffix(".src")), p, {"content.xml": b"<office:document-content"}
            ),
        ),
    ],
)
def test_a_damaged_file_is_unreadable(tmp_path: Path, name: str, damage: object) -> None:
    damage(tmp_path / name)  # type: ignore[operator]
    with pytest.raises(UnreadableFile) as failure:
        load_path(tmp_path / name)
    assert name in str(failure.value)


@pytest.mark.parametrize("name", ["bomb.docx", "bomb.pptx", "bomb.odt", "bomb.xlsx"])
def test_a_zip_bomb_is_refused_before_it_is_unpacked(tmp_path: Path, name: str) -> None:
    """A zip file named as an office file whose one member is 100 MB of zeros, about
    100 kB packed: more than a file of its size may unpack to. It is refused from its
    table of contents, fast."""
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("zeros.bin", "w") as member:
            chunk = bytes(2**20)
            for _ in range(100):
                member.write(chunk)
    started = time.perf_counter()
    with pytest.raises(UnreadableFile, match="zip bomb"):
        load_path(path)
    assert time.perf_counter() - started < 2


def test_indexed_office_files_are_found_by_section_and_slide(tmp_path: Path) -> None:
    handbook = make_docx(tmp_path / "handbook.docx")
    review = make_pptx(tmp_path / "review.pptx")
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        results = t.add([handbook, review])
        assert [r.status for r in results] == ["indexed", "indexed"]
        [hit, *_] = t.search("graphite sand colours", scope="global")
        assert (hit.title, hit.section_title, hit.page) == (
            "Lamp Handbook",
            "Pricing > Colours",
            None,
        )
        [hit, *_] = t.search("prices valid until June", scope="global")
        assert (hit.title, hit.section_title, hit.page, hit.page_label) == (
            "Quarterly Review",
            "Price List",
            2,
            "slide 2",
        )
        [hit, *_] = t.search("thank the sales team", scope="global")
        assert (hit.page, hit.page_label) == (1, "slide 1")


# -- OpenDocument spreadsheets and presentations ------------------------------------------


def ods_row(*values: str | float, repeated: int = 1) -> TableRow:
    """A sheet row; a number is a float cell that shows itself, "" an empty cell."""
    row = TableRow(numberrowsrepeated=repeated) if repeated > 1 else TableRow()
    for value in values:
        if value == "":
            row.addElement(TableCell())
            continue
        kind = {"valuetype": "string"} if isinstance(value, str) else {"valuetype": "float"}
        cell = TableCell(**kind) if isinstance(value, str) else TableCell(**kind, value=value)
        cell.addElement(P(text=str(value)))
        row.addElement(cell)
    return row


def ods_sheet(name: str, *rows: TableRow | TableHeaderRows) -> Table:
    sheet = Table(name=name)
    sheet.addElement(TableColumn(numbercolumnsrepeated=3))
    for row in rows:
        sheet.addElement(row)
    return sheet


def make_ods(path: Path) -> Path:
    """Two sheets: one with a title line, whose last row repeats a cell across two
    columns, then a million empty rows a thousand cells wide (as LibreOffice ends a
    sheet); one whose header row is marked as such."""
    document = OpenDocumentSpreadsheet()
    document.meta.addElement(dc.Title(text="Lamp Stock"))
    floor = ods_row("Floor lamp")
    twice = TableCell(valuetype="float", value=3, numbercolumnsrepeated=2)
    twice.addElement(P(text="3"))
    floor.addElement(twice)
    tail = TableRow(numberrowsrepeated=1_048_000)
    tail.addElement(TableCell(numbercolumnsrepeated=1024))
    header = TableHeaderRows()
    header.addElement(ods_row("Supplier", "Country"))
    document.spreadsheet.addElement(
        ods_sheet(
            "Stock",
            ods_row("Stock in May"),
            ods_row("Item", "Count", "Shelf"),
            ods_row("Desk lamp", 12, 4.5),
            floor,
            tail,
        )
    )
    document.spreadsheet.addElement(
        ods_sheet("Suppliers", header, ods_row("Lumen GmbH", "Germany"), ods_row("", ""))
    )
    document.save(str(path))
    return path


def test_ods_is_a_section_per_sheet_of_rows_named_by_their_header(tmp_path: Path) -> None:
    started = time.perf_counter()
    doc = load_path(make_ods(tmp_path / "stock.ods"))
    assert time.perf_counter() - started < 5  # the million empty rows were never made
    assert_well_formed(doc)
    assert (doc.title, doc.mime) == ("Lamp Stock", "application/vnd.oasis.opendocument.spreadsheet")
    assert titled(doc) == [
        (
            "Stock",
            "Stock\n\nStock in May\n\n"
            "Item: Desk lamp; Count: 12; Shelf: 4.5\n\nItem: Floor lamp; Count: 3; Shelf: 3",
        ),
        ("Suppliers", "Suppliers\n\nSupplier: Lumen GmbH; Country: Germany"),
    ]
    assert doc.metadata == {}


def test_ods_stops_at_the_row_limit_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As an Excel workbook does; a row repeated a million times is read to the limit."""
    monkeypatch.setattr(tables, "MAX_ROWS", 5)
    document = OpenDocumentSpreadsheet()
    rows = [ods_row("Item", "Price"), *(ods_row(f"item {n}", n) for n in range(4))]
    document.spreadsheet.addElement(ods_sheet("First", *rows))
    for name in ("Second", "Third"):
        many = ods_row("part", 1, repeated=1_000_000)
        document.spreadsheet.addElement(ods_sheet(name, ods_row("Part", "Count"), many))
    document.save(str(tmp_path / "big.ods"))
    with caplog.at_level(logging.WARNING, logger="tether.ingest"):
        doc = load_path(tmp_path / "big.ods")
    assert doc.text.count("Item: item") == 4
    assert doc.text.count("Part: part; Count: 1") == 1
    assert [s.title for s in doc.sections] == ["First", "Second"]
    [warning] = doc.metadata["warnings"]
    assert "first 5 rows" in warning and "'Second'" in warning
    assert [r.name for r in caplog.records if warning in r.getMessage()] == ["tether.ingest"]


def odp_frame(kind: str | None, *paragraphs: str, y: str = "1cm") -> Frame:
    """A text frame; ``kind`` its presentation class (``title``, ``outline``, ``notes``)."""
    frame = Frame(width="20cm", height="3cm", x="1cm", y=y)
    if kind:
        frame.setAttrNS(PRESENTATIONNS, "class", kind)
    box = TextBox()
    for text in paragraphs:
        box.addElement(P(text=text))
    frame.addElement(box)
    return frame


def make_odp(path: Path) -> Path:
    """Three slides: titled with notes; titled with a text box, a table whose first row
    is marked as its header and a page number; untitled."""
    document = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    first, second, third = (Page(masterpagename=master) for _ in range(3))
    first.addElement(odp_frame("title", "Quarterly Review"))
    first.addElement(odp_frame("outline", "Revenue grew", "Churn fell", y="5cm"))
    notes = Notes()
    notes.addElement(odp_frame("notes", "Thank the sales team."))
    first.addElement(notes)
    second.addElement(odp_frame("title", "Price List"))
    table = Table(usefirstrowstyles="true")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    table.addElement(ods_row("Item", "Price"))
    table.addElement(ods_row("Desk lamp", "39 EUR"))
    holder = Frame(width="20cm", height="3cm", x="1cm", y="3.5in")  # 8.89 cm: below
    holder.addElement(table)
    second.addElement(holder)  # written first, read second: frames go top, then left
    second.addElement(odp_frame(None, "Prices valid until June.", y="4cm"))
    second.addElement(odp_frame("page-number", "2", y="18cm"))
    third.addElement(odp_frame(None, "Questions welcome."))
    for slide in (first, second, third):
        document.presentation.addElement(slide)
    document.save(str(path))
    return path


def test_odp_is_a_section_per_slide_with_its_number_and_notes(tmp_path: Path) -> None:
    doc = load_path(make_odp(tmp_path / "review.odp"))
    assert_well_formed(doc)
    assert doc.title == "Quarterly Review"
    assert doc.mime == "application/vnd.oasis.opendocument.presentation"
    assert [(s.title, s.page) for s in doc.sections] == [
        ("Quarterly Review", 1),
        ("Price List", 2),
        ("Slide 3", 3),
    ]
    assert doc.page_labels == {n: f"slide {n}" for n in (1, 2, 3)}
    first, second, third = (text.split("\n\n") for _, text in titled(doc))
    assert first == [
        "Quarterly Review",
        "Revenue grew",
        "Churn fell",
        "Notes: Thank the sales team.",
    ]
    assert second == ["Price List", "Prices valid until June.", "Item: Desk lamp; Price: 39 EUR"]
    assert third == ["Questions welcome."]


@pytest.mark.parametrize("name", ["stock.ods", "review.odp"])
def test_opendocument_files_are_recognised_by_their_content(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    (make_ods if name.endswith(".ods") else make_odp)(path)
    unnamed = tmp_path / "unnamed"
    unnamed.write_bytes(path.read_bytes())
    assert load_path(unnamed).mime == load_path(path).mime


def empty_odp(path: Path) -> None:
    document = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    document.presentation.addElement(Page(masterpagename=master))
    document.save(str(path))


def empty_ods(path: Path) -> None:
    document = OpenDocumentSpreadsheet()
    document.spreadsheet.addElement(ods_sheet("Empty", ods_row("", ""), ods_row("", "", "")))
    document.save(str(path))


@pytest.mark.parametrize(("name", "make"), [("e.ods", empty_ods), ("e.odp", empty_odp)])
def test_an_opendocument_file_without_text_is_empty(
    tmp_path: Path, name: str, make: object
) -> None:
    make(tmp_path / name)  # type: ignore[operator]
    with pytest.raises(EmptyDocument):
        load_path(tmp_path / name)


LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lol [<!ENTITY lol "lol">'
    b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
    b'<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
    b"<office:body><office:spreadsheet>&lol2;</office:spreadsheet></office:body>"
    b"</office:document-content>"
)


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("garbage.ods", lambda p: p.write_bytes(b"PK\x03\x04 this is not a zip file")),
        ("cut.ods", lambda p: p.write_bytes(make_ods(p).read_bytes()[:1000])),
        (
            "broken.ods",
            lambda p: rezip(
                make_ods(p.with_suffix(".src")), p, {"content.xml": b"<office:document-content"}
            ),
        ),
        (
            "laughs.ods",
            lambda p: rezip(make_ods(p.with_suffix(".src")), p, {"content.xml": LAUGHS}),
        ),
        (
            "broken.odp",
            lambda p: rezip(
                make_odp(p.with_suffix(".src")), p, {"content.xml": b"<office:document-content"}
            ),
        ),
        ("text.odp", lambda p: make_odt(p)),  # an OpenDocument text named as a presentation
    ],
)
def test_a_damaged_opendocument_file_is_unreadable(
    tmp_path: Path, name: str, damage: object
) -> None:
    damage(tmp_path / name)  # type: ignore[operator]
    with pytest.raises(UnreadableFile) as failure:
        load_path(tmp_path / name)
    assert name in str(failure.value)
    if name == "laughs.ods":  # odfpy parses with defusedxml: no entity is expanded
        assert "EntitiesForbidden" in str(failure.value)


@pytest.mark.parametrize("name", ["bomb.ods", "bomb.odp"])
def test_an_opendocument_zip_bomb_is_refused(tmp_path: Path, name: str) -> None:
    """As the other office files' are (the same zip, named .ods and .odp)."""
    test_a_zip_bomb_is_refused_before_it_is_unpacked(tmp_path, name)


def test_indexed_opendocument_files_are_found_by_sheet_and_slide(tmp_path: Path) -> None:
    stock = make_ods(tmp_path / "stock.ods")
    review = make_odp(tmp_path / "review.odp")
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        results = t.add([stock, review])
        assert [r.status for r in results] == ["indexed", "indexed"]
        [hit, *_] = t.search("Lumen GmbH Germany", scope="global")
        assert (hit.title, hit.section_title, hit.page) == ("Lamp Stock", "Suppliers", None)
        assert "Supplier: Lumen GmbH; Country: Germany" in hit.text
        [hit, *_] = t.search("prices valid until June", scope="global")
        assert (hit.title, hit.section_title, hit.page, hit.page_label) == (
            "Quarterly Review",
            "Price List",
            2,
            "slide 2",
        )
        [hit, *_] = t.search("thank the sales team", scope="global")
        assert (hit.page, hit.page_label) == (1, "slide 1")
