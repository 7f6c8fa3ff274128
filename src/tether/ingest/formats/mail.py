"""E-mail: a message (``.eml``) or a mailbox (``.mbox``) as text, attachments as files.

A message reads as its ``Subject:``, ``From:``, ``To:`` and ``Date:`` lines, a blank
line, then its body (the plain-text part, else the HTML part through tether's HTML
reader). Its subject, sender, recipients, date (ISO 8601 when it parses) and message id
go into the document's metadata. Each attachment with a file name becomes a file of its
own, named ``<message file>#<attachment name>`` (the indexer indexes it as a document of
its own type): names lose path separators and control characters and are cut to
:data:`MAX_NAME_CHARS`; at most :data:`MAX_ATTACHMENTS` attachments and
:data:`MAX_ATTACHMENT_BYTES` bytes of them are kept from one file, past which they are
skipped with a warning. An image shown inside an HTML body (with a ``Content-ID``) is
one only when it has at least :data:`INLINE_IMAGE_PIXELS` pixels (by its header): a
screenshot, or the message itself set as a picture, is read (by OCR); a logo, an icon or
a tracking pixel is not.

A mailbox is split at its ``From `` lines (mboxo and mboxrd: ``>From `` lines in a body
are unescaped) and each message read as above, a section each, titled
``<subject> (<date>)``; at most :data:`MAX_MESSAGES` messages are read.
"""

from __future__ import annotations

import email
import logging
import mimetypes
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, cast

from tether.errors import EmptyDocument, UnreadableFile
from tether.ingest.chunking import Heading
from tether.ingest.formats.data import TextBuilder
from tether.ingest.html import html_document
from tether.ingest.loaders import FileBytes, LoadedDocument, byte_size
from tether.text import normalize_text

logger = logging.getLogger("tether.ingest")

#: Attachments kept from one file (a message, or a whole mailbox).
MAX_ATTACHMENTS = 100
#: Bytes of attachments kept from one file.
MAX_ATTACHMENT_BYTES = 256 * 2**20
#: An image shown inside a body this large or larger (400 x 250) is content (read by
#: OCR), not a logo.
INLINE_IMAGE_PIXELS = 100_000
#: Messages read from one mailbox.
MAX_MESSAGES = 10_000
#: An attachment's name is cut to this many characters (its extension kept).
MAX_NAME_CHARS = 120

# A separator line: "From " at the start of the file or after a blank line.
_FROM_LINE = re.compile(rb"^From [^\n]*\n", re.MULTILINE)
_ESCAPED_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)
# Characters no file name should hold: path separators, and those Windows refuses.
_UNSAFE_NAME = re.compile(r'[/\\:*?"<>|#]')
_HEADERS = (("Subject", "subject"), ("From", "from"), ("To", "to"), ("Date", "date"))


@dataclass
class _Attachments:
    """The attachments of one file, named uniquely and kept within the bounds."""

    source: Path
    files: list[FileBytes] = field(default_factory=list)
    size: int = 0
    skipped: int = 0
    skipped_bytes: int = 0

    def add(self, name: str, data: bytes) -> None:
        if len(self.files) >= MAX_ATTACHMENTS or self.size + len(data) > MAX_ATTACHMENT_BYTES:
            self.skipped += 1
            self.skipped_bytes += len(data)
            return
        name = self._unique(name)
        self.files.append(FileBytes(Path(f"{self.source}#{name}"), data))
        self.size += len(data)

    def _unique(self, name: str) -> str:
        taken = {file.path.name.rpartition("#")[2] for file in self.files}
        stem, dot, extension = name.rpartition(".")
        stem, extension = (stem, dot + extension) if stem else (name, "")
        number = 1
        while name in taken:
            number += 1
            name = f"{stem} ({number}){extension}"
        return name

    def warnings(self) -> list[str]:
        if not self.skipped:
            return []
        warning = (
            f"{self.skipped} attachments ({byte_size(self.skipped_bytes)}) were not indexed:"
            f" a file's attachments are limited to {MAX_ATTACHMENTS} and"
            f" {byte_size(MAX_ATTACHMENT_BYTES)}"
        )
        logger.warning("%s: %s", self.source, warning)
        return [warning]


