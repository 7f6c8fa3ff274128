"""Which backend a ``db`` names: a PostgreSQL URL, else a SQLite file (or connection)."""

from __future__ import annotations

import os
import sqlite3

from tether.store.base import Store
from tether.store.sqlite import SQLiteStore
from tether.store.sqlite.database import SQLiteDatabase

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(db: object) -> bool:
    return isinstance(db, str) and db.startswith(POSTGRES_SCHEMES)


def open_store(
    db: str | os.PathLike[str] | sqlite3.Connection, *, language: str | None = None
) -> Store:
    """The store ``db`` names: ``postgresql://...`` (or ``postgres://``) opens the
    PostgreSQL backend; anything else is a SQLite file, ``":memory:"`` or a connection.

    ``language`` (``rag.language``) is the language a new store is made for; an existing
    store made for another raises :class:`~tether.errors.ConfigurationError`. None: a
    store's own language (English for a new one)."""
    if is_postgres_url(db):
        from tether.store.postgres import PostgresStore

        return PostgresStore.connect(str(db), language=language)
    return SQLiteStore(SQLiteDatabase(db, language=language))
