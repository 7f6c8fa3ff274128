"""A SQLite file as it is found: one that cannot be written (opened to be read only),
one that is damaged or not SQLite at all (refused, untouched), and SQLite's failures in
tether's words (a full disk, a read-only store, a damaged file). :mod:`tether.store.sqlite.database`
opens its files and runs its transactions through these."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tether.errors import SchemaVersionError, StorageReadOnly, StoreError
from tether.store._failures import (
    MAKE_THE_FILE_WRITABLE,
    storage_full,
    storage_read_only,
    store_corrupt,
)
from tether.store.sqlite.migrations import LATEST_VERSION

# SQLite's primary result codes (the low byte of an extended one) that tether tells apart.
_SQLITE_READONLY = 8
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26


def check_version(conn: sqlite3.Connection, label: str) -> int:
    """The file's schema version; raises for a file of a newer tether or not SQLite."""
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error as exc:
        raise unreadable(exc, label) from exc
    if version > LATEST_VERSION:
        raise SchemaVersionError(label, version, LATEST_VERSION)
    return version


def read_only_file(file: Path, label: str) -> bool:
    """Whether the store at ``file`` can only be read: the file cannot be written (a
    read-only file or mount; ``os.access`` knows, even for root), or its folder cannot,
    and SQLite could not make the write-ahead log beside it."""
    if not file.parent.is_dir():
        raise StoreError(f"cannot open {label}: the folder {file.parent} does not exist")
    folder_writable = os.access(file.parent, os.W_OK)
    if not file.exists():
        if not folder_writable:
            raise StorageReadOnly(
                f"cannot create {label}: its folder {file.parent} cannot be written (a"
                " read-only folder or mount); put the store where it can be written"
            )
        return False
    if not os.access(file, os.W_OK):
        return True
    logs = (Path(f"{file}-wal"), Path(f"{file}-shm"))
    return not folder_writable and not all(log.exists() for log in logs)


def connect_read_only(file: Path, label: str, timeout: float) -> sqlite3.Connection:
    """A connection that can only read ``file``: ``mode=ro``. SQLite reads a file in WAL
    mode through an index it keeps beside it (``-shm``); where that cannot be made (a
    read-only folder or mount), its documentation of WAL's read-only databases says to
    open the file as ``immutable=1``, which is right only with no log holding changes
    (``-wal``) and the file not written meanwhile: both hold on read-only media."""
    conn = _connect_uri(file, "mode=ro", timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if _primary_code(exc) != _SQLITE_CANTOPEN:
            raise
    log = Path(f"{file}-wal")
    if log.exists() and log.stat().st_size > 0:
        raise StoreError(
            f"cannot read {label}: its folder cannot be written, so SQLite cannot read the"
            f" changes its log {log.name} holds; open it once where it can be written (that"
            " folds them into the file), then here"
        )
    return _connect_uri(file, "mode=ro&immutable=1", timeout)


def _connect_uri(file: Path, options: str, timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(
        f"{file.as_uri()}?{options}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=timeout,
    )


def probe(file: Path, label: str, timeout: float) -> None:
    """Refuse a newer, non-SQLite or damaged file through a read-only connection, which
    cannot change it: closing the last read-write connection would checkpoint its WAL into
    it. Damage is looked for where every open reads: the schema, and the first page of
    each table (a full check would read the whole file)."""
    if not file.exists():
        return
    try:
        conn = connect_read_only(file, label, timeout)
    except sqlite3.DatabaseError as exc:
        corrupt = _damage(exc, label)
        if corrupt is not None:
            raise corrupt from exc
        return  # unreadable here (locked, say): the read-write open reports why
    try:
        check_version(conn, label)
        with damage_as_corrupt(label):
            tables = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND rootpage > 0"
            ).fetchall()
            for (table,) in tables:
                quoted = table.replace('"', '""')
                conn.execute(f'SELECT * FROM "{quoted}" LIMIT 1').fetchall()
    finally:
        conn.close()


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def write_failure(exc: sqlite3.Error, label: str) -> StoreError | None:
    """A full disk or a read-only store as tether's error; None for any other failure."""
    code, detail = _primary_code(exc), str(exc)
    if code == _SQLITE_FULL or "disk is full" in detail:
        return storage_full(label, detail)
    if code == _SQLITE_READONLY or "readonly database" in detail:
        return storage_read_only(label, detail, remedy=MAKE_THE_FILE_WRITABLE)
    return None


def _damage(exc: sqlite3.Error, label: str) -> StoreError | None:
    """A damaged file (or one that is not SQLite) as tether's error; None for any other
    failure (a busy or locked file is not damaged)."""
    code = _primary_code(exc)
    if code == _SQLITE_NOTADB:
        return store_corrupt(label, str(exc), not_sqlite=True)
    if code == _SQLITE_CORRUPT or type(exc) is sqlite3.DatabaseError:
        return store_corrupt(label, str(exc))
    return None


def unreadable(exc: sqlite3.Error, label: str) -> StoreError:
    """Why the store at ``label`` could not be opened, in tether's words."""
    return (
        _damage(exc, label)
        or write_failure(exc, label)
        or StoreError(f"cannot open {label}: {exc}")
    )


@contextmanager
def damage_as_corrupt(label: str) -> Iterator[None]:
    """A damaged page met inside the block as :class:`~tether.errors.StoreCorrupt`."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        corrupt = _damage(exc, label)
        if corrupt is None:
            raise
        raise corrupt from exc
