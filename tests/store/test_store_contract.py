"""Every backend passes the :class:`~tether.store.Store` conformance suite, which ships in
:mod:`tether.testing.store` as one test class per role: a backend is a class that
inherits :class:`~tether.testing.store.StoreContract` and gives its ``store`` fixture.
Real databases in ``tmp_path`` (and a real PostgreSQL), no mocks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.models import Scope
from tether.store import SQLiteDatabase, SQLiteStore, Store, VectorSnapshot
from tether.testing.store import StoreContract
from tether.testing.store._kit import put, vectors


class TestSQLite(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        backend = SQLiteStore(SQLiteDatabase(tmp_path / "t.db"))
        yield backend
        backend.close()

    def test_a_reader_whose_changes_were_pruned_reloads(self, store: SQLiteStore) -> None:
        """The change log keeps its newest 100,000 rows: a reader further behind is told to
        reload (None), never handed a partial delta."""
        put(store, "d1", "one", vectors=vectors("m", 1))
        behind = store.load_vectors("m").seq
        assert store.vector_delta("m", behind, 10) is not None
        with store.db.write() as conn:  # churn, as 100,000 changed chunks would leave it
            conn.executemany(
                "INSERT INTO rag_document_changes (document_id, vectors) VALUES (?, 1)",
                (("d1",) for _ in range(100_001)),
            )
        put(store, "d2", "two", vectors=vectors("m", 1))  # a new document prunes the log
        assert store.vector_delta("m", behind, 10) is None
        assert store.document_changes(behind, 10) is None
        recent = store.load_vectors("m").seq
        assert store.vector_delta("m", recent, 10) == VectorSnapshot([], [], recent, ())
        assert store.scope_document_ids(Scope.global_(), among=["d2"]) == ["d2"]


class TestPostgres(StoreContract):
    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[Store]:
        from tether.store.postgres import PostgresStore

        backend = PostgresStore.connect(postgres_url)
        yield backend
        backend.close()
