"""The format table end to end: files recognised by their content when their name says
nothing, the library folder listing what it cannot read, a message's attachments indexed
as documents of their own, web pages added by their URL (a real HTTP server on
loopback), slides cited as slides, and ``tether formats``."""

from __future__ import annotations

import email.message
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import make_pdf, make_settings
from tether import IndexingFailed, Settings, Tether, UnsupportedFileType
from tether.cli import app
from tether.ingest.formats import FORMATS, by_extension, format_of, sniff, supported_extensions


def lexical(t: Tether, query: str) -> list[str]:
    return [hit.title for hit in t.search(query, scope="global", mode="lexical")]


def test_every_extension_names_one_format_and_each_format_loads_something() -> None:
    extensions = [e for f in FORMATS for e in f.extensions]
    assert len(extensions) == len(set(extensions)), "an extension names two formats"
    assert supported_extensions() == sorted(extensions)
    for f in FORMATS:
        assert f.extensions and all(e.startswith(".") and e == e.lower() for e in f.extensions)
        assert by_extension(f"x{f.extensions[0].upper()}") is f  # names are not case-bound


def test_content_tells_the_format_when_the_name_does_not(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "p.pdf", ["A page."]).read_bytes()
    assert sniff(pdf).name == "PDF"
    assert sniff(b"<!DOCTYPE html><html><body>x</body></html>").name == "HTML"
    assert sniff(b"<?xml version='1.0'?><root/>").name == "XML"
    assert sniff(b'{"a": 1}').name == "JSON"
    mail = b"From: ada@example.com\nTo: bo@example.com\nSubject: Valves\n\nHello."
    assert sniff(mail).name == "E-mail"
    assert sniff(b"From ada@example.com Sat Jan  3 01:05:34 1996\nSubject: x\n\nBody\n").name == (
        "Mailbox"
    )
    assert sniff(b"\x89PNG\r\n\x1a\n" + bytes(20)).name == "Image (scanned page)"
    assert sniff("Grüße, the valve note.\n".encode()).name == "Plain text"
    assert sniff("Grüße, the valve note.\n".encode("cp1252")).name == "Plain text"
    # Binary data of no known format is nothing tether reads, however it is named.
    for blob in (b"MZ\x90\x00\x03\x00", bytes(range(256)) * 4, b"GIF89a\x01\x00\x01\x00\x00"):
        assert sniff(blob) is None
        with pytest.raises(UnsupportedFileType):
            format_of("tool", blob)
    assert format_of("notes.md", b"\x00\x01").name == "Markdown"  # the name wins


def test_an_extensionless_pdf_and_an_extensionless_note_are_indexed(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "made.pdf", ["The bilge pump moves 40 litres a minute."])
    scan = tmp_path / "scan-0042"
    scan.write_bytes(pdf.read_bytes())
    note = tmp_path / "NOTES"
    note.write_text("The anchor winch needs grease every spring.\n")
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        results = t.add([scan, note])
        assert [r.status for r in results] == ["indexed", "indexed"]
        assert t.get_document(results[0].document_id).mime == "application/pdf"
        assert lexical(t, "bilge pump") and lexical(t, "anchor winch")
        junk = tmp_path / "blob.bin"
        junk.write_bytes(bytes(range(256)) * 8)
        with pytest.raises(IndexingFailed) as failed:
            t.add(junk)
        assert isinstance(failed.value.results[0].error, UnsupportedFileType)


