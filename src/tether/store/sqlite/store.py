"""The SQLite store: the embedded default backend, one file (or ``:memory:``).

Its parts are mixins by concern (shared with PostgreSQL's store), each over the same
:class:`~tether.store.sqlite.database.SQLiteDatabase`. Every writing
method opens its own ``BEGIN IMMEDIATE`` transaction, or becomes a savepoint of the one
open in :meth:`SQLiteStore.write`, so each call is atomic on its own.
"""

from __future__ import annotations

from typing import Any

from tether.store._audit import AuditMixin
from tether.store._documents import DocumentsMixin
from tether.store._embeddings import EmbeddingsMixin
from tether.store._keys import KeysMixin
from tether.store._registry import RegistryMixin
from tether.store._search import SearchMixin
from tether.store._sessions import SessionsMixin
from tether.store.base import Store
from tether.store.sqlite.database import SQLiteDatabase
from tether.store.sqlite.fts_upkeep import FtsShape, fts_shape, index_queued


class SQLiteStore(
    SessionsMixin,
    DocumentsMixin,
    SearchMixin,
    EmbeddingsMixin,
    RegistryMixin,
    AuditMixin,
    KeysMixin,
    Store,
):
    """All reads and writes of the tether schema, on one :class:`SQLiteDatabase`."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db
        # Each scope's share of the store's chunks, by the documents counter it was
        # counted at: it picks the lexical plan (see SearchMixin._rank_first_depth).
        self._scope_shares: dict[tuple[Any, ...], tuple[int, float, int]] = {}
        # How many chunks held each query term, and the store's size then: it picks the
        # rare terms of the rare-first plan (see SearchMixin._rare_first).
        self._term_counts: dict[str, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"SQLiteStore({self.location!r})"

    def compact(self) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """FTS5's ``optimize``: the index as one segment, tombstones gone (the upkeep after
        writes does it by itself for indexes up to ``AUTO_PAGES``)."""
        with self.db.write() as conn:
            index_queued(conn)
            before = fts_shape(conn)
            conn.execute("INSERT INTO rag_chunks_fts (rag_chunks_fts) VALUES ('optimize')")
            after = fts_shape(conn)
        return _pair(before), _pair(after)

    def fts_integrity_check(self) -> None:
        """Raise ``sqlite3.DatabaseError`` unless the FTS index matches ``rag_fts_source``
        (FTS5's integrity check in its content-comparing form, rank = 1). SQLite only:
        not part of :class:`Store`."""
        with self.db.write() as conn:
            index_queued(conn)  # (a chunk written outside a store transaction waits here)
            conn.execute(
                "INSERT INTO rag_chunks_fts (rag_chunks_fts, rank) VALUES ('integrity-check', 1)"
            )


def _pair(shape: FtsShape | None) -> tuple[int, int] | None:
    return None if shape is None else (shape.segments, shape.pages)
