"""Loaders: a file becomes normalized text plus sections (headings, pages).

One loader per kind of file; :func:`load_path` picks it by extension. Every failure is a
typed :class:`~tether.errors.IngestError` naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path

from tether.errors import EmptyDocument, UnreadableFile, UnsupportedFileType
from tether.ingest.chunking import (
    Heading,
    Section,
    heading_sections,
    markdown_sections,
    markdown_title,
)
from tether.ingest.pdf import read_pdf
from tether.text import normalize_text


@dataclass(frozen=True)
class LoadedDocument:
    title: str
    text: str  # normalized
    mime: str
    sections: tuple[Section, ...]
    file_size: int | None = None
    #: Physical page number -> printed label, where they differ (PDFs: "i", "ii", "A-1").
    page_labels: dict[int, str] = field(default_factory=dict)
    #: Physical numbers of the pages left out of ``text`` (PDF contents and index pages).
    dropped_pages: tuple[int, ...] = ()


def load_text(text: str, *, title: str, mime: str = "text/plain") -> LoadedDocument:
    """Text given directly. ``text/markdown`` is split at headings; anything else is one section."""
    normalized = normalize_text(text)
    if not normalized.strip():
        raise EmptyDocument(title, "the text is empty")
    if mime == "text/markdown":
        sections = tuple(markdown_sections(normalized))
    else:
        sections = (Section(0, len(normalized)),)
    return LoadedDocument(title=title, text=normalized, mime=mime, sections=sections)


def _read_text_file(path: Path) -> str:
    data = _read_bytes(path)
    if b"\x00" in data[:8192]:
        raise UnreadableFile(str(path), "looks like a binary file, not text")
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise UnreadableFile(str(path), "is neither UTF-8 nor Windows-1252 text")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UnreadableFile(str(path), "no such file") from None
    except IsADirectoryError:
        raise UnreadableFile(str(path), "is a directory, not a file") from None
    except OSError as exc:
        raise UnreadableFile(str(path), f"cannot be read ({exc.strerror or exc})") from exc


_FRONT_MATTER = re.compile(r"---\n(.*?)^---[ \t]*$", re.DOTALL | re.MULTILINE)


def _front_matter_title(text: str) -> tuple[str | None, str]:
    """Strip YAML front matter; return its ``title:`` if any."""
    front = _FRONT_MATTER.match(text)
    if front is None:
        return None, text
    block, rest = front.group(1), text[front.end() :]
    match = re.search(r"^title:\s*['\"]?(.+?)['\"]?\s*$", block, re.MULTILINE)
    return (match.group(1) if match else None), rest


def load_markdown(path: Path) -> LoadedDocument:
    meta_title, body = _front_matter_title(normalize_text(_read_text_file(path)))
    text = normalize_text(body)
    if not text:
        raise EmptyDocument(str(path), "the file has no text")
    title = meta_title or markdown_title(text) or path.stem
    return LoadedDocument(
        title=title,
        text=text,
        mime="text/markdown",
        sections=tuple(markdown_sections(text)),
    )


def load_plain_text(path: Path) -> LoadedDocument:
    text = normalize_text(_read_text_file(path))
    if not text:
        raise EmptyDocument(str(path), "the file has no text")
    return LoadedDocument(
        title=path.stem, text=text, mime="text/plain", sections=(Section(0, len(text)),)
    )


def load_pdf(path: Path) -> LoadedDocument:
    """Clean text per page (see :mod:`tether.ingest.pdf`); a page is at least its own
    section, so every chunk keeps its page number, and the outline titles the sections."""
    pdf = read_pdf(_read_bytes(path), str(path))
    return LoadedDocument(
        title=pdf.title or path.stem,
        text=pdf.text,
        mime="application/pdf",
        sections=pdf.sections,
        page_labels=pdf.page_labels,
        dropped_pages=pdf.dropped_pages,
    )


_BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
    "section", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
}  # fmt: skip
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


# Marks the start of a heading line while the page text is assembled. Sections come from
# the parser's own headings, never from re-reading the text as Markdown, so a ``# comment``
# line in a <pre> block or a paragraph starting with "#" is not taken for a heading.
_HEADING_MARK = "\ue000"


class _HTMLText(HTMLParser):
    """Visible text as Markdown-like lines: headings become ``#`` lines, list items ``- ``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._skipping: list[str] = []  # open skip tags (head, script, svg, ...)
        self._in_title = False
        self._title_done = False
        self._heading: int | None = None
        self._heading_at = 0  # index in ``out`` where the open heading starts
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skipping.append(tag)
        elif tag == "title":
            # The page title lives in <head>; an <svg><title> (an icon's tooltip) is not it.
            self._in_title = not self._title_done and all(t == "head" for t in self._skipping)
        elif self._skipping:
            return
        elif tag in _HEADINGS:
            self._heading = _HEADINGS[tag]
            self._heading_at = len(self.out)
            self.out.append("\n\n" + _HEADING_MARK + "#" * self._heading + " ")
        elif tag == "br" and self._heading is not None:
            self.out.append(" ")  # a heading stays on one line
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "pre":
            self._pre += 1
            self.out.append("\n\n")
        elif tag in _BLOCK_TAGS:
            self.out.append("\n\n" if tag in {"p", "div", "section", "article", "table"} else "\n")
        elif tag in {"td", "th"}:
            self.out.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping or tag not in {"br", "hr"}:
            return
        self.out.append(" " if self._heading is not None else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            if tag in self._skipping:
                del self._skipping[len(self._skipping) - 1 - self._skipping[::-1].index(tag)]
        elif tag == "title":
            if self._in_title:
                self._title_done = True
            self._in_title = False
        elif self._skipping:
            return
        elif tag in _HEADINGS:
            if self._heading is not None and not "".join(self.out[self._heading_at + 1 :]).strip():
                del self.out[self._heading_at :]  # an empty heading is no heading
            self._heading = None
            self.out.append("\n\n")
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.out.append("\n\n")
        elif tag in _BLOCK_TAGS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        data = data.replace(_HEADING_MARK, "")
        if self._in_title:
            self.title += data
            return
        if self._skipping:
            return
        if self._pre and self._heading is None:
            self.out.append(data)
        else:
            # Collapse layout whitespace the way a browser does.
            collapsed = re.sub(r"\s+", " ", data)
            self.out.append(collapsed)


def html_document(markup: str) -> tuple[str, str, list[Heading]]:
    """(title, text, headings) of an HTML page: visible text with headings as ``#`` lines."""
    parser = _HTMLText()
    parser.feed(markup)
    parser.close()
    lines = [line.strip() for line in "".join(parser.out).split("\n")]
    marked = normalize_text("\n".join(lines))
    headings: list[Heading] = []
    text_lines: list[str] = []
    offset = 0
    for line in marked.split("\n"):
        if line.startswith(_HEADING_MARK):
            line = line[len(_HEADING_MARK) :]
            hashes, _, title = line.partition(" ")
            title = " ".join(title.split())
            line = f"{hashes} {title}"
            headings.append(Heading(offset, offset + len(line) + 1, len(hashes), title))
        text_lines.append(line)
        offset += len(line) + 1
    # The title is character data already decoded by the parser: no second unescape.
    return " ".join(parser.title.split()), "\n".join(text_lines), headings


def load_html(path: Path) -> LoadedDocument:
    title, text, headings = html_document(_read_text_file(path))
    if not text:
        raise EmptyDocument(str(path), "the page has no visible text")
    if not title:
        h1 = next((h.title for h in headings if h.level == 1), None)
        title = h1 or path.stem
    return LoadedDocument(
        title=title,
        text=text,
        mime="text/html",
        sections=tuple(heading_sections(text, headings)),
    )


LOADERS: dict[str, Callable[[Path], LoadedDocument]] = {
    ".md": load_markdown,
    ".markdown": load_markdown,
    ".txt": load_plain_text,
    ".text": load_plain_text,
    ".pdf": load_pdf,
    ".html": load_html,
    ".htm": load_html,
    ".xhtml": load_html,
}


def supported_extensions() -> list[str]:
    return sorted(LOADERS)


def load_path(path: Path) -> LoadedDocument:
    """Load one file with the loader for its extension."""
    if path.is_dir():
        raise UnreadableFile(str(path), "is a directory, not a file")
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise UnsupportedFileType(
            str(path),
            f"tether cannot read {path.suffix or 'extensionless'!s} files; supported:"
            f" {', '.join(supported_extensions())}",
        )
    if not path.exists():
        raise UnreadableFile(str(path), "no such file")
    return replace(loader(path), file_size=path.stat().st_size)
