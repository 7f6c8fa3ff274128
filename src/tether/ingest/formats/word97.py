"""Word 97-2003 documents (``.doc``): their text, read from the file's structure.

A ``.doc`` file is an OLE compound file. Its ``WordDocument`` stream starts with the File
Information Block (FIB), which says where the piece table is: the list of the pieces the
document's characters are stored in, each either 8-bit (Windows-1252) or UTF-16. The
main text is the first ``ccpText`` characters of those pieces, then the footnotes'
``ccpFtn`` ([MS-DOC] 2.4.1, "Retrieving Text"). Read from there:

- a paragraph ends at ``\\r``; a line break ``\\v`` is a new line;
- a field is ``\\x13 code \\x14 result \\x15``: its code (``HYPERLINK "..."``, ``PAGE``)
  is left out and its result kept, as Word shows it; fields nest;
- a table cell ends at ``\\x07`` and a row with one more: a row reads as its cells
  joined by ``|``, a line per row;
- pictures, drawn objects and note marks (``\\x01 \\x08 \\x02 \\x05``) are nothing; a
  non-breaking hyphen is a hyphen and an optional one nothing.

Headings are not told apart from other paragraphs (that needs the style of each
paragraph), so a citation points at the file. Word 6 and Word 95 files (an older FIB) and
encrypted ones are refused with a typed error that says to save them as ``.docx``.
"""

from __future__ import annotations

import io
import re
import struct
from dataclasses import dataclass

from tether.errors import EmptyDocument, UnreadableFile, UnsupportedFileType
from tether.ingest.formats import _mimes
from tether.ingest.formats.tables import TextBlocks
from tether.ingest.loaders import FileBytes, LoadedDocument, metadata_title

#: The FIB's first word in every Word 97-2003 file, and the oldest ``nFib`` of that FIB
#: (Word 97); older values are Word 6 and Word 95.
_IDENT = 0xA5EC
_WORD97 = 0x00C1
#: Offsets in the FIB ([MS-DOC] 2.5.1): flags (``fEncrypted``, ``fWhichTblStm``), the
#: character counts of the main text and the footnotes, and the piece table's place in the
#: table stream (``fcClx``, ``lcbClx``).
_FLAGS = 0x0A
_ENCRYPTED = 0x0100
_TABLE_1 = 0x0200
_CCP_TEXT = 0x4C
_CCP_FOOTNOTES = 0x50
_FC_CLX = 0x01A2
#: Bytes of a character in a piece that is not compressed (UTF-16); a compressed piece's
#: characters (Windows-1252) take one.
_UTF16_BYTES = 2

_FIELD_BEGIN, _FIELD_SEPARATOR, _FIELD_END = "\x13", "\x14", "\x15"
#: Characters that are no text: a picture, a drawn object, footnote and comment marks,
#: an optional hyphen, and the control characters Word leaves in a piece.
_NOT_TEXT = dict.fromkeys([*range(0x00, 0x07), 0x08, *range(0x0E, 0x13), 0x1F], None)
_NOT_TEXT |= {0x1E: "-", 0xA0: " ", 0x0B: "\n", 0x0C: "\n"}
_CELL = "\x07"
#: The summary information stream, the first bytes of it read, and the title's property.
_SUMMARY = "\x05SummaryInformation"
_SUMMARY_BYTES = 1 << 20
_TITLE = 2


@dataclass(frozen=True)
class _Piece:
    """A run of the document's characters: where it is in the stream and how it is coded."""

    cp_start: int
    cp_end: int
    offset: int
    compressed: bool


def load_doc(file: FileBytes) -> LoadedDocument:
    """A Word 97-2003 document (see the module's docstring for what is read)."""
    source = str(file.path)
    try:
        import olefile
    except ImportError as exc:
        raise UnsupportedFileType(
            source,
            f"reading Word 97-2003 files needs olefile: pip install 'tether[formats]' ({exc})",
        ) from exc
    if not file.data:
        raise EmptyDocument(source, "the file is empty")
    try:
        with olefile.OleFileIO(io.BytesIO(file.data)) as ole:
            text = _document_text(ole, source)
            title = _summary_title(ole)
    except (OSError, struct.error, ValueError, IndexError, KeyError) as exc:
        raise UnreadableFile(source, f"is not a readable Word 97-2003 document ({exc})") from exc
    blocks = TextBlocks()
    for block in _blocks(text):
        blocks.add(block)
    if not blocks.text():
        raise EmptyDocument(source, "the document has no text")
    return LoadedDocument(
        title=metadata_title(title) or file.stem,
        text=blocks.text(),
        mime=_mimes.DOC,
        sections=tuple(blocks.sections(blocks.text())),
    )


def _document_text(ole: object, source: str) -> str:
    """The main text and the footnotes, as stored (fields and marks still in)."""
    if not ole.exists("WordDocument"):  # type: ignore[attr-defined]
        raise UnreadableFile(source, "is an OLE file without a Word document in it")
    stream = ole.openstream("WordDocument").read()  # type: ignore[attr-defined]
    ident, version = struct.unpack_from("<HH", stream, 0)
    if ident != _IDENT:
        raise UnreadableFile(source, "is not a Word document (its header is not Word's)")
    if version < _WORD97:
        raise UnsupportedFileType(
            source,
            "is a Word 6 or Word 95 document: save it as .docx (or Word 97-2003) to index it",
        )
    (flags,) = struct.unpack_from("<H", stream, _FLAGS)
    if flags & _ENCRYPTED:
        raise UnreadableFile(source, "is encrypted (password protected): save it unprotected")
    table_name = "1Table" if flags & _TABLE_1 else "0Table"
    if not ole.exists(table_name):  # type: ignore[attr-defined]
        raise UnreadableFile(source, f"has no {table_name} stream (it is damaged)")
    table = ole.openstream(table_name).read()  # type: ignore[attr-defined]
    main, footnotes = struct.unpack_from("<ii", stream, _CCP_TEXT)
    fc_clx, lcb_clx = struct.unpack_from("<II", stream, _FC_CLX)
    pieces = _pieces(table[fc_clx : fc_clx + lcb_clx], source)
    wanted = max(0, main) + max(0, footnotes)
    return _characters(stream, pieces, wanted, source)


