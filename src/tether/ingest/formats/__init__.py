"""What tether reads: one table of formats, each with the extensions that name it, what a
citation of it points at and the library that reads it, and how a file is recognised by
its content when its name does not say (an extensionless PDF is a PDF).

The table is the one place this is written: the loaders, the library folder's scan, the
service's upload check (415), the console's upload label and the README's formats table
all read it. A format's loader is imported when a file of it is first loaded (in the
worker process that loads it), so that reading a Word file costs nothing to a process
that never sees one.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tether.errors import UnreadableFile, UnsupportedFileType
from tether.ingest import loaders
from tether.ingest.chunking import underlined_headings
from tether.ingest.formats import _mimes
from tether.ingest.loaders import FileBytes, LoadedDocument, read_file

Loader = Callable[[FileBytes], LoadedDocument]


@dataclass(frozen=True)
class Format:
    """One kind of file tether reads."""

    name: str
    extensions: tuple[str, ...]
    mime: str
    #: The loader.
    loader: Loader
    #: What a citation of it points at.
    cites: str
    #: The library that reads it.
    reader: str
    #: Small files load in the indexing process (loaders linear in the file, that cannot
    #: be made to hang); everything else loads in a worker process, under its limits.
    inline: bool = False
    #: The pip extra its reader comes with (None: tether's own dependencies).
    extra: str | None = None

    def load(self, file: FileBytes) -> LoadedDocument:
        """``file`` read as this format (:class:`UnsupportedFileType` when the library
        that reads it is not installed: its extra says which)."""
        try:
            return self.loader(file)
        except ImportError as exc:
            raise UnsupportedFileType(
                str(file.path),
                f"reading {self.name} files needs {self.reader}: pip install"
                f" 'tether[{self.extra or 'formats'}]' ({exc})",
            ) from exc


def _docx(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.office import load_docx

    return load_docx(file)


def _odt(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.office import load_odt

    return load_odt(file)


def _pptx(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.office import load_pptx

    return load_pptx(file)


def _odp(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.opendocument import load_odp

    return load_odp(file)


def _xlsx(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.tables import load_xlsx

    return load_xlsx(file)


def _ods(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.opendocument import load_ods

    return load_ods(file)


def _csv(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.tables import load_csv

    return load_csv(file)


def _epub(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.ebook import load_epub

    return load_epub(file)


def _eml(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.mail import load_eml

    return load_eml(file)


def _mbox(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.mail import load_mbox

    return load_mbox(file)


def _json(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.data import load_json

    return load_json(file)


def _xml(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.data import load_xml

    return load_xml(file)


def _rst(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.data import load_rst

    return load_rst(file)


def _rtf(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.data import load_rtf

    return load_rtf(file)


def _notebook(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.notebook import load_notebook

    return load_notebook(file)


def _xls(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.tables import load_xls

    return load_xls(file)


def _doc(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.word97 import load_doc

    return load_doc(file)


def _asciidoc(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.asciidoc import load_asciidoc

    return load_asciidoc(file)


def _latex(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.latex import load_latex

    return load_latex(file)


def _transcript(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.transcript import load_transcript

    return load_transcript(file)


def _info(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.info import load_info

    return load_info(file)


def _manpage(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.manpage import load_manpage

    return load_manpage(file)


#: The most a gzip-compressed file may hold once decompressed (a file that grows past it,
#: a decompression bomb, is refused having cost that much memory, no more).
MAX_GUNZIPPED_BYTES = 256 << 20


def _gunzipped(file: FileBytes) -> LoadedDocument:
    """The file a ``.gz`` file holds, read as its own format (by its name less ``.gz``,
    else its content): a man page ``ls.1.gz``, a ``changelog.gz``, a ``README.md.gz``."""
    import gzip
    import zlib

    inner = file.path.with_suffix("") if file.path.suffix.lower() == ".gz" else file.path
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(file.data)) as stream:
            data = stream.read(MAX_GUNZIPPED_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise UnreadableFile(str(file.path), f"is a damaged gzip file ({exc})") from exc
    if len(data) > MAX_GUNZIPPED_BYTES:
        raise UnreadableFile(
            str(file.path), f"decompresses to more than {MAX_GUNZIPPED_BYTES >> 20} MiB"
        )
    if data.startswith(b"\x1f\x8b"):
        raise UnsupportedFileType(str(file.path), "is compressed twice: decompress it first")
    return format_of(inner, data).load(FileBytes(inner, data))


def _image(file: FileBytes) -> LoadedDocument:
    from tether.ingest.formats.ocr import load_image

    return load_image(file)


#: Source code and configuration read as plain text (a citation points at the file).
CODE_EXTENSIONS = (
    ".py", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".c", ".h", ".cc", ".cpp",
    ".hpp", ".cs", ".go", ".rs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash", ".ps1",
    ".sql", ".r", ".lua", ".pl", ".css", ".scss", ".yaml", ".yml", ".toml", ".ini", ".cfg",
    ".conf", ".log",
)  # fmt: skip

#: A man page's source: its section's number (``ls.1``, ``ip-route.8``), or ``.man``.
MAN_EXTENSIONS = (*(f".{n}" for n in range(1, 10)), ".man", ".mdoc")
#: One file of an Info manual split into several (``find.info-2``).
_INFO_PART = re.compile(r"\.info-\d{1,3}")
#: A man page's name whose section has letters after its number (``openssl.1ssl``).
_MAN_SUFFIX = re.compile(r"\.[1-9][a-z]{1,4}")

FORMATS: tuple[Format, ...] = (
    Format("PDF", (".pdf",), "application/pdf", loaders.load_pdf,
           "page (its printed label)", "pypdf; scans: Tesseract or RapidOCR"),
    Format("Markdown", (".md", ".markdown"), "text/markdown", loaders.load_markdown,
           "section (heading path)", "tether", inline=True),
    Format("Plain text", (".txt", ".text"), "text/plain", loaders.load_text_document,
           "section (underlined heading) or file", "tether", inline=True),
    Format("HTML", (".html", ".htm", ".xhtml"), "text/html", loaders.load_html,
           "section (heading path)", "tether (main content only)", inline=True),
    Format("Word", (".docx",),
           _mimes.DOCX,
           _docx, "section (heading path)", "python-docx",
           extra="formats"),
    Format("Word 97-2003", (".doc",), _mimes.DOC, _doc, "file", "olefile", extra="formats"),
    Format("OpenDocument text", (".odt",), _mimes.ODT,
           _odt, "section (heading path)", "odfpy", extra="formats"),
    Format("PowerPoint", (".pptx",),
           _mimes.PPTX,
           _pptx, "slide (its title as section)", "python-pptx",
           extra="formats"),
    Format("OpenDocument presentation", (".odp",), _mimes.ODP,
           _odp, "slide (its title as section)", "odfpy", extra="formats"),
    Format("Excel", (".xlsx",),
           _mimes.XLSX,
           _xlsx, "sheet", "openpyxl", extra="formats"),
    Format("Excel 97-2003", (".xls",), _mimes.XLS, _xls, "sheet", "xlrd", extra="formats"),
    Format("OpenDocument spreadsheet", (".ods",), _mimes.ODS,
           _ods, "sheet", "odfpy", extra="formats"),
    Format("CSV", (".csv",), _mimes.CSV, _csv, "file (rows)",
           "Python's csv"),
    Format("TSV", (".tsv", ".tab"), _mimes.TSV, _csv,
           "file (rows)", "Python's csv"),
    Format("EPUB", (".epub",), "application/epub+zip", _epub,
           "chapter (section)", "tether (zip, XHTML, defusedxml)"),
    Format("E-mail", (".eml",), "message/rfc822", _eml,
           "message (attachments: their own documents)", "Python's email"),
    Format("Mailbox", (".mbox",), "application/mbox", _mbox,
           "message (section)", "Python's email"),
    Format("JSON", (".json", ".jsonl", ".ndjson"), "application/json",
           _json, "file (section per record)", "Python's json"),
    Format("XML", (".xml",), "application/xml", _xml, "file",
           "defusedxml"),
    Format("AsciiDoc", (".adoc", ".asciidoc"), "text/asciidoc", _asciidoc,
           "section (heading path)", "tether", inline=True),
    Format("Jupyter notebook", (".ipynb",), "application/x-ipynb+json", _notebook,
           "section (heading path)", "Python's json"),
    Format("reStructuredText", (".rst",), "text/x-rst", _rst,
           "section (heading path)", "docutils", extra="formats"),
    Format("RTF", (".rtf",), "application/rtf", _rtf, "file",
           "striprtf", extra="formats"),
    Format("Source code", CODE_EXTENSIONS, "text/plain", loaders.load_plain_text, "file",
           "tether", inline=True),
    Format("Image (scanned page)", (".png", ".jpg", ".jpeg", ".tif", ".tiff"), "image/*",
           _image, "page (OCR)", "Tesseract or RapidOCR", extra="ocr"),
    Format("Man page", MAN_EXTENSIONS, "text/troff", _manpage,
           "section (heading path)", "tether", inline=True),
    Format("LaTeX", (".tex", ".latex", ".ltx"), "application/x-latex", _latex,
           "section (heading path)", "tether", inline=True),
    Format("Subtitles", (".vtt", ".srt"), "text/vtt", _transcript,
           "time (5-minute section)", "tether", inline=True),
    Format("Info (Texinfo)", (".info",), "text/x-info", _info,
           "section (heading path)", "tether", inline=True),
    Format("Gzip-compressed file", (".gz",), "application/gzip", _gunzipped,
           "as the file it holds", "Python's gzip"),
)  # fmt: skip

_BY_EXTENSION = {ext: f for f in FORMATS for ext in f.extensions}
_BY_NAME = {f.name: f for f in FORMATS}


def supported_extensions() -> list[str]:
    """Every extension tether reads, sorted."""
    return sorted(_BY_EXTENSION)


def by_extension(path: str | Path) -> Format | None:
    """The format ``path``'s extension names, or None. A ``.gz`` file is one when the
    name inside says a format tether reads, or says none (``changelog.gz``): a
    ``.tar.gz`` is no document."""
    suffix = Path(path).suffix.lower()
    if suffix == ".gz":
        inner = Path(path).with_suffix("")
        known = not inner.suffix or by_extension(inner) not in (None, _BY_NAME[_GZIP])
        return _BY_NAME[_GZIP] if known else None
    found = _BY_EXTENSION.get(suffix)
    if found is None and _MAN_SUFFIX.fullmatch(suffix):
        return _BY_NAME["Man page"]
    if found is None and _INFO_PART.fullmatch(suffix):
        return _BY_NAME["Info (Texinfo)"]
    return found


_GZIP = "Gzip-compressed file"


def format_of(path: str | Path, data: bytes) -> Format:
    """The format of the file at ``path`` holding ``data``: the one its extension names,
    else the one its content shows (:func:`sniff`); :class:`UnsupportedFileType`
    otherwise. A text file that is reStructuredText (:func:`reads_as_rst`) is read as
    reStructuredText when docutils is installed."""
    found = by_extension(path) or sniff(data)
    if found is _BY_NAME["Plain text"] and reads_as_rst(path, data) and _has("docutils"):
        found = _BY_NAME["reStructuredText"]
    if found is None and "PowerPoint Document" in _ole_streams(data):
        raise UnsupportedFileType(
            str(path),
            "is a PowerPoint 97-2003 presentation, which tether does not read: save it as"
            " .pptx (PowerPoint, LibreOffice: Save As) and add that",
        )
    if found is None:
        suffix = Path(path).suffix
        raise UnsupportedFileType(
            str(path),
            f"tether cannot read {suffix or 'this extensionless'} file (its content is not"
            f" a format it knows); supported: {', '.join(supported_extensions())}",
        )
    return found


#: A line of reStructuredText's explicit markup: a directive (``.. note::``), a hyperlink
#: target (``.. _fixtures:``), a footnote, a substitution or a comment.
_RST_MARKUP = re.compile(r"^\.\. [^\s.]", re.MULTILINE)


#: reStructuredText's inline markup, which plain text does not write: a role
#: (``:ref:`fixtures```), an inline literal (````pytest.mark````) and a hyperlink reference
#: (```Tidelift`_``, ```the tracker <https://...>`_``).
_RST_INLINE = re.compile(r":[a-z][\w:+.-]*:`[^`\s]|``[^`\s][^`]*``|`[^`]{1,200}`__?(?![\w`])")
#: A section title's underline, as reStructuredText reads one: a run of one punctuation
#: character at least as long as the title above it (any longer), after a blank line.
_RST_TITLE = re.compile(
    r"(?:\A|\n[ \t]*\n)"  # a blank line before
    r"(?:([!-/:-@\[-`{-~])\1{2,}\n)?"  # an overline
    r"([^\s].*?)[ \t]*\n([!-/:-@\[-`{-~])\3{2,}[ \t]*$",  # the title, its underline
    re.MULTILINE,
)


def reads_as_rst(path: str | Path, data: bytes) -> bool:
    """Whether a text file is reStructuredText: Sphinx's copy of a source
    (``_sources/fixtures.rst.txt``), or text with a section title and two marks of
    reStructuredText (lines of explicit markup: directives, targets, comments; roles,
    inline literals, hyperlink references), as Django's ``.txt`` documentation and
    pytest's sources have. Plain text has no such marks."""
    if str(path).lower().endswith(".rst.txt"):
        return True
    text = _text_head(data[: 1 << 16])
    if text is None:
        return False
    marks = len(_RST_MARKUP.findall(text)) + len(_RST_INLINE.findall(text, 0, 1 << 14))
    return marks >= 2 and (bool(underlined_headings(text)) or _rst_titled(text))


