"""Office documents: Word (.docx), OpenDocument text (.odt) and PowerPoint (.pptx).

What is read, and what is not:

- Word and OpenDocument text read in body order, tables where they stand. Headings
  (Heading 1-9 styles or an outline level; the Title style is a level-1 heading) title
  the sections, by heading path. List items are ``- item`` lines, indented by level; a
  table is one line per row (:func:`~tether.ingest.formats.tables.table_lines`:
  ``Header: value; Header2: value2`` under a header row, else cells joined by `` | ``).
- Footnotes and endnotes are kept, as the author's own text: a reference is ``[n]`` where
  it stands, and the notes follow the body under a ``Footnotes`` heading, ``[n] text``
  each. Comments are dropped: they are reviewers' notes about the text, not the text.
  Tracked changes read as accepted (insertions kept, deletions dropped), and a table of
  contents is dropped (it repeats the headings).
- A presentation is a section per slide: ``page`` is the slide's number (cited as
  "slide 7"), the section's title the slide's title (else "Slide 7"). Its text is the
  title line, then the other shapes' text in reading order (top, then left; slide
  numbers, dates and footers left out), tables as rows, then ``Notes: ...`` with the
  speaker notes.

The title is the file's own (its core properties), else its first Title or level-1
heading (a presentation: its first slide's title), else the file's name. Every file is
opened through :func:`~tether.ingest.formats._zip.open_zip` first, which refuses zip
bombs before a library unpacks anything.
"""

from __future__ import annotations

import contextlib
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from xml.sax import SAXException

import docx
import docx.opc.exceptions
import pptx
import pptx.exc
from docx.enum.style import WD_STYLE_TYPE
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.oxml import parse_xml
from odf.namespaces import DCNS, OFFICENS, STYLENS, SVGNS, TABLENS, TEXTNS
from odf.opendocument import load as load_odf
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER

from tether.errors import EmptyDocument, UnreadableFile
from tether.ingest.chunking import Section
from tether.ingest.formats import _mimes
from tether.ingest.formats._zip import open_zip
from tether.ingest.formats.charts import chart_blocks
from tether.ingest.formats.tables import TextBlocks, table_lines
from tether.ingest.loaders import FileBytes, LoadedDocument, metadata_title

#: What the libraries raise for a file that is not what its name says, or is damaged.
_OPEN_ERRORS = (
    docx.opc.exceptions.PackageNotFoundError,
    pptx.exc.PackageNotFoundError,
    KeyError,
    ValueError,
    zipfile.BadZipFile,
    OSError,
    EOFError,
    SyntaxError,  # lxml's XMLSyntaxError
    SAXException,
)


def _opened(file: FileBytes, kind: str, open_with: Any) -> Any:
    """``open_with`` applied to the file's bytes, once :func:`open_zip` passed them."""
    source = str(file.path)
    open_zip(file.data, source).close()
    try:
        return open_with(io.BytesIO(file.data))
    except _OPEN_ERRORS as exc:
        raise UnreadableFile(source, f"is not a readable {kind} ({exc})") from exc


def _mime(extension: str) -> str:
    return _MIMES.get(extension, "application/octet-stream")


_MIMES = {".docx": _mimes.DOCX, ".pptx": _mimes.PPTX, ".odt": _mimes.ODT}


def _title(*candidates: str | None) -> str:
    return next((" ".join(c.split()) for c in candidates if c and c.strip()), "")


def _document(file: FileBytes, blocks: TextBlocks, title: str, extension: str) -> LoadedDocument:
    text = blocks.text()
    if not text:
        raise EmptyDocument(str(file.path), "the document has no text")
    return LoadedDocument(
        title=title or file.stem,
        text=text,
        mime=_mime(extension),
        sections=tuple(blocks.sections(text)),
    )


