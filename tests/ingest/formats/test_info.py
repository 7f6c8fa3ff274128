"""GNU Info files: a manual's text without its navigation, its titles as sections."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tether.errors import EmptyDocument
from tether.ingest.formats import by_extension, load_path, sniff

SED = (
    "This is sed.info, produced by makeinfo version 6.8 from sed.texi.\n\n"
    "INFO-DIR-SECTION Text creation\nSTART-INFO-DIR-ENTRY\n* sed: (sed).  Stream EDitor.\n"
    "END-INFO-DIR-ENTRY\n\n"
    "\x1f\nFile: sed.info,  Node: Top,  Next: Invoking sed,  Up: (dir)\n\n"
    "GNU sed\n*******\n\nThis file documents GNU sed, a stream editor.\n\n"
    "* Menu:\n\n* Invoking sed::   Invocation\n* Overview::   How to run it\n\n"
    "\x1f\nFile: sed.info,  Node: Invoking sed,  Next: Overview,  Prev: Top,  Up: Top\n\n"
    "2 Running sed\n*************\n\nThis chapter covers how to run sed.  *Note\n"
    "Overview::, for the basics, and *note How sed works: Execution Cycle. for the rest.\n\n"
    "\x1f\nFile: sed.info,  Node: Overview,  Prev: Invoking sed,  Up: Invoking sed\n\n"
    "2.1 Overview\n============\n\nNormally sed is invoked like this:\n\n"
    "     sed SCRIPT INPUTFILE...\n\n"
    "\x1f\nTag Table:\nNode: Top\x7f120\nNode: Overview\x7f420\n\x1f\nEnd Tag Table\n"
)


def write(path: Path, text: str) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def test_an_info_manual_reads_without_its_navigation(tmp_path: Path) -> None:
    doc = load_path(write(tmp_path / "sed.info.gz", SED))
    assert doc.title == "GNU sed" and doc.mime == "text/x-info"
    assert doc.text.split("\n\n") == [
        "GNU sed",
        "This file documents GNU sed, a stream editor.",
        "2 Running sed",
        "This chapter covers how to run sed.  See Overview, for the basics, and see How"
        " sed works for the rest.",
        "2.1 Overview",
        "Normally sed is invoked like this:",
        "     sed SCRIPT INPUTFILE...",
    ]
    assert [s.title for s in doc.sections] == [
        "GNU sed",
        "2 Running sed",
        "2 Running sed > 2.1 Overview",
    ]
    for navigation in ("File:", "Menu", "Tag Table", "makeinfo", "INFO-DIR"):
        assert navigation not in doc.text


def test_a_split_manual_is_read_part_by_part(tmp_path: Path) -> None:
    """A large manual is split: the main file names its parts and holds no text."""
    index = "This is find.info, produced by makeinfo.\n\n\x1f\nIndirect:\nfind.info-1: 1201\n"
    with pytest.raises(EmptyDocument, match=r"split into find\.info-1: add those files"):
        load_path(write(tmp_path / "find.info", index))
    part = write(tmp_path / "find.info-1.gz", SED.split("\x1f\nTag Table")[0])
    assert load_path(part).title == "GNU sed"
    found = by_extension("find.info-1")
    assert found is not None and found.name == "Info (Texinfo)"
    sniffed = sniff(SED.encode())
    assert sniffed is not None and sniffed.name == "Info (Texinfo)"


def test_the_machines_own_info_manuals_read_without_navigation() -> None:
    path = Path("/usr/share/info/sed.info.gz")
    if not path.exists():
        pytest.skip(f"{path} is not installed on this machine")
    doc = load_path(path)
    assert len(doc.sections) > 20
    assert "\nFile: sed.info," not in doc.text and "* Menu:" not in doc.text
