"""Opening the SQLite file: pragmas, migrations, connections per thread, transactions."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tether.errors import SchemaVersionError, StoreError
from tether.store.migrations import LATEST_VERSION, MIGRATIONS, Migration

DEFAULT_BUSY_TIMEOUT_MS = 10_000


class Database:
    """A tether store in one SQLite file (or ``":memory:"``, or a connection you own).

    File databases get one connection per thread, so a reader on one thread never waits
    for a writer on another (WAL). In-memory databases and caller-owned connections are a
    single connection, used by one thread at a time.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | sqlite3.Connection = ":memory:",
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> None:
        self.busy_timeout_ms = busy_timeout_ms
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._all_connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        self.cross_thread = True
        if isinstance(target, sqlite3.Connection):
            self.path = "<connection>"
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
                parent = Path(self.path).expanduser().resolve().parent
                if not parent.is_dir():
                    raise StoreError(f"cannot open {self.path}: the folder {parent} does not exist")
                self.connection()  # open, check the version and migrate now, not on first use

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
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
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{label} is not a SQLite database ({exc})") from exc
        if version > LATEST_VERSION:
            raise SchemaVersionError(label, version, LATEST_VERSION)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        if version < LATEST_VERSION:
            with self._write_lock:
                migrate(conn)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection."""
        if self._shared is not None:
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several SELECTs (a deferred transaction)."""
        with self._shared_lock if self._shared is not None else _nullcontext():
            conn = self.connection()
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: all of it commits, or none of it."""
        with self._shared_lock if self._shared is not None else _nullcontext():
            conn = self.connection()
            if conn.in_transaction:
                yield conn
                return
            with self._write_lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")

    def schema_version(self) -> int:
        return self.connection().execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        with self._connections_lock:
            for conn in self._all_connections:
                conn.close()
            self._all_connections.clear()
        if self._shared is not None and self.path == ":memory:":
            self._shared.close()
        self._local = threading.local()


@contextmanager
def _nullcontext() -> Iterator[None]:
    yield


def migrate(conn: sqlite3.Connection, *, to: int = LATEST_VERSION) -> int:
    """Apply every migration above the file's ``user_version`` up to ``to``; return it."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for migration in MIGRATIONS:
        if current < migration.version <= to:
            _apply(conn, migration)
            current = migration.version
    return current


def _apply(conn: sqlite3.Connection, migration: Migration) -> None:
    # executescript would COMMIT a pending transaction first, so the script carries its own
    # BEGIN IMMEDIATE ... COMMIT and the version bump, and any failure rolls all of it back.
    script = (
        f"BEGIN IMMEDIATE;\n{migration.sql}\nPRAGMA user_version = {migration.version};\nCOMMIT;"
    )
    try:
        conn.executescript(script)
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StoreError(
            f"migration {migration.version} ({migration.name}) failed: {exc}; the file was"
            " left at the previous version"
        ) from exc


def _usable_from_another_thread(conn: sqlite3.Connection) -> bool:
    """False for a connection opened with ``check_same_thread=True`` (the default)."""
    outcome: list[bool] = []

    def probe() -> None:
        try:
            conn.execute("SELECT 1").fetchone()
            outcome.append(True)
        except sqlite3.ProgrammingError:
            outcome.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return bool(outcome and outcome[0])
