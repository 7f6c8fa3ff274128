"""Each chunk enters the FTS5 index with its context header: its section title, else its
document's title (migration 14). Real SQLite files, checked with FTS5's own
content-comparing integrity check after every write that moves a title: a new title, a
replaced document, a deleted document or workspace, in one transaction or several."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.models import GLOBAL_WORKSPACE, Scope
from tether.retrieve.fts import compile_match
from tether.store import NewChunk, NewDocument, SQLiteStore, migrate, open_store
from tether.store.sqlite import database
from tether.store.sqlite.fts_upkeep import index_queued
from tether.text import stemmed_text

LANGUAGES = ["english", "german"]


def _document(
    document_id: str, title: str, text: str, section: str | None = None, workspace: str = "w"
) -> tuple[NewDocument, list[NewChunk]]:
    chunk = NewChunk(0, text, section, 0, len(text), None, f"h-{document_id}-{text}")
    document = NewDocument(document_id, workspace, title, None, None, "text/plain", text, None, {})
    return document, [chunk]


def _found(store: SQLiteStore, query: str, workspace: str = "w") -> list[str]:
    match = compile_match(query, store.language)
    assert match is not None
    hits = store.search_lexical(Scope.workspace(workspace), match, 10)
    return sorted(h.document_id for h in hits)


@pytest.fixture(params=LANGUAGES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteStore]:
    if request.param != "english":
        pytest.importorskip("Stemmer", reason="the languages extra installs PyStemmer")
    opened = open_store(tmp_path / "t.db", language=request.param)
    assert isinstance(opened, SQLiteStore)
    opened.ensure_workspace("w")
    yield opened
    opened.close()


def test_a_new_title_moves_the_chunks_indexed_under_it(store: SQLiteStore) -> None:
    store.insert_document(*_document("plain", "Lighthouse", "The body says nothing."))
    store.insert_document(*_document("headed", "Lighthouse", "Other text.", "Foghorn"))
    assert _found(store, "lighthouse") == ["plain"]
    store.set_tags_and_status("plain", None, "active", title="Harbour")
    store.fts_integrity_check()
    assert _found(store, "lighthouse") == [] and _found(store, "harbour") == ["plain"]
    store.replace_document(*_document("plain", "Breakwater", "The body, rewritten."))
    store.fts_integrity_check()
    assert _found(store, "harbour") == [] and _found(store, "breakwater") == ["plain"]
    assert _found(store, "foghorn") == ["headed"]


def test_a_title_changed_in_the_transaction_that_wrote_the_chunk(store: SQLiteStore) -> None:
    """The chunk still waits in the queue: it is indexed once, under the newer title."""
    with store.db.write():
        store.insert_document(*_document("d", "Lighthouse", "The body says nothing."))
        store.set_tags_and_status("d", None, "active", title="Harbour")
    store.fts_integrity_check()
    assert _found(store, "lighthouse") == [] and _found(store, "harbour") == ["d"]
    with store.db.write():
        store.set_tags_and_status("d", None, "active", title="Jetty")
        store.set_tags_and_status("d", None, "active", title="Pier")
    store.fts_integrity_check()
    assert _found(store, "jetty") == [] and _found(store, "pier") == ["d"]


def test_deleting_a_document_or_its_workspace_leaves_the_index_whole(store: SQLiteStore) -> None:
    store.ensure_workspace("gone")
    for i in range(3):
        store.insert_document(*_document(f"w{i}", f"Lighthouse {i}", "Some text."))
        store.insert_document(*_document(f"g{i}", "Lighthouse", "More text.", workspace="gone"))
    store.delete_document("w0")
    store.fts_integrity_check()
    with store.db.write() as conn:
        conn.execute("DELETE FROM workspaces WHERE id = 'gone'")  # documents by cascade
    store.fts_integrity_check()
    assert _found(store, "lighthouse") == ["w1", "w2"]


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_store_of_version_13_is_indexed_again_with_titles(
    tmp_path: Path, language: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if language != "english":
        pytest.importorskip("Stemmer", reason="the languages extra installs PyStemmer")
    path = tmp_path / "v13.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("tether_stemmed_text", 2, stemmed_text, deterministic=True)
    assert migrate(conn, to=13, language=language) == 13
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO rag_documents (id, workspace_id, title, mime, content_hash, created_at)"
        f" VALUES ('old', '{GLOBAL_WORKSPACE}', 'Lighthouse', 'text/plain', 'h', 'now')"
    )
    conn.execute(
        "INSERT INTO rag_chunks (document_id, ordinal, content, char_start, char_end,"
        " content_hash) VALUES ('old', 0, 'The keeper climbs the stairs.', 0, 29, 'c')"
    )
    index_queued(conn)
    conn.execute("COMMIT")
    conn.close()

    monkeypatch.setattr(database, "REINDEX_NOTICE_CHUNKS", 1)  # a large store says so
    with caplog.at_level(logging.WARNING, logger="tether.store.sqlite.database"):
        store = open_store(path)
    assert "indexing its 1 chunks again for full-text search" in caplog.text
    assert isinstance(store, SQLiteStore) and store.language == language
    try:
        assert store.db.schema_version() == 14
        store.fts_integrity_check()
        assert _found(store, "lighthouse", GLOBAL_WORKSPACE) == ["old"]
        assert _found(store, "stairs", GLOBAL_WORKSPACE) == ["old"]
        store.set_tags_and_status("old", None, "active", title="Harbour")
        store.fts_integrity_check()
        assert _found(store, "harbour", GLOBAL_WORKSPACE) == ["old"]
    finally:
        store.close()
