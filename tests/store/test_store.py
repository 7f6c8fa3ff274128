"""The SQLite store: migrations, pragmas, transactions, cascades, atomic replacement."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from helpers import make_settings
from tether import (
    GLOBAL_WORKSPACE,
    DocumentNotFound,
    SchemaVersionError,
    ScopeError,
    SessionNotFound,
    StoreError,
    Tether,
)
from tether.models import Scope
from tether.store import (
    LATEST_VERSION,
    MIGRATIONS,
    NewChunk,
    NewDocument,
    SQLiteDatabase,
    SQLiteStore,
    Store,
    migrate,
    scope_documents_sql,
    scope_sql,
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_new_file_is_migrated_and_seeded(tether: Tether) -> None:
    conn = tether.store.db.connection()
    assert tether.store.db.schema_version() == LATEST_VERSION == MIGRATIONS[-1].version
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {
        "workspaces", "sessions", "rag_documents", "rag_document_sessions", "rag_chunks",
        "rag_chunks_fts", "rag_embeddings", "rag_index_registry", "rag_retrieval_log",
    } <= tables  # fmt: skip
    assert [w.id for w in tether.workspaces()] == [GLOBAL_WORKSPACE]


def test_pragmas(tether: Tether) -> None:
    conn = tether.store.db.connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_write_transactions_take_the_write_lock_at_begin(db_path: Path, tether: Tether) -> None:
    other = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    with tether.store.db.write():
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        # Readers are not blocked by the writer (WAL).
        assert other.execute("SELECT count(*) FROM workspaces").fetchone()[0] == 1
    other.execute("BEGIN IMMEDIATE")
    other.execute("ROLLBACK")
    other.close()


def test_older_file_migrates_forward_keeping_its_data(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(conn, to=1) == 1
    conn.execute("INSERT INTO workspaces VALUES ('lab', 'Lab', '2024-01-01T00:00:00Z')")
    conn.execute(
        "INSERT INTO rag_documents (id, workspace_id, title, mime, content_hash, created_at)"
        " VALUES ('old-doc', 'lab', 'Old notes', 'text/plain', 'h', '2024-01-01T00:00:00Z')"
    )
    conn.execute(
        "INSERT INTO rag_chunks (document_id, ordinal, content, char_start, char_end,"
        " content_hash) VALUES ('old-doc', 0, 'the centrifuge protocol', 0, 23, 'c')"
    )
    conn.close()

    with Tether(db=db_path, settings=make_settings()) as t:
        assert t.store.db.schema_version() == LATEST_VERSION
        hits = t.search("centrifuge", scope="workspace", workspace_id="lab")
        assert [h.document_id for h in hits] == ["old-doc"]
        t.store.db.connection().execute("SELECT count(*) FROM rag_embeddings").fetchone()
        t.store.fts_integrity_check()


def test_file_from_a_newer_tether_is_refused_and_left_unchanged(db_path: Path) -> None:
    with Tether(db=db_path, settings=make_settings()) as t:
        t.add(text="keep me", title="Precious")
        t.store.db.connection().execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    before = sha256(db_path)
    with pytest.raises(SchemaVersionError, match="newer tether") as info:
        Tether(db=db_path, settings=make_settings())
    assert info.value.found == LATEST_VERSION + 1
    assert sha256(db_path) == before
    assert not Path(f"{db_path}-wal").exists() or Path(f"{db_path}-wal").stat().st_size == 0


def test_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a SQLite database"):
        Tether(db=junk, settings=make_settings())
    assert junk.read_bytes() == b"this is not sqlite" * 100


def test_missing_folder_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        Tether(db=tmp_path / "nope" / "t.db", settings=make_settings())


def test_caller_owned_connection_and_memory(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "owned.db")
    with Tether(db=conn, settings=make_settings()) as t:
        t.add(text="owned connection works", title="Owned")
        assert t.search("owned", scope="global")
    with Tether(db=":memory:", settings=make_settings()) as t:
        t.add(text="memory works", title="Mem")
        assert t.search("memory", scope="global")
        assert t.retrieve("memory works", scope="global").grounded


def test_a_single_thread_connection_gets_a_clear_error_for_threaded_work(
    tmp_path: Path,
) -> None:
    """retrieve and background jobs use threads: a check_same_thread connection is told
    what to do; one opened with check_same_thread=False works."""
    from tether import ConfigurationError

    conn = sqlite3.connect(tmp_path / "owned.db")
    with Tether(db=conn, settings=make_settings()) as t:
        t.add(text="owned connection works", title="Owned")
        with pytest.raises(ConfigurationError, match="check_same_thread=False"):
            t.retrieve("owned connection", scope="global")
        with pytest.raises(ConfigurationError, match="check_same_thread=False"):
            t.submit([tmp_path / "x.md"])
    shared = sqlite3.connect(tmp_path / "shared.db", check_same_thread=False)
    with Tether(db=shared, settings=make_settings()) as t:
        t.add(text="shared connection works", title="Shared")
        assert t.retrieve("shared connection", scope="global").grounded


def _doc_with_everything(t: Tether) -> str:
    t.create_session("s1", workspace_id="ws")
    t.create_session("s2", workspace_id="ws")
    (result,) = t.add(
        text="\n\n".join(f"Paragraph {i} about the turbine." * 10 for i in range(20)),
        title="Turbines",
        session_id="s1",
    )
    doc = result.document_id
    assert doc is not None
    t.attach(doc, "s2")
    conn = t.store.db.connection()
    chunk_ids = [c.id for c in t.chunks(doc)]
    with t.store.db.write():
        conn.executemany(
            "INSERT INTO rag_embeddings (chunk_id, model, dims, vector) VALUES (?, 'm', 2, ?)",
            [(cid, b"\x00" * 8) for cid in chunk_ids],
        )
    return doc


def test_delete_document_cascades(tether: Tether) -> None:
    doc = _doc_with_everything(tether)
    keep = tether.add(text="an unrelated turbine note", title="Keep", workspace_id="ws")[0]
    counts = tether.store.counts()
    assert counts["rag_chunks"] > 2 and counts["rag_embeddings"] > 1
    assert counts["rag_document_sessions"] == 2

    tether.delete_document(doc)

    after = tether.store.counts()
    assert after["rag_documents"] == 1
    assert after["rag_chunks"] == 1
    assert after["rag_embeddings"] == 0
    assert after["rag_document_sessions"] == 0
    tether.store.fts_integrity_check()
    hits = tether.search("turbine", scope="workspace", workspace_id="ws")
    assert [h.document_id for h in hits] == [keep.document_id]
    with pytest.raises(DocumentNotFound):
        tether.delete_document(doc)


def test_fts_integrity_check_detects_drift(tether: Tether) -> None:
    """The check is real: an FTS row missing its chunk makes it fail."""
    tether.add(text="a chunk about gearboxes", title="Gear")
    tether.store.fts_integrity_check()
    conn = tether.store.db.connection()
    conn.execute("DROP TRIGGER rag_chunks_fts_delete")
    conn.execute("DELETE FROM rag_chunks")
    with pytest.raises(sqlite3.DatabaseError):
        tether.store.fts_integrity_check()


def test_attach_and_detach(tether: Tether) -> None:
    tether.create_session("chat", workspace_id="ws")
    (r,) = tether.add(text="quarterly revenue grew", title="Report", workspace_id="ws")
    assert r.document_id is not None
    assert tether.search("revenue", scope="session", session_id="chat") == []
    assert tether.attach(r.document_id, "chat") is True
    assert tether.attach(r.document_id, "chat") is False
    assert len(tether.search("revenue", scope="session", session_id="chat")) == 1
    assert tether.detach(r.document_id, "chat") is True
    assert tether.detach(r.document_id, "chat") is False
    assert tether.search("revenue", scope="session", session_id="chat") == []
    assert tether.get_document(r.document_id).title == "Report"
    with pytest.raises(SessionNotFound):
        tether.attach(r.document_id, "no-such-session")
    with pytest.raises(DocumentNotFound):
        tether.attach("no-such-doc", "chat")


def test_sessions_belong_to_one_workspace(tether: Tether) -> None:
    tether.create_session("chat", workspace_id="ws")
    with pytest.raises(ScopeError, match="belongs to workspace 'ws'"):
        tether.create_session("chat", workspace_id="other")
    with pytest.raises(ScopeError):
        tether.add(text="x y z", title="t", session_id="chat", workspace_id="other")
    (r,) = tether.add(text="session default workspace", title="t", session_id="chat")
    assert tether.get_document(r.document_id).workspace_id == "ws"
    closed = tether.close_session("chat")
    assert closed.closed_at is not None


def test_failed_write_rolls_back_and_keeps_the_old_version(tether: Tether) -> None:
    tether.add(text="original content about pumps", title="Pumps", document_id="p1")
    old_chunks = tether.chunks("p1")
    good = NewChunk(0, "new content", None, 0, 11, None, "h1")
    bad = NewChunk(1, "broken", None, 50, 10, None, "h2")  # violates char_end >= char_start
    record = NewDocument("p1", GLOBAL_WORKSPACE, "Pumps v2", None, None, "text/plain",
                         "new-hash", None, {})  # fmt: skip
    with pytest.raises(sqlite3.IntegrityError):
        tether.store.replace_document(record, [good, bad])
    assert tether.chunks("p1") == old_chunks
    assert tether.get_document("p1").title == "Pumps"
    assert [h.document_id for h in tether.search("pumps", scope="global")] == ["p1"]
    tether.store.fts_integrity_check()


def _version_text(version: int, paragraphs: int) -> str:
    return "\n\n".join(
        f"Release marker v{version}. Paragraph {i} describes the flux capacitor. " * 6
        for i in range(paragraphs)
    )


def test_replacement_is_atomic_for_a_concurrent_reader(db_path: Path) -> None:
    """A reader thread polling while a writer swaps versions never sees a mix."""
    settings = make_settings(chunk_size=300, chunk_overlap=0)
    texts = {1: _version_text(1, 12), 2: _version_text(2, 30)}
    writer = Tether(db=db_path, settings=settings)
    writer.add(text=texts[1], title="Flux", document_id="flux")
    expected = {1: len(writer.chunks("flux"))}
    writer.add(text=texts[2], title="Flux", document_id="flux")
    expected[2] = len(writer.chunks("flux"))
    assert expected[1] != expected[2]

    stop = threading.Event()
    seen: list[tuple[int, ...]] = []
    problems: list[str] = []

    def read() -> None:
        with Tether(db=db_path, settings=settings) as reader:
            while not stop.is_set():
                hits = reader.search("flux capacitor", scope="global", k=1000)
                versions = {int(h.text.split("marker v")[1][0]) for h in hits}
                if len(versions) != 1:
                    problems.append(f"mixed versions {versions}")
                    continue
                (version,) = versions
                if len(hits) != expected[version]:
                    problems.append(f"v{version} with {len(hits)} chunks")
                seen.append((version, len(hits)))
                ready.set()

    ready = threading.Event()
    thread = threading.Thread(target=read)
    thread.start()
    try:
        # The reader opens its own store first; on a loaded machine that can outlast a
        # fixed number of writes, so write until it has read both versions (or 30 s).
        assert ready.wait(30) or problems, "the reader never read"
        i, deadline = 0, time.monotonic() + 30
        while i < 40 or ({v for v, _ in seen} != {1, 2} and time.monotonic() < deadline):
            result = writer.add(text=texts[1 + i % 2], title="Flux", document_id="flux")
            assert result[0].status == "replaced"
            i += 1
    finally:
        stop.set()
        thread.join(timeout=30)
        writer.close()
    assert not problems, problems[:5]
    assert {v for v, _ in seen} == {1, 2}, "the reader should have seen both versions"


def test_reindexing_unchanged_content_is_idempotent(tether: Tether, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nSome text about lasers.\n\n## Safety\n\nWear goggles.\n")
    (first,) = tether.add(note)
    before = [(c.id, c.content) for c in tether.chunks(first.document_id)]
    state = tether.store.counts()
    for _ in range(3):
        (again,) = tether.add(note)
        assert again.status == "skipped"
        assert again.document_id == first.document_id
    assert [(c.id, c.content) for c in tether.chunks(first.document_id)] == before
    assert tether.store.counts() == state


def test_database_class_opens_one_connection_per_thread(db_path: Path) -> None:
    db = SQLiteDatabase(db_path)
    seen: list[sqlite3.Connection] = []  # held, so no two share an id()

    def grab() -> None:
        seen.append(db.connection())
        assert db.connection() is seen[-1]

    threads = [threading.Thread(target=grab) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    grab()
    assert len({id(conn) for conn in seen}) == 4
    db.close()


def open_files_of(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc/self/fd to count open files with")
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):  # closed while listed
            count += Path(fd.readlink()) == path.resolve()
    return count


def test_a_thread_s_connection_closes_when_the_thread_ends(db_path: Path) -> None:
    """Each add() loads files on helper threads, and each thread opens its own connection:
    a long-running app adding a note at a time must not gather open files (it had one
    more per call)."""
    with Tether(db=db_path, settings=make_settings(embeddings={"enabled": False})) as t:
        for i in range(40):
            t.add(text=f"note {i} on the pump", title=f"n{i}")
        # A handful (SQLite itself defers closing a file another connection holds a lock
        # on), not one per call.
        assert open_files_of(db_path) <= 4
        assert len(t.store.list_documents()) == 40
    assert open_files_of(db_path) == 0


@pytest.mark.parametrize("start", range(1, LATEST_VERSION))
def test_every_older_version_migrates_forward(db_path: Path, start: int) -> None:
    """A file left at any earlier version (not only the first) reaches the latest one with
    its documents searchable and its FTS index consistent."""
    with Tether(db=db_path, settings=make_settings()) as t:
        t.add(text="the centrifuge protocol for plasma", title="Protocol", workspace_id="lab")
    conn = sqlite3.connect(db_path, isolation_level=None)
    # Rebuild the file at ``start``: a fresh schema up to it, then the rows of the old one.
    rows = conn.execute("SELECT id, workspace_id, title, mime, content_hash, created_at"
                        " FROM rag_documents").fetchall()  # fmt: skip
    chunks = conn.execute("SELECT document_id, ordinal, content, char_start, char_end,"
                          " content_hash FROM rag_chunks").fetchall()  # fmt: skip
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(conn, to=start) == start
    conn.execute("INSERT INTO workspaces VALUES ('lab', 'Lab', '2024-01-01T00:00:00Z')")
    conn.executemany("INSERT INTO rag_documents (id, workspace_id, title, mime, content_hash,"
                     " created_at) VALUES (?, ?, ?, ?, ?, ?)", rows)  # fmt: skip
    conn.executemany("INSERT INTO rag_chunks (document_id, ordinal, content, char_start,"
                     " char_end, content_hash) VALUES (?, ?, ?, ?, ?, ?)", chunks)  # fmt: skip
    assert conn.execute("PRAGMA user_version").fetchone()[0] == start
    conn.close()

    with Tether(db=db_path, settings=make_settings()) as t:
        assert t.store.db.schema_version() == LATEST_VERSION
        assert [h.title for h in t.search("centrifuge", scope="workspace", workspace_id="lab")] == [
            "Protocol"
        ]
        t.store.fts_integrity_check()
        (again,) = t.add(text="a second protocol", title="Second", workspace_id="lab")
        assert again.status == "indexed"


def test_a_failed_migration_leaves_the_file_at_its_version(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.store.sqlite import database, migrations

    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, to=2)
    conn.close()
    broken = (*MIGRATIONS[:3], migrations.Migration(4, "broken", "CREATE TABLE t(x);\nNOPE;"))
    monkeypatch.setattr(database, "MIGRATIONS", broken)
    with pytest.raises(StoreError, match=r"migration 4 \(broken\) failed.*left at version 2"):
        SQLiteDatabase(db_path)
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "t" not in tables and "rag_state" not in tables  # migration 3 rolled back too
    conn.close()


def _open_and_close(path: str, barrier: object, out: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    try:
        SQLiteDatabase(path).close()
        out.put("ok")  # type: ignore[attr-defined]
    except Exception as exc:  # reported to the test, which shows it
        out.put(f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


def test_processes_opening_a_new_file_together_migrate_it_once(tmp_path: Path) -> None:
    """Several processes (an app and its CLI, say) open a file that does not exist yet at
    the same moment: one migrates it, the others wait for the write lock and find it done."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    failures = []
    for round_ in range(4):
        path = str(tmp_path / f"race-{round_}.db")
        barrier, out = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_and_close, args=(path, barrier, out)) for _ in range(4)]
        for p in procs:
            p.start()
        outcomes = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        failures += [o for o in outcomes if o != "ok"]
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        assert conn.execute("SELECT id FROM workspaces").fetchall() == [(GLOBAL_WORKSPACE,)]
        conn.close()
    assert failures == []