def _pieces(clx: bytes, source: str) -> list[_Piece]:
    """The piece table in ``clx``: formatting runs (``0x01``) are skipped to the ``0x02``
    piece table, ``n + 1`` character positions and ``n`` 8-byte piece descriptors."""
    at = 0
    while at < len(clx) and clx[at] == 0x01:
        (size,) = struct.unpack_from("<H", clx, at + 1)
        at += 3 + size
    if at >= len(clx) or clx[at] != 0x02:
        raise UnreadableFile(source, "has no piece table (it is damaged)")
    (length,) = struct.unpack_from("<I", clx, at + 1)
    table = clx[at + 5 : at + 5 + length]
    count = (len(table) - 4) // 12
    if count < 1:
        raise UnreadableFile(source, "has an empty piece table (it is damaged)")
    starts = struct.unpack_from(f"<{count + 1}I", table, 0)
    pieces = []
    for i in range(count):
        (fc,) = struct.unpack_from("<I", table, 4 * (count + 1) + 8 * i + 2)
        compressed = bool(fc & 0x40000000)
        offset = (fc & 0x3FFFFFFF) // 2 if compressed else fc & 0x3FFFFFFF
        pieces.append(_Piece(starts[i], starts[i + 1], offset, compressed))
    return pieces


def _characters(stream: bytes, pieces: list[_Piece], wanted: int, source: str) -> str:
    """The first ``wanted`` characters of the pieces, decoded."""
    parts: list[str] = []
    for piece in sorted(pieces, key=lambda p: p.cp_start):
        if piece.cp_start >= wanted:
            break
        count = min(piece.cp_end, wanted) - piece.cp_start
        if count <= 0:
            continue
        size = count if piece.compressed else _UTF16_BYTES * count
        raw = stream[piece.offset : piece.offset + size]
        if len(raw) < size:
            raise UnreadableFile(source, "has a text piece past the end of its stream (damaged)")
        parts.append(
            raw.decode("cp1252", "replace")
            if piece.compressed
            else raw.decode("utf-16-le", "replace")
        )
    return "".join(parts)


def _without_field_codes(text: str) -> str:
    """``text`` with each field's code left out and its result kept (fields nest)."""
    if _FIELD_BEGIN not in text:
        return text
    out: list[str] = []
    #: For each open field: whether its code is still being read.
    open_fields: list[bool] = []
    for piece in re.split(r"([\x13\x14\x15])", text):
        if piece == _FIELD_BEGIN:
            open_fields.append(True)
        elif piece == _FIELD_SEPARATOR:
            if open_fields:
                open_fields[-1] = False
        elif piece == _FIELD_END:
            if open_fields:
                open_fields.pop()
        elif not any(open_fields):
            out.append(piece)
    return "".join(out)


def _blocks(text: str) -> list[str]:
    """The paragraphs of the stored text, a table row as one ``a | b`` line: a cell ends
    at a cell mark, and a row at a cell mark of its own after its last cell's (so an
    empty cell, two marks in a row too, ends its row's line early)."""
    text = _without_field_codes(text).translate(_NOT_TEXT)
    text = text.replace(_CELL * 2, "\r").replace(_CELL, " | ")
    return [b for b in text.split("\r") if b.strip()]


def _summary_title(ole: object) -> str | None:
    """The title in the file's summary information (property 2 of its first property
    set), when it has one. Read here, within the stream's bounds: olefile's own reader
    loops over the count a damaged stream claims (seconds for a 23 kB file)."""
    try:
        if not ole.exists(_SUMMARY):  # type: ignore[attr-defined]
            return None
        data = ole.openstream(_SUMMARY).read(_SUMMARY_BYTES)  # type: ignore[attr-defined]
        (section,) = struct.unpack_from("<I", data, 44)
        _, count = struct.unpack_from("<II", data, section)
        for i in range(min(count, (len(data) - section) // 8)):
            prop, offset = struct.unpack_from("<II", data, section + 8 + 8 * i)
            if prop != _TITLE:
                continue
            kind, size = struct.unpack_from("<II", data, section + offset)
            raw = data[section + offset + 8 : section + offset + 8 + min(size, 4096)]
            if kind == 0x1E:  # VT_LPSTR, in the file's code page (Windows-1252 here)
                title = raw.split(b"\x00", 1)[0].decode("cp1252", "replace")
            elif kind == 0x1F:  # VT_LPWSTR: a count of UTF-16 characters
                title = data[section + offset + 8 : section + offset + 8 + 2 * size]
                title = title.decode("utf-16-le", "replace").split("\x00", 1)[0]
            else:
                return None
            return title.strip() or None
    except (OSError, struct.error, ValueError, IndexError, KeyError):
        return None
    return None