def _rst_titled(text: str) -> bool:
    """Whether ``text`` has a section title underlined as reStructuredText underlines one
    (at least as long as the title: plain text's headings are within a third of it)."""
    return any(
        len(m.group(0).rstrip().rsplit("\n", 1)[1]) >= len(m.group(2))
        for m in _RST_TITLE.finditer(text)
    )


@functools.cache
def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def load_path(path: Path) -> LoadedDocument:
    """Load one file, from one read (:func:`~tether.ingest.loaders.read_file`), with the
    loader of its format."""
    if path.is_dir():
        raise UnreadableFile(str(path), "is a directory, not a file")
    return load_file(read_file(path))


def load_file(file: FileBytes) -> LoadedDocument:
    """Load a file already read, with the loader of its format (by its extension, else
    its content: :func:`format_of`); its size is that of the bytes loaded."""
    return replace(format_of(file.path, file.data).load(file), file_size=file.size)


def sniff(data: bytes) -> Format | None:
    """The format ``data`` is, by its first bytes (and a zip file's table of contents),
    or None. Text that is no known markup is plain text; binary data of no known
    format is None."""
    head = data[:4096]
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return _BY_NAME[name]
    if head.startswith(b"PK\x03\x04"):
        return _zipped(data)
    if head.startswith(_OLE):
        return _compound(data)
    text = _text_head(head)
    if text is None:
        return None
    return _BY_NAME[_markup(text)]


