"""What every part of a store shares, SQLite's and PostgreSQL's alike: its database, its
transactions and lifetime, the plumbing of its reads (one snapshot per call; long id
lists in batches), and the end of a thread's connection."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from tether.store.base import Database, Store
from tether.text import DEFAULT_LANGUAGE

T = TypeVar("T")

# Well under SQLite's default limit of 999 bound variables per statement.
_BATCH = 500

_COUNTED_TABLES = (
    "workspaces",
    "sessions",
    "rag_documents",
    "rag_document_sessions",
    "rag_chunks",
    "rag_embeddings",
)


class _ThreadEnd:
    """Held in one thread's storage only, so it is collected when that thread ends."""


def when_thread_ends(local: threading.local, close: Callable[[], None]) -> None:
    """Call ``close`` once the calling thread ends (its part of ``local`` goes with it).

    A connection per thread is opened by every helper thread (each ``add()`` loads files
    on new ones); this closes it with its thread, so a long-running process does not
    gather one open connection per call (and PostgreSQL one server process)."""
    local.thread_end = _ThreadEnd()
    weakref.finalize(local.thread_end, close)


class StorePart(Store):
    """The base of the parts every store shares (the mixins of
    :class:`~tether.store.sqlite.SQLiteStore` and
    :class:`~tether.store.postgres.PostgresStore`): each is written over ``self.db``, a
    :class:`~tether.store.base.Database` of either backend, and may call the others
    through the :class:`Store` methods."""

    db: Database
    _scope_shares: dict[tuple[Any, ...], tuple[int, float, int]]
    _term_counts: dict[str, tuple[int, int]]

    # -- transactions, lifetime, maintenance (the same on every backend) -----------------

    @contextmanager
    def write(self) -> Iterator[None]:
        with self.db.write():
            yield

    @property
    def cross_thread(self) -> bool:
        return self.db.cross_thread

    @property
    def in_transaction(self) -> bool:
        return self.db.thread_in_transaction()

    @property
    def location(self) -> str:
        return self.db.path

    @property
    def language(self) -> str:
        return self.db.language or DEFAULT_LANGUAGE

    def close(self) -> None:
        self.db.close()

    def counts(self) -> dict[str, int]:
        with self.db.read() as conn:
            return {
                t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _COUNTED_TABLES
            }

    # -- reads -----------------------------------------------------------------------------

    def _select(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Every row of one SELECT."""
        with self.db.read(single=True) as conn:
            return conn.execute(sql, params).fetchall()

    def _select_one(self, sql: str, params: Sequence[Any] = ()) -> Any | None:
        """The first row of one SELECT, or None."""
        with self.db.read(single=True) as conn:
            return conn.execute(sql, params).fetchone()

    def _insert_rows(self, conn: Any, sql: str, rows: Sequence[Any]) -> None:
        """``conn.executemany(sql, rows)``; on SQLite, many rows go in one statement
        (:func:`insert_rows`)."""
        if self.db.dialect.name == "sqlite":
            insert_rows(conn, sql, rows)
        else:
            conn.executemany(sql, rows)

    def _select_in_batches(
        self, keys: Sequence[T], build: Callable[[Sequence[T]], tuple[str, list[Any]]]
    ) -> list[Any]:
        """The rows of ``build(batch)`` for every batch of ``keys``, read in one snapshot."""
        rows: list[Any] = []
        with self.db.read() as conn:
            for i in range(0, len(keys), _BATCH):
                sql, params = build(keys[i : i + _BATCH])
                rows += conn.execute(sql, params).fetchall()
        return rows


#: Rows SQLite inserts from one JSON array rather than one statement each (fewer: each).
JSON_ROWS = 64


def insert_rows(conn: sqlite3.Connection, sql: str, rows: Sequence[Any]) -> None:
    """``conn.executemany(sql, rows)`` for an ``INSERT ... VALUES (...)`` (``?`` or
    ``:name`` placeholders), as one statement over a JSON array when there are many rows
    of values JSON carries exactly: SQLite then inserts them all without taking Python's
    interpreter lock back between rows, so a thread that runs Python meanwhile (the next
    documents being chunked) does not stall it. Rows holding anything else (bytes, a NUL
    in a text, which SQLite's JSON functions cut at, an integer past 64 bits, a float
    that is not finite) go one statement each, as before."""
    if len(rows) < JSON_ROWS or not _json_safe(rows) or not json_rows(conn):
        conn.executemany(sql, rows)
        return
    head, values = sql.split(" VALUES ", 1)
    marks, _, tail = values.strip().removeprefix("(").partition(")")  # (tail: ON CONFLICT)
    if isinstance(rows[0], Mapping):
        keys = [name.strip()[1:] for name in marks.split(",")]
        columns = ", ".join(f"json_extract(value, '$.{key}')" for key in keys)
        data = json.dumps([{k: row[k] for k in keys} for row in rows], ensure_ascii=False)
    else:
        columns = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(len(rows[0])))
        data = json.dumps(rows, ensure_ascii=False)
    # (WHERE true: SQLite reads ON CONFLICT after a bare FROM as a join's ON)
    conn.execute(f"{head} SELECT {columns} FROM json_each(?) WHERE true {tail}", (data,))


def json_rows(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has its JSON functions (built in since 3.38; optional before)."""
    try:
        conn.execute("SELECT json_extract('[1]', '$[0]')").fetchone()
    except sqlite3.OperationalError:
        return False
    return True


_INT64 = range(-(2**63), 2**63)


def _json_safe(rows: Sequence[Any]) -> bool:
    """Whether every value of ``rows`` reads back from JSON as the same SQL value."""
    return all(
        _json_value(value)
        for row in rows
        for value in (row.values() if isinstance(row, Mapping) else row)
    )


def _json_value(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value in _INT64
    return isinstance(value, float) and math.isfinite(value)
