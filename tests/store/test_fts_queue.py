"""New chunks wait in ``rag_fts_pending`` and enter the FTS5 index when their transaction
commits, in one statement. Real SQLite files, checked with FTS5's own content-comparing
integrity check after every kind of write that can meet a queued chunk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tether.errors import StoreError
from tether.models import GLOBAL_WORKSPACE, Scope
from tether.retrieve.fts import compile_match
from tether.store import NewChunk, NewDocument, SQLiteStore, migrate, open_store
from tether.store.sqlite.fts_upkeep import fts_shape


def _document(document_id: str, text: str) -> tuple[NewDocument, list[NewChunk]]:
    chunk = NewChunk(0, text, "Section", 0, len(text), None, f"h-{document_id}-{len(text)}")
    document = NewDocument(
        document_id, GLOBAL_WORKSPACE, document_id, None, None, "text/plain", text, None, {}
    )
    return document, [chunk]


def _found(store: SQLiteStore, query: str) -> list[str]:
    match = compile_match(query, store.language)
    assert match is not None
    return sorted(h.document_id for h in store.search_lexical(Scope.global_(), match, 10))


def _queued(store: SQLiteStore) -> int:
    conn = store.db.connection()
    return int(conn.execute("SELECT count(*) FROM rag_fts_pending").fetchone()[0])


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    opened = open_store(tmp_path / "t.db")
    assert isinstance(opened, SQLiteStore)
    yield opened
    opened.close()


def test_chunks_enter_the_index_when_their_transaction_commits(store: SQLiteStore) -> None:
    with store.db.write() as conn:
        store.insert_document(*_document("a", "The gearbox oil is changed yearly."))
        store.insert_document(*_document("b", "The pump is primed before use."))
        assert _queued(store) == 2
        indexed = conn.execute("SELECT count(*) FROM rag_chunks_fts_docsize").fetchone()[0]
        assert indexed == 0
    assert _queued(store) == 0
    assert _found(store, "gearbox") == ["a"] and _found(store, "pump") == ["b"]
    store.fts_integrity_check()


def test_a_transaction_indexes_its_chunks_as_one_segment(store: SQLiteStore) -> None:
    """Written one statement at a time from a trigger, each chunk was a segment of its
    own (FTS5 writes its pending terms at each statement savepoint), merged again and
    again; the queue writes one segment for the transaction."""
    with store.db.write():
        for i in range(40):
            store.insert_document(*_document(f"d{i}", f"Valve number {i} is checked monthly."))
    shape = fts_shape(store.db.connection())
    assert shape is not None and shape.segments == 1
    assert len(_found(store, "valve")) == 10  # (the search's limit)


def test_a_queued_chunk_replaced_deleted_or_changed_keeps_the_index_whole(
    store: SQLiteStore,
) -> None:
    """Replaced, deleted or edited before its transaction commits, a queued chunk leaves
    no row in the index for text that is gone (an FTS5 'delete' of a row never indexed
    would damage an external-content index)."""
    store.insert_document(*_document("old", "Indexed before: the compressor hums."))
    with store.db.write() as conn:
        store.insert_document(*_document("r", "First words about turbines."))
        store.replace_document(*_document("r", "Second words about propellers."))
        store.insert_document(*_document("gone", "A chunk about dynamos."))
        store.delete_document("gone")
        store.insert_document(*_document("e", "Edited text about boilers."))
        edit = "UPDATE rag_chunks SET content = ? WHERE document_id = ?"
        conn.execute(edit, ("Edited: about condensers.", "e"))
        conn.execute(edit, ("Now about heat exchangers.", "old"))
    store.fts_integrity_check()
    assert _found(store, "propellers") == ["r"] and _found(store, "turbines") == []
    assert _found(store, "dynamos") == []
    assert _found(store, "condensers") == ["e"] and _found(store, "boilers") == []
    assert _found(store, "exchangers") == ["old"] and _found(store, "compressor") == []
    assert _queued(store) == 0


def test_a_document_rolled_back_alone_leaves_nothing_queued(store: SQLiteStore) -> None:
    with store.db.write():
        store.insert_document(*_document("kept", "Kept: the flywheel spins."))
        with pytest.raises(StoreError), store.db.write():
            store.insert_document(*_document("lost", "Lost: the alternator."))
            raise StoreError("this document fails")
        assert _queued(store) == 1
    store.fts_integrity_check()
    assert _found(store, "flywheel") == ["kept"] and _found(store, "alternator") == []


def test_a_transaction_rolled_back_whole_indexes_nothing(store: SQLiteStore) -> None:
    with pytest.raises(RuntimeError), store.db.write():
        store.insert_document(*_document("x", "Never stored: the carburettor."))
        raise RuntimeError("the caller gives up")
    assert _queued(store) == 0 and _found(store, "carburettor") == []
    store.fts_integrity_check()


def test_a_store_of_version_12_keeps_its_index_and_queues_from_then_on(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, to=12)
    conn.close()
    old = open_store(path)  # (opening migrates; the rows below are written the old way)
    old.close()
    _write_as_version_12(path, _V12_ENGLISH_INSERT)
    store = open_store(path)
    assert isinstance(store, SQLiteStore)
    try:
        assert _found(store, "lathe") == ["v12"]
        store.insert_document(*_document("new", "A new chunk about drills."))
        store.replace_document(*_document("v12", "Now about milling machines."))
        store.fts_integrity_check()
        assert _found(store, "drills") == ["new"] and _found(store, "lathe") == []
    finally:
        store.close()


def test_a_german_store_of_version_12_queues_stems(tmp_path: Path) -> None:
    """A store made for German before the queue: migrating gives it triggers and a source
    view that stem as its index does (not the English ones of migration 13)."""
    pytest.importorskip("Stemmer", reason="the languages extra installs PyStemmer")
    path = tmp_path / "de.db"
    open_store(path, language="german").close()
    _write_as_version_12(path, _V12_GERMAN_INSERT)
    store = open_store(path)
    assert isinstance(store, SQLiteStore) and store.language == "german"
    try:
        store.insert_document(*_document("neu", "Die alten Häuser stehen am Fluss."))
        store.fts_integrity_check()
        assert _found(store, "Haus") == ["neu"]
        assert _found(store, "Drehbank") == ["v12"]
        store.delete_document("neu")
        store.fts_integrity_check()
    finally:
        store.close()


# What migration 13 replaced: each chunk indexed by its own trigger statement.
_V12_ENGLISH_INSERT = """
CREATE TRIGGER rag_chunks_fts_insert AFTER INSERT ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts (rowid, content, section_title)
    VALUES (new.id, new.content, new.section_title);
