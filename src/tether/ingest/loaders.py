"""Loaders: a file becomes normalized text plus sections (headings, pages).

The files read whole (:func:`read_file`, :class:`FileBytes`), what a loader makes of one
(:class:`LoadedDocument`), and the loaders of text, Markdown, HTML and PDF. The table of
every format, and the loading of a file by its format, is :mod:`tether.ingest.formats`.
Every failure is a typed :class:`~tether.errors.IngestError` naming the file.

A file is opened once and read whole through that one descriptor (:func:`read_file`):
its hash, size and text all come from the same bytes, so a file replaced while it is
read cannot mix two files. Under a folder that must contain it (the library's), the file
is opened from that folder one name at a time, never following a symbolic link.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass, field, replace
from functools import cached_property
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from tether.errors import EmptyDocument, LoadLimitExceeded, UnreadableFile
from tether.ingest.chunking import (
    Section,
    heading_sections,
    markdown_sections,
    markdown_title,
    underlined_headings,
)
from tether.ingest.html import html_document
from tether.ingest.markup import rendered_markdown
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
    #: What the file says about itself, kept in the document's metadata (a message's
    #: subject, sender and date).
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Files inside it that are documents of their own (a message's attachments), each
    #: named ``<file>#<name>``; indexed after it, as files of their own type.
    attachments: tuple[FileBytes, ...] = ()


class OutsideFolder(UnreadableFile):
    """The file is not inside the folder it must be read from, or is reached through a
    symbolic link there (perhaps one swapped in after a check): it was not opened."""


#: What an authoring program writes before the file name in a title it makes up.
_PROGRAM_PREFIX = re.compile(
    r"^(microsoft\s+(word|powerpoint|excel|publisher)|libreoffice\s+\w+|openoffice\S*)\s*-\s*",
    re.I,
)
_FILE_EXTENSION = re.compile(
    r"\.(docx?|dotx?|pptx?|xlsx?|odt|odp|ods|rtf|txt|pdf|html?|indd|tex|dvi|ps|qxd|pages)$", re.I
)
#: Titles that name no document: what a program fills in when the author gave none.
_PLACEHOLDER = re.compile(
    r"^(untitled( document)?|no title|title|none|unknown|document\s*\d*|presentation\s*\d*"
    r"|powerpoint presentation|slide\s*\d*|book\s*\d*|sheet\s*\d*|workbook\s*\d*)$",
    re.I,
)


def metadata_title(value: str | None) -> str:
    """A title from a file's metadata, as a reader would name the document, or "" when it
    names none: what authoring programs make up ("Microsoft Word - report.docx" is
    "report", "Untitled" and "Presentation1" are nothing) is not a title. It matters
    beyond the citation: a document's title heads its chunks' vectors and is searched
    with every chunk that has no section title."""
    title = " ".join((value or "").split())
    if "\\" in title or ("/" in title and _FILE_EXTENSION.search(title)):
        title = title.replace("\\", "/").rsplit("/", 1)[-1]  # a path: its file name
    title = _FILE_EXTENSION.sub("", _PROGRAM_PREFIX.sub("", title)).strip()
    if not any(c.isalpha() for c in title) or _PLACEHOLDER.match(title):
        return ""
    return title


@dataclass(frozen=True)
class FileBytes:
    """A file's content, read through one descriptor: ``size`` and ``sha256`` are those
    of ``data``, so they can never describe another file."""

    path: Path
    data: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def stem(self) -> str:
        """The file's name without its extension, the title of a file that names none: a
        file inside another (``mail.eml#report.pdf``) by its own name (``report``)."""
        return Path(self.path.name.rpartition("#")[2]).stem

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def load_text(text: str, *, title: str, mime: str = "text/plain") -> LoadedDocument:
    """Text given directly. ``text/markdown`` is read as a Markdown file is (without its
    front matter, comments and site-generator markup) and split at headings; anything
    else is one section."""
    normalized = normalize_text(text)
    if mime == "text/markdown":
        normalized = read_markdown(normalized)[1]
    if not normalized.strip():
        raise EmptyDocument(title, "the text is empty")
    if mime == "text/markdown":
        sections = tuple(markdown_sections(normalized))
    else:
        sections = (Section(0, len(normalized)),)
    return LoadedDocument(title=title, text=normalized, mime=mime, sections=sections)


#: NUL bytes that the first :data:`SNIFF_BYTES` of a UTF-8 text may hold and still be text
#: (a Javadoc page documenting the NUL character shows it as one), at most one in
#: :data:`NUL_SPACING` bytes. Binary data holds many more (random bytes: one in 256), and
#: hardly ever decodes as UTF-8.
STRAY_NULS = 4
NUL_SPACING = 1000
SNIFF_BYTES = 8192


def stray_nuls(head: bytes) -> int | None:
    """How many NUL bytes the start of a text holds (0 for most), or None when there are
    too many for a text: binary data."""
    nuls = head.count(b"\x00", 0, SNIFF_BYTES)
    if nuls > STRAY_NULS or nuls * NUL_SPACING > min(len(head), SNIFF_BYTES):
        return None
    return nuls


#: An HTML page's declared encoding: ``<meta charset="...">`` or ``<meta
#: http-equiv="Content-Type" content="text/html; charset=...">``, in its first 4 kB.
_META_CHARSET = re.compile(rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def declared_charset(data: bytes) -> str | None:
    """The encoding an HTML page declares, when Python knows it (None otherwise)."""
    match = _META_CHARSET.search(data[:4096])
    if match is None:
        return None
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name
    except LookupError:
        return None


def decode_text(file: FileBytes, declared: str | None = None) -> str:
    """The file's text: UTF-16 with its mark, UTF-8 (with or without its mark), else the
    encoding the file ``declared`` (an HTML page's ``<meta charset>``: a page in
    ISO-8859-1 may hold bytes Windows-1252 lacks), else Windows-1252;
    :class:`UnreadableFile` for binary data. A text may hold a stray NUL byte or two if
    it is UTF-8 (:data:`STRAY_NULS`); normalizing drops them."""
    data = file.data
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise UnreadableFile(str(file.path), "is not valid UTF-16 text") from None
    nuls = stray_nuls(data)
    if nuls is None:
        raise UnreadableFile(str(file.path), "looks like a binary file, not text")
    fallbacks = (declared, "cp1252") if declared else ("cp1252",)
    for encoding in ("utf-8-sig", *fallbacks) if not nuls else ("utf-8-sig",):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    if nuls:
        raise UnreadableFile(str(file.path), "looks like a binary file, not text")
    raise UnreadableFile(str(file.path), "is neither UTF-8 nor Windows-1252 text")


def _flags(*names: str) -> int:
    """The ``os.O_*`` flags of this platform among ``names`` (Windows lacks most)."""
    flags = os.O_RDONLY
    for name in names:
        flags |= getattr(os, name, 0)
    return flags


# O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below, by fstat).
_FILE_FLAGS = _flags("O_NONBLOCK", "O_NOCTTY", "O_CLOEXEC", "O_BINARY")
# O_PATH (Linux) walks a folder one may search but not list, as the kernel does.
_FOLDER_FLAGS = _flags("O_PATH", "O_DIRECTORY", "O_CLOEXEC")
_NOFOLLOW = _flags("O_NOFOLLOW")
#: openat() is there (not on Windows): folders are walked one name at a time.
_OPENAT = os.open in os.supports_dir_fd and _NOFOLLOW != os.O_RDONLY


def read_file(
    path: Path,
    *,
    within: str | os.PathLike[str] | None = None,
    max_bytes: int | None = None,
    head: int | None = None,
) -> FileBytes:
    """The bytes of the regular file ``path``, read through one descriptor.

    With ``within``, ``path`` must be under that folder and is opened from it one name at
    a time, following no symbolic link (each step is ``openat`` with ``O_NOFOLLOW``):
    a link anywhere below ``within``, even one swapped in after the path was checked, is
    :class:`OutsideFolder` and nothing is read. Without it, ``path`` is opened as given.

    With ``max_bytes`` (``rag.max_file_bytes``), a larger file is :class:`LoadLimitExceeded`
    from its size as opened (``fstat``), before anything is read; one that grows past it
    while it is read fails too, having read no more than ``max_bytes + 1``.

    With ``head``, only the file's first ``head`` bytes are read (to tell its format).
    """
    try:
        fd = _open_under(Path(within), path) if within is not None else os.open(path, _FILE_FLAGS)
    except OSError as exc:
        raise _open_error(path, exc) from exc
    try:
        opened = os.fstat(fd)  # the file opened, not whatever the path names now
        if stat.S_ISDIR(opened.st_mode):
            raise UnreadableFile(str(path), "is a directory, not a file")
        if not stat.S_ISREG(opened.st_mode):
            raise UnreadableFile(str(path), "is not a regular file (a pipe, socket or device)")
        if max_bytes is not None and opened.st_size > max_bytes:
            raise too_large(str(path), opened.st_size, max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            if head is not None:
                return FileBytes(path, fh.read(head))
            if max_bytes is None:
                data = fh.read()
            else:  # its size and one byte more, and while it grows up to the limit
                data = fh.read(opened.st_size + 1)
                if len(data) > opened.st_size:
                    data += fh.read(max_bytes + 1 - len(data))
        if max_bytes is not None and len(data) > max_bytes:
            raise too_large(str(path), len(data), max_bytes)
        return FileBytes(path, data)
    except OSError as exc:
        raise UnreadableFile(str(path), f"cannot be read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)


def too_large(source: str, size: int, max_bytes: int) -> LoadLimitExceeded:
    """The error of a file of ``size`` bytes, over ``rag.max_file_bytes``."""
    return LoadLimitExceeded(
        source,
        f"is {byte_size(size)}; rag.max_file_bytes is {byte_size(max_bytes)}. Raise it to"
        " index this file, or split the file",
        setting="rag.max_file_bytes",
    )


def byte_size(count: int) -> str:
    """``count`` bytes for a person: "200 MB", "64 kB", "12 bytes"."""
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} bytes"


def _open_under(folder: Path, path: Path) -> int:
    """A descriptor of ``path`` opened from ``folder`` one name at a time, following no
    link; :class:`OutsideFolder` when ``path`` is not below ``folder`` or a name on the
    way is a symbolic link."""
    try:
        names = path.relative_to(folder).parts
    except ValueError:
        names = ()
    if not names or ".." in names:
        raise OutsideFolder(str(path), f"is not inside {folder}; not read")
    if not _OPENAT:
        return _open_checked(folder, path)
    fd = os.open(folder, _FOLDER_FLAGS)
    try:
        for name in names[:-1]:
            try:
                step = os.open(name, _FOLDER_FLAGS | _NOFOLLOW, dir_fd=fd)
            except NotADirectoryError:
                # O_PATH | O_NOFOLLOW opens a link itself, which is no folder: say which.
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise _link(path, folder) from None
                raise
            os.close(fd)
            fd = step
        return os.open(names[-1], _FILE_FLAGS | _NOFOLLOW, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: O_NOFOLLOW on BSD
            raise _link(path, folder) from exc
        raise
    finally:
        os.close(fd)


def _open_checked(folder: Path, path: Path) -> int:
    """Without openat: open ``path``, then make sure that what was opened is the file
    that ``path`` names with no link on the way (the same device and inode)."""
    fd = os.open(path, _FILE_FLAGS)
    try:
        same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
    except OSError:
        same = False
    if not (same and resolves_to_itself(str(path))):
        os.close(fd)
        raise _link(path, folder)
    return fd


def resolves_to_itself(path: str) -> bool:
    """Whether ``path`` names its file with no link on the way; False also for one
    swapped between a link and a file while it is resolved (``realpath`` then fails)."""
    try:
        return os.path.realpath(path) == path
    except OSError:
        return False


def _link(path: Path, folder: Path) -> OutsideFolder:
    return OutsideFolder(
        str(path),
        f"is a symbolic link, or lies behind one, below {folder}; such links are not followed",
    )


def _open_error(path: Path, exc: OSError) -> UnreadableFile:
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return UnreadableFile(str(path), "no such file")
    if isinstance(exc, IsADirectoryError):
        return UnreadableFile(str(path), "is a directory, not a file")
    return UnreadableFile(str(path), f"cannot be read ({exc.strerror or exc})")


_FRONT_MATTER = re.compile(r"---\n(.*?)^---[ \t]*$", re.DOTALL | re.MULTILINE)


def _front_matter_title(text: str) -> tuple[str | None, str]:
    """Strip YAML front matter; return its ``title:`` if any."""
    front = _FRONT_MATTER.match(text)
    if front is None:
        return None, text
    block, rest = front.group(1), text[front.end() :]
    match = re.search(r"^title:\s*['\"]?(.+?)['\"]?\s*$", block, re.MULTILINE)
    return (match.group(1) if match else None), rest


# A fenced code block or a code span (kept as they are), or outside them what a reader
# never sees: an HTML comment (a maintainer's note such as "this file is generated, edit
# the other repository") and an empty link, the anchor a heading is linked to by
# (``### <a name="format"></a> Format the output``).
_UNSEEN = re.compile(
    r"^(```|~~~).*?(?:^\1[^\n]*$|\Z)|(`[^`\n]+`)|<!--.*?(?:-->|\Z)|<a\s[^<>]*>[ \t]*</a>[ \t]?",
    re.M | re.S | re.I,
)


def _without_unseen(text: str) -> str:
    """Markdown text without its HTML comments and empty anchors, which a reader never
    sees."""
    if "<!--" not in text and "</a>" not in text.lower():
        return text
    return _UNSEEN.sub(lambda m: m.group(0) if m.group(1) or m.group(2) else "", text)


#: Where an HTML block of a Markdown text starts (CommonMark's kind 6: a line opening or
#: closing one of the block elements; it ends at a blank line), and where a fenced code
#: block starts or ends.
_HTML_BLOCK = re.compile(
    r" {0,3}</?(?:address|article|aside|blockquote|caption|center|dd|details|dialog|div|dl|dt"
    r"|fieldset|figcaption|figure|footer|form|h[1-6]|header|hr|legend|li|main|nav|ol|p"
    r"|section|summary|table|tbody|td|tfoot|th|thead|tr|ul)(?:[\s/>]|$)",
    re.I,
)
_FENCE = re.compile(r" {0,3}(```|~~~)")


def _html_blocks_as_text(text: str) -> str:
    """Markdown text with its HTML blocks (a ``<table>`` of options, a ``<details>``
    summary, a centred ``<p>``) as a reader sees them: their text, by the HTML extractor,
    headings as ``#`` lines. A block holding a code fence is left as it is."""
    if "<" not in text:
        return text
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None
    at, rendered = 0, False
    while at < len(lines):
        line = lines[at]
        opened = _FENCE.match(line)
        if fence is not None or opened or not _HTML_BLOCK.match(line):
            if opened:
                fence = None if fence == opened.group(1) else (fence or opened.group(1))
            out.append(line)
            at += 1
            continue
        end = next((i for i in range(at, len(lines)) if not lines[i].strip()), len(lines))
        block = lines[at:end]
        if any(_FENCE.match(b) for b in block):
            out.extend(block)
        else:
            out.append(html_document("\n".join(block))[1])
            rendered = True
        at = end
    return "\n".join(out) if rendered else text  # (the same text: not normalized again)


def read_markdown(text: str) -> tuple[str | None, str]:
    """The title in the front matter of normalized Markdown ``text``, if any, and its text
    as a reader sees it: without the front matter, comments and empty anchors, and the
    markup of site generators (:mod:`tether.ingest.markup`), its HTML blocks as their
    text."""
    meta_title, body = _front_matter_title(text)
    body = _html_blocks_as_text(rendered_markdown(_without_unseen(body)))
    return meta_title, body if body is text else normalize_text(body)


def load_markdown(file: FileBytes) -> LoadedDocument:
    meta_title, text = read_markdown(normalize_text(decode_text(file)))
    if not text:
        raise EmptyDocument(str(file.path), "the file has no text")
    title = meta_title or markdown_title(text) or file.stem
    return LoadedDocument(
        title=title,
        text=text,
        mime="text/markdown",
        sections=tuple(markdown_sections(text)),
    )


def load_plain_text(file: FileBytes) -> LoadedDocument:
    """A text file (source code too) as it is: one section."""
    text = normalize_text(decode_text(file))
    if not text:
        raise EmptyDocument(str(file.path), "the file has no text")
    return LoadedDocument(
        title=file.stem, text=text, mime="text/plain", sections=(Section(0, len(text)),)
    )


def load_text_document(file: FileBytes) -> LoadedDocument:
    """A plain-text document (``.txt``): split at its underlined headings
    (:func:`~tether.ingest.chunking.underlined_headings`), when it has them."""
    loaded = load_plain_text(file)
    headings = underlined_headings(loaded.text)
    if not headings:
        return loaded
    return replace(loaded, sections=tuple(heading_sections(loaded.text, headings)))


def load_pdf(file: FileBytes) -> LoadedDocument:
    """Clean text per page (see :mod:`tether.ingest.pdf`); a page is at least its own
    section, so every chunk keeps its page number, and the outline titles the sections.
    Scanned pages are read by OCR: ``metadata["ocr_pages"]`` counts them, and
    ``metadata["warnings"]`` says which were left out and why."""
    pdf = read_pdf(file.data, str(file.path))
    metadata: dict[str, Any] = {"ocr_pages": len(pdf.ocr_pages)} if pdf.ocr_pages else {}
    if pdf.warnings:
        metadata["warnings"] = list(pdf.warnings)
    return LoadedDocument(
        title=metadata_title(pdf.title) or file.stem,
        text=pdf.text,
        mime="application/pdf",
        sections=pdf.sections,
        page_labels=pdf.page_labels,
        dropped_pages=pdf.dropped_pages,
        metadata=metadata,
    )


class _Shown(HTMLParser):
    """Whether a page shows any text outside its title, scripts and styles, menus
    included: what tells a page of navigation alone from a page with nothing to show."""

    _UNSEEN = frozenset({"script", "style", "title", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.unseen = 0
        self.shown = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.unseen += tag in self._UNSEEN

    def handle_endtag(self, tag: str) -> None:
        self.unseen -= tag in self._UNSEEN and self.unseen > 0

    def handle_data(self, data: str) -> None:
        self.shown = self.shown or (not self.unseen and any(c.isalnum() for c in data))


def shows_text(markup: str) -> bool:
    """Whether an HTML page shows any text at all, menus included."""
    parser = _Shown()
    parser.feed(markup)
    parser.close()
    return parser.shown


def load_html(file: FileBytes) -> LoadedDocument:
    markup = decode_text(file, declared_charset(file.data))
    title, text, headings = html_document(markup)
    if not text:
        why = "the page has no visible text"
        if shows_text(markup):  # a contents page, an index, a search page
            why = "the page holds only navigation (menus, links, a contents list)"
        raise EmptyDocument(str(file.path), why)
    if not title:
        h1 = next((h.title for h in headings if h.level == 1), None)
        title = h1 or file.stem
    return LoadedDocument(
        title=title,
        text=text,
        mime="text/html",
        sections=tuple(heading_sections(text, headings)),
    )