def _add_notes(blocks: TextBlocks, notes: list[tuple[str, str]]) -> None:
    """The footnotes, after the body: a ``Footnotes`` heading, then ``[n] text`` lines."""
    notes = [(mark, text) for mark, text in notes if text.strip()]
    if notes:
        blocks.heading(1, "Footnotes")
    for mark, text in notes:
        blocks.add(f"[{mark}] {' '.join(text.split())}", tight=True)


# -- Word ---------------------------------------------------------------------------------

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
#: Inside a paragraph, what is not its text: deleted revisions, field codes, properties,
#: and the fallback copy of a drawing (its text is in the drawing itself).
_WORD_SKIPPED = frozenset(
    {W + "del", W + "moveFrom", W + "pPr", W + "rPr", W + "instrText", W + "delText"}
    | {"{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"}
)
_WORD_NOTES = {W + "footnoteReference": "footnote", W + "endnoteReference": "endnote"}
_HEADING_STYLE = re.compile(r"heading ([1-9])")


@dataclass(frozen=True)
class _WordStyle:
    level: int | None = None  # a heading's level
    title: bool = False  # the Title style
    listed: bool = False
    toc: bool = False  # a table of contents' entry or heading


def _word_style(style: Any, depth: int = 0) -> _WordStyle:
    """What a paragraph style makes of a paragraph, from its name (Word writes the
    built-in names in English whatever the language) or its outline level, else its base
    style's."""
    name = (style.name or "").lower()
    if name == "title":
        return _WordStyle(level=1, title=True)
    if name.startswith("toc "):
        return _WordStyle(toc=True)
    heading = _HEADING_STYLE.fullmatch(name)
    level = int(heading.group(1)) if heading else _outline_level(style.element.pPr)
    if level:
        return _WordStyle(level=level)
    if name.startswith(("list bullet", "list number", "list paragraph")):
        return _WordStyle(listed=True)
    base = style.base_style
    return _word_style(base, depth + 1) if base is not None and depth < 8 else _WordStyle()


def _outline_level(ppr: Any) -> int | None:
    """The heading level a paragraph's properties give (``w:outlineLvl`` 0-8)."""
    found = ppr.find(W + "outlineLvl") if ppr is not None else None
    value = found.get(W + "val", "") if found is not None else ""
    return int(value) + 1 if value.isdigit() and int(value) < 9 else None


def _word_notes(document: Any) -> dict[tuple[str, str], Any]:
    """(kind, id) -> the ``w:footnote``/``w:endnote`` elements of the document."""
    notes: dict[tuple[str, str], Any] = {}
    kinds = {RT.FOOTNOTES: "footnote", RT.ENDNOTES: "endnote"}
    for rel in document.part.rels.values():
        kind = kinds.get(rel.reltype)
        if kind is None or rel.is_external:
            continue
        for note in parse_xml(rel.target_part.blob).iterchildren(W + kind):
            if note.get(W + "type") in (None, "normal"):  # not the separator lines
                notes[(kind, note.get(W + "id", ""))] = note
    return notes


