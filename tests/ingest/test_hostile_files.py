"""Hostile files: a file name that is not UTF-8 indexes (its path stored losslessly) or
fails alone, and the library folder goes on. Real files with such names in tmp_path,
a real SQLite store, the real CLI."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tether import Tether
from tether.cli import app
from tether.store._paths import read_path, stored_path

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or os.fsencode("\udcff") != b"\xff",
    reason="needs a POSIX file system whose names are bytes (surrogateescape)",
)


def odd_file(folder: Path, raw: bytes, text: str) -> Path:
    """A file whose name is the bytes ``raw`` (not UTF-8), as Python names it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = Path(os.fsdecode(os.path.join(os.fsencode(folder), raw)))
    path.write_text(text)
    return path


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)))
def test_a_stored_path_is_valid_text_and_reads_back_exactly(path: str) -> None:
    stored = stored_path(path)
    assert stored is not None
    stored.encode("utf-8")  # SQLite can hold it
    assert read_path(stored) == path
    if not any("\ud800" <= c <= "\udfff" or c == "\uffff" for c in path):
        assert stored == path  # ordinary paths are kept as they are


def test_a_folder_prefix_stays_a_prefix() -> None:
    folder, name = "/lib/docs", "/lib/docs/\udcff\udcfe.md"
    stored = stored_path(name)
    assert stored is not None and stored.startswith(stored_path(folder + "/") or "")


def test_add_indexes_a_file_whose_name_is_not_utf8_beside_a_fine_one(tmp_path: Path) -> None:
    odd = odd_file(tmp_path / "docs", b"\xff\xfe.md", "# Odd\n\nThe odd file is about pumps.\n")
    fine = tmp_path / "docs" / "fine.md"
    fine.write_text("# Fine\n\nThe fine file is about valves.\n")
    with Tether(db=tmp_path / "t.db") as t:
        results = t.add([odd, fine], workspace_id="lib")
        assert [r.status for r in results] == ["indexed", "indexed"]
        paths = {d.title: d.source_path for d in t.documents()}
        assert paths == {"Odd": str(odd.resolve()), "Fine": str(fine.resolve())}
        again = t.add([odd, fine], workspace_id="lib")
        assert [r.status for r in again] == ["skipped", "skipped"]
        (hit,) = t.search("pumps", scope="workspace", workspace_id="lib", k=1)
        assert hit.source_path == str(odd.resolve())  # exactly the file's own name


def test_scan_indexes_follows_renames_and_deletes_such_a_file(tmp_path: Path) -> None:
    folder = tmp_path / "library"
    odd = odd_file(folder, b"caf\xe9.md", "# Cafe\n\nNotes on the espresso machine.\n")
    (folder / "fine.md").write_text("# Fine\n\nA fine file about valves.\n")
    with Tether(db=tmp_path / "lib.db") as t:
        first = t.library(folder, workspace_id="lib", settle=0).scan()
        assert sorted(first.indexed) == sorted([str(odd.resolve()), str(folder / "fine.md")])
        assert first.failed == [] and t.scan(folder, workspace_id="lib").unchanged
        renamed = Path(os.fsdecode(os.path.join(os.fsencode(folder), b"caf\xe8.md")))
        odd.rename(renamed)
        moved = t.library(folder, workspace_id="lib", settle=0).scan()
        assert moved.renamed == [(str(odd.resolve()), str(renamed.resolve()))]
        assert {d.source_path for d in t.documents()} == {
            str(renamed.resolve()), str(folder / "fine.md")}  # fmt: skip
        renamed.unlink()
        gone = t.library(folder, workspace_id="lib", settle=0).scan()
        assert gone.deleted == [str(renamed.resolve())]
        assert [d.title for d in t.documents()] == ["Fine"]
        assert [e.source_path for e in t.store.registry(str(folder))] == [str(folder / "fine.md")]


def test_a_bulk_add_stores_such_names_losslessly_and_finds_them_again(tmp_path: Path) -> None:
    """Enough files that their rows go to SQLite as one JSON array (and are looked up many
    at a time): the escaped names survive both, and a second add skips every file."""
    folder = tmp_path / "many"
    odd = [odd_file(folder, b"\xff%02d.md" % i, f"# Odd {i}\n\nPump {i}.\n") for i in range(40)]
    for i in range(40):
        (folder / f"fine-{i}.md").write_text(f"# Fine {i}\n\nValve {i}.\n")
    files = sorted(folder.iterdir())
    with Tether(db=tmp_path / "t.db") as t:
        assert {r.status for r in t.add(files, workspace_id="lib")} == {"indexed"}
        stored = {d.source_path for d in t.documents()}
        assert stored == {str(f.resolve()) for f in files}
        assert {str(f.resolve()) for f in odd} <= stored
        assert {r.status for r in t.add(files, workspace_id="lib")} == {"skipped"}


def test_the_cli_adds_and_scans_such_files_without_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "badname"
    odd_file(folder, b"\xff\xfe.md", "# Odd\n\nThe odd file is about pumps.\n")
    (folder / "fine.md").write_text("# Fine\n\nA fine file about valves.\n")
    runner = CliRunner()
    db = str(tmp_path / "cli.db")
    files = sorted(str(p) for p in folder.iterdir())
    added = runner.invoke(app, ["add", *files, "--db", db])
    assert added.exit_code == 0, added.output
    assert added.output.count("indexed") == 2 and "Traceback" not in added.output
    scanned = runner.invoke(app, ["scan", str(folder), "--db", str(tmp_path / "scan.db")])
    assert scanned.exit_code == 0, scanned.output
    assert scanned.output.count("indexed") == 2
    listed = runner.invoke(app, ["docs", "list", "--db", db, "--json"])
    assert listed.exit_code == 0, listed.output
    paths = {d["title"]: d["source_path"] for d in json.loads(listed.stdout)["documents"]}
    assert paths["Odd"] == str((folder / os.fsdecode(b"\xff\xfe.md")).resolve())  # lossless
    assert "\\udcff" in listed.stdout  # as a JSON escape: the output is valid UTF-8
    listed.stdout.encode("utf-8")
