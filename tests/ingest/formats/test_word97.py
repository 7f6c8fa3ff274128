"""Word 97-2003 documents (``.doc``), read from real files saved by Word: the test
documents of oletools' source distribution (pinned by version and SHA-256, fetched from
PyPI with ``pip download`` once per machine), checked word for word against antiword,
Debian's reader of the format, where it is installed."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import make_settings
from tether import Tether
from tether.errors import EmptyDocument, UnreadableFile, UnsupportedFileType
from tether.ingest.formats import load_path, sniff
from tether.ingest.formats.word97 import _blocks

olefile = pytest.importorskip("olefile")

SDIST = ("oletools", "0.60.2", "ad452099f4695ffd8855113f453348200d195ee9fa341a09e197d66ee7e0b2c3")
CACHE = Path(__file__).resolve().parents[3] / "test-artifacts" / "sdists"
DATA = "oletools-0.60.2/tests/test-data/"
#: Documents with text, and what each says.
WITH_TEXT = {
    "msodde/harmless-clean.doc": "This is a harmless test document.",
    "msodde/dde-test-from-office2016.doc": "Another field, this time with mean unicode chars (üöä)",
    "oleobj/embedded-unicode.doc": "an embedded object which is a file with unicode in filename",
    "oleobj/embedded-simple-2007.doc": "This document contains an embedded file:",
}
#: Documents that hold an embedded object and no text.
PICTURE_ONLY = ("oleobj/sample_with_lnk_file.doc", "oleobj/sample_with_calc_embedded.doc")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist's test documents, extracted (the sdist downloaded once per machine)."""
    name, version, digest = SDIST
    archive = CACHE / f"{name}-{version}.zip"
    if not archive.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--no-binary", ":all:", "--dest", str(CACHE), f"{name}=={version}"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if fetched.returncode != 0 or not archive.is_file():
            pytest.skip(f"cannot fetch {name}=={version} from the package index: {fetched.stderr}")
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest, "not the pinned sdist"
    root = tmp_path_factory.mktemp("doc")
    with zipfile.ZipFile(archive) as sdist:
        for member in sdist.namelist():
            if member.startswith(DATA) and member.endswith((".doc", ".ppt")):
                sdist.extract(member, root)
    return root / DATA


