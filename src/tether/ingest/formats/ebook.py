"""EPUB books: chapters in reading order, each a section, its own headings nested under it.

An EPUB is a zip file (read with the bounds of :mod:`tether.ingest.formats._zip`): its
``META-INF/container.xml`` names the package (``.opf``), whose manifest lists the files
and whose spine gives the reading order. Each chapter is XHTML, read by tether's HTML
reader (:func:`~tether.ingest.html.html_document`). A chapter is titled by the heading at
its top, else by the book's table of contents (the EPUB 3 navigation document, else the
EPUB 2 NCX), else "Chapter N". Spine items marked ``linear="no"`` (notes, a cover shown
apart), the navigation document and pages with no text (a cover image) are left out.
Package XML is parsed with defusedxml (no entity expansion).
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote
from xml.etree.ElementTree import Element

from tether.errors import EmptyDocument, UnreadableFile
from tether.ingest.chunking import Heading
from tether.ingest.formats._zip import open_zip, read_member
from tether.ingest.formats.data import TextBuilder, local_name, one_line, parse_xml
from tether.ingest.html import html_document
from tether.ingest.loaders import FileBytes, LoadedDocument

_CONTAINER = "META-INF/container.xml"
_XHTML = {"application/xhtml+xml", "text/html", "application/xml"}
_NCX = "application/x-dtbncx+xml"


@dataclass(frozen=True)
class _Package:
    """What the package document says: the book's title, the chapters to read (member
    names, in reading order), and where its table of contents is."""

    title: str
    chapters: tuple[str, ...]
    nav: str | None = None
    ncx: str | None = None
    missing: tuple[str, ...] = ()


def load_epub(file: FileBytes) -> LoadedDocument:
    """An EPUB book: a section per chapter, in reading order."""
    source = str(file.path)
    with open_zip(file.data, source) as archive:
        package = _package(archive, source)
        labels = _toc_labels(archive, package, source)
        builder = TextBuilder()
        number = 0
        for name in package.chapters:
            _, text, headings = html_document(_decode(read_member(archive, name, source)))
            if not text:
                continue  # a cover image, a blank page
            number += 1
            _add_chapter(builder, text, headings, labels.get(name) or "", number)
    text, sections = builder.sections()
    if not text:
        raise EmptyDocument(source, "the book has no text (no chapter in its spine holds any)")
    warnings = [f"the book lists {name!r}, which it does not hold" for name in package.missing]
    return LoadedDocument(
        title=package.title or file.stem,
        text=text,
        mime="application/epub+zip",
        sections=sections,
        metadata={"warnings": warnings} if warnings else {},
    )


def _add_chapter(
    builder: TextBuilder, text: str, headings: list[Heading], label: str, number: int
) -> None:
    """Add a chapter as a level-1 section, its own headings nested under it. A heading at
    the top of the chapter is its title line; else the table of contents' ``label``, else
    "Chapter N", titles it without adding a line."""
    first = headings[0] if headings and headings[0].start == 0 else None
    if first is not None:
        nested = [Heading(first.start, first.body, 1, first.title)] + [
            Heading(h.start, h.body, max(2, h.level - first.level + 1), h.title)
            for h in headings[1:]
        ]
        builder.block(text, nested)
        return
    builder.mark(label or f"Chapter {number}", 1)
    top = min((h.level for h in headings), default=1)
    builder.block(text, [Heading(h.start, h.body, h.level - top + 2, h.title) for h in headings])


def _package(archive: zipfile.ZipFile, source: str) -> _Package:
    """The package document named by ``META-INF/container.xml``, read."""
    opf = _rootfile(archive, source)
    root = parse_xml(read_member(archive, opf, source), source, opf)
    base = posixpath.dirname(opf)
    manifest: dict[str, tuple[str, str, str]] = {}  # id -> (member, media type, properties)
    for item in _elements(root, "item"):
        href = item.get("href")
        if item.get("id") and href:
            manifest[item.get("id", "")] = (
                _member(base, href),
                item.get("media-type", ""),
                item.get("properties", ""),
            )
    nav = next((m for m, _, props in manifest.values() if "nav" in props.split()), None)
    spine = next(_elements(root, "spine"), None)
    toc = manifest.get(spine.get("toc", "")) if spine is not None else None
    ncx = toc[0] if toc else next((m for m, t, _ in manifest.values() if t == _NCX), None)
    names = set(archive.namelist())
    chapters: list[str] = []
    missing: list[str] = []
    for itemref in _elements(root, "itemref"):
        entry = manifest.get(itemref.get("idref", ""))
        if entry is None or itemref.get("linear", "yes").strip().lower() == "no":
            continue
        member, media_type, _ = entry
        if member == nav or (media_type and media_type not in _XHTML):
            continue
        if member in chapters or member in missing:
            continue  # a file listed once per part of it (``ch3.xhtml#s2``): read it once
        (chapters if member in names else missing).append(member)
    title = next((one_line(e.text or "") for e in _elements(root, "title") if e.text), "")
    return _Package(title, tuple(chapters), nav, ncx, tuple(missing))


def _rootfile(archive: zipfile.ZipFile, source: str) -> str:
    """The package document's member name, from ``META-INF/container.xml``."""
    container = parse_xml(read_member(archive, _CONTAINER, source), source, _CONTAINER)
    paths = [e.get("full-path", "") for e in _elements(container, "rootfile")]
    path = next((p for p in paths if p.lower().endswith(".opf")), paths[0] if paths else "")
    if not path:
        raise UnreadableFile(source, f"its {_CONTAINER} names no package document")
    return posixpath.normpath(unquote(path))