def test_scan_lists_what_it_cannot_read_and_why_a_file_failed(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    (library / "guide.md").write_text("# Guide\n\nThe valve opens at 3 bar.\n")
    (library / "video.bin").write_bytes(bytes(range(256)) * 64)
    (library / "README").write_text("Spare fuses are in the red box.\n")
    (library / "empty.md").write_text("\n\n")
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        report = t.scan(library)
    assert sorted(Path(p).name for p in report.indexed) == ["README", "guide.md"]
    assert [Path(p).name for p in report.unsupported] == ["video.bin"]
    assert [Path(p).name for p in report.failed] == ["empty.md"]
    assert "no text" in report.errors[report.failed[0]]
    as_json = report.to_dict()
    assert as_json["unsupported"] == report.unsupported and as_json["errors"] == report.errors


def _message(tmp_path: Path) -> Path:
    msg = email.message.EmailMessage()
    msg["From"] = "Ada Ops <ada@example.com>"
    msg["To"] = "crew@example.com"
    msg["Subject"] = "Pump manual and checklist"
    msg["Date"] = "Tue, 03 Nov 2026 09:30:00 +0100"
    msg.set_content("Attached: the pump manual and the winter checklist.")
    pdf = make_pdf(tmp_path / "m.pdf", ["Prime the pump with two litres of water."])
    msg.add_attachment(pdf.read_bytes(), maintype="application", subtype="pdf",
                       filename="pump-manual.pdf")  # fmt: skip
    msg.add_attachment("Drain the hoses before the first frost.", filename="checklist.txt")
    path = tmp_path / "pump.eml"
    path.write_bytes(bytes(msg))
    return path


def test_a_messages_attachments_are_documents_of_their_own(tmp_path: Path) -> None:
    path = _message(tmp_path)
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        results = t.add(path, workspace_id="ops", session_id="chat")
        assert [r.status for r in results] == ["indexed"] * 3
        message, manual, checklist = (t.get_document(r.document_id) for r in results)
        assert message.title == "Pump manual and checklist"
        assert message.metadata["from"] == "Ada Ops <ada@example.com>"
        assert message.metadata["date"].startswith("2026-11-03T09:30")
        assert manual.source_path.endswith("pump.eml#pump-manual.pdf")
        assert manual.mime == "application/pdf" and checklist.mime == "text/plain"
        # Each attachment is found, cited and attached to the chat as the message is.
        hits = t.search("prime the pump", scope="session", session_id="chat", mode="lexical")
        assert hits and hits[0].document_id == manual.id and hits[0].page == 1
        found = t.search("first frost", scope="workspace", workspace_id="ops", mode="lexical")
        assert [hit.title for hit in found] == ["checklist"] == [checklist.title]
        # The same message again: nothing changed, nothing indexed twice.
        assert [r.status for r in t.add(path, workspace_id="ops")] == ["skipped"]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, dict[str, bytes]]]:
    pages: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            if body is None:
                self.send_error(404)
                return
            kind = "application/pdf" if body.startswith(b"%PDF") else "text/html; charset=utf-8"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()


PAGE = b"""<!doctype html><html><head><title>Winter storage</title></head><body>
<nav><a href="/">Home</a> | <a href="/shop">Shop</a></nav>
<main><h1>Winter storage</h1><p>Store the batteries at 40 to 60 percent charge.</p></main>
<footer>Cookie settings</footer></body></html>"""


