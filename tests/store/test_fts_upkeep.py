"""The FTS5 index is kept compact while documents are replaced (store/sqlite/fts_upkeep.py)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from helpers import make_settings
from tether import Tether, TextSource
from tether.store.sqlite import fts_upkeep as upkeep
from tether.store.sqlite.fts_upkeep import fts_shape

WORDS = ("pump valve seal drain filter motor relay fuse cable torque gasket bearing rotor "
         "stator sensor relay housing bracket spring lever").split()  # fmt: skip


def text(rng: random.Random, words: int = 60) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(40)) for _ in range(words))


def test_the_structure_record_gives_segments_and_pages() -> None:
    """Each transaction writes a segment (automerge waits for four on a level);
    ``optimize`` leaves one; the pages are the leaf pages of them all."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(body)")
    assert fts_shape(conn, "f") is None or fts_shape(conn, "f").segments == 0
    rng = random.Random(1)
    for _ in range(3):
        with conn:
            conn.executemany("INSERT INTO f VALUES (?)", [(text(rng, 400),) for _ in range(50)])
    three = fts_shape(conn, "f")
    assert three is not None and three.segments == 3
    assert three.largest < three.pages
    conn.execute("INSERT INTO f(f) VALUES ('optimize')")
    one = fts_shape(conn, "f")
    assert one is not None and one.segments == 1 and one.pages == one.largest
    assert not one.fragmented


def test_an_unknown_record_is_not_guessed_at() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(body)")
    conn.execute("INSERT INTO f VALUES ('pump valve')")
    conn.execute("UPDATE f_data SET block = x'0000000105' WHERE id = 10")  # cut short
    assert fts_shape(conn, "f") is None


def churn(t: Tether, rounds: int) -> None:
    rng = random.Random(4)
    for i in range(20):
        t.add(TextSource(text(rng), f"doc {i}", document_id=f"d{i}"), workspace_id="acme")
    for n in range(rounds):
        t.add(TextSource(text(rng), "doc", document_id=f"d{n % 20}"), workspace_id="acme")


def test_replacing_documents_keeps_the_index_compact_and_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under churn, a store with upkeep optimizes its index whenever it is fragmented:
    it ends with fewer segments and pages than the same churn leaves without upkeep, the
    index passes FTS5's integrity check against the chunks, and both answer alike."""
    monkeypatch.setattr(upkeep, "MIN_PAGES", 4)
    settings = make_settings(embeddings={"enabled": False}, chunk_size=400)
    with (
        Tether(db=tmp_path / "on.db", settings=settings) as on,
        Tether(db=tmp_path / "off.db", settings=settings) as off,
    ):
        off.store.db.fts_upkeep.enabled = False
        churn(on, 300)
        churn(off, 300)
        kept, left = fts_shape(on.store.db.connection()), fts_shape(off.store.db.connection())
        assert kept is not None and left is not None
        stats = on.store.db.fts_upkeep.stats
        assert stats["optimized"] > 0 and stats["failed"] == 0, stats
        assert off.store.db.fts_upkeep.stats["optimized"] == 0
        assert left.fragmented and not kept.fragmented, (kept, left)
        assert kept.pages < left.pages, (kept, left)
        on.store.fts_integrity_check()
        off.store.fts_integrity_check()
        for query in ("pump3 valve7", "relay12 fuse5 cable1", "gasket9"):
            answers = [
                [
                    (h.document_id, round(h.score, 9))
                    for h in t.search(query, k=10, workspace_id="acme")
                ]
                for t in (on, off)
            ]
            assert answers[0] and answers[0] == answers[1], answers


def test_a_large_index_is_left_to_compact_which_says_what_it_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Past ``AUTO_PAGES`` a fragmented index is not rewritten after a write (the
    rewrite's time grows with it): a warning names ``tether compact``, and
    ``Tether.compact()`` (the command's call) leaves one whole segment."""
    monkeypatch.setattr(upkeep, "MIN_PAGES", 1)
    monkeypatch.setattr(upkeep, "AUTO_PAGES", 1)
    settings = make_settings(embeddings={"enabled": False}, chunk_size=400)
    with Tether(db=tmp_path / "big.db", settings=settings) as t:
        churn(t, 200)
        stats = t.store.db.fts_upkeep.stats
        assert stats["optimized"] == 0 and stats["too_large"] > 0, stats
        assert "tether compact" in caplog.text
        before = fts_shape(t.store.db.connection())
        assert before is not None and before.fragmented
        report = t.compact()
        assert (report.segments_before, report.pages_before) == (before.segments, before.pages)
        assert report.segments_after == 1 and report.pages_after < before.pages
        t.store.fts_integrity_check()
        assert t.search("pump3", k=3, workspace_id="acme")


def test_a_failed_upkeep_never_fails_the_write(
    tether: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(conn: sqlite3.Connection, table: str = upkeep.TABLE) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(upkeep, "fts_shape", broken)
    tether.add(text="pump valve seal", title="t", document_id="x", workspace_id="acme")
    assert tether.store.db.fts_upkeep.stats["failed"] >= 1
    assert [h.document_id for h in tether.search("pump", workspace_id="acme")] == ["x"]
