"""A bulk add: each group is written in a writer thread while the next is prepared, the
stored documents are looked up many sources at a time, and rows go to SQLite in one
statement per table."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import tether.ingest.indexer as indexer_module
import tether.store._common as common_module
from helpers import make_settings
from tether import Tether, TextSource
from tether.ingest.indexer import Indexer
from tether.models import Tags
from tether.testing import HashEmbedder


def notes(count: int, start: int = 0) -> list[TextSource]:
    return [
        TextSource(f"The sextant memo {i} notes bearing {i * 7} degrees.", f"memo {i}",
                   document_id=f"memo-{i}")
        for i in range(start, start + count)
    ]  # fmt: skip


@pytest.fixture
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of a few chunks, so that a short add is written in several."""
    monkeypatch.setattr(indexer_module, "LEXICAL_GROUP_CHUNKS", 4)
    monkeypatch.setattr(indexer_module, "GROUP_CHUNKS", 4)


def spy_store_group(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread each group is stored on, in order."""
    threads: list[str] = []
    real = Indexer.store_group

    def store_group(self: Indexer, group: Any, placement: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(self, group, placement)

    monkeypatch.setattr(Indexer, "store_group", store_group)
    return threads


@pytest.mark.usefixtures("small_groups")
def test_groups_are_stored_in_a_writer_thread_while_the_next_is_prepared(
    tether: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first group's write waits (up to 10 s) until a source of a later group is
    being prepared: it can only go on if the two run at once. Results and progress stay
    on the caller's thread, in the caller's order."""
    prepared_later = threading.Event()
    threads: list[str] = []
    real_store, real_prepare = Indexer.store_group, Indexer._prepare

    def store_group(self: Indexer, group: Any, placement: Any) -> Any:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            assert prepared_later.wait(10), "the next group was not prepared meanwhile"
        return real_store(self, group, placement)

    def prepare(self: Indexer, source: Any, *args: Any) -> Any:
        if source.document_id == "memo-12":
            prepared_later.set()
        return real_prepare(self, source, *args)

    monkeypatch.setattr(Indexer, "store_group", store_group)
    monkeypatch.setattr(Indexer, "_prepare", prepare)
    progress: list[tuple[int, str]] = []
    results = tether.add(
        notes(16),
        progress=lambda done, total, r: progress.append((done, threading.current_thread().name)),
    )
    assert [r.status for r in results] == ["indexed"] * 16
    assert [r.source for r in results] == [f"memo-{i}" for i in range(16)]
    assert len(threads) >= 3 and set(threads) == {"tether-write_0"}
    assert [done for done, _ in progress] == list(range(1, 17))
    assert {name for _, name in progress} == {threading.current_thread().name}
    assert len(tether.store.list_documents()) == 16
    assert not [t for t in threading.enumerate() if t.name.startswith("tether-write")]


def test_an_add_of_one_group_starts_no_thread(
    tether: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = spy_store_group(monkeypatch)
    assert [r.status for r in tether.add(notes(5))] == ["indexed"] * 5
    assert threads == [threading.current_thread().name]


@pytest.mark.usefixtures("small_groups")
def test_with_an_embedder_each_group_is_embedded_and_stored_in_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = spy_store_group(monkeypatch)
    with Tether(db=tmp_path / "v.db", settings=make_settings(), embedder=HashEmbedder()) as t:
        assert [r.status for r in t.add(notes(12))] == ["indexed"] * 12
        assert set(threads) == {"tether-write_0"}
        hits = t.search("sextant memo 7 bearing", mode="vector", k=12)
        assert len(hits) == 12  # (every chunk has its vector)


@pytest.mark.usefixtures("small_groups")
def test_groups_are_stored_in_place_through_a_writer_or_inside_a_transaction(
    tether: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer the application set decides where writes run; a caller inside its own
    transaction holds the store's write lock, which a writer thread would wait for."""
    threads = spy_store_group(monkeypatch)
    tether.set_writer(lambda fn: fn())
    tether.add(notes(10))
    assert set(threads) == {threading.current_thread().name}
    tether.set_writer(None)
    threads.clear()
    with tether.store.write():
        assert [r.status for r in tether.add(notes(10, start=10))] == ["indexed"] * 10
    assert set(threads) == {threading.current_thread().name}
    assert len(tether.store.list_documents()) == 20


@pytest.mark.usefixtures("small_groups")
def test_a_failure_in_the_writer_thread_reaches_the_caller_and_earlier_groups_stay(
    tether: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = Indexer.store_group

    def store_group(self: Indexer, group: Any, placement: Any) -> Any:
        calls.append(len(group))
        if len(calls) == 2:
            raise RuntimeError("the embedder fell over")
        return real(self, group, placement)

    monkeypatch.setattr(Indexer, "store_group", store_group)
    with pytest.raises(RuntimeError, match="fell over"):
        tether.add(notes(16))
    stored = {d.id for d in tether.store.list_documents()}
    assert stored and stored < {f"memo-{i}" for i in range(16)}
    assert not [t for t in threading.enumerate() if t.name.startswith("tether-write")]


@pytest.mark.usefixtures("small_groups")
def test_the_same_document_twice_in_one_add_ends_with_the_later_tags(tether: Tether) -> None:
    """The second copy is looked up before the first is stored (both in one block of
    lookups); the write finds the first and keeps its chunks, with the second's tags."""
    text = "The sextant memo notes a bearing of 40 degrees."
    first = TextSource(text, "memo", document_id="twice", tags=Tags(domain="hr"))
    second = TextSource(text, "memo", document_id="twice", tags=Tags(domain="sales"))
    results = tether.add([first, *notes(8), second])
    assert (results[0].status, results[-1].status) == ("indexed", "updated")
    assert tether.store.get_document("twice").tags == Tags(domain="sales")
    assert tether.add([second])[0].status == "skipped"


def test_sources_with_ids_are_looked_up_a_block_at_a_time(
    tether: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not one query per source, neither when prepared nor inside the write."""
    store = tether.store
    one_by_one: list[Any] = []
    batches: list[int] = []
    real_one, real_many = store.find_document, store.find_documents

    def find_document(**lookup: Any) -> Any:
        one_by_one.append(lookup)
        return real_one(**lookup)

    def find_documents(lookups: Any) -> Any:
        batches.append(len(lookups))
        return real_many(lookups)

    monkeypatch.setattr(store, "find_document", find_document)
    monkeypatch.setattr(store, "find_documents", find_documents)
    assert {r.status for r in tether.add(notes(600))} == {"indexed"}
    assert {r.status for r in tether.add(notes(600))} == {"skipped"}
    assert one_by_one == []
    assert batches and max(batches) <= 600 and sum(batches) >= 1800


def stored_rows(db: Path) -> tuple[list[Any], list[Any]]:
    conn = sqlite3.connect(db)
    try:
        chunks = conn.execute(
            "SELECT id, document_id, ordinal, content, typeof(content), section_title,"
            " token_count, typeof(token_count), char_start, char_end, page, typeof(page),"
            " content_hash, page_label FROM rag_chunks ORDER BY id"
        ).fetchall()
        documents = conn.execute(
            "SELECT id, title, typeof(title), metadata, content_hash, file_size,"
            " typeof(file_size), status, chunking FROM rag_documents ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    return chunks, documents


def test_rows_are_stored_the_same_from_one_json_array_as_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts JSON or SQL could misread (quotes, backslashes, "null", digits, a JSON
    array, non-ASCII) come back as written, with the same types, as when each row is
    its own statement (an SQLite without JSON functions)."""
    tricky = ['say "hi"', "C:\\path\\n", "null", "0012", "[1, 2]", "naïve café — 東京 😀", "'; --"]
    sources = [
        TextSource(f"Note {i}: {text}.\n\n## Part\n\n{text} again", f"t{i} {text}",
                   document_id=f"t{i}", metadata={"k": text}, mime="text/markdown")
        for i, text in enumerate(tricky * 12)
    ]  # fmt: skip
    stored = {}
    for json_rows in (True, False):
        monkeypatch.setattr(common_module, "json_rows", lambda conn, j=json_rows: j)
        db = tmp_path / f"rows-{json_rows}.db"
        with Tether(db=db, settings=make_settings()) as t:
            assert {r.status for r in t.add(sources)} == {"indexed"}
        stored[json_rows] = stored_rows(db)
    chunks, documents = stored[True]
    assert stored[True] == stored[False]
    assert len(chunks) > len(sources) and len(documents) == len(sources)
    assert {row[4] for row in chunks} == {"text"} and {row[7] for row in chunks} == {"integer"}
    assert {row[11] for row in chunks} == {"null"} and {row[2] for row in documents} == {"text"}
    by_id = {row[0]: row for row in documents}
    assert by_id["t3"][1] == "t3 0012" and by_id["t4"][3] == '{"k": "[1, 2]"}'
    contents = {row[3] for row in chunks}
    assert any("naïve café — 東京 😀 again" in c for c in contents)
    assert any("C:\\path\\n again" in c for c in contents)
    assert {row[5] for row in chunks} >= {"Part"}


@pytest.mark.usefixtures("small_groups")
def test_a_source_that_may_not_update_its_document_fails_alone_in_a_bulk_add(
    tether: Tether,
) -> None:
    """A document id of another workspace, and a source key another document holds,
    fail their source with the error a lookup of their own gives; the others are
    stored."""
    tether.add(text="The far memo.", title="far", document_id="far-doc", workspace_id="far")
    tether.add(text="The held memo.", title="held", source="held-key", workspace_id="ws")
    sources = [
        *notes(6),
        TextSource("A stranger's memo.", "stranger", document_id="far-doc"),
        TextSource("A clashing memo.", "clash", document_id="clash-doc", source="held-key"),
        *notes(6, start=6),
    ]
    results = tether.add(sources, workspace_id="ws", on_error="collect")
    assert [r.status for r in results] == ["indexed"] * 6 + ["failed"] * 2 + ["indexed"] * 6
    assert "belongs to workspace 'far'" in str(results[6].error)
    assert "already document" in str(results[7].error)
    assert {d.id for d in tether.store.list_documents(workspace_id="ws")} >= {
        f"memo-{i}" for i in range(12)
    }
    assert tether.store.get_document("far-doc").workspace_id == "far"


@pytest.mark.usefixtures("small_groups")
def test_a_source_key_taken_earlier_in_the_same_add_is_found_at_its_write(
    tether: Tether,
) -> None:
    """Both are looked up ahead, before either is stored: the write looks again."""
    sources = [
        TextSource("The first keyed memo.", "first", source="shared-key"),
        *notes(6),
        TextSource("The second keyed memo.", "second", document_id="second", source="shared-key"),
    ]
    results = tether.add(sources, on_error="collect")
    assert results[0].status == "indexed" and results[-1].status == "failed"
    assert f"already document '{results[0].document_id}'" in str(results[-1].error)


@pytest.mark.usefixtures("small_groups")
def test_the_last_copy_of_a_document_in_one_add_wins_whatever_the_store_held(
    tether: Tether,
) -> None:
    """The store holds T0; the add brings T1, then T0 again, groups apart. The second
    copy is looked up before the first is stored: it is not taken as unchanged then."""
    t0 = "The original memo about the sextant bearings and the harbour charts."
    tether.add(text=t0, title="x", document_id="x")
    results = tether.add(
        [TextSource("A short memo x.", "x", document_id="x"), *notes(10),
         TextSource(t0, "x", document_id="x")]
    )  # fmt: skip
    assert (results[0].status, results[-1].status) == ("replaced", "replaced")
    assert [c.content for c in tether.store.chunks_of("x")] == [t0]


@pytest.mark.usefixtures("small_groups")
def test_a_source_key_freed_earlier_in_the_same_add_can_be_taken(tether: Tether) -> None:
    """Document x holds the source key k; the add replaces x without it, then gives k to
    y. y's lookup, made before x's replacement, said "k is x's": its write looks again."""
    tether.add(text="The keyed memo.", title="x", document_id="x", source="k")
    results = tether.add(
        [TextSource("The new x memo.", "x", document_id="x"), *notes(10),
         TextSource("The y memo takes the key.", "y", document_id="y", source="k")],
        on_error="collect",
    )  # fmt: skip
    assert [r.status for r in results] == ["replaced"] + ["indexed"] * 11
    assert tether.store.get_document("y").source_path == "k"
    assert tether.store.get_document("x").source_path is None


@pytest.mark.usefixtures("small_groups")
def test_a_bulk_add_into_a_session_attaches_every_document(tether: Tether) -> None:
    threads: list[str] = []
    results = tether.add(
        notes(90), session_id="chat", workspace_id="ws",
        progress=lambda *_: threads.append(threading.current_thread().name),
    )  # fmt: skip
    assert {r.status for r in results} == {"indexed"}
    attached = tether.store.list_documents(session_id="chat")
    assert sorted(d.id for d in attached) == sorted(f"memo-{i}" for i in range(90))
    assert tether.add(notes(90), session_id="other", workspace_id="ws")[0].status == "skipped"
    assert len(tether.store.list_documents(session_id="other")) == 90


def test_lookups_go_in_blocks_of_256(tether: Tether, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[int] = []
    real = tether.store.find_documents

    def find_documents(lookups: Any) -> Any:
        batches.append(len(lookups))
        return real(lookups)

    monkeypatch.setattr(tether.store, "find_documents", find_documents)
    monkeypatch.setattr(indexer_module, "LEXICAL_GROUP_CHUNKS", 10_000)
    tether.add(notes(600))
    assert batches[:3] == [256, 256, 88] and batches[3:] == [600]  # (prepared; then the write)


def test_a_nul_in_a_title_is_kept_when_many_rows_are_stored_together(tether: Tether) -> None:
    """SQLite's JSON functions cut a text at a NUL: such rows go one statement each."""
    sources = [
        TextSource(f"The memo {i}.", f"ti\x00tle {i}", document_id=f"n{i}") for i in range(80)
    ]
    assert {r.status for r in tether.add(sources)} == {"indexed"}
    assert tether.store.get_document("n7").title == "ti\x00tle 7"
    assert {r.status for r in tether.add(sources)} == {"skipped"}


@pytest.mark.usefixtures("small_groups")
def test_a_bulk_add_to_postgresql_writes_in_the_writer_thread_too(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = spy_store_group(monkeypatch)
    with Tether(db=postgres_url, settings=make_settings(), embedder=HashEmbedder()) as t:
        results = t.add(notes(40), session_id="chat", workspace_id="ws")
        assert {r.status for r in results} == {"indexed"}
        assert set(threads) == {"tether-write_0"}
        assert len(t.store.list_documents(session_id="chat")) == 40
        assert {r.status for r in t.add(notes(40), workspace_id="ws")} == {"skipped"}
        hits = t.search("sextant memo 17 bearing", scope="session", session_id="chat", k=3)
        assert hits and hits[0].document_id == "memo-17"
