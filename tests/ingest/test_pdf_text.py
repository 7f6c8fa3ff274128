"""Clean text from PDFs: broken words joined, page furniture and contents pages gone,
sections titled by the outline, printed page labels reported.

Every PDF is a real one, written in the test with fpdf2 and read back through the loader.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tether import EmptyDocument, Tether
from tether.ingest import LoadedDocument, load_path
from tether.ingest.chunking import Section
from tether.ingest.pdf_sections import OutlineEntry, outline_headings

Furniture = Callable[[int], str]  # the physical page number -> a header or footer line


def build_pdf(
    path: Path,
    pages: list[list[str]],
    *,
    header: Furniture | None = None,
    footer: Furniture | None = None,
    labels: tuple[tuple[int, str, int], ...] = (),  # (first page, fpdf style, start)
    title: str | None = None,
) -> Path:
    """A PDF with one line per entry of each page. A line "# Title" / "## Title" starts an
    outline entry (level 1 / 2) at that point and is written as "Title" ("# Title|Printed"
    is written as "Printed", a line per "\\n"). ``header`` and ``footer`` are written at the
    top and bottom of every page, in that stream order."""
    from fpdf import FPDF

    pdf = FPDF()
    if title is not None:
        pdf.set_title(title)
    pdf.set_auto_page_break(auto=False)
    styles = {page: (style, start) for page, style, start in labels}
    for number, lines in enumerate(pages, start=1):
        pdf.add_page()
        if number in styles:
            style, start = styles[number]
            pdf.set_page_label(label_style=style, label_start=start)
        pdf.set_font("Helvetica", size=11)
        if header:
            pdf.set_xy(10, 8)
            pdf.cell(0, 6, header(number))
        pdf.set_xy(10, 20)
        for line in lines:
            hashes, _, title = line.partition(" ")
            if hashes and set(hashes) == {"#"} and title:
                title, _, printed = title.partition("|")
                pdf.start_section(title, level=len(hashes) - 1)
                line = printed or title
            for part in line.split("\n"):
                pdf.cell(0, 6, part, new_x="LMARGIN", new_y="NEXT")
        if footer:
            pdf.set_xy(10, 280)
            pdf.cell(0, 6, footer(number))
    pdf.output(str(path))
    return path


def page_texts(doc: LoadedDocument) -> dict[int, str]:
    """The document text of each page, its sections joined by a blank line."""
    pages: dict[int, list[str]] = {}
    for section in doc.sections:
        assert section.page is not None
        pages.setdefault(section.page, []).append(doc.text[section.start : section.end])
    return {page: "\n\n".join(parts) for page, parts in pages.items()}


WORDS = ["pump", "valve", "filter", "sensor", "gasket", "flange", "rotor", "seal"]


def body(number: int) -> list[str]:
    word = WORDS[(number - 1) % len(WORDS)]
    return [
        f"Page {number} explains how the {word} is inspected.",
        f"Remove the {word} cover and check it for wear.",
        f"Fit a new {word} when the old one is cracked.",
    ]


# -- broken words -------------------------------------------------------------------------


def test_words_broken_at_line_ends_are_joined_and_real_hyphens_kept(tmp_path: Path) -> None:
    pdf = build_pdf(
        tmp_path / "words.pdf",
        [
            ["The configu-", "ration file is read once at start."],
            [
                "A well-known rule applies here: the well-",
                "known rule wins over a local one.",
                "Text is encoded as UTF-",
                "8 everywhere, in a state-of-the-",
                "art pump sold by Addison-",
                "Wesley and friends.",
            ],
        ],
    )
    text = load_path(pdf).text
    assert "The configuration file is read once" in text
    assert "the well-known rule wins" in text  # the document spells it with a hyphen
    assert "UTF-8 everywhere" in text
    assert "a state-of-the-art pump" in text
    assert "sold by Addison-Wesley and friends" in text
    assert "configu-" not in text and "wellknown" not in text


# -- page furniture -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "footer",
    [
        pytest.param(lambda n: f"Page {n} of 6", id="page-n-of-m"),
        pytest.param(lambda n: str(n), id="bare-number"),
        pytest.param(lambda n: f"- {n} -", id="dashed-number"),
        pytest.param(lambda n: f"{n} / 6", id="n-slash-m"),
    ],
)
def test_running_headers_footers_and_page_numbers_are_removed(
    tmp_path: Path, footer: Furniture
) -> None:
    pages = [body(n) for n in range(1, 7)]
    pages[2].insert(0, "Torque note: use 12 Nm on this page only.")  # a line on one page
    pdf = build_pdf(
        tmp_path / "manual.pdf",
        pages,
        header=lambda n: "Lumen S2 Service Manual - Revision 4",
        footer=footer,
    )
    doc = load_path(pdf)
    assert page_texts(doc) == {n: "\n".join(lines) for n, lines in enumerate(pages, start=1)}
    assert doc.dropped_pages == ()
    assert {s.title for s in doc.sections} == {None}  # no outline, no titles


CHAPTERS = ["Setup", "Daily care", "Repairs"]


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(lambda n: f"{CHAPTERS[(n - 1) // 4]} chapter", id="chapter-title"),
        pytest.param(
            lambda n: f"Chapter {(n - 1) // 4 + 1}: {CHAPTERS[(n - 1) // 4]} {n}",
            id="chapter-title-and-page-number",
        ),
    ],
)
def test_a_chapter_header_on_a_few_nearby_pages_is_removed(
    tmp_path: Path, header: Furniture
) -> None:
    """Each header recurs on 4 of 12 pages: too few to be everywhere, close enough together."""
    pages = [body(n) for n in range(1, 13)]
    doc = load_path(build_pdf(tmp_path / "chapters.pdf", pages, header=header))
    assert page_texts(doc) == {n: "\n".join(lines) for n, lines in enumerate(pages, start=1)}


def test_short_chapter_headers_with_their_page_number_are_removed(tmp_path: Path) -> None:
    """Headers that no other page repeats go when they hold the page's number; a heading
    that happens to start with its page's number stays when no other page does that."""
    chapters = {1: "Chapter 1: Setup", 2: "Chapter 1: Setup", 3: "Chapter 2: Spare parts"}
    pages = [body(n) for n in range(1, 6)]
    doc = load_path(
        build_pdf(
            tmp_path / "short.pdf",
            pages,
            header=lambda n: f"{chapters.get(n, 'Chapter 3: Care')} {n}",
        )
    )
    assert page_texts(doc) == {n: "\n".join(lines) for n, lines in enumerate(pages, start=1)}

    pages = [["1 Overview", *body(1)], body(2), body(3)]
    doc = load_path(build_pdf(tmp_path / "numbered-heading.pdf", pages))
    assert page_texts(doc)[1] == "\n".join(pages[0])