class _WordReader:
    """A Word document's body as :class:`TextBlocks`, its notes numbered as cited."""

    def __init__(self, document: Any, notes: dict[tuple[str, str], Any]) -> None:
        self.styles = {
            style.style_id: _word_style(style)
            for style in document.styles
            if style.type == WD_STYLE_TYPE.PARAGRAPH and style.style_id
        }
        self.notes = notes
        self.cited: list[tuple[str, Any]] = []  # (mark, note element), in citation order
        self._marks: dict[tuple[str, str], str] = {}
        self.blocks = TextBlocks()
        self.first_title: str | None = None  # the first Title, else Heading 1

    def body(self, container: Any) -> None:
        for child in container.iterchildren():
            if child.tag == W + "p":
                self.paragraph(child)
            elif child.tag == W + "tbl":
                self.blocks_of_table(child)
            elif child.tag == W + "sdt" and not _is_toc(child):
                content = child.find(W + "sdtContent")
                if content is not None:
                    self.body(content)

    def paragraph(self, p: Any) -> None:
        ppr = p.find(W + "pPr")
        found = ppr.find(W + "pStyle") if ppr is not None else None
        style_id = found.get(W + "val") if found is not None else "Normal"
        style = self.styles.get(style_id or "", _WordStyle())
        if style.toc:
            return
        text = self.runs(p)
        level = _outline_level(ppr) or style.level
        if level:
            title = self.blocks.heading(level, text)
            if title and (style.title or level == 1) and self.first_title is None:
                self.first_title = title
            return
        numbering = _numbering(ppr)
        if (style.listed or numbering is not None) and text.strip():
            self.blocks.add(f"{'  ' * (numbering or 0)}- {text.strip()}", tight=True)
        else:
            self.blocks.add(text)

    def blocks_of_table(self, tbl: Any) -> None:
        first = tbl.find(W + "tr")
        marked = first is not None and first.find(f"{W}trPr/{W}tblHeader") is not None
        for line in table_lines(self.rows(tbl), header=True if marked else None):
            self.blocks.add(line)

    def rows(self, tbl: Any) -> list[list[str]]:
        """The table's rows on its grid: a cell merged across columns (``gridSpan``)
        stands in each of them, a cell that continues a vertical merge (``vMerge``) holds
        the text of the cell it continues, so every value keeps its column's name."""
        rows: list[list[str]] = []
        above: dict[int, str] = {}  # grid column -> the text last written there
        for tr in tbl.iterchildren(W + "tr"):
            row: list[str] = []
            for tc in tr.iterchildren(W + "tc"):
                span = tc.find(f"{W}tcPr/{W}gridSpan")
                merged = tc.find(f"{W}tcPr/{W}vMerge")
                column = len(row)
                text = self.cell(tc)
                if merged is not None and merged.get(W + "val") != "restart":
                    text = above.get(column, text)
                value = span.get(W + "val", "1") if span is not None else "1"
                width = int(value) if value.isdigit() else 1
                for offset in range(max(1, min(width, 64))):
                    row.append(text)
                    above[column + offset] = text
            rows.append(row)
        return rows

    def cell(self, tc: Any) -> str:
        """A cell's text on one line (a table inside it too)."""
        return " ".join(self.runs(tc).split())

    def runs(self, element: Any) -> str:
        parts: list[str] = []
        self._collect(element, parts)
        return "".join(parts)

    def _collect(self, element: Any, parts: list[str]) -> None:
        for child in element.iterchildren():
            tag = child.tag
            if not isinstance(tag, str) or tag in _WORD_SKIPPED:
                continue
            if tag == W + "t":
                parts.append(child.text or "")
            elif tag in (W + "tab", W + "ptab"):
                parts.append("\t")
            elif tag in (W + "br", W + "cr"):
                parts.append("\n")
            elif tag == W + "noBreakHyphen":
                parts.append("-")
            elif tag in _WORD_NOTES:
                parts.append(self._cite(_WORD_NOTES[tag], child.get(W + "id", "")))
            else:  # runs, hyperlinks, insertions, fields, a text box's paragraphs
                self._collect(child, parts)
                if tag == W + "p":
                    parts.append("\n")

    def _cite(self, kind: str, note_id: str) -> str:
        key = (kind, note_id)
        if key not in self.notes:
            return ""
        if key not in self._marks:
            self._marks[key] = str(len(self._marks) + 1)
            self.cited.append((self._marks[key], self.notes[key]))
        return f"[{self._marks[key]}]"

    def footnotes(self) -> None:
        notes = [(mark, " ".join(self.runs(p) for p in note)) for mark, note in self.cited]
        _add_notes(self.blocks, notes)


def _numbering(ppr: Any) -> int | None:
    """A numbered or bulleted paragraph's list level (0 at the top), else None."""
    numbering = ppr.find(W + "numPr") if ppr is not None else None
    list_id = numbering.find(W + "numId") if numbering is not None else None
    if list_id is None or list_id.get(W + "val") == "0":  # 0: numbering taken away
        return None
    level = numbering.find(W + "ilvl")
    value = level.get(W + "val", "") if level is not None else ""
    return min(int(value), 8) if value.isdigit() else 0


