"""Loaders: a file becomes normalized text plus sections (headings, pages).

One loader per kind of file; :func:`load_path` picks it by extension. Every failure is a
typed :class:`~tether.errors.IngestError` naming the file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from tether.errors import EmptyDocument, UnreadableFile, UnsupportedFileType
from tether.ingest.chunking import Section, markdown_sections
from tether.ingest.text import normalize_text


@dataclass(frozen=True)
class LoadedDocument:
    title: str
    text: str  # normalized
    mime: str
    sections: tuple[Section, ...]
    file_size: int | None = None


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


def _front_matter_title(text: str) -> tuple[str | None, str]:
    """Strip YAML front matter; return its ``title:`` if any."""
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---", 4)
    if end == -1:
        return None, text
    block, rest = text[4:end], text[end + 4 :]
    match = re.search(r"^title:\s*['\"]?(.+?)['\"]?\s*$", block, re.MULTILINE)
    return (match.group(1) if match else None), rest


def load_markdown(path: Path) -> LoadedDocument:
    meta_title, body = _front_matter_title(normalize_text(_read_text_file(path)))
    text = normalize_text(body)
    if not text:
        raise EmptyDocument(str(path), "the file has no text")
    h1 = re.search(r"^ {0,3}# +(.+?)[ #]*$", text, re.MULTILINE)
    title = meta_title or (h1.group(1).strip() if h1 else path.stem)
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
    """Text per page; each page is its own section, so every chunk keeps its page number."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    _read_bytes(path)  # uniform errors for missing or unreadable files
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFile(str(path), "is encrypted with a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except UnreadableFile:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise UnreadableFile(str(path), f"is not a readable PDF ({exc})") from exc

    parts: list[str] = []
    sections: list[Section] = []
    offset = 0
    for number, page_text in enumerate(pages, start=1):
        page_text = normalize_text(page_text)
        if not page_text:
            continue
        if parts:
            offset += 2  # the "\n\n" joining pages
        sections.append(Section(offset, offset + len(page_text), None, number))
        parts.append(page_text)
        offset += len(page_text)
    if not parts:
        raise EmptyDocument(str(path), "the PDF has no text layer (a scan?); run OCR on it first")
    return LoadedDocument(
        title=meta_title.strip() or path.stem,
        text="\n\n".join(parts),
        mime="application/pdf",
        sections=tuple(sections),
    )


_BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
    "section", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
}  # fmt: skip
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


class _HTMLText(HTMLParser):
    """Visible text as Markdown-like lines: headings become ``#`` lines, list items ``- ``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._heading: int | None = None
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _HEADINGS:
            self._heading = _HEADINGS[tag]
            self.out.append("\n\n" + "#" * self._heading + " ")
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
        if tag in {"br", "hr"}:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in _HEADINGS:
            self._heading = None
            self.out.append("\n\n")
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.out.append("\n\n")
        elif tag in _BLOCK_TAGS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._skip:
            return
        if self._pre:
            self.out.append(data)
        else:
            # Collapse layout whitespace the way a browser does.
            collapsed = re.sub(r"\s+", " ", data)
            self.out.append(collapsed)


def html_to_text(markup: str) -> tuple[str, str]:
    """(title, text) of an HTML page: visible text with headings as ``#`` lines."""
    parser = _HTMLText()
    parser.feed(markup)
    parser.close()
    lines = [line.strip() for line in "".join(parser.out).split("\n")]
    text = normalize_text("\n".join(lines))
    return " ".join(html.unescape(parser.title).split()), text


def load_html(path: Path) -> LoadedDocument:
    title, text = html_to_text(_read_text_file(path))
    if not text:
        raise EmptyDocument(str(path), "the page has no visible text")
    if not title:
        h1 = re.search(r"^# +(.+)$", text, re.MULTILINE)
        title = h1.group(1).strip() if h1 else path.stem
    return LoadedDocument(
        title=title, text=text, mime="text/html", sections=tuple(markdown_sections(text))
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
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise UnsupportedFileType(
            str(path),
            f"tether cannot read {path.suffix or 'extensionless'!s} files; supported:"
            f" {', '.join(supported_extensions())}",
        )
    if not path.exists():
        raise UnreadableFile(str(path), "no such file")
    document = loader(path)
    size = path.stat().st_size
    return LoadedDocument(document.title, document.text, document.mime, document.sections, size)