def test_a_short_chapters_title_between_two_running_lines_is_removed(tmp_path: Path) -> None:
    """An appendix of two pages: its title in the footer, between the book's title and
    the page number, recurs on too few pages to be found alone."""
    from fpdf import FPDF

    chapters = ["Setup"] * 4 + ["Daily care"] * 4 + ["Appendix A Demos"] * 2
    pages = [body(n) for n in range(1, len(chapters) + 1)]
    pages[4] = ["vii", "Item no. 2", "viii", *pages[4]]  # a list: lines like page numbers
    pdf = FPDF()
    pdf.set_auto_page_break(auto=False)
    pdf.set_font("Helvetica", size=11)
    for number, lines in enumerate(pages, start=1):
        pdf.add_page()
        pdf.set_xy(10, 20)
        for line in lines:
            pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
        pdf.set_xy(10, 270)
        for line in ("User Guide", chapters[number - 1], f"Page {number}"):
            pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "guide.pdf"))
    doc = load_path(tmp_path / "guide.pdf")
    pages[4] = pages[4][1:2] + pages[4][3:]  # "vii" and "viii" read as page numbers; not the item
    assert page_texts(doc) == {n: "\n".join(lines) for n, lines in enumerate(pages, start=1)}


def test_repeated_lines_in_the_body_of_pages_are_kept(tmp_path: Path) -> None:
    """Only the top and bottom lines of a page can be furniture, and code that ends a few
    pages the same way ("}") is not."""
    pages = [[*body(n), "Check the seal.", *body(n + 1), "}"] for n in range(1, 7)]
    doc = load_path(build_pdf(tmp_path / "body.pdf", pages))
    assert page_texts(doc) == {n: "\n".join(lines) for n, lines in enumerate(pages, start=1)}