_MAGIC = (
    (b"%PDF-", "PDF"),
    (b"\x1f\x8b", "Gzip-compressed file"),
    (b"\x89PNG\r\n\x1a\n", "Image (scanned page)"),
    (b"\xff\xd8\xff", "Image (scanned page)"),
    (b"II*\x00", "Image (scanned page)"),
    (b"MM\x00*", "Image (scanned page)"),
    (b"{\\rtf", "RTF"),
)

#: A zip file's ``mimetype`` member (OpenDocument, EPUB), or the part it must hold (OOXML).
_ZIP_MIMETYPES = {
    b"application/epub+zip": "EPUB",
    b"application/vnd.oasis.opendocument.text": "OpenDocument text",
    b"application/vnd.oasis.opendocument.spreadsheet": "OpenDocument spreadsheet",
    b"application/vnd.oasis.opendocument.presentation": "OpenDocument presentation",
}
_OOXML_PARTS = (
    ("word/document.xml", "Word"),
    ("ppt/presentation.xml", "PowerPoint"),
    ("xl/workbook.xml", "Excel"),
)


#: An OLE compound file's first bytes: Word, Excel and PowerPoint 97-2003 files.
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: The stream each kind of compound file holds.
_OLE_STREAMS = (
    ("WordDocument", "Word 97-2003"),
    ("Workbook", "Excel 97-2003"),
    ("Book", "Excel 97-2003"),
)