@dataclass(frozen=True)
class _Message:
    """One message read: its header lines, its body and the body's headings, metadata."""

    header: str
    body: str
    headings: list[Heading]
    metadata: dict[str, str]
    when: datetime | None


def load_eml(file: FileBytes) -> LoadedDocument:
    """An e-mail message: its header lines and body; its attachments as files."""
    source = str(file.path)
    if b"\x00" in file.data[:8192]:
        raise UnreadableFile(source, "looks like a binary file, not an e-mail message")
    attachments = _Attachments(file.path)
    message = _read_message(file.data, source, attachments)
    builder = TextBuilder()
    builder.block(message.header)
    builder.block(message.body, message.headings)
    text, sections = builder.sections()
    if not text:
        raise EmptyDocument(source, "the message has no headers and no text")
    metadata: dict[str, Any] = dict(message.metadata)
    if warnings := attachments.warnings():
        metadata["warnings"] = warnings
    return LoadedDocument(
        title=message.metadata["subject"] or file.stem,
        text=text,
        mime="message/rfc822",
        sections=sections,
        metadata=metadata,
        attachments=tuple(attachments.files),
    )


def load_mbox(file: FileBytes) -> LoadedDocument:
    """A mailbox: a section per message, titled ``<subject> (<date>)``; the attachments
    of every message as files."""
    source = str(file.path)
    attachments = _Attachments(file.path)
    builder = TextBuilder()
    warnings: list[str] = []
    count = 0
    for data in _mbox_messages(file.data):
        if count == MAX_MESSAGES:
            warnings.append(f"only the first {MAX_MESSAGES:,} messages were read")
            logger.warning("%s: %s", source, warnings[-1])
            break
        count += 1
        message = _read_message(data, source, attachments)
        builder.mark(_message_title(message), 1)
        builder.block(message.header)
        headings = [Heading(h.start, h.body, h.level + 1, h.title) for h in message.headings]
        builder.block(message.body, headings)
    text, sections = builder.sections()
    if not text:
        raise EmptyDocument(source, "the mailbox holds no message")
    metadata: dict[str, Any] = {"messages": count}
    if warnings := warnings + attachments.warnings():
        metadata["warnings"] = warnings
    return LoadedDocument(
        title=file.stem,
        text=text,
        mime="application/mbox",
        sections=sections,
        metadata=metadata,
        attachments=tuple(attachments.files),
    )


def _mbox_messages(data: bytes) -> Iterator[bytes]:
    """Each message of a mailbox, its ``>From `` lines unescaped."""
    end: int | None = None
    for match in _FROM_LINE.finditer(data):
        at = match.start()
        if at and not data.endswith((b"\n\n", b"\n\r\n"), 0, at):
            continue  # "From " inside a message whose writer did not escape it
        if end is not None or data[:at].strip():
            yield _ESCAPED_FROM.sub(rb"\1", data[end or 0 : at])
        end = match.end()
    if data[end or 0 :].strip():
        yield _ESCAPED_FROM.sub(rb"\1", data[end or 0 :])


def _message_title(message: _Message) -> str:
    subject = message.metadata["subject"] or "(no subject)"
    if message.when is not None:
        return f"{subject} ({message.when:%Y-%m-%d %H:%M})"
    date = message.metadata["date"]
    return f"{subject} ({date})" if date else subject


def _read_message(data: bytes, source: str, attachments: _Attachments) -> _Message:
    """A message's header lines, body and metadata; its attachments go to ``attachments``."""
    try:
        message = cast(EmailMessage, email.message_from_bytes(data, policy=policy.default))
        body_part = message.get_body(preferencelist=("plain", "html"))
    except RecursionError as exc:
        raise UnreadableFile(source, "has a message nested too deeply to read") from exc
    values = {key: _header(message, key) for _, key in _HEADERS}
    when = _parse_date(values["date"])
    header = "\n".join(f"{label}: {values[key]}" for label, key in _HEADERS if values[key])
    body, headings = _body(body_part)
    for part in _leaf_parts(message):
        if part is not body_part:
            _attach(part, attachments)
    metadata = {
        **values,
        "date": when.isoformat() if when is not None else values["date"],
        "message_id": _header(message, "message-id"),
    }
    return _Message(header, body, headings, metadata, when)