# -- contents and index pages -------------------------------------------------------------

CONTENTS_STYLES = {
    "spaced-leaders": lambda title, page: f"{title} . . . . . . . . . . . . {page}",
    "dot-leaders": lambda title, page: f"{title} ........................ {page}",
    "no-leaders": lambda title, page: f"{title} {page}",
}


@pytest.mark.parametrize("style", CONTENTS_STYLES.values(), ids=CONTENTS_STYLES.keys())
def test_contents_and_index_pages_are_left_out(
    tmp_path: Path, style: Callable[[str, int], str]
) -> None:
    entries = ["1 Introduction", "2 Installation", "2.1 Unpacking", "2.2 Mounting", "3 Care"]
    contents = ["Contents", *(style(title, page) for page, title in enumerate(entries, 2))]
    with_numbers = [
        "Set the relief valve to 30",
        "bar before the first start; the pump then runs at 2900 rpm",
        "and draws about 4 A. Check the seal every 6 months and write",
        "down what you find in the service log of the machine.",
    ]
    index = ["Index", "calibration, 2, 4", "filter, 3", "gasket, 3-4", "pump, 2, 3, 4", "valve, 4"]
    pages = [contents, body(2), with_numbers, body(4), index]
    doc = load_path(build_pdf(tmp_path / "contents.pdf", pages))
    assert doc.dropped_pages == (1, 5)
    assert page_texts(doc) == {
        2: "\n".join(body(2)),
        3: "\n".join(with_numbers),
        4: "\n".join(body(4)),
    }


def test_tables_of_numbers_are_not_contents(tmp_path: Path) -> None:
    measurements = ["Flow per pump model", "Model A 120", "Model B 95", "Model C 140", "Model D 60"]
    years = ["Service history", "Installed 2019", "Inspected 2020", "Repaired 2021", "Sold 2023"]
    doc = load_path(build_pdf(tmp_path / "tables.pdf", [measurements, years]))
    assert doc.dropped_pages == ()
    assert page_texts(doc) == {1: "\n".join(measurements), 2: "\n".join(years)}


def test_a_pdf_that_is_only_contents_keeps_them(tmp_path: Path) -> None:
    contents = [f"{n} Chapter {n} . . . . . . . . {n + 1}" for n in range(1, 7)]
    doc = load_path(build_pdf(tmp_path / "only.pdf", [contents]))
    assert doc.dropped_pages == ()
    assert doc.text == "\n".join(contents)


# -- outline ------------------------------------------------------------------------------


def outlined_pages() -> list[list[str]]:
    return [
        ["# Getting started", "Unpack the pump and read this guide."],
        ["## Installation", "Mount the pump on a level base."],
        ["Tighten the four base bolts evenly."],
        [
            "Connect the hoses and open the valve.",
            "# Maintenance",
            "Inspect the pump every month.",
            "## Cleaning",
            "Rinse the filter with clean water.",
        ],
    ]


