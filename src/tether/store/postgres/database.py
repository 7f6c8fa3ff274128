"""Opening a PostgreSQL database: connections per thread, transactions, migrations.

The store's parts are written once, their few differing spellings built for
:data:`~tether.store.dialect.POSTGRES` (``self.db.dialect``); :class:`PgConnection` runs
them with psycopg's placeholders for the DB-API's ``?`` and ``:name``. What differs
beyond spelling (full-text search, vectors, generated ids) is written for PostgreSQL in
:mod:`tether.store.postgres`.

Writers are serialized by a transaction-level advisory lock, as SQLite's one writer is:
the change log's sequence numbers then commit in order, which its readers rely on
(:meth:`~tether.store.Store.vector_delta`), and a document's all-or-nothing replace never
interleaves with another. Readers never wait for it (MVCC): each read is one
``REPEATABLE READ`` snapshot.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tether.errors import InvalidArgument, StorageReadOnly, StoreError
from tether.store._common import when_thread_ends
from tether.store._failures import (
    opened_language,
    storage_full,
    storage_read_only,
    wanted_language,
)
from tether.store.dialect import POSTGRES
from tether.store.postgres.schema import (
    LATEST_VERSION,
    migrate,
    recorded_language,
    schema_version,
)
from tether.text import DEFAULT_LANGUAGE

try:
    import psycopg
    from pgvector.psycopg import register_vector
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "the PostgreSQL backend needs psycopg and pgvector: pip install 'tether[postgres]'"
    ) from exc

#: The advisory lock every write transaction takes (any 64-bit number of our own).
WRITE_LOCK = 0x7E7E_0001
_NAME = re.compile(r"[A-Za-z_]\w*")
#: What to do about a read-only PostgreSQL store (a standby, or a read-only default).
_MAKE_IT_WRITABLE = (
    "point tether at a database that can be written (the primary, not a standby, and"
    " default_transaction_read_only off)"
)


@functools.lru_cache(maxsize=512)
def psycopg_placeholders(sql: str) -> str:
    """``sql`` with the DB-API placeholders the store writes as psycopg's: ``?`` as
    ``%s``, ``:name`` as ``%(name)s`` (a ``::`` cast stays), every other ``%`` doubled, in
    string literals too (``LIKE 'http://%'``)."""
    out: list[str] = []
    i, n, quoted = 0, len(sql), False
    while i < n:
        c = sql[i]
        if c == "'":
            quoted = not quoted
            out.append(c)
        elif c == "%":
            out.append("%%")
        elif quoted:
            out.append(c)
        elif c == "?":
            out.append("%s")
        elif c == ":" and sql[i + 1 : i + 2] != ":" and (i == 0 or sql[i - 1] != ":"):
            name = _NAME.match(sql, i + 1)
            if name is None:
                out.append(c)
            else:
                out.append(f"%({name.group()})s")
                i = name.end()
                continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


class PgConnection:
    """One thread's psycopg connection, running the store's SQL with psycopg's
    placeholders (:func:`psycopg_placeholders`)."""

    def __init__(self, raw: psycopg.Connection[Any], label: str = "the database") -> None:
        self.raw = raw
        #: The database in messages (its URL without the password).
        self.label = label

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        with _errors(self.label):
            return self.raw.execute(psycopg_placeholders(sql), params, prepare=False)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        with _errors(self.label):
            cur = self.raw.cursor()
            cur.executemany(psycopg_placeholders(sql), rows)
            return cur

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


class PgDatabase:
    """A tether store in one PostgreSQL database, reached by ``url``
    (``postgresql://user:password@host:port/dbname``, or any libpq connection string).

    Each thread gets its own connection. A write is one transaction (nested writes are
    savepoints of it); a read is one snapshot.
    """

    dialect = POSTGRES

    def __init__(self, url: str, *, connect_timeout: int = 10, language: str | None = None) -> None:
        self.url = url
        self.path = _redacted(url)
        #: The language of the lexical side (see :class:`~tether.store.SQLiteDatabase`).
        self.language = wanted_language(language)
        self.cross_thread = True
        self._connect_timeout = connect_timeout
        self._local = threading.local()
        self._all: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._closed = False
        conn = self._open(register=False)
        try:
            self._migrate(conn)
            with _errors(self.path):
                recorded = recorded_language(conn)
            self.language = opened_language(self.path, recorded, self.language)
            register_vector(conn)
        except BaseException:
            conn.close()
            raise
        self._local.conn = PgConnection(conn, self.path)
        with self._lock:
            self._all.append(conn)

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Bring the schema up to date. One that is needs no write, so a read-only
        database (a standby) opens, to be read."""
        with _errors(self.path):
            if schema_version(conn) == LATEST_VERSION:
                return
        try:
            migrate(conn, self.path, self.language or DEFAULT_LANGUAGE)
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.errors.ReadOnlySqlTransaction):
                raise StorageReadOnly(
                    f"{self.path} has an older schema than this tether's and is read-only,"
                    f" so it cannot be upgraded; {_MAKE_IT_WRITABLE}, or read it with the"
                    " tether that wrote it. Nothing in it was changed"
                ) from cause
            if isinstance(cause, psycopg.errors.DiskFull):
                raise storage_full(self.path, _detail(cause)) from cause
            raise

    def _open(self, *, register: bool = True) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self._connect_timeout)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to {self.path}: {exc}") from exc
        conn.prepare_threshold = None  # plans per statement: partial indexes stay usable
        if register:
            register_vector(conn)
        return conn

    def thread_in_transaction(self) -> bool:
        """Whether this thread's connection (if it has one) is inside a transaction."""
        conn = getattr(self._local, "conn", None)
        return conn is not None and not conn.raw.closed and conn.in_transaction

    def connection(self) -> PgConnection:
        """This thread's connection."""
        if self._closed:
            raise StoreError(f"{self.path} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.raw.closed:
            raw = self._open()
            with self._lock:
                self._all.append(raw)
            conn = self._local.conn = PgConnection(raw, self.path)
            when_thread_ends(self._local, lambda: self._thread_ended(raw))
        return conn

    def _thread_ended(self, raw: psycopg.Connection[Any]) -> None:
        with self._lock:
            if raw in self._all:
                self._all.remove(raw)
                raw.close()

    @contextmanager
    def read(self, *, single: bool = False) -> Iterator[PgConnection]:
        """A consistent snapshot for several SELECTs (``single``, for one statement, is
        taken as the same here: one read-only transaction)."""
        conn = self.connection()
        if conn.in_transaction:
            yield conn
            return
        with _errors(self.path), conn.raw.transaction():
            conn.raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self._local.reading = True
            try:
                yield conn
            finally:
                self._local.reading = False

    @contextmanager
    def write(self) -> Iterator[PgConnection]:
        """One transaction holding the write lock: all of it commits, or none of it;
        inside another write, a savepoint of it. A full disk raises
        :class:`~tether.errors.StorageFull`, a read-only database (a standby)
        :class:`~tether.errors.StorageReadOnly`; nothing of the write is stored then."""
        conn = self.connection()
        if conn.in_transaction:
            if getattr(self._local, "reading", False):
                raise StoreError(
                    "a write cannot start inside a read transaction; open the write first"
                )
            with _errors(self.path), conn.raw.transaction():
                yield conn
            return
        with _errors(self.path), conn.raw.transaction():
            conn.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            yield conn

    def schema_version(self) -> int:
        return schema_version(self.connection().raw)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


@contextmanager
def _errors(label: str) -> Iterator[None]:
    """psycopg's errors as tether's: text PostgreSQL cannot store as a typed
    :class:`InvalidArgument`, a full disk as :class:`~tether.errors.StorageFull`, a
    read-only database as :class:`~tether.errors.StorageReadOnly`, a lost server as
    :class:`StoreError`. ``label`` names the database."""
    try:
        yield
    except UnicodeEncodeError as exc:
        text = exc.object if isinstance(exc.object, str) else repr(exc.object)
        raise InvalidArgument(
            f"{text[:80]!r} cannot be stored or looked up: it holds"
            f" {text[exc.start : exc.end]!r} at position {exc.start} (a lone surrogate is not text)"
        ) from None
    except psycopg.DataError as exc:
        if "0x00" in str(exc) or "NUL" in str(exc):
            raise InvalidArgument(f"text with a NUL character cannot be stored: {exc}") from None
        raise
    except psycopg.errors.DiskFull as exc:
        raise storage_full(label, _detail(exc)) from exc
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        raise storage_read_only(label, _detail(exc), remedy=_MAKE_IT_WRITABLE) from exc
    except psycopg.OperationalError as exc:
        raise StoreError(f"the PostgreSQL server failed: {exc}") from exc


def _detail(exc: psycopg.Error) -> str:
    """The server's one-line message (a message's DETAIL and HINT lines left out)."""
    return exc.diag.message_primary or str(exc).splitlines()[0]


def _redacted(url: str) -> str:
    """``url`` without its password, for messages and ``repr``."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
