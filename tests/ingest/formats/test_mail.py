"""E-mail: real messages built with :class:`email.message.EmailMessage` (a text and a PDF
attachment, the PDF made with fpdf2) and a real mailbox of three messages, read through
the format table: header lines, body, metadata, attachments as files of their own, and
the bounds on attachments and messages."""

from __future__ import annotations

import logging
from email.message import EmailMessage
from pathlib import Path

import pytest

from helpers import make_pdf
from tether import UnreadableFile
from tether.ingest import LoadedDocument, load_path, normalize_text
from tether.ingest.formats import load_file, mail

DATE = "Tue, 05 Mar 2024 10:30:00 +0000"


def message(
    subject: str = "Quarterly lighthouse report",
    body: str = "The fog horn was sounded 41 times this quarter.",
    *,
    date: str = DATE,
    html: str | None = None,
) -> EmailMessage:
    """A message; a ``date`` that is no date is written as it is (as some mailers do)."""
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = "Ana Ribeiro <ana@example.org>"
    msg["To"] = "Ben Okafor <ben@example.org>"
    msg.set_raw("Date", date)  # as written: EmailMessage would drop a date it cannot parse
    msg["Message-ID"] = "<report-1@example.org>"
    msg.set_content(body)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    return msg


def write(path: Path, msg: EmailMessage) -> Path:
    path.write_bytes(msg.as_bytes())
    return path


def titled(doc: LoadedDocument) -> list[tuple[str | None, str]]:
    """Each section's title and text; the text is normalized and the sections cover it
    in order."""
    assert normalize_text(doc.text) == doc.text
    assert all(a.end <= b.start for a, b in zip(doc.sections, doc.sections[1:], strict=False))
    return [(s.title, doc.text[s.start : s.end].strip()) for s in doc.sections]


def test_a_message_is_its_header_lines_then_its_plain_body_with_metadata(tmp_path: Path) -> None:
    msg = message(html="<p>Only the HTML part says this.</p>")
    doc = load_path(write(tmp_path / "report.eml", msg))
    assert doc.title == "Quarterly lighthouse report" and doc.mime == "message/rfc822"
    assert doc.text == (
        "Subject: Quarterly lighthouse report\nFrom: Ana Ribeiro <ana@example.org>\n"
        f"To: Ben Okafor <ben@example.org>\nDate: {DATE}\n\n"
        "The fog horn was sounded 41 times this quarter."
    )
    assert doc.metadata == {
        "subject": "Quarterly lighthouse report",
        "from": "Ana Ribeiro <ana@example.org>",
        "to": "Ben Okafor <ben@example.org>",
        "date": "2024-03-05T10:30:00+00:00",
        "message_id": "<report-1@example.org>",
    }
    assert doc.attachments == ()


def test_an_html_only_body_is_read_as_html_with_its_headings(tmp_path: Path) -> None:
    msg = message()
    msg.set_content(
        "<html><body><nav>Menu</nav><h1>Storm log</h1><p>Gale at noon.</p></body></html>",
        subtype="html",
    )
    doc = load_path(write(tmp_path / "storm.eml", msg))
    assert titled(doc)[-1] == ("Storm log", "# Storm log\n\nGale at noon.")
    assert "Menu" not in doc.text and "<p>" not in doc.text


def test_attachments_become_files_of_their_own_with_safe_names(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "source.pdf", ["Lamp oil used: 12 litres."]).read_bytes()
    msg = message()
    msg.add_attachment(b"Wick stock: 40.\n", maintype="text", subtype="plain", filename="notes.txt")
    msg.add_attachment(pdf, maintype="application", subtype="pdf", filename="../../etc/report.pdf")
    msg.add_attachment(b"again", maintype="text", subtype="plain", filename="notes.txt")
    path = write(tmp_path / "report.eml", msg)
    doc = load_path(path)
    assert [(str(f.path), f.data) for f in doc.attachments] == [
        (f"{path}#notes.txt", b"Wick stock: 40.\n"),
        (f"{path}#report.pdf", pdf),
        (f"{path}#notes (2).txt", b"again"),
    ]
    assert "Wick stock" not in doc.text  # an attachment is its own document
    # An attachment reads as its own type: the PDF is a PDF.
    assert "Lamp oil used" in load_file(doc.attachments[1]).text