def test_a_newer_file_with_a_pending_wal_is_left_unchanged(db_path: Path) -> None:
    """A newer tether that stopped without checkpointing leaves committed pages in the WAL.
    Refusing the file must not fold them into the main file (closing the last read-write
    connection would): the main file and the WAL stay byte for byte as they were."""
    import subprocess
    import sys

    SQLiteDatabase(db_path).close()
    script = (
        "import os, sqlite3\n"
        f"c = sqlite3.connect({str(db_path)!r}, isolation_level=None)\n"
        "c.execute('PRAGMA wal_autocheckpoint = 0')\n"
        f"c.execute('PRAGMA user_version = {LATEST_VERSION + 1}')\n"
        "c.execute('CREATE TABLE a_future_feature (x)')\n"
        "os._exit(0)\n"  # no close: the WAL keeps the commits
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    wal = Path(f"{db_path}-wal")
    assert wal.stat().st_size > 0
    before = (sha256(db_path), sha256(wal))
    with pytest.raises(SchemaVersionError):
        SQLiteDatabase(db_path)
    with pytest.raises(SchemaVersionError):
        Tether(db=db_path, settings=make_settings())
    assert (sha256(db_path), sha256(wal)) == before


def test_a_refused_caller_connection_is_not_reconfigured(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    assert conn.isolation_level == ""
    with pytest.raises(SchemaVersionError):
        SQLiteDatabase(conn)
    assert conn.isolation_level == ""
    conn.close()


def test_a_write_inside_a_read_transaction_is_refused(tether: Tether) -> None:
    """A deferred read transaction cannot safely become a write one (it would not hold the
    write lock from its start): it is a programming error, said at once."""
    with (
        tether.store.db.read(),
        pytest.raises(StoreError, match="inside a read transaction"),
        tether.store.db.write(),
    ):
        pass
    with tether.store.db.write(), tether.store.db.read() as conn:  # a read inside a write is fine
        conn.execute("SELECT 1")
    tether.add(text="still writable", title="After")


_WRITES = {"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER"}


def test_every_write_of_the_library_runs_in_begin_immediate(db_path: Path, tmp_path: Path) -> None:
    """Trace every statement of every connection through the write paths of the facade:
    no INSERT, UPDATE or DELETE runs outside a BEGIN IMMEDIATE transaction."""
    statements: list[tuple[int, str]] = []
    real_connect = sqlite3.connect

    def traced_connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        key = id(conn)
        conn.set_trace_callback(lambda sql: statements.append((key, sql)))
        return conn

    note = tmp_path / "note.md"
    note.write_text("# Pumps\n\nThe pump primes in ten seconds.\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sqlite3, "connect", traced_connect)
        with Tether(db=db_path, settings=make_settings()) as t:
            t.create_session("chat", workspace_id="ws")
            (r,) = t.add(note, session_id="chat")
            t.add(note, session_id="chat")  # skipped
            note.write_text("# Pumps\n\nThe pump primes in five seconds.\n")
            t.add(note, session_id="chat")  # replaced
            t.add(text="a global note on pumps", title="Global")
            t.create_session("other", workspace_id="ws")
            t.attach(r.document_id, "other")
            t.detach(r.document_id, "other")
            t.set_tags(r.document_id, {"domain": "global", "version": "2"})
            t.set_status(r.document_id, "draft")
            t.approve(r.document_id)
            t.retrieve("how fast does the pump prime?", scope="session", session_id="chat")
            t.close_session("chat")
            t.cleanup(retention="0d")
            t.delete_document(t.add(text="doomed", title="Doomed")[0].document_id)
    assert len(statements) > 50
    state: dict[int, str | None] = {}
    outside = []
    for conn_id, sql in statements:
        head = sql.lstrip().split(None, 2)
        verb = " ".join(head[:2]).upper().rstrip(";")
        if verb.startswith("BEGIN"):
            state[conn_id] = verb
        elif verb.startswith(("COMMIT", "ROLLBACK")):
            state[conn_id] = None
        elif head[0].upper() in _WRITES and state.get(conn_id) != "BEGIN IMMEDIATE":
            outside.append(sql[:80])
    assert outside == []


def test_a_nested_write_is_a_savepoint(tether: Tether) -> None:
    """write() inside write(): the inner block's failure undoes the inner block only; the
    outer transaction still commits what it did before and after."""
    with tether.store.db.write() as conn:
        conn.execute("INSERT INTO workspaces VALUES ('before', 'B', '2024-01-01T00:00:00Z')")
        with pytest.raises(ScopeError), tether.store.db.write():
            conn.execute("INSERT INTO workspaces VALUES ('inner', 'I', '2024-01-01T00:00:00Z')")
            raise ScopeError("inner part fails")
        conn.execute("INSERT INTO workspaces VALUES ('after', 'A', '2024-01-01T00:00:00Z')")
    assert {w.id for w in tether.workspaces()} == {GLOBAL_WORKSPACE, "before", "after"}


# -- the package and the SQLite backend on its own (no facade) -----------------------------


def test_the_store_package_exports_exactly_its_public_surface() -> None:
    import inspect

    import tether.store as package

    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(package.__all__) == public
    # isort order, as ruff keeps it: CONSTANTS, then Classes, then functions.
    assert package.__all__ == sorted(
        package.__all__, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    assert "Repository" not in public


def test_sqlite_store_on_its_own_file(db_path: Path) -> None:
    store = SQLiteStore(SQLiteDatabase(db_path))
    assert isinstance(store, Store)
    assert store.location == str(db_path)
    assert repr(store) == f"SQLiteStore({str(db_path)!r})"
    assert store.cross_thread is True
    chunk = NewChunk(0, "the valve opens", None, 0, 15, None, "h")
    with store.write() as nothing:
        assert nothing is None
        store.insert_document(
            NewDocument("v", GLOBAL_WORKSPACE, "Valve", None, None, "text/plain", "c", None, {}),
            [chunk],
        )
    store.fts_integrity_check()
    store.delete_document("v")
    store.fts_integrity_check()
    store.close()


@pytest.mark.parametrize(
    "scope", [Scope.session("s"), Scope.workspace("w"), Scope.global_()], ids=str
)
def test_scope_documents_sql_is_built_for_documents_not_patched(scope: Scope) -> None:
    """The document set and the chunk search share one predicate, each written for the
    table it reads: no chunk alias in the document query."""
    sql, params = scope_documents_sql(scope)
    where, chunk_params = scope_sql(scope)
    assert "c." not in sql
    assert params == chunk_params
    assert where == scope_sql(scope, document_column="c.document_id")[0]
    assert "d.status = 'active'" in where and "d.status = 'active'" in sql
    with pytest.raises(ValueError, match="unknown document column"):
        scope_sql(scope, document_column="x.id")  # type: ignore[arg-type]


def test_closing_never_pulls_a_connection_from_under_another_thread(tmp_path: Path) -> None:
    """A thread inside a transaction when the store is closed (an abandoned file loader,
    say) finishes it on a connection that is still open; the connection is closed when
    it is done, and that thread's next transaction is a StoreError, never a crash."""
    db = SQLiteDatabase(tmp_path / "t.db")
    inside, closed = threading.Event(), threading.Event()
    seen: list[object] = []

    def reader() -> None:
        with db.read() as conn:
            inside.set()
            closed.wait(10)
            seen.append(conn.execute("SELECT count(*) FROM rag_documents").fetchone()[0])
        try:
            with db.read():
                seen.append("read after close")
        except StoreError as exc:
            seen.append(type(exc))

    worker = threading.Thread(target=reader)
    worker.start()
    assert inside.wait(10)
    db.close()
    closed.set()
    worker.join(10)
    assert seen == [0, StoreError]
    with pytest.raises(StoreError, match="closed"):
        db.connection()


def test_migration_8_gives_old_audit_rows_their_scopes_workspace(db_path: Path) -> None:
    """Rows logged before the column existed get it from their scope: a workspace or
    global scope names it, a session scope through the session's workspace."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(conn, to=7) == 7
    conn.execute("INSERT INTO workspaces VALUES ('lab', 'Lab', '2024-01-01T00:00:00Z')")
    conn.execute("INSERT INTO sessions (id, workspace_id, created_at) VALUES ('s', 'lab', 'x')")
    for n, scope in enumerate(
        ['{"id": "s", "kind": "session"}', '{"id": "lab", "kind": "workspace"}',
         '{"id": "GLOBAL", "kind": "global"}', '{"id": "gone", "kind": "session"}']
    ):  # fmt: skip
        conn.execute(
            "INSERT INTO rag_retrieval_log (retrieval_id, created_at, query, scope, filters,"
            " chunk_ids, document_ids, outcome) VALUES (?, 'x', 'q', ?, '{}', '[]', '[]', 'ok')",
            (f"r{n}", scope),
        )
    conn.close()
    with Tether(db=db_path, settings=make_settings()) as t:
        assert [e.retrieval_id for e in t.retrieval_log(workspace_ids=["lab"])] == ["r1", "r0"]
        assert [e.retrieval_id for e in t.retrieval_log(workspace_ids=["GLOBAL"])] == ["r2"]
        # A row whose session is gone belongs to no workspace: only an admin read sees it.
        assert len(t.retrieval_log()) == 4


def test_insert_rows_stores_what_executemany_would_for_every_kind_of_value(
    tmp_path: Path,
) -> None:
    """Rows of values JSON carries exactly go in one statement; any other value (bytes,
    a NUL, an integer past 64 bits, a float that is not finite) sends the rows one
    statement each, so the table holds the same either way."""
    import math
    import sqlite3

    from tether.store._common import JSON_ROWS, insert_rows

    values = [None, 0, -(2**63), 2**63 - 1, 1.5, 1e300, "0012", "null", 'a "b" \\ c', "é 😀"]
    odd = [b"\x00\xff", "a\x00b", 2**64, math.inf, True]
    for n, extra in enumerate([None, *odd]):
        rows = [(i, v) for i, v in enumerate(values * JSON_ROWS)] + [(-1, extra)]
        conn = sqlite3.connect(tmp_path / f"rows-{n}.db")
        conn.execute("CREATE TABLE t (k INTEGER, v)")
        if extra == 2**64:
            with pytest.raises(OverflowError):
                conn.executemany("INSERT INTO t (k, v) VALUES (?, ?)", rows)
            with pytest.raises(OverflowError):
                insert_rows(conn, "INSERT INTO t (k, v) VALUES (?, ?)", rows)
            conn.close()
            continue
        insert_rows(conn, "INSERT INTO t (k, v) VALUES (?, ?)", rows)
        got = conn.execute("SELECT k, v, typeof(v) FROM t ORDER BY rowid").fetchall()
        conn.execute("DELETE FROM t")
        conn.executemany("INSERT INTO t (k, v) VALUES (?, ?)", rows)
        want = conn.execute("SELECT k, v, typeof(v) FROM t ORDER BY rowid").fetchall()
        conn.close()
        assert got == want