def _compound(data: bytes) -> Format | None:
    """The format of an OLE compound file, from the streams it holds (None without
    olefile, or when it is none tether reads)."""
    streams = _ole_streams(data)
    return next((_BY_NAME[name] for stream, name in _OLE_STREAMS if stream in streams), None)


def _ole_streams(data: bytes) -> set[str]:
    """The top-level stream names of ``data`` when it is an OLE compound file, read in one
    pass over its directory (empty without olefile, or for anything else)."""
    if not data.startswith(_OLE):
        return set()
    try:
        import olefile
    except ImportError:
        return set()
    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            return {entry[0] for entry in ole.listdir() if len(entry) == 1}
    except (OSError, ValueError, IndexError, KeyError):
        return set()


def _zipped(data: bytes) -> Format | None:
    """The format of a zip file, from its members' names (nothing is decompressed but
    the few bytes of a ``mimetype`` member)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "mimetype" in names and archive.getinfo("mimetype").file_size < 200:
                name = _ZIP_MIMETYPES.get(archive.read("mimetype").strip())
                return _BY_NAME[name] if name else None
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    for part, name in _OOXML_PARTS:
        if part in names:
            return _BY_NAME[name]
    return None


def _text_head(head: bytes) -> str | None:
    """``head`` as text when it is text (UTF-8, UTF-16 with its mark, or Windows-1252
    without control bytes), else None."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return head.decode("utf-16", errors="ignore")
    nuls = loaders.stray_nuls(head)
    if nuls is None:
        return None
    try:
        return head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":  # a character cut at the end of the head
            return head[: exc.start].decode("utf-8-sig")
    if nuls:  # a stray NUL is allowed in UTF-8 text only (see loaders.decode_text)
        return None
    text = head.decode("cp1252", errors="replace")
    odd = sum(1 for c in text if (ord(c) < 32 and c not in "\t\n\r\f") or c == "\ufffd")
    return None if odd > len(text) // 100 else text


