"""A store's language (``rag.language``): recorded when the store is made, checked when it
is opened, and what its full-text index holds. SQLite files and a real PostgreSQL."""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.errors import ConfigurationError, InvalidArgument
from tether.models import GLOBAL_WORKSPACE, Scope
from tether.retrieve.fts import compile_match
from tether.store import NewChunk, NewDocument, SQLiteDatabase, SQLiteStore, Store, migrate
from tether.store import open_store as _open_store

pytest.importorskip("Stemmer", reason="the languages extra installs PyStemmer")

# (language, a document, a query that shares no word with it, only stems)
INFLECTED = [
    ("german", "Die alten Häuser stehen am Fluss.", "Haus"),
    ("french", "Les chevaux courent dans le pré.", "cheval"),
    ("spanish", "Nosotros cantamos cada mañana.", "cantar"),
]


def open_store(db: str | Path, language: str | None = None) -> Store:
    return _open_store(db, language=language)


def _add(
    store: Store, document_id: str, text: str, section: str | None = None, *, again: bool = False
) -> None:
    chunk = NewChunk(0, text, section, 0, len(text), None, f"h-{document_id}")
    document = NewDocument(
        document_id, GLOBAL_WORKSPACE, document_id, None, None, "text/plain", text, None, {}
    )
    (store.replace_document if again else store.insert_document)(document, [chunk])


def _found(store: Store, query: str) -> list[str]:
    match = compile_match(query, store.language)
    assert match is not None
    return [h.document_id for h in store.search_lexical(Scope.global_(), match, 10)]


@pytest.mark.parametrize(("language", "text", "query"), INFLECTED)
def test_a_store_of_a_language_matches_its_inflections(
    tmp_path: Path, language: str, text: str, query: str
) -> None:
    """Made for a language, a store finds a word by another form of it (Snowball stems
    both); the same text in an English store (FTS5's porter) does not."""
    native, english = open_store(tmp_path / "n.db", language), open_store(tmp_path / "e.db")
    try:
        for store in (native, english):
            _add(store, "d", text)
            _add(store, "other", "Something else entirely, no match here.")
        assert _found(native, query) == ["d"]
        assert _found(english, query) == []
        assert native.language == language and english.language == "english"
    finally:
        native.close()
        english.close()


def test_accents_are_folded_before_stemming(tmp_path: Path) -> None:
    """A query typed without accents finds the accented words, and the other way round."""
    store = open_store(tmp_path / "t.db", "french")
    try:
        _add(store, "accented", "Les élèves préférées ont réussi.")
        _add(store, "plain", "Les eleves preferees ont reussi.")
        assert sorted(_found(store, "élève préférée")) == ["accented", "plain"]
        assert sorted(_found(store, "eleve preferee")) == ["accented", "plain"]
    finally:
        store.close()


def test_the_language_is_recorded_and_checked_at_open(tmp_path: Path) -> None:
    """A store opens for the language it was made for, or for none (its own); for another
    it raises a ConfigurationError that names both and says what to do."""
    path = tmp_path / "t.db"
    open_store(path, "german").close()
    for language in (None, "german"):
        store = open_store(path, language)
        assert store.language == "german"
        store.close()
    with pytest.raises(ConfigurationError) as info:
        open_store(path, "french")
    message = str(info.value)
    assert "'german'" in message and "'french'" in message
    assert "rag.language = 'german'" in message and "new store" in message


def test_a_store_made_before_languages_is_english(tmp_path: Path) -> None:
    """A file of the tether before migration 12 holds no language: it is English, and
    migrating records it so, with its index as it was."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, to=11)
    conn.close()
    with pytest.raises(ConfigurationError, match=r"made for rag\.language 'english'"):
        open_store(path, "spanish")
    store = open_store(path)
    try:
        assert store.language == "english"
        _add(store, "d", "The pumps are primed.")
        assert _found(store, "pump") == ["d"]
    finally:
        store.close()


def test_an_unknown_language_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="unknown language 'klingon'"):
        open_store(tmp_path / "t.db", "klingon")
    assert not (tmp_path / "t.db").exists()


def test_the_index_stays_whole_through_writes(tmp_path: Path) -> None:
    """Replacing and deleting documents keeps the stemmed index equal to the chunks (FTS5's
    content check reads the text through the stemming view), and a compaction keeps it."""
    store = open_store(tmp_path / "t.db", "german")
    assert isinstance(store, SQLiteStore)
    try:
        for i in range(20):
            _add(store, f"d{i}", f"Die Häuser Nummer {i} werden gebaut.", "Bauen")
        store.delete_document("d3")
        _add(store, "d4", "Ein völlig anderer Text über Straßen.", "Straßen", again=True)
        store.fts_integrity_check()
        store.compact()
        store.fts_integrity_check()
        assert _found(store, "Straße") == ["d4"]
        stats = store.term_statistics(["Hauses", "Bäume"], Scope.global_())
        assert stats.store == {"Hauses": 18, "Bäume": 0}
    finally:
        store.close()


def test_every_connection_can_write(tmp_path: Path) -> None:
    """The stemming function the index needs is on each thread's connection, and on a
    connection the caller owns."""
    path = tmp_path / "t.db"
    store = open_store(path, "french")
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            _add(store, f"t{i}", "Les chevaux mangent.")
        except BaseException as exc:  # the test reads them below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert errors == []
    owned = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    mine = SQLiteStore(SQLiteDatabase(owned, language="french"))
    _add(mine, "mine", "Un cheval blanc.")
    assert sorted(_found(mine, "cheval")) == ["mine", "t0", "t1", "t2"]
    owned.close()


def test_without_pystemmer_a_stemmed_store_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stemming needs PyStemmer (the languages extra); English needs nothing more."""
    monkeypatch.setitem(sys.modules, "Stemmer", None)
    outcome: list[BaseException | Store] = []

    def attempt(call: Callable[[], Any]) -> None:  # a fresh thread: no stemmer cached
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    def make_german() -> Store:
        return open_store(tmp_path / "g.db", "german")

    thread = threading.Thread(target=attempt, args=(make_german,))
    thread.start()
    thread.join()
    assert isinstance(outcome[0], ConfigurationError)
    assert "pip install 'tether[languages]'" in str(outcome[0])
    assert not (tmp_path / "g.db").exists()  # refused before anything was made
    open_store(tmp_path / "e.db").close()


# -- PostgreSQL ------------------------------------------------------------------------


def test_postgres_stems_the_language_it_was_made_for(postgres_server: Any) -> None:
    """A new PostgreSQL store is made for its language (the ``tether`` text search
    configuration's Snowball dictionary), records it, and refuses another."""
    pytest.importorskip("psycopg", reason="the postgres extra installs psycopg")
    url = postgres_server.new_database(empty=True)
    try:
        store = open_store(url, "german")
        try:
            assert store.language == "german"
            _add(store, "d", INFLECTED[0][1])
            _add(store, "other", "Etwas ganz anderes.")
            assert _found(store, "Haus") == ["d"]
        finally:
            store.close()
        with pytest.raises(ConfigurationError, match=r"made for rag\.language 'german'"):
            open_store(url, "spanish")
        reopened = open_store(url)
        assert reopened.language == "german"
        reopened.close()
    finally:
        postgres_server.drop_database(url)


def test_an_existing_postgres_store_is_english(postgres_url: str) -> None:
    """The session's stores are made English (as every store before languages was)."""
    store = open_store(postgres_url)
    try:
        assert store.language == "english"
    finally:
        store.close()
    with pytest.raises(ConfigurationError, match=r"made for rag\.language 'english'"):
        open_store(postgres_url, "french")