def _header(message: EmailMessage, name: str) -> str:
    """A header's value as one line ("" when absent); as written when it cannot be parsed
    (a date that is no date reads as "")."""
    try:
        value = str(message.get(name) or "")
    except (ValueError, IndexError, TypeError, AttributeError, LookupError):
        value = ""
    if not value.strip():
        value = next((str(v) for k, v in message.raw_items() if k.lower() == name), "")
    return " ".join(value.split())


def _parse_date(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None


def _body(part: EmailMessage | None) -> tuple[str, list[Heading]]:
    """The text of the body part (HTML through tether's HTML reader) and its headings."""
    if part is None:
        return "", []
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset: read it as UTF-8
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return "", []
    if part.get_content_subtype() == "html":
        _, text, headings = html_document(content)
        return text, headings
    return normalize_text(content), []


def _leaf_parts(message: EmailMessage) -> Iterator[EmailMessage]:
    """The parts of ``message`` that are not multipart containers, in order (a message
    attached whole is one part), walked without recursion."""
    pending: list[EmailMessage] = [message]
    while pending:
        part = pending.pop()
        if part.is_multipart() and part.get_content_maintype() == "multipart":
            pending += reversed(list(part.iter_parts()))  # type: ignore[arg-type]
        else:
            yield part


def _attach(part: EmailMessage, attachments: _Attachments) -> None:
    """Keep ``part`` as an attachment when it is one: it has a file name (a message
    attached whole: always), or it is an image shown inside the body that is large
    enough to be content rather than decoration."""
    filename = part.get_filename()
    is_message = part.get_content_type() == "message/rfc822"
    inline = part.get_content_disposition() != "attachment" and part.get("content-id")
    if part.get_content_maintype() == "image" and inline:
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes) or image_pixels(payload) < INLINE_IMAGE_PIXELS:
            return
    elif not filename and not is_message:
        return
    if is_message:
        data = _message_bytes(part)
        fallback = "message.eml"
    else:
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        fallback = f"attachment{_extension(part)}"
    if data:
        attachments.add(safe_name(filename or "", fallback), data)


def _message_bytes(part: EmailMessage) -> bytes:
    """The bytes of a message attached whole, written again from its parsed form (b""
    when it cannot be: its text is then only lost as an attachment, not the message)."""
    attached = part.get_payload(0)
    try:
        return attached.as_bytes() if isinstance(attached, EmailMessage) else b""
    except (ValueError, TypeError, LookupError, IndexError, RecursionError) as exc:
        logger.warning("an attached message cannot be written out again (%s)", exc)
        return b""


def _extension(part: EmailMessage) -> str:
    return mimetypes.guess_extension(part.get_content_type()) or ".bin"


def safe_name(name: str, fallback: str) -> str:
    """``name`` as a file name: its last path part, without control or format characters
    (a right-to-left mark that disguises an extension) or characters a file system
    refuses, at most :data:`MAX_NAME_CHARS` long with its extension kept."""
    name = re.sub(r"\s", " ", name.replace("\\", "/").rpartition("/")[2])
    name = "".join(
        c for c in unicodedata.normalize("NFC", name) if unicodedata.category(c)[0] != "C"
    )
    name = " ".join(_UNSAFE_NAME.sub("_", name).split()).strip(" .")
    if not name:
        return fallback
    if len(name) > MAX_NAME_CHARS:
        stem, dot, extension = name.rpartition(".")
        extension = dot + extension if stem and len(extension) <= 16 else ""
        name = name[: MAX_NAME_CHARS - len(extension)].rstrip(" .") + extension
    return name


def image_pixels(data: bytes) -> int:
    """An image's width times height from its header (PNG, GIF, JPEG), 0 when it says
    none: nothing is decoded."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        return int.from_bytes(data[16:20], "big") * int.from_bytes(data[20:24], "big")
    if data.startswith((b"GIF87a", b"GIF89a")) and len(data) >= 10:
        return int.from_bytes(data[6:8], "little") * int.from_bytes(data[8:10], "little")
    if data.startswith(b"\xff\xd8"):
        return _jpeg_pixels(data)
    return 0


def _jpeg_pixels(data: bytes) -> int:
    """A JPEG's size from its first start-of-frame marker."""
    at = 2
    while at + 9 < len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            return height * int.from_bytes(data[at + 7 : at + 9], "big")
        at += 2 + length
    return 0