def _is_toc(sdt: Any) -> bool:
    """Whether a content control holds a table of contents."""
    gallery = sdt.find(f"{W}sdtPr/{W}docPartObj/{W}docPartGallery")
    return gallery is not None and "contents" in gallery.get(W + "val", "").lower()


def load_docx(file: FileBytes) -> LoadedDocument:
    """A Word document (see the module's docstring for what is read)."""
    document = _opened(file, "Word document", docx.Document)
    try:
        notes = _word_notes(document)
    except _OPEN_ERRORS as exc:
        raise UnreadableFile(str(file.path), f"has damaged footnotes ({exc})") from exc
    reader = _WordReader(document, notes)
    reader.body(document.element.body)
    reader.footnotes()
    title = _title(metadata_title(document.core_properties.title), reader.first_title)
    return _document(file, reader.blocks, title, ".docx")


# -- OpenDocument text --------------------------------------------------------------------

#: Not the document's text: comments, the record of tracked changes (deleted text among
#: it), an image's title and description.
_ODF_SKIPPED = frozenset(
    {(OFFICENS, "annotation"), (OFFICENS, "annotation-end"), (TEXTNS, "tracked-changes")}
    | {(SVGNS, "title"), (SVGNS, "desc")}
)
#: Generated indexes (a table of contents repeats the headings).
_ODF_INDEXES = frozenset(
    (TEXTNS, name)
    for name in (
        "table-of-content alphabetical-index illustration-index table-index object-index"
        " user-index bibliography"
    ).split()
)
_ODF_PARAGRAPHS = ((TEXTNS, "p"), (TEXTNS, "h"))


def _elements(element: Any) -> Iterator[Any]:
    return (child for child in element.childNodes if child.nodeType == child.ELEMENT_NODE)


def _attribute(element: Any, namespace: str, name: str) -> str:
    return str(element.attributes.get((namespace, name), ""))


