"""Hostile files of the zip, XML, spreadsheet and image formats, through a real
``Tether.add`` (the loaders' worker processes, the default limits): each fails typed, or
is read within its bounds with a warning, and what the store held before stays. The
makers are the benchmark's (``bench/hostile_formats.py``, which measures time and
memory at full size)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import REPO_ROOT, make_settings
from tether import Tether, UnreadableFile

sys.path.insert(0, str(REPO_ROOT / "bench"))
import hostile_formats as hostile


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Tether(tmp_path / "t.db", settings=make_settings()) as t:
        t.add(text="The harbour crane lifts 40 tonnes.", title="Crane note", document_id="crane")
        yield t


def _kept(t: Tether) -> bool:
    return [h.document_id for h in t.search("harbour crane", scope="global", mode="lexical")] == [
        "crane"
    ]


@pytest.mark.parametrize(
    ("name", "make", "says"),
    [
        ("bomb.docx", lambda p: hostile.zip_bomb_docx(p, megabytes=600), "zip bomb"),
        ("laughs.xml", hostile.billion_laughs, "entities"),
        ("pixels.png", lambda p: hostile.pixel_bomb_png(p, side=30_000), "decompression bomb"),
    ],
)
def test_a_bomb_fails_typed_and_loses_nothing(
    store: Tether, tmp_path: Path, name: str, make: object, says: str
) -> None:
    path = make(tmp_path / name)  # type: ignore[operator]
    [result] = store.add(path, on_error="collect")
    assert result.status == "failed" and isinstance(result.error, UnreadableFile)
    assert says in str(result.error)
    assert _kept(store)


@pytest.mark.parametrize("name", ["rows.xlsx", "rows.csv"])
def test_a_sheet_past_the_row_limit_is_read_to_it_with_a_warning(
    store: Tether, tmp_path: Path, name: str
) -> None:
    from tether.ingest.formats import tables

    # Made past the real limit (the workers import the module afresh): a few seconds.
    make = hostile.sheet_xlsx if name.endswith(".xlsx") else hostile.sheet_csv
    path = make(tmp_path / name, tables.MAX_ROWS + 10_000)
    [result] = store.add(path)
    assert result.status == "indexed"
    document = store.get_document(result.document_id)
    [warning] = document.metadata["warnings"]
    assert "50,000 rows" in warning
    found = store.search("A-50001", scope="global", mode="lexical")
    assert found and "Order: A-50001" in found[0].text  # the header names each value
    assert store.search("A-50003", scope="global", mode="lexical") == []  # past the limit
    assert _kept(store)
