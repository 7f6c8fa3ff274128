"""The PostgreSQL backend against a real PostgreSQL 16 with pgvector (the pgserver wheel):
what the store contract cannot say alone. Its BM25 gives FTS5's scores, its pgvector
search gives the in-memory index's answers, and tether as a whole (library, CLI, a
second process) runs on it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether import Tether
from tether.errors import SchemaVersionError, StoreError
from tether.models import GLOBAL_WORKSPACE, Scope
from tether.retrieve.fts import compile_match
from tether.retrieve.vector import VectorIndex
from tether.store import ChunkVectors, NewChunk, NewDocument, SQLiteDatabase, SQLiteStore, Store
from tether.testing import HashEmbedder

psycopg = pytest.importorskip("psycopg", reason="the postgres extra installs psycopg")
from tether.store.postgres import PostgresStore  # noqa: E402 - after the skip above
from tether.store.postgres.schema import LATEST_VERSION  # noqa: E402

TEXTS = [
    "The pump primes in thirty seconds when the valve is open.",
    "Close the valve before you service the pump housing.",
    "Battery warranty: two years for the battery, one for the charger.",
    "Reset the sensor by holding the pin for five seconds; the sensor light blinks.",
    "The sensor reports the water temperature every minute.",
    "Service intervals: clean the filter monthly and the pump yearly.",
    "Firmware updates reset the sensor calibration to its defaults.",
    "A blinking light means the battery charge is low.",
    "Part ZX-9047 fits pump 6.4; part ZX 12 fits pump 4.6 and the 6 4 kit.",
    "Pump 6.4 ships with part 9047; the zx series: 6.4, 6.4 again.",
]
QUERIES = [
    "how fast does the pump prime",
    "reset sensor pin",
    "battery warranty charger",
    "valve service pump",
    "water temperature minute",
    "blinking light",
    # Compounds are also searched as phrases ("6 4"): hits counted as FTS5 counts them.
    "which part fits pump 6.4",
    "ZX-9047",
    "pump 4.6 or 6.4",
    # Chunks without a section title are indexed under their document's title ("doc 3").
    "doc 3 battery",
]


def _fill(store: Store, *, vectors: bool = False) -> None:
    embedder = HashEmbedder()
    for i, text in enumerate(TEXTS):
        workspace = "lumen" if i % 3 == 1 else GLOBAL_WORKSPACE
        store.ensure_workspace(workspace)
        chunk = NewChunk(0, text, None, 0, len(text), None, f"h{i}", token_count=len(text))
        blobs = None
        if vectors:
            blob = embedder.embed([text])[0].astype("<f4").tobytes()
            blobs = ChunkVectors(embedder.model, embedder.dims, [blob])
        document = NewDocument(f"d{i}", workspace, f"doc {i}", None, None, "text/plain",
                               f"c{i}", None, {})  # fmt: skip
        store.insert_document(document, [chunk], blobs)


def test_bm25_gives_the_scores_fts5_gives(postgres_url: str, tmp_path: Path) -> None:
    sqlite = SQLiteStore(SQLiteDatabase(tmp_path / "t.db"))
    postgres = PostgresStore.connect(postgres_url)
    try:
        for store in (sqlite, postgres):
            _fill(store)
        for query in QUERIES:
            match = compile_match(query)
            assert match is not None
            for scope in (Scope.global_(), Scope.workspace("lumen")):
                expected = sqlite.search_lexical_scores(scope, match, 10)
                got = postgres.search_lexical_scores(scope, match, 10)
                assert [c for c, _ in got] == [c for c, _ in expected], query
                assert np.allclose([s for _, s in got], [s for _, s in expected], rtol=1e-6)
                hits = postgres.search_lexical(scope, match, 3)
                assert [h.chunk_id for h in hits] == [c for c, _ in expected[:3]]
                assert all(h.workspace_id == scope.id for h in hits)
        terms, lumen = ["sensor", "valve", "zebra"], Scope.workspace("lumen")
        assert postgres.term_statistics(terms, lumen) == sqlite.term_statistics(terms, lumen)
    finally:
        sqlite.close()
        postgres.close()


def test_an_option_or_a_word_in_capitals_is_in_scope_only_where_a_chunk_names_it(
    postgres_url: str, tmp_path: Path
) -> None:
    """The index drops dashes, so "--ipv4" is the word "ipv4" there; an option is in
    scope only where a chunk names it, with any dash typesetting gave it; a keyword in
    capitals only where a chunk writes it with a capital ("UPSERT", "Src")."""
    texts = [
        "Give the network IPv4 and IPv6 subnets; the -w flag sets workers.",
        "Preview what would be removed with \u2013dry-run first.",  # an en dash, from a PDF
        "Enable IPv6 with --IPv6 on create.",
        "Rows merge into the table; the UPSERT clause updates them.",
        "The Src kinase is active in most tumours.",
    ]
    sqlite = SQLiteStore(SQLiteDatabase(tmp_path / "t.db"))
    postgres = PostgresStore.connect(postgres_url)
    terms = ["--ipv4", "--ipv6", "--dry-run", "-w", "ipv4", "MERGE", "UPSERT", "SRC", "IPV6"]
    try:
        for store in (sqlite, postgres):
            store.ensure_workspace("w")
            for i, text in enumerate(texts):
                chunk = NewChunk(0, text, None, 0, len(text), None, f"h{i}", token_count=9)
                document = NewDocument(f"d{i}", "w", f"doc {i}", None, None, "text/plain",
                                       f"c{i}", None, {})  # fmt: skip
                store.insert_document(document, [chunk])
        scope = Scope.workspace("w")
        stats = sqlite.term_statistics(terms, scope)
        assert stats.in_scope == {
            "--ipv4": False,  # the word is there, the option is not
            "--ipv6": True,
            "--dry-run": True,
            "-w": True,
            "ipv4": True,
            "MERGE": False,  # the word is there, the keyword in capitals is not
            "UPSERT": True,
            "SRC": True,  # a name written capitalized ("Src") is the same name
            "IPV6": True,  # a code holding a digit is no word in capitals: any case
        }
        assert postgres.term_statistics(terms, scope) == stats
    finally:
        sqlite.close()
        postgres.close()


def test_diacritics_and_case_fold_as_fts5_folds_them(postgres_url: str) -> None:
    store = PostgresStore.connect(postgres_url)
    try:
        store.ensure_workspace("w")
        text = "Crème BRÛLÉE, à la Straße"
        chunk = NewChunk(0, text, None, 0, len(text), None, "h", token_count=5)
        store.insert_document(
            NewDocument("d", "w", "t", None, None, "text/plain", "c", None, {}), [chunk]
        )
        for query in ("creme brulee", "CRÈME", "Straße", "BRULÉE"):
            match = compile_match(query)
            assert match is not None
            assert [c for c, _ in store.search_lexical_scores(Scope.workspace("w"), match, 5)]
    finally:
        store.close()


def test_pgvector_answers_as_the_in_memory_index_does(postgres_url: str) -> None:
    store = PostgresStore.connect(postgres_url)
    try:
        _fill(store, vectors=True)
        native = store.native_vectors("hash-64")
        memory = VectorIndex(store, "hash-64")
        assert len(native) == len(TEXTS) == memory.load()
        query = HashEmbedder().embed_query("reset the sensor pin")
        for scope in (Scope.global_(), Scope.workspace("lumen")):  # HNSW, then exact
            got, expected = native.search(scope, query, 3), memory.search(scope, query, 3)
            assert [c for c, _ in got] == [c for c, _ in expected]
            assert np.allclose([s for _, s in got], [s for _, s in expected], atol=1e-5)
        assert native.stats["hnsw"] >= 1 and native.stats["exact"] >= 1
        ids = [c for c, _ in expected]
        cosines = native.cosines(query, ids)
        assert cosines == pytest.approx(memory.cosines(query, ids), abs=1e-5)
        with pytest.raises(ValueError, match="dims"):
            native.search(Scope.global_(), np.zeros(3, dtype=np.float32), 3)
    finally:
        store.close()


def test_tether_runs_on_postgresql_and_a_second_process_reads_it(postgres_url: str) -> None:
    with Tether(db=postgres_url, embedder=HashEmbedder()) as t:
        t.add(text="Reset the sensor by holding the pin.", title="Guide", workspace_id="lumen")
        t.add(text="The battery is covered for two years.", title="Warranty", workspace_id="other")
        t.add(text="Sensor manuals live in the global library.", title="Library")
        hits = t.search("reset the sensor", scope="workspace", workspace_id="lumen", k=5)
        assert {h.title for h in hits} == {"Guide"}
        result = t.retrieve("how do I reset the sensor?", scope="workspace", workspace_id="lumen")
        assert result.grounded and result.citations
        outside = t.retrieve("battery warranty years", scope="workspace", workspace_id="lumen")
        assert not outside.grounded
        assert [e.outcome for e in t.store.retrieval_log(limit=5)][:2] == [
            "ungrounded",
            "grounded",
        ]
    script = (
        "import json, sys\n"
        "from tether import Tether\n"
        "from tether.testing import HashEmbedder\n"
        "with Tether(db=sys.argv[1], embedder=HashEmbedder()) as t:\n"
        "    hits = t.search('battery', scope='workspace', workspace_id='other')\n"
        "    print(json.dumps([h.title for h in hits]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, postgres_url], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == ["Warranty"]


def test_each_add_s_helper_threads_give_their_connections_back(postgres_url: str) -> None:
    """A helper thread's connection is a server process: it ends with its thread, so an
    app adding a note at a time stays far from ``max_connections`` (it held one more
    per call)."""

    def backends() -> int:
        with psycopg.connect(postgres_url, autocommit=True) as probe:
            row = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            ).fetchone()
        return int(row[0])

    with Tether(db=postgres_url, embedder=HashEmbedder()) as t:
        for i in range(30):
            t.add(text=f"note {i} on the pump", title=f"n{i}")
        assert len(t.store.list_documents()) == 30
        assert backends() <= 3
    assert backends() == 0


def test_the_cli_takes_a_postgresql_url(postgres_url: str, tmp_path: Path) -> None:
    doc = tmp_path / "guide.txt"
    doc.write_text("To reset the sensor, hold the pin for five seconds.")
    env_cli = [sys.executable, "-m", "tether.cli"]
    subprocess.run(
        [*env_cli, "add", "--db", postgres_url, "--workspace", "lumen", str(doc)],
        check=True,
        capture_output=True,
        text=True,
        env=_lexical_env(),
    )
    out = subprocess.run(
        [*env_cli, "search", "--db", postgres_url, "reset the sensor", "--scope", "workspace",
         "--workspace", "lumen", "--json"],
        check=True, capture_output=True, text=True, env=_lexical_env(),
    )  # fmt: skip
    hits = json.loads(out.stdout)
    assert hits and "reset the sensor" in json.dumps(hits)
    compact = subprocess.run(
        [*env_cli, "compact", "--db", postgres_url],
        check=True, capture_output=True, text=True, env=_lexical_env(),
    )  # fmt: skip
    assert "Nothing to compact" in compact.stdout  # PostgreSQL's postings are rows


def _lexical_env() -> dict[str, str]:
    import os

    return {**os.environ, "TETHER_RAG__EMBEDDINGS__ENABLED": "false"}


def test_a_newer_schema_is_refused_and_migration_runs_once(postgres_server: Any) -> None:
    url = postgres_server.new_database("fresh", empty=True)
    # Several processes' first connections at once: one migrates, the others find it done.
    opened: list[Any] = []
    threads = [
        threading.Thread(target=lambda: opened.append(PostgresStore.connect(url))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(opened) == 4
    assert {s.db.schema_version() for s in opened} == {LATEST_VERSION}
    for store in opened:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO tether_schema VALUES (99, 'from the future', 'now')")
    with pytest.raises(SchemaVersionError):
        PostgresStore.connect(url)
    postgres_server.drop_database(url)


def test_a_store_of_version_3_indexes_its_chunks_under_their_titles(postgres_url: str) -> None:
    """Migration 4 re-indexes the chunks of a store made before with their document's
    title, postings and counts included, as a new store indexes them."""
    store = PostgresStore.connect(postgres_url)
    store.insert_document(
        NewDocument("d", GLOBAL_WORKSPACE, "Lighthouse", None, None, "text/plain", "c", None, {}),
        [NewChunk(0, "The keeper climbs the stairs.", None, 0, 29, None, "h")],
    )
    fresh = store.term_statistics(["lighthouse", "stairs"], Scope.global_())
    store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # the chunk as version 3 wrote it
        conn.execute(
            "UPDATE rag_chunks SET terms = 5,"
            " tsv = to_tsvector('tether', 'the keeper climbs the stairs')"
        )
        conn.execute("DROP TRIGGER rag_chunks_update_rows ON rag_chunks")
        conn.execute("DROP FUNCTION tether_chunks_reindexed")
        conn.execute("DELETE FROM tether_schema WHERE version = 4")
    old = PostgresStore.connect(postgres_url)
    try:
        assert old.db.schema_version() == LATEST_VERSION
        hits = old.search_lexical(Scope.global_(), compile_match("lighthouse") or "", 10)
        assert [h.document_id for h in hits] == ["d"]
        assert old.term_statistics(["lighthouse", "stairs"], Scope.global_()) == fresh
    finally:
        old.close()


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    url = "postgresql://tether:s3cret@127.0.0.1:1/nothing?connect_timeout=2"
    with pytest.raises(StoreError) as caught:
        Tether(db=url)
    assert "s3cret" not in str(caught.value)
    assert "***" in str(caught.value)


def test_tether_serve_on_postgresql_keeps_keys_to_their_workspaces(
    postgres_url: str, serve_app: Any, tmp_path: Path
) -> None:
    import httpx

    from helpers import make_pdf, make_settings, service_keys
    from tether.server import create_app

    with Tether(db=postgres_url, settings=make_settings()) as t:
        t.add(text="The rival pump runs at 12 bar.", title="Rival pump", workspace_id="rival")
        keys = service_keys(t)
        with serve_app(create_app(t, warm=False, mcp=False)) as url:

            def call(method: str, path: str, key: str, **options: Any) -> httpx.Response:
                headers = {"Authorization": f"Bearer {keys[key]}"}
                return httpx.request(method, url + path, headers=headers, timeout=60, **options)

            pages = ["The drain valve is on the left.", "Replace the gasket every spring."]
            pdf = make_pdf(tmp_path / "manual.pdf", pages)
            files = [("files", ("manual.pdf", pdf.read_bytes(), "application/pdf"))]
            response = call("POST", "/v1/documents", "acme", files=files,
                            data={"workspace_id": "acme", "wait": "true"})  # fmt: skip
            assert response.status_code in (200, 201), response.text
            search = {"query": "gasket spring", "scope": "workspace", "workspace_id": "acme"}
            hits = call("POST", "/v1/search", "acme", json=search).json()["hits"]
            assert hits and hits[0]["page"] == 2
            denied = call("POST", "/v1/search", "rival", json=search)
            assert denied.status_code == 404  # another workspace reads as one that is not there
            rival = {"query": "pump bar", "scope": "global"}
            seen = call("POST", "/v1/search", "acme", json=rival).json()["hits"]
            assert all(h["workspace_id"] == "GLOBAL" for h in seen)
