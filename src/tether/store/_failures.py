"""What a store says when its storage fails: a full disk, a read-only store, a damaged
file; or when it is opened for a language it was not made for. Each backend maps its
driver's errors to these at one place (SQLite's in :mod:`tether.store.sqlite.database`,
PostgreSQL's in :mod:`tether.store.postgres.database`); the words are the same on both."""

from __future__ import annotations

from tether.errors import ConfigurationError, StorageFull, StorageReadOnly, StoreCorrupt
from tether.text import DEFAULT_LANGUAGE, check_language, snowball

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


def wanted_language(language: str | None) -> str | None:
    """``language`` (``rag.language``, or None), checked before a store is opened or made
    for it: a known name, and for a stemmed one, PyStemmer there to stem with."""
    if language is not None and check_language(language) != DEFAULT_LANGUAGE:
        snowball(language)
    return language


def opened_language(store: str, recorded: str | None, wanted: str | None) -> str:
    """The language of the store ``store`` opened for ``wanted`` (None: whichever it was
    made for), whose record says ``recorded`` (None: made before languages were recorded,
    so English). A store of another language than ``wanted`` raises
    :class:`ConfigurationError`: its full-text index holds that language's stems, and
    queries stemmed for another would miss. A stemmed language needs PyStemmer here."""
    language = check_language(recorded or DEFAULT_LANGUAGE)
    if wanted is not None and check_language(wanted) != language:
        raise ConfigurationError(
            f"{store} was made for rag.language {language!r}, not {wanted!r}: its full-text"
            f" index holds {language.capitalize()} stems. Set rag.language = {language!r} to"
            f" open it, or index the documents again into a new store made with rag.language"
            f" = {wanted!r}"
        )
    if language != DEFAULT_LANGUAGE:
        snowball(language)
    return language