END"""
_V12_GERMAN_INSERT = """
CREATE TRIGGER rag_chunks_fts_insert AFTER INSERT ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts (rowid, content, section_title)
    VALUES (new.id, tether_stemmed_text(new.content, 'german'),
            tether_stemmed_text(new.section_title, 'german'));
END"""


def _write_as_version_12(path: Path, insert_trigger: str) -> None:
    """Turn a new file back into one the tether before migration 13 made (its insert
    trigger, no queue), and store one chunk through that trigger."""
    from tether.text import stemmed_text

    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("tether_stemmed_text", 2, stemmed_text, deterministic=True)
    conn.execute("BEGIN")
    for trigger in ("insert", "delete", "update"):
        conn.execute(f"DROP TRIGGER rag_chunks_fts_{trigger}")
    conn.execute("DROP VIEW rag_fts_source")
    conn.execute("DROP TABLE rag_fts_pending")
    conn.execute(insert_trigger)
    conn.execute(
        "INSERT INTO rag_documents (id, workspace_id, title, mime, content_hash, created_at)"
        " VALUES ('v12', 'GLOBAL', 'v12', 'text/plain', 'h', 'now')"
    )
    conn.execute(
        "INSERT INTO rag_chunks (document_id, ordinal, content, char_start, char_end,"
        " content_hash) VALUES ('v12', 0, 'Die Drehbank: the lathe is oiled.', 0, 33, 'c')"
    )
    conn.execute("PRAGMA user_version = 12")
    conn.execute("COMMIT")
    conn.close()