_MAIL_HEADERS = (
    "from:",
    "to:",
    "subject:",
    "date:",
    "received:",
    "return-path:",
    "message-id:",
    "mime-version:",
    "delivered-to:",
)


def _markup(text: str) -> str:
    """Which text format ``text`` (a file's first 4 kB) is: HTML, XML, e-mail, a
    mailbox, JSON, a man page, Markdown-free plain text."""
    start = text.lstrip("\ufeff \t\r\n")[:512].lower()
    if start.startswith(("<!doctype html", "<html")) or "<html" in start[:256]:
        return "HTML"
    if start.startswith("<?xml"):
        return "HTML" if "<html" in start else "XML"
    if text.startswith("From ") and "\n" in text:
        return "Mailbox"
    lines = [line.lower() for line in text.splitlines()[:20] if line.strip()]
    if len(lines) >= 2 and sum(line.startswith(_MAIL_HEADERS) for line in lines[:8]) >= 2:
        return "E-mail"
    if start.startswith(("{", "[")):
        return "JSON"
    if _ROFF.match(text):
        return "Man page"
    if text.startswith("This is ") and "produced by makeinfo" in text[:300]:
        return "Info (Texinfo)"
    if _LATEX.search(text):
        return "LaTeX"
    if text.lstrip("\ufeff").startswith("WEBVTT") or _SUBRIP.match(text.lstrip("\ufeff")):
        return "Subtitles"
    return "Plain text"


#: A LaTeX document's class or body, at a line's start.
_LATEX = re.compile(r"^\\(?:documentclass|begin\{document\})", re.MULTILINE)
#: A SubRip file's first cue: its number, then its timing.
_SUBRIP = re.compile(r"\s*\d+\s*\n\d{1,2}:\d{2}:\d{2},\d{3} --> ")
#: A man page's source: comments, then a title request (``.TH``, mdoc's ``.Dd``).
_ROFF = re.compile(r"(?:[.']\\\".*\n|[ \t]*\n)*[.'][ \t]*(?:TH|Dd|Dt)\b")


def markdown_table() -> str:
    """The formats as a Markdown table (the README's, which a test keeps equal to it)."""
    rows = ["| format | files | a citation points at | read by |", "| --- | --- | --- | --- |"]
    for f in FORMATS:
        names = ", ".join(f"`{e}`" for e in f.extensions)
        reader = f.reader if f.extra is None else f"{f.reader} (extra `{f.extra}`)"
        rows.append(f"| {f.name} | {names} | {f.cites} | {reader} |")
    return "\n".join(rows)