def test_outline_titles_become_section_titles(tmp_path: Path) -> None:
    doc = load_path(build_pdf(tmp_path / "outlined.pdf", outlined_pages()))
    assert [(s.page, s.title, doc.text[s.start : s.end]) for s in doc.sections] == [
        (1, "Getting started", "Getting started\nUnpack the pump and read this guide."),
        (2, "Getting started > Installation", "Installation\nMount the pump on a level base."),
        (3, "Getting started > Installation", "Tighten the four base bolts evenly."),
        (4, "Getting started > Installation", "Connect the hoses and open the valve."),
        (4, "Maintenance", "Maintenance\nInspect the pump every month."),
        (4, "Maintenance > Cleaning", "Cleaning\nRinse the filter with clean water."),
    ]


def test_an_outline_title_is_found_as_the_page_prints_it(tmp_path: Path) -> None:
    """Outlines and pages differ: in punctuation ("Nonregular" / "Non-regular"), in
    numbering ("1.3", "Appendix A", the outline's own "A"), in underscores, and a long
    title wraps. Each
    entry starts at its heading's line, not at its page's start, so the text above the
    heading stays in the section before it."""
    pages = [
        ["# Checking order", "The checks run in this order, and the order"],
        ["is: glob, then magic.", "# 2.13. Nonregular files|2.13. Non-regular files",
         "Directories have types too."],
        ["Sockets are inode/socket.", "# R and statistics|1.3 R and statistics",
         "R is an environment for statistics."],
        ["Most of it is free software.", "# A Copying Information|Appendix A Copying Information",
         "This manual may be copied."],
        ["Keep a copy of the licence.",
         "# How can I put error bars or confidence bands on my plot?|7.38 How can I put error"
         " bars or confidence bands on my\nplot?", "Use arrows() for bars."],
        ["Bars need a column of errors.", "# Tm_week|Tm week",
         "The week of the year in ISO 8601."],
    ]  # fmt: skip
    doc = load_path(build_pdf(tmp_path / "outlined.pdf", pages))
    starts = [(s.page, s.title, doc.text[s.start : s.end].split("\n")[0]) for s in doc.sections]
    assert starts == [
        (1, "Checking order", "Checking order"),
        (2, "Checking order", "is: glob, then magic."),
        (2, "2.13. Nonregular files", "2.13. Non-regular files"),
        (3, "2.13. Nonregular files", "Sockets are inode/socket."),
        (3, "R and statistics", "1.3 R and statistics"),
        (4, "R and statistics", "Most of it is free software."),
        (4, "A Copying Information", "Appendix A Copying Information"),
        (5, "A Copying Information", "Keep a copy of the licence."),
        (5, "How can I put error bars or confidence bands on my plot?",
         "7.38 How can I put error bars or confidence bands on my"),
        (6, "How can I put error bars or confidence bands on my plot?",
         "Bars need a column of errors."),
        (6, "Tm_week", "Tm week"),  # (the page lost the underscore it drew)
    ]  # fmt: skip
    wrapped = doc.sections[-3]
    assert doc.text[wrapped.start : wrapped.end].endswith("plot?\nUse arrows() for bars.")


def test_a_run_in_heading_starts_its_section_at_its_line(tmp_path: Path) -> None:
    """LaTeX sets a paragraph heading at the start of its text's first line: "Column The
    column(x) function ...". The line that begins with the entry's title starts it."""
    pages = [
        ["# Functions", "Functions of the data columns follow."],
        ["Every column is numbered from 1.",
         "## Column|Column The column(x) function is used in the using specifier.",
         "It returns the value of column x."],
    ]  # fmt: skip
    doc = load_path(build_pdf(tmp_path / "run-in.pdf", pages))
    starts = [(s.page, s.title, doc.text[s.start : s.end].split("\n")[0]) for s in doc.sections]
    assert starts == [
        (1, "Functions", "Functions"),
        (2, "Functions", "Every column is numbered from 1."),
        (2, "Functions > Column", "Column The column(x) function is used in the using specifier."),
    ]