class _OdfReader:
    """An OpenDocument text's body as :class:`TextBlocks`, its notes in citation order."""

    def __init__(self, title_styles: set[str]) -> None:
        self.title_styles = title_styles
        self.blocks = TextBlocks()
        self.notes: list[tuple[str, str]] = []
        self.first_title: str | None = None

    def body(self, container: Any) -> None:
        for child in _elements(container):
            name = child.qname
            if name in _ODF_SKIPPED or name in _ODF_INDEXES:
                continue
            if name == (TEXTNS, "h"):
                level = _attribute(child, TEXTNS, "outline-level")
                self.heading(int(level) if level.isdigit() else 1, child)
            elif name == (TEXTNS, "p"):
                if _attribute(child, TEXTNS, "style-name") in self.title_styles:
                    self.heading(1, child)
                else:
                    self.blocks.add(self.inline(child))
            elif name == (TEXTNS, "list"):
                self.list(child, 0)
            elif name == (TABLENS, "table"):
                self.table(child)
            else:  # sections, frames, text boxes: what they hold
                self.body(child)

    def heading(self, level: int, element: Any) -> None:
        title = self.blocks.heading(max(1, min(level, 10)), self.inline(element))
        if title and level == 1 and self.first_title is None:
            self.first_title = title

    def list(self, element: Any, depth: int) -> None:
        indent = "  " * min(depth, 8)
        for item in _elements(element):
            bullet = "- "
            for child in _elements(item):
                if child.qname == (TEXTNS, "list"):
                    self.list(child, depth + 1)
                elif child.qname == (TABLENS, "table"):
                    self.table(child)
                elif child.qname == (TEXTNS, "h"):  # a numbered heading ("2.1 Install")
                    level = _attribute(child, TEXTNS, "outline-level")
                    self.heading(int(level) if level.isdigit() else depth + 1, child)
                elif child.qname in _ODF_PARAGRAPHS:
                    text = self.inline(child).strip()
                    if text:
                        self.blocks.add(f"{indent}{bullet}{text}", tight=True)
                        bullet = "  "

    def table(self, element: Any) -> None:
        header: list[list[str]] = []
        rows: list[list[str]] = []
        self._rows(element, rows, header)
        lines = table_lines(header[:1] + rows, header=True) if header else table_lines(rows)
        for line in lines:
            self.blocks.add(line)

    def _rows(self, element: Any, rows: list[list[str]], header: list[list[str]]) -> None:
        for child in _elements(element):
            name = child.qname
            if name == (TABLENS, "table-header-rows"):
                self._rows(child, header, header)
            elif name in ((TABLENS, "table-rows"), (TABLENS, "table-row-group")):
                self._rows(child, rows, header)
            elif name == (TABLENS, "table-row"):
                rows.append([" ".join(self.inline(cell).split()) for cell in _elements(child)])

    def inline(self, element: Any) -> str:
        parts: list[str] = []
        self._collect(element, parts)
        return "".join(parts)

    def _collect(self, element: Any, parts: list[str]) -> None:
        for child in element.childNodes:
            if child.nodeType == child.TEXT_NODE:
                parts.append(child.data)
                continue
            name = child.qname if child.nodeType == child.ELEMENT_NODE else None
            if name is None or name in _ODF_SKIPPED:
                continue
            if name == (TEXTNS, "s"):
                count = _attribute(child, TEXTNS, "c")
                parts.append(" " * min(int(count) if count.isdigit() else 1, 100))
            elif name == (TEXTNS, "tab"):
                parts.append("\t")
            elif name == (TEXTNS, "line-break"):
                parts.append("\n")
            elif name == (TEXTNS, "note"):
                parts.append(self._note(child))
            else:  # spans, links, frames and the paragraphs of a text box
                self._collect(child, parts)
                if name in _ODF_PARAGRAPHS:
                    parts.append("\n")

    def _note(self, note: Any) -> str:
        citation, body = "", ""
        for child in _elements(note):
            if child.qname == (TEXTNS, "note-citation"):
                citation = " ".join(self.inline(child).split())
            elif child.qname == (TEXTNS, "note-body"):
                body = self.inline(child)
        mark = citation or str(len(self.notes) + 1)
        self.notes.append((mark, body))
        return f"[{mark}]"


def _odf_title_styles(document: Any) -> set[str]:
    """The paragraph styles that are the Title style (automatic styles derived from it)."""
    names = {"Title"}
    for style in _elements(document.automaticstyles):
        if _attribute(style, STYLENS, "parent-style-name") == "Title":
            names.add(_attribute(style, STYLENS, "name"))
    return names


class _Printed(io.TextIOBase):
    """Where odfpy's prints go: it prints a part it fails to parse, whole, and goes on."""

    printed = False

    def write(self, text: str) -> int:
        self.printed = True
        return len(text)


def _parsed_odf(stream: io.BytesIO, body: str = "text") -> Any:
    """odfpy's document, checked to hold ``body`` (``text``, ``spreadsheet``,
    ``presentation``), or ValueError where it failed to parse a part or holds another
    kind. (odfpy prints a part it fails to parse and goes on: its print is caught by a
    redirected stdout; this runs in a loader's worker process.)"""
    printed = _Printed()
    with contextlib.redirect_stdout(printed):
        document = load_odf(stream)
    if printed.printed:
        raise ValueError("a part of it is not well-formed XML")
    if getattr(document, body, None) is None:
        raise ValueError(f"it holds no {body} (its type: {document.mimetype or 'none'})")
    return document


def load_odt(file: FileBytes) -> LoadedDocument:
    """An OpenDocument text (see the module's docstring for what is read)."""
    document = _opened(file, "OpenDocument text", _parsed_odf)
    reader = _OdfReader(_odf_title_styles(document))
    reader.body(document.text)
    _add_notes(reader.blocks, reader.notes)
    meta_title = next(
        (str(e) for e in _elements(document.meta) if e.qname == (DCNS, "title")), None
    )
    return _document(
        file, reader.blocks, _title(metadata_title(meta_title), reader.first_title), ".odt"
    )