def test_a_web_page_is_added_by_its_url_and_again_only_when_it_changed(
    tmp_path: Path, site: tuple[str, dict[str, bytes]]
) -> None:
    base, pages = site
    pages["/docs/winter"] = PAGE
    pages["/manual.pdf"] = make_pdf(tmp_path / "m.pdf", ["Torque the bolts to 12 Nm."]).read_bytes()
    settings = Settings.load(fetch={"allow_private": True})
    with Tether(tmp_path / "t.db", settings=settings) as t:
        [page] = t.add(url=f"{base}/docs/winter", workspace_id="boats")
        document = t.get_document(page.document_id)
        assert page.status == "indexed" and document.title == "Winter storage"
        assert document.source_path == f"{base}/docs/winter"
        assert document.metadata["url"] == f"{base}/docs/winter" and document.metadata["fetched_at"]
        [chunk] = t.chunks(page.document_id)
        assert "40 to 60 percent" in chunk.content and "Cookie" not in chunk.content
        assert [r.status for r in t.add(url=f"{base}/docs/winter", workspace_id="boats")] == [
            "skipped"
        ]
        pages["/docs/winter"] = PAGE.replace(b"40 to 60", b"50 to 70")
        again = t.add(url=f"{base}/docs/winter", workspace_id="boats")
        assert [(r.status, r.document_id) for r in again] == [("replaced", page.document_id)]
        [manual] = t.add_url(f"{base}/manual.pdf", workspace_id="boats")
        assert t.get_document(manual.document_id).mime == "application/pdf"
        missing = t.add(url=f"{base}/nowhere", on_error="collect")
        assert missing[0].status == "failed" and "404" in str(missing[0].error)
    # Without fetch.allow_private, loopback is refused before any request is made.
    with (
        Tether(tmp_path / "u.db", settings=Settings.load()) as t,
        pytest.raises(IndexingFailed, match="allow_private"),
    ):
        t.add(url=f"{base}/docs/winter")


def test_tether_add_fetches_urls_and_tether_formats_lists_the_table(
    tmp_path: Path, site: tuple[str, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, pages = site
    pages["/docs/winter"] = PAGE
    monkeypatch.setenv("TETHER_FETCH__ALLOW_PRIVATE", "true")
    runner = CliRunner()
    db = str(tmp_path / "t.db")
    added = runner.invoke(app, ["add", f"{base}/docs/winter", "--db", db, "--json"])
    assert added.exit_code == 0, added.output
    [result] = json.loads(added.stdout)["results"]
    assert result["status"] == "indexed" and result["source"] == f"{base}/docs/winter"
    listed = runner.invoke(app, ["formats", "--json"])
    assert listed.exit_code == 0, listed.output
    names = [f["name"] for f in json.loads(listed.stdout)["formats"]]
    assert names == [f.name for f in FORMATS]


def test_a_slide_is_cited_as_a_slide(tmp_path: Path) -> None:
    pptx = pytest.importorskip("pptx")
    deck = pptx.Presentation()
    for title, body in (("Agenda", "Welcome and goals."), ("Pricing", "The kit costs 39 EUR.")):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    path = tmp_path / "deck.pptx"
    deck.save(path)
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        t.add(path)
        result = t.retrieve("How much does the kit cost?", scope="global", min_relevance=0.0)
    assert "(slide 2)" in result.context and "PDF page" not in result.context
    assert result.citations[0].page == 2


def test_a_large_picture_inside_a_message_is_read_and_a_logo_is_not(tmp_path: Path) -> None:
    from PIL import Image

    from tether.ingest.formats import load_file
    from tether.ingest.formats.mail import image_pixels
    from tether.ingest.loaders import FileBytes

    def png(size: tuple[int, int]) -> bytes:
        out = tmp_path / "i.png"
        Image.new("L", size, 255).save(out)
        return out.read_bytes()

    def jpeg(size: tuple[int, int]) -> bytes:
        out = tmp_path / "i.jpg"
        Image.new("RGB", size, "white").save(out, "JPEG")
        return out.read_bytes()

    assert image_pixels(png((500, 400))) == 200_000 and image_pixels(jpeg((443, 246))) == 108_978
    assert image_pixels(b"not an image") == 0
    msg = email.message.EmailMessage()
    msg["Subject"] = "Screenshot"
    msg.set_content("See below.")
    msg.add_alternative('<p>See below.</p><img src="cid:shot"><img src="cid:logo">', subtype="html")
    html = msg.get_payload()[1]
    html.add_related(png((500, 400)), "image", "png", cid="<shot>")
    html.add_related(png((120, 40)), "image", "png", cid="<logo>")
    loaded = load_file(FileBytes(tmp_path / "m.eml", bytes(msg)))
    assert len(loaded.attachments) == 1  # the screenshot, not the logo