def _elements(root: Element, name: str) -> Iterator[Element]:
    """The elements under ``root`` called ``name`` in any namespace, in document order."""
    return (e for e in root.iter() if local_name(e.tag) == name)


def _member(base: str, href: str) -> str:
    """The member name an ``href`` relative to the folder ``base`` points at."""
    path = unquote(href.partition("#")[0])
    return posixpath.normpath(posixpath.join(base, path)) if path else ""


def _decode(data: bytes) -> str:
    """An XHTML file's text: UTF-16 with its mark, UTF-8, else Windows-1252."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


# -- the table of contents ----------------------------------------------------------------


def _toc_labels(archive: zipfile.ZipFile, package: _Package, source: str) -> dict[str, str]:
    """Chapter member -> its label in the table of contents (the first entry naming it,
    which is the outermost)."""
    if package.nav and package.nav in archive.namelist():
        links = _NavLinks()
        links.feed(_decode(read_member(archive, package.nav, source)))
        links.close()
        base = posixpath.dirname(package.nav)
        entries = [(_member(base, href), label) for href, label in links.entries()]
    elif package.ncx and package.ncx in archive.namelist():
        entries = _ncx_entries(archive, package.ncx, source)
    else:
        return {}
    labels: dict[str, str] = {}
    for member, label in entries:
        if member and label:
            labels.setdefault(member, one_line(label))
    return labels


def _ncx_entries(archive: zipfile.ZipFile, ncx: str, source: str) -> list[tuple[str, str]]:
    """(member, label) of each ``navPoint`` of an EPUB 2 NCX, in order."""
    root = parse_xml(read_member(archive, ncx, source), source, ncx)
    base = posixpath.dirname(ncx)
    entries: list[tuple[str, str]] = []
    for point in _elements(root, "navPoint"):
        label = next(("".join(c.itertext()) for c in point if local_name(c.tag) == "navLabel"), "")
        src = next((c.get("src", "") for c in point if local_name(c.tag) == "content"), "")
        entries.append((_member(base, src), label))
    return entries


class _NavLinks(HTMLParser):
    """The links of an EPUB 3 navigation document's ``<nav>`` elements: those of the
    table of contents (``epub:type="toc"``) when it has one, else of every ``<nav>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._navs: list[tuple[bool, list[tuple[str, str]]]] = []
        self._in_nav = False
        self._link: tuple[str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "nav":
            self._in_nav = True
            self._navs.append(("toc" in values.get("epub:type", "").split(), []))
        elif tag == "a" and self._in_nav:
            self._link = (values.get("href", ""), [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._in_nav = False
        elif tag == "a" and self._link is not None:
            href, parts = self._link
            self._navs[-1][1].append((href, "".join(parts)))
            self._link = None

    def handle_data(self, data: str) -> None:
        if self._link is not None:
            self._link[1].append(data)

    def entries(self) -> list[tuple[str, str]]:
        """(href, label) of the table of contents' links, in order."""
        tocs = [links for is_toc, links in self._navs if is_toc]
        return [entry for links in (tocs or [links for _, links in self._navs]) for entry in links]