# -- PowerPoint ---------------------------------------------------------------------------

#: Placeholders whose text is the slide's frame, not its content (or its title, read first).
_FRAME_PLACEHOLDERS = frozenset(
    {PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.DATE}
    | {PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE}
)


def _frame_text(shape: Any) -> str:
    """A shape's text, line breaks inside a paragraph as line breaks (python-pptx: ``\\v``)."""
    return str(shape.text_frame.text).replace("\v", "\n")


def _reading_order(shapes: Iterable[Any]) -> list[Any]:
    return sorted(shapes, key=lambda shape: (shape.top or 0, shape.left or 0))


def _shape_blocks(shape: Any) -> Iterator[str]:
    """A shape's text as blocks: a group's shapes in reading order, a table's rows."""
    if shape.is_placeholder and shape.placeholder_format.type in _FRAME_PLACEHOLDERS:
        return
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in _reading_order(shape.shapes):
            yield from _shape_blocks(inner)
    elif getattr(shape, "has_table", False):
        table = shape.table
        rows = [[" ".join(cell.text.split()) for cell in row.cells] for row in table.rows]
        # PowerPoint marks its first row as the header: an empty one names no column (the
        # row below it is data, unless it looks like a header itself).
        marked = table.first_row and bool(rows) and any(rows[0])
        yield from table_lines(rows, header=True if marked else None)
    elif getattr(shape, "has_chart", False):
        yield from chart_blocks(shape.chart)
    elif shape.has_text_frame:
        yield _frame_text(shape)


def _slide_blocks(slide: Any) -> tuple[str, list[str]]:
    """(title, blocks) of a slide: its title line, its shapes' text, its speaker notes."""
    title_shape = slide.shapes.title
    title = " ".join(_frame_text(title_shape).split()) if title_shape is not None else ""
    blocks = [title]
    for shape in _reading_order(slide.shapes):
        blocks.extend(_shape_blocks(shape))
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = str(frame.text).replace("\v", "\n").strip() if frame is not None else ""
        if notes:
            blocks.append(f"Notes: {notes}")
    return title, blocks


def load_pptx(file: FileBytes) -> LoadedDocument:
    """A presentation: a section per slide (see the module's docstring)."""
    presentation = _opened(file, "PowerPoint presentation", pptx.Presentation)
    slides = [_slide_blocks(slide) for slide in presentation.slides]
    return slides_document(file, slides, presentation.core_properties.title, _mime(".pptx"))


def slides_document(
    file: FileBytes, slides: list[tuple[str, list[str]]], meta_title: str | None, mime: str
) -> LoadedDocument:
    """A presentation from each slide's title and text blocks: a section per slide with
    text, titled by its title (else "Slide N"), its page the slide's number, labelled
    "slide N"."""
    blocks = TextBlocks()
    starts: list[tuple[int, str, int]] = []  # (offset, section title, slide number)
    first_title = None
    for number, (title, slide_blocks) in enumerate(slides, start=1):
        first_title = first_title or title
        offsets = [blocks.add(block) for block in slide_blocks]
        start = next((offset for offset in offsets if offset is not None), None)
        if start is not None:
            starts.append((start, title or f"Slide {number}", number))
    text = blocks.text()
    if not text:
        raise EmptyDocument(str(file.path), "the presentation's slides have no text")
    ends = [start for start, _, _ in starts[1:]] + [len(text)]
    return LoadedDocument(
        title=_title(metadata_title(meta_title), first_title) or file.stem,
        text=text,
        mime=mime,
        sections=tuple(
            Section(start, end, title, page=number)
            for (start, title, number), end in zip(starts, ends, strict=True)
        ),
        page_labels={number: f"slide {number}" for number in range(1, len(slides) + 1)},
    )