@pytest.mark.parametrize("name", sorted(WITH_TEXT))
def test_a_word_97_document_reads_as_word_saved_it(files: Path, name: str) -> None:
    loaded = load_path(files / name)
    assert WITH_TEXT[name] in loaded.text
    assert loaded.mime == "application/msword"
    assert "HYPERLINK" not in loaded.text and "\x13" not in loaded.text  # no field codes
    antiword = shutil.which("antiword")
    if antiword is None:
        return  # the peer below is Debian's; the text above is checked without it
    peer = subprocess.run([antiword, "-w", "0", str(files / name)], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert loaded.text.split() == peer.replace("[pic]", "").split()


def test_the_summary_title_is_the_documents_title(files: Path) -> None:
    assert load_path(files / "msodde/dde-test-from-office2016.doc").title == (
        "This is a dde test file"
    )
    assert load_path(files / "msodde/harmless-clean.doc").title == "harmless-clean"  # none set


@pytest.mark.parametrize("name", PICTURE_ONLY)
def test_a_document_of_pictures_alone_is_empty(files: Path, name: str) -> None:
    with pytest.raises(EmptyDocument, match="no text"):
        load_path(files / name)


def test_an_encrypted_document_is_refused_saying_why(tmp_path: Path) -> None:
    with zipfile.ZipFile(CACHE / f"{SDIST[0]}-{SDIST[1]}.zip") as sdist:
        path = Path(
            sdist.extract("oletools-0.60.2/tests/test-data/encrypted/encrypted.doc", tmp_path)
        )
    with pytest.raises(UnreadableFile, match="encrypted"):
        load_path(path)


def _with_word_document(files: Path, tmp_path: Path, change: dict[int, bytes]) -> Path:
    """A copy of a real document whose ``WordDocument`` stream has bytes changed in place."""
    path = tmp_path / "changed.doc"
    shutil.copy(files / "msodde/harmless-clean.doc", path)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        stream = bytearray(ole.openstream("WordDocument").read())
        for offset, value in change.items():
            stream[offset : offset + len(value)] = value
        ole.write_stream("WordDocument", bytes(stream))
    return path


def test_a_word_95_document_is_refused_saying_what_to_do(files: Path, tmp_path: Path) -> None:
    path = _with_word_document(files, tmp_path, {2: (0x0065).to_bytes(2, "little")})
    with pytest.raises(UnsupportedFileType, match=r"Word 6 or Word 95.*\.docx"):
        load_path(path)


@pytest.mark.parametrize(
    "change",
    [
        {0x01A2: (10**9).to_bytes(4, "little")},  # the piece table outside its stream
        {0: b"\x00\x00"},  # not Word's header
    ],
)
def test_a_damaged_document_fails_typed(files: Path, tmp_path: Path, change: dict) -> None:
    with pytest.raises(UnreadableFile):
        load_path(_with_word_document(files, tmp_path, change))


def test_an_overstated_length_reads_what_the_pieces_hold(files: Path, tmp_path: Path) -> None:
    path = _with_word_document(files, tmp_path, {0x4C: (10**8).to_bytes(4, "little")})
    assert "This is a harmless test document." in load_path(path).text


@pytest.mark.timeout(60)
def test_a_damaged_property_set_still_loads_with_its_title(files: Path, tmp_path: Path) -> None:
    """One byte of a property set's format id changed (found by fuzzing): olefile's own
    metadata reader then loops 6.8 million times over this 23 kB file (5 s). tether reads
    the title itself, within the summary stream's bounds, and never that set."""
    path = tmp_path / "damaged.doc"
    shutil.copy(files / "msodde/dde-test-from-office2016.doc", path)
    name = "\x05DocumentSummaryInformation"
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        data = bytearray(ole.openstream(name).read())
        data[55] = 62  # inside the second property set's format id
        ole.write_stream(name, bytes(data))
    loaded = load_path(path)
    assert "This is a dde test file" in loaded.text
    assert loaded.title == "This is a dde test file"


def test_garbage_with_a_doc_name_fails_typed(tmp_path: Path) -> None:
    path = tmp_path / "report.doc"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    with pytest.raises(UnreadableFile, match="not a readable Word 97-2003 document"):
        load_path(path)
    path.write_bytes(b"")
    with pytest.raises(EmptyDocument):
        load_path(path)


def test_an_extensionless_word_97_document_is_recognised(files: Path) -> None:
    data = (files / "msodde/harmless-clean.doc").read_bytes()
    found = sniff(data)
    assert found is not None and found.name == "Word 97-2003"


def test_a_powerpoint_97_presentation_is_refused_saying_what_to_do(files: Path) -> None:
    """A ``.ppt`` is not read; the error says what it is and how to make it readable."""
    with pytest.raises(UnsupportedFileType, match=r"PowerPoint 97-2003.*\.pptx"):
        load_path(files / "oleobj/sample_with_lnk_file.ppt")


def test_fields_read_as_their_results_and_table_rows_as_lines() -> None:
    stored = (
        'See \x13 HYPERLINK "https://example.org" \x14the guide\x15 for more.\r'
        "Page \x13PAGE\x143\x15 of \x13NUMPAGES\x14\x13 = 2 \x1412\x15\x15\r"  # nested
        "Name\x07Price\x07\x07Desk lamp\x0739 EUR\x07\x07"
        "After the\x1ftable,\x0ba new\xa0line.\x01\r"
    )
    assert _blocks(stored) == [
        "See the guide for more.",
        "Page 3 of 12",
        "Name | Price",
        "Desk lamp | 39 EUR",
        "After thetable,\na new line.",
    ]


def test_a_word_97_document_is_searched_and_cited_as_a_file(files: Path, tmp_path: Path) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        (result,) = t.add(files / "msodde/harmless-clean.doc", workspace_id="w")
        assert result.status == "indexed"
        hits = t.search(
            "harmless test document", scope="workspace", workspace_id="w", mode="lexical"
        )
    assert hits and hits[0].title == "harmless-clean"
    assert "harmless test document" in hits[0].text