def test_an_image_shown_in_the_body_is_no_attachment(tmp_path: Path) -> None:
    msg = message(html='<p>See the lens: <img src="cid:lens"></p>')
    html = msg.get_payload()[1]
    html.add_related(b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", cid="<lens>")
    msg.add_attachment(b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", filename="tower.png")
    doc = load_path(write(tmp_path / "lens.eml", msg))
    assert [f.path.name for f in doc.attachments] == ["lens.eml#tower.png"]


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("..\\..\\windows\\evil.exe", "evil.exe"),
        ("/etc/passwd", "passwd"),
        ("invoice\u202efdp.exe", "invoicefdp.exe"),  # a right-to-left override, dropped
        ("tab\tand\x00nul\x1b.txt", "tab andnul.txt"),
        ("a#b:c?.txt", "a_b_c_.txt"),
        ("..", "fallback.bin"),
        ("", "fallback.bin"),
        ("x" * 300 + ".pdf", "x" * 116 + ".pdf"),
    ],
)
def test_attachment_names_are_made_safe(name: str, safe: str) -> None:
    assert mail.safe_name(name, "fallback.bin") == safe


def test_attachments_past_the_bounds_are_skipped_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(mail, "MAX_ATTACHMENTS", 2)
    monkeypatch.setattr(mail, "MAX_ATTACHMENT_BYTES", 100)
    msg = message()
    for number, size in enumerate([10, 200, 20, 30], start=1):
        msg.add_attachment(b"x" * size, maintype="text", subtype="plain", filename=f"{number}.txt")
    with caplog.at_level(logging.WARNING, logger="tether.ingest"):
        doc = load_path(write(tmp_path / "many.eml", msg))
    assert [f.path.name.partition("#")[2] for f in doc.attachments] == ["1.txt", "3.txt"]
    [warning] = doc.metadata["warnings"]
    assert warning.startswith("2 attachments (230 bytes) were not indexed")
    assert warning in caplog.text


def test_an_unparseable_date_is_kept_as_written(tmp_path: Path) -> None:
    doc = load_path(write(tmp_path / "odd.eml", message(date="the day after the storm")))
    assert doc.metadata["date"] == "the day after the storm"
    assert "Date: the day after the storm" in doc.text


def test_a_binary_file_named_eml_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "blob.eml").write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(UnreadableFile):
        load_path(tmp_path / "blob.eml")


# -- mailboxes ----------------------------------------------------------------------------


def mailbox(messages: list[EmailMessage]) -> bytes:
    """An mboxrd mailbox: a ``From `` line before each message, ``From `` lines in a body
    escaped as ``>From ``."""
    out = b""
    for msg in messages:
        raw = msg.as_bytes().replace(b"\nFrom ", b"\n>From ")
        out += b"From ana@example.org Tue Mar  5 10:30:00 2024\n" + raw + b"\n"
    return out


def three_messages() -> list[EmailMessage]:
    first = message("Fog report", "Thick fog all week.\n\nFrom the gallery nothing was seen.")
    first.add_attachment(b"fog log", maintype="text", subtype="plain", filename="log.txt")
    second = message("Oil order", "Order 40 litres.\nSent\nFrom my phone", date="n/a")
    third = message("Storm", "Gale at noon.", date="Wed, 06 Mar 2024 18:05:00 +0100")
    third.add_attachment(b"storm log", maintype="text", subtype="plain", filename="log.txt")
    return [first, second, third]


def test_a_mailbox_is_a_section_per_message_with_every_attachment(tmp_path: Path) -> None:
    path = tmp_path / "keepers.mbox"
    path.write_bytes(mailbox(three_messages()))
    doc = load_path(path)
    assert doc.title == "keepers" and doc.mime == "application/mbox"
    sections = titled(doc)
    assert [title for title, _ in sections] == [
        "Fog report (2024-03-05 10:30)",
        "Oil order (n/a)",
        "Storm (2024-03-06 18:05)",
    ]
    assert sections[0][1].endswith("Thick fog all week.\n\nFrom the gallery nothing was seen.")
    assert sections[1][1].endswith("Order 40 litres.\nSent\nFrom my phone")
    assert sections[2][1].startswith("Subject: Storm\nFrom: Ana Ribeiro")
    assert doc.metadata == {"messages": 3}
    assert [(f.path.name, f.data) for f in doc.attachments] == [
        ("keepers.mbox#log.txt", b"fog log"),
        ("keepers.mbox#log (2).txt", b"storm log"),
    ]


def test_messages_past_the_limit_are_left_out_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mail, "MAX_MESSAGES", 2)
    path = tmp_path / "keepers.mbox"
    path.write_bytes(mailbox(three_messages()))
    doc = load_path(path)
    assert len(doc.sections) == 2 and "Gale at noon" not in doc.text
    assert doc.metadata["warnings"] == ["only the first 2 messages were read"]