def test_stored_chunks_carry_outline_titles_and_pages(tether: Tether, tmp_path: Path) -> None:
    [result] = tether.add(build_pdf(tmp_path / "outlined.pdf", outlined_pages()))
    chunks = tether.chunks(result.document_id)
    assert [(c.page, c.section_title) for c in chunks] == [
        (1, "Getting started"),
        (2, "Getting started > Installation"),
        (3, "Getting started > Installation"),
        (4, "Getting started > Installation"),
        (4, "Maintenance"),
        (4, "Maintenance > Cleaning"),
    ]
    [hit] = tether.search("rinse filter", scope="global")
    assert (hit.page, hit.section_title) == (4, "Maintenance > Cleaning")


# -- page labels --------------------------------------------------------------------------


def test_printed_page_labels_are_reported(tmp_path: Path) -> None:
    """Roman front matter, then arabic numbers from 1: the printed footer is removed too."""
    printed = ["i", "ii", "1", "2", "3"]
    pdf = build_pdf(
        tmp_path / "labelled.pdf",
        [body(n) for n in range(1, 6)],
        footer=lambda n: printed[n - 1],
        labels=((1, "r", 1), (3, "D", 1)),
    )
    doc = load_path(pdf)
    assert doc.page_labels == {1: "i", 2: "ii", 3: "1", 4: "2", 5: "3"}
    assert page_texts(doc) == {n: "\n".join(body(n)) for n in range(1, 6)}


def test_a_pdf_numbered_as_printed_reports_no_labels(tmp_path: Path) -> None:
    doc = load_path(build_pdf(tmp_path / "plain.pdf", [body(1), body(2)]))
    assert doc.page_labels == {}
    assert doc.file_size == (tmp_path / "plain.pdf").stat().st_size


# -- no text ------------------------------------------------------------------------------


def test_an_image_only_pdf_is_an_empty_document(tmp_path: Path) -> None:
    from fpdf import FPDF
    from PIL import Image

    image = tmp_path / "scan.png"
    Image.new("RGB", (200, 100), "gray").save(image)
    pdf = FPDF()
    pdf.add_page()
    pdf.image(str(image), x=10, y=10, w=100)
    pdf.output(str(tmp_path / "scan.pdf"))
    with pytest.raises(EmptyDocument, match="no text layer"):
        load_path(tmp_path / "scan.pdf")


@pytest.mark.parametrize(
    ("metadata", "title"),
    [
        ("Pump Service Manual", "Pump Service Manual"),
        ("Microsoft Word - pump_service.docx", "pump_service"),
        ("C:\\Users\\ann\\Desktop\\pump notes.doc", "pump notes"),
        ("Untitled", "manual"),
        ("Document1", "manual"),
        ("   ", "manual"),
    ],
)
def test_a_title_made_up_by_the_authoring_program_is_not_the_title(
    tmp_path: Path, metadata: str, title: str
) -> None:
    """A PDF's metadata title names the document unless a program made it up: then the
    file's name does (a title heads every chunk's vector and is searched with it)."""
    path = build_pdf(tmp_path / "manual.pdf", [["Prime the pump before use."]], title=metadata)
    assert load_path(path).title == title


def test_an_entry_is_not_placed_at_a_blank_line_or_by_a_word_of_prose() -> None:
    """A title that is all punctuation ("* * *") has no words to find: it is not placed at
    the page's first blank line. A run-in heading is found by its whole title: the entry
    "A Note" does not start at a sentence that begins "Note that"."""
    text = "Intro\nSome text here.\n\nNote that the cache is kept.\n* * *\nMore text."
    spans = [Section(0, len(text), None, 1)]
    outline = [OutlineEntry(1, 1, "Intro"), OutlineEntry(1, 1, "* * *"),
               OutlineEntry(1, 1, "A Note")]  # fmt: skip
    headings = outline_headings(text, spans, outline)
    assert [(h.title, text[h.start : h.start + 5]) for h in headings] == [
        ("Intro", "Intro"),
        ("* * *", "Intro"),  # not found: where the entry before it starts
        ("A Note", "Intro"),
    ]
