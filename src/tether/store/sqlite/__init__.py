"""The SQLite backend: one file, a connection per thread (WAL), FTS5 for lexical search,
vectors held in memory by the reader (:mod:`tether.retrieve.vector`).

:mod:`~tether.store.sqlite.store` (:class:`SQLiteStore`, the parts every backend shares
composed over a SQLite database), :mod:`~tether.store.sqlite.database` (opening the
file, pragmas, transactions, storage failures as typed errors),
:mod:`~tether.store.sqlite.migrations` (the numbered schema),
:mod:`~tether.store.sqlite.files` (read-only files, probing for damage) and
:mod:`~tether.store.sqlite.fts_upkeep` (keeping the FTS5 index compact).
"""

from tether.store.sqlite.database import SQLiteDatabase, migrate
from tether.store.sqlite.migrations import LATEST_VERSION, MIGRATIONS
from tether.store.sqlite.store import SQLiteStore

__all__ = ["LATEST_VERSION", "MIGRATIONS", "SQLiteDatabase", "SQLiteStore", "migrate"]
