"""What a store says when its storage fails: a full disk, a read-only store, a damaged
file. Each backend maps its driver's errors to these at one place (SQLite's in
:mod:`tether.store.sqlite.database`, PostgreSQL's in
:mod:`tether.store.postgres.database`); the words are the same on both."""

from __future__ import annotations

from tether.errors import StorageFull, StorageReadOnly, StoreCorrupt

#: What to do about a read-only SQLite store.
MAKE_THE_FILE_WRITABLE = (
    "make its file and folder writable (or its mount read-write), or write to a copy of it"
)


def storage_full(store: str, detail: str) -> StorageFull:
    return StorageFull(
        f"cannot write to {store}: its disk is full ({detail}). Nothing of this write was"
        " stored and nothing stored before was lost; free space and retry"
    )


def storage_read_only(store: str, detail: str, *, remedy: str) -> StorageReadOnly:
    return StorageReadOnly(
        f"cannot write to {store}: the store is read-only ({detail}). Reads still work and"
        f" nothing stored was lost; to write, {remedy}"
    )


def store_corrupt(file: str, detail: str, *, not_sqlite: bool = False) -> StoreCorrupt:
    what = (
        "is not a SQLite database, or its header is damaged"
        if not_sqlite
        else "is damaged: SQLite cannot read it"
    )
    return StoreCorrupt(
        f"{file} {what} ({detail}). The file was not changed; restore it from a backup, or"
        " index the documents again into a new store"
    )
