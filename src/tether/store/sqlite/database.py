"""Opening the SQLite file: pragmas, migrations, connections per thread, transactions.

SQLite's storage failures become tether's errors here: a full disk and a read-only store
where a write transaction (or a migration) meets them, a damaged file where it is opened
or read. A file that cannot be written is opened to be read only (see
:mod:`tether.store.sqlite.files`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tether.errors import InvalidArgument, SchemaVersionError, StorageReadOnly, StoreError
from tether.store._common import when_thread_ends
from tether.store._failures import (
    MAKE_THE_FILE_WRITABLE,
    opened_language,
    storage_read_only,
    wanted_language,
)
from tether.store.dialect import SQLITE
from tether.store.sqlite.files import (
    check_version,
    connect_read_only,
    damage_as_corrupt,
    probe,
    read_only_file,
    unreadable,
    write_failure,
)
from tether.store.sqlite.fts_upkeep import FtsUpkeep, index_queued
from tether.store.sqlite.migrations import (
    FTS_HEADER_VERSION,
    FTS_QUEUE_VERSION,
    LATEST_VERSION,
    MIGRATIONS,
    STEMMED_TEXT,
    Migration,
    language_fts_sql,
    queued_language_fts_sql,
)
from tether.text import DEFAULT_LANGUAGE, stemmed_text

DEFAULT_BUSY_TIMEOUT_MS = 10_000
#: A store of at least this many chunks says it is being indexed again (migration 14).
REINDEX_NOTICE_CHUNKS = 100_000

logger = logging.getLogger(__name__)


class SQLiteDatabase:
    """A tether store in one SQLite file (or ``":memory:"``, or a connection you own).

    File databases get one connection per thread, so a reader on one thread never waits
    for a writer on another (WAL). In-memory databases and caller-owned connections are a
    single connection, used by one thread at a time.

    A file that cannot be written (a read-only file, folder or mount) is opened to be read
    only: ``read_only`` is then True, reads work, and each write raises
    :class:`~tether.errors.StorageReadOnly`.
    """

    dialect = SQLITE

    def __init__(
        self,
        target: str | os.PathLike[str] | sqlite3.Connection = ":memory:",
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        language: str | None = None,
    ) -> None:
        self.busy_timeout_ms = busy_timeout_ms
        #: The language of the lexical side: the one the store was made for. Opened for
        #: another one (``language``), it raises; None opens it for its own. A new store
        #: is made for ``language`` (None: English).
        self.language = wanted_language(language)
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._all_connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        # Transactions running on each connection (by id): a connection another thread
        # is using is closed by that thread when it is done, never under its feet.
        self._busy: dict[int, int] = {}
        self._closed = False
        self.cross_thread = True
        self.read_only = False
        #: Merges the FTS5 index's segments, a bounded step at a time, as writes fragment it.
        self.fts_upkeep = FtsUpkeep()
        if isinstance(target, sqlite3.Connection):
            self.path = "<connection>"
            check_version(target, self.path)  # before anything changes the connection
            target.isolation_level = None
            self._shared = target
            self._prepare(target, self.path)
            self.cross_thread = _usable_from_another_thread(target)
        else:
            self.path = os.fspath(target)
            if self.path == ":memory:" or self.path == "":
                self.path = ":memory:"
                self._shared = self._connect()
            else:
                self._file = Path(self.path).expanduser().resolve()
                self.read_only = read_only_file(self._file, self.path)
                probe(self._file, self.path, self.busy_timeout_ms / 1000)
                self.connection()  # open, check the version and migrate now, not on first use

    def _connect(self) -> sqlite3.Connection:
        timeout = self.busy_timeout_ms / 1000
        try:
            if self.read_only:
                conn = connect_read_only(self._file, self.path, timeout)
            else:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=timeout
                )
        except sqlite3.Error as exc:
            raise unreadable(exc, self.path) from exc
        try:
            self._prepare(conn, self.path)
        except BaseException:
            conn.close()
            raise
        with self._connections_lock:
            self._all_connections.append(conn)
        return conn

    def _prepare(self, conn: sqlite3.Connection, label: str) -> None:
        # Read the version before anything writes to the file: a newer file stays untouched.
        version = check_version(conn, label)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if not self.read_only:
                _use_wal(conn, self.busy_timeout_ms / 1000)
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise unreadable(exc, label) from exc
        conn.create_function(STEMMED_TEXT, 2, stemmed_text, deterministic=True)
        if version < LATEST_VERSION:
            self._migrate(conn, version, label)
        self.language = opened_language(label, _recorded_language(conn, label), self.language)

    def _migrate(self, conn: sqlite3.Connection, version: int, label: str) -> None:
        if self.read_only:
            raise StorageReadOnly(
                f"{label} has schema version {version}, older than this tether's"
                f" {LATEST_VERSION}, and it is read-only, so it cannot be upgraded: open it"
                " once where it can be written (it is upgraded then), or read it with the"
                " tether that wrote it. The file was not changed"
            )
        with self._write_lock:  # (migrate reads the version again under the file's lock)
            migrate(conn, label=label, language=self.language or DEFAULT_LANGUAGE)

    def thread_in_transaction(self) -> bool:
        """Whether this thread's connection (if it has one) is inside a transaction; a
        connection shared by every thread (``:memory:``) always counts as in one."""
        if self._shared is not None:
            return True
        conn = getattr(self._local, "conn", None)
        return conn is not None and conn.in_transaction

    def connection(self) -> sqlite3.Connection:
        """This thread's connection."""
        if self._closed:
            raise StoreError(f"{self.path} is closed")
        if self._shared is not None:
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            when_thread_ends(self._local, lambda: self._thread_ended(conn))
        return conn

    def _thread_ended(self, conn: sqlite3.Connection) -> None:
        with self._connections_lock:
            if conn in self._all_connections and id(conn) not in self._busy:
                self._all_connections.remove(conn)
                conn.close()

    @contextmanager
    def read(self, *, single: bool = False) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several SELECTs (a deferred transaction); with
        ``single``, for one statement, which is a snapshot of its own (no BEGIN and COMMIT
        around it). A damaged page met on the way is :class:`~tether.errors.StoreCorrupt`."""
        with self._shared_lock if self._shared is not None else _nullcontext():
            conn = self.connection()
            with damage_as_corrupt(self.path):
                if conn.in_transaction:
                    with _unstorable_text():
                        yield conn
                    return
                if single:
                    with self._in_use(conn), _unstorable_text():
                        yield conn
                    return
                with self._in_use(conn):
                    conn.execute("BEGIN")
                    self._local.reading = True
                    try:
                        with _unstorable_text():
                            yield conn
                    finally:
                        self._local.reading = False
                        conn.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: all of it commits, or none of it.

        Inside another write transaction it is a savepoint of it: an exception rolls back
        only the inner block, and the outer transaction decides whether to go on. A full
        disk raises :class:`~tether.errors.StorageFull`, a read-only store
        :class:`~tether.errors.StorageReadOnly`; nothing of the write is stored then."""
        if self.read_only:
            raise storage_read_only(
                self.path,
                "its file, folder or mount cannot be written",
                remedy=MAKE_THE_FILE_WRITABLE,
            )
        with self._shared_lock if self._shared is not None else _nullcontext():
            conn = self.connection()
            if conn.in_transaction or getattr(self._local, "writing", False):
                with self._savepoint(conn):
                    yield conn
                return
            with self._write_lock, self._in_use(conn), self._transaction(conn):
                yield conn

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        before = conn.total_changes
        self._local.writing, self._local.lost = True, None
        try:
            with self._write_failures(conn):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    with _unstorable_text():
                        yield
                    if not conn.in_transaction:  # SQLite rolled it back under a savepoint
                        raise self._lost()
                    index_queued(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # SQLite may have rolled it back already
                        conn.execute("ROLLBACK")
                    raise
        finally:
            self._local.writing = False
        self.fts_upkeep.after_write(conn, conn.total_changes - before)

    @contextmanager
    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[None]:
        """A write nested in this thread's write transaction: a savepoint of it, so a
        failure here undoes only this part (and still raises); the outer one goes on."""
        if getattr(self._local, "reading", False):
            # A deferred read transaction would take the write lock only at its first
            # write, and fail with "database is locked" if another writer got there.
            raise StoreError(
                "a write cannot start inside a read transaction (SQLiteDatabase.read());"
                " open the write transaction first"
            )
        if not conn.in_transaction:  # an earlier failure took the whole transaction with it
            raise self._lost()
        depth = getattr(self._local, "savepoints", 0) + 1
        self._local.savepoints = depth
        name = f"tether_nested_{depth}"
        try:
            with self._write_failures(conn):
                conn.execute(f"SAVEPOINT {name}")
                try:
                    with _unstorable_text():
                        yield
                except BaseException:
                    if conn.in_transaction:
                        conn.execute(f"ROLLBACK TO {name}")
                        conn.execute(f"RELEASE {name}")
                    raise
                conn.execute(f"RELEASE {name}")
        finally:
            self._local.savepoints = depth - 1

    @contextmanager
    def _write_failures(self, conn: sqlite3.Connection) -> Iterator[None]:
        """A full disk or a read-only store as tether's error. SQLite may roll the whole
        transaction back on such a failure (its documentation says "may"): the error is
        then kept for the writes nested in it that come after (see :meth:`_lost`)."""
        try:
            yield
        except sqlite3.Error as exc:
            failure = write_failure(exc, self.path)
            if failure is None:
                raise
            if not conn.in_transaction:
                self._local.lost = failure
            raise failure from exc

    def _lost(self) -> StoreError:
        """The error to raise in a write whose transaction SQLite already rolled back:
        nothing of it is stored, so no more of it may be (it would commit on its own)."""
        lost = getattr(self._local, "lost", None)
        if lost is None:
            return StoreError(f"the write transaction on {self.path} was rolled back")
        again = type(lost)(*lost.args)
        again.__cause__ = lost.__cause__  # SQLite's own error, as on the first
        return again

    def schema_version(self) -> int:
        return self.connection().execute("PRAGMA user_version").fetchone()[0]

    @contextmanager
    def _in_use(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Marks ``conn`` busy for one transaction; a store closed meanwhile closes it
        when the transaction ends (on this thread, after its last statement)."""
        with self._connections_lock:
            if self._closed:
                raise StoreError(f"{self.path} is closed")
            self._busy[id(conn)] = self._busy.get(id(conn), 0) + 1
        try:
            yield
        finally:
            with self._connections_lock:
                left = self._busy[id(conn)] = self._busy[id(conn)] - 1
                if left == 0:
                    del self._busy[id(conn)]
                if self._closed and left == 0 and conn in self._all_connections:
                    self._all_connections.remove(conn)
                    conn.close()

    def close(self) -> None:
        """Close every connection. One that another thread is in the middle of using (an
        abandoned file loader, say) is closed by that thread at the end of its
        transaction; its next one raises StoreError."""
        with self._connections_lock:
            self._closed = True
            for conn in list(self._all_connections):
                if id(conn) not in self._busy:
                    conn.close()
                    self._all_connections.remove(conn)
        if self._shared is not None and self.path == ":memory:":
            with self._shared_lock:
                self._shared.close()
        self._local = threading.local()


@contextmanager
def _unstorable_text() -> Iterator[None]:
    """A str SQLite cannot take (one holding a lone surrogate, which UTF-8 cannot encode)
    as a typed :class:`InvalidArgument` naming it, not a ``UnicodeEncodeError`` from deep
    inside: an id that cannot be stored cannot be found either."""
    try:
        yield
    except UnicodeEncodeError as exc:
        text = exc.object if isinstance(exc.object, str) else repr(exc.object)
        bad = text[exc.start : exc.end]
        raise InvalidArgument(
            f"{text[:80]!r} cannot be stored or looked up: it holds {bad!r} at position"
            f" {exc.start} (a lone surrogate is not text)"
        ) from None


@contextmanager
def _nullcontext() -> Iterator[None]:
    yield


def migrate(
    conn: sqlite3.Connection,
    *,
    to: int = LATEST_VERSION,
    label: str = "the store",
    language: str = DEFAULT_LANGUAGE,
) -> int:
    """Apply every migration above the file's ``user_version`` up to ``to``, in one
    ``BEGIN IMMEDIATE`` transaction; return the version reached. A new store (version 0)
    is made for ``language`` in the same transaction (an existing one keeps its own).

    The version is read inside the transaction, under the file's write lock, so processes
    opening a new file at the same time migrate it once: the others wait, then find it done.
    A failure rolls everything back and leaves the file at the version it had (a full disk
    or a read-only file is then :class:`~tether.errors.StorageFull` or
    :class:`~tether.errors.StorageReadOnly`).
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise write_failure(exc, label) or StoreError(f"cannot migrate {label}: {exc}") from exc
    try:
        start = current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current > LATEST_VERSION:  # a newer tether got here between the check and the lock
            raise SchemaVersionError(label, current, LATEST_VERSION)
        recorded = DEFAULT_LANGUAGE
        for migration in MIGRATIONS:
            if current < migration.version <= to:
                if start > 0 and migration.for_language is not None:
                    recorded = _recorded_language(conn, label) or DEFAULT_LANGUAGE
                if start > 0 and migration.version == FTS_HEADER_VERSION:
                    _say_reindexing(conn, label)
                _apply(conn, migration, start, label, recorded)
                current = migration.version
        if start == 0 and current >= FTS_QUEUE_VERSION and language != DEFAULT_LANGUAGE:
            sql = (language_fts_sql if current >= FTS_HEADER_VERSION else queued_language_fts_sql)(
                language
            )
            _apply(conn, Migration(current, f"a store of {language}", sql), start, label)
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:  # SQLite may have rolled it back already (a full disk)
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):  # COMMIT's own failure
            raise write_failure(exc, label) or StoreError(f"cannot migrate {label}: {exc}") from exc
        raise
    return current


def _apply(
    conn: sqlite3.Connection,
    migration: Migration,
    start: int,
    label: str,
    language: str = DEFAULT_LANGUAGE,
) -> None:
    # Statement by statement inside the open transaction (executescript would commit it).
    try:
        for statement in _statements(migration.sql_for(language)):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {migration.version}")
    except sqlite3.Error as exc:
        raise write_failure(exc, label) or StoreError(
            f"migration {migration.version} ({migration.name}) failed: {exc}; the file was"
            f" left at version {start}"
        ) from exc


def _say_reindexing(conn: sqlite3.Connection, label: str) -> None:
    """Migration 14 indexes every chunk again (SciFact's 11,132 chunks: 0.4 s on 2
    cores, and proportionally longer for more): a large store says so before the wait."""
    chunks = conn.execute("SELECT count(*) FROM rag_chunks").fetchone()[0]
    if chunks >= REINDEX_NOTICE_CHUNKS:
        logger.warning(
            "%s: indexing its %d chunks again for full-text search (once: each chunk is now"
            " indexed with its document's title); this takes a while on a large store",
            label,
            chunks,
        )


def _recorded_language(conn: sqlite3.Connection, label: str) -> str | None:
    """The language the store records (None: none, which is English)."""
    try:
        row = conn.execute("SELECT value FROM rag_store_settings WHERE key = 'language'").fetchone()
    except sqlite3.Error as exc:
        raise unreadable(exc, label) from exc
    return None if row is None else str(row[0])


def _statements(script: str) -> Iterator[str]:
    """The statements of ``script``, split where SQLite itself sees one end (so a
    trigger's ``BEGIN ... END;`` body stays whole)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""
    leftover = "\n".join(
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    )
    if leftover:
        raise StoreError(f"unterminated statement in a migration: {leftover[:80]!r}")


def _use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch the file to WAL (it stays so). The switch needs the file to itself, and
    SQLite answers "locked" at once instead of waiting when another connection is opening
    it too, so wait here, up to the busy timeout; a file already in WAL needs nothing."""
    deadline = time.monotonic() + timeout
    while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return  # ":memory:" answers "memory": nothing more to do
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise  # the caller says what it was (a full disk, say)
            if time.monotonic() > deadline:
                raise StoreError(f"cannot switch the store to WAL: {exc}") from exc
            time.sleep(0.01)


def _usable_from_another_thread(conn: sqlite3.Connection) -> bool:
    """False for a connection opened with ``check_same_thread=True`` (the default)."""
    outcome: list[bool] = []

    def use_it() -> None:
        try:
            conn.execute("SELECT 1").fetchone()
            outcome.append(True)
        except sqlite3.ProgrammingError:
            outcome.append(False)

    thread = threading.Thread(target=use_it)
    thread.start()
    thread.join()
    return bool(outcome and outcome[0])
