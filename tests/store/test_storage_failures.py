"""Storage that fails under the store: a full disk, a read-only store, a damaged file.

Each is the real thing: a 2 MiB tmpfs filled to its last page, a read-only bind mount, an
immutable file (``chattr +i``), files damaged byte by byte, a PostgreSQL database whose
transactions are read-only. Mounting needs root (CI runs the suite as root); where it
cannot be done the test is skipped, saying why. Every failure is a typed StoreError, the
CLI says it in one line, and what was stored before stays readable.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import make_settings
from tether import (
    GLOBAL_WORKSPACE,
    IndexResult,
    StorageFull,
    StorageReadOnly,
    StoreCorrupt,
    Tether,
    TextSource,
)
from tether.server import create_app
from tether.store import LATEST_VERSION, migrate

KESTREL = "The kestrel hovers over the meadow before it dives. " * 20
FALCON = "The falcon stoops from a great height onto its prey. " * 20
TETHER = Path(sys.executable).with_name("tether")


# -- helpers ----------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``tether`` command in a process of its own (its stderr as a user sees it)."""
    return subprocess.run(
        [str(TETHER), *args], capture_output=True, text=True, timeout=120, check=False
    )


def one_error_line(*args: str) -> str:
    """The command's stderr: exactly one ``error:`` line (no traceback), exit status 1."""
    result = run_cli(*args)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    return lines[0]


def sudo_only(what: str) -> None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip(f"{what} needs root (CI runs the tests as root)")


def mount_or_skip(*args: str) -> None:
    sudo_only("mounting")
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip()})")


def unmount(folder: Path) -> None:
    # Lazily, should a process still hold a file there: the folder goes at once either way.
    if subprocess.run(["umount", str(folder)], capture_output=True, check=False).returncode:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def fill(folder: Path) -> None:
    """Fill the file system of ``folder`` to its last page."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


# -- a full disk --------------------------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "small-disk"
    folder.mkdir()
    mount_or_skip("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder))
    yield folder
    unmount(folder)


@pytest.fixture
def full(tmpfs: Path) -> Iterator[tuple[Tether, str]]:
    """A store on a disk that filled up after a document was stored; and that document."""
    db = tmpfs / "tether.db"
    with Tether(db=db, settings=make_settings()) as tether:
        (kept,) = tether.add(text=KESTREL, title="Kestrel")
    # Reopened, its write-ahead log starts empty: every write needs a page the disk lacks.
    tether = Tether(db=db, settings=make_settings())
    fill(tmpfs)
    assert kept.document_id is not None
    yield tether, kept.document_id
    tether.close()


def assert_full(error: BaseException | None) -> None:
    assert isinstance(error, StorageFull), repr(error)
    assert "disk is full" in str(error)
    assert "nothing stored before was lost" in str(error)
    assert isinstance(error.__cause__, sqlite3.OperationalError)  # SQLite's, chained


def test_add_on_a_full_disk_collects_storage_full(full: tuple[Tether, str]) -> None:
    tether, _ = full
    (result,) = tether.add(text=FALCON, title="Falcon", on_error="collect")
    assert result.status == "failed"
    assert_full(result.error)


def test_add_on_a_full_disk_raises_storage_full(full: tuple[Tether, str]) -> None:
    tether, _ = full
    with pytest.raises(StorageFull) as info:
        tether.add(text=FALCON, title="Falcon")
    assert_full(info.value)


def test_a_group_that_cannot_be_stored_fails_whole(full: tuple[Tether, str]) -> None:
    """Documents written in one transaction: the disk fills under it, every one of them
    fails, and none is half there."""
    tether, kept = full
    texts = [TextSource(f"{FALCON} number {i}", f"Falcon {i}") for i in range(5)]
    results = tether.add(texts, on_error="collect")
    assert [r.status for r in results] == ["failed"] * 5
    for result in results:
        assert_full(result.error)
    assert [d.id for d in tether.documents()] == [kept]


def test_groups_written_in_the_writer_thread_fail_whole_on_a_full_disk(
    full: tuple[Tether, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk add of several groups (each stored by the writer thread while the next is
    prepared): each group fails whole with the disk's error, and the add ends cleanly."""
    import threading

    import tether.ingest.indexer as indexer_module

    monkeypatch.setattr(indexer_module, "LEXICAL_GROUP_CHUNKS", 2)
    tether, kept = full
    texts = [TextSource(f"{FALCON} number {i}", f"Falcon {i}") for i in range(12)]
    results = tether.add(texts, on_error="collect")
    assert [r.status for r in results] == ["failed"] * 12
    for result in results:
        assert_full(result.error)
    with pytest.raises(StorageFull):
        tether.add(texts)
    assert [d.id for d in tether.documents()] == [kept]
    assert not [t for t in threading.enumerate() if t.name.startswith("tether-write")]


WRITES: dict[str, Callable[[Tether, str], object]] = {
    "keys.create": lambda t, _: t.keys.create(global_write=True, name="ops"),
    "create_session": lambda t, _: t.create_session("chat", workspace_id=GLOBAL_WORKSPACE),
    "delete_document": lambda t, kept: t.delete_document(kept),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_writes_on_a_full_disk_raise_storage_full(
    full: tuple[Tether, str], write: Callable[[Tether, str], object]
) -> None:
    tether, kept = full
    with pytest.raises(StorageFull) as info:
        write(tether, kept)
    assert_full(info.value)


def test_what_was_stored_before_stays_readable_and_searchable(full: tuple[Tether, str]) -> None:
    tether, kept = full
    for write in WRITES.values():
        with pytest.raises(StorageFull):
            write(tether, kept)
    tether.add(text=FALCON, title="Falcon", on_error="collect")
    assert tether.get_document(kept).title == "Kestrel"
    assert "kestrel hovers" in tether.document_text(kept)
    hits = tether.search("kestrel meadow", scope="global")
    assert {h.document_id for h in hits} == {kept}


def test_an_api_keys_last_use_is_not_recorded_on_a_full_disk(tmpfs: Path) -> None:
    db = tmpfs / "tether.db"
    with Tether(db=db, settings=make_settings()) as tether:
        key, _ = tether.keys.create(global_write=True)
    with Tether(db=db, settings=make_settings()) as tether:
        fill(tmpfs)
        assert not tether.keys.mark_used(key)  # no error: recording a use is best effort
        assert tether.keys.list()[0].last_used_at is None


CLI_WRITES = {
    "add": lambda db, kept, note: ["add", str(note), "--db", db],
    "sessions create": lambda db, kept, note: ["sessions", "create", "chat", "-w", "w", "--db", db],
    "keys create": lambda db, kept, note: ["keys", "create", "--global-write", "--db", db],
    "docs rm": lambda db, kept, note: ["docs", "rm", kept, "--db", db],
}


@pytest.mark.parametrize("command", CLI_WRITES.values(), ids=CLI_WRITES.keys())
def test_the_cli_on_a_full_disk_prints_one_line(
    full: tuple[Tether, str], tmp_path: Path, command: Callable[[str, str, Path], list[str]]
) -> None:
    tether, kept = full
    note = tmp_path / "falcon.md"
    note.write_text(f"# Falcon\n\n{FALCON}\n")
    line = one_error_line(*command(tether.store.location, kept, note))
    assert "disk is full" in line and "free space" in line
    searched = run_cli("search", "kestrel", "--db", tether.store.location)
    assert searched.returncode == 0, searched.stderr
    assert "Kestrel" in searched.stdout


# -- a read-only store ----------------------------------------------------------------------------


def make_store(db: Path) -> str:
    """A store holding one document, cleanly closed: no -wal or -shm file is left."""
    with Tether(db=db, settings=make_settings()) as tether:
        (kept,) = tether.add(text=KESTREL, title="Kestrel")
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    assert kept.document_id is not None
    return kept.document_id


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder, and the same folder mounted read-only: (writable, read-only)."""
    writable, view = tmp_path / "rw", tmp_path / "ro"
    writable.mkdir()
    view.mkdir()
    mount_or_skip("--bind", str(writable), str(view))
    done = subprocess.run(
        ["mount", "-o", "remount,ro,bind", str(view)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        unmount(view)
        pytest.skip(f"cannot make a read-only bind mount here ({done.stderr.strip()})")
    yield writable, view
    unmount(view)


def assert_read_only(tether: Tether, kept: str) -> None:
    """Reads work; every write raises StorageReadOnly."""
    assert [d.id for d in tether.documents()] == [kept]
    assert {h.document_id for h in tether.search("kestrel", scope="global")} == {kept}
    for write in [
        lambda: tether.add(text=FALCON, title="Falcon"),
        *(lambda w=w: w(tether, kept) for w in WRITES.values()),
    ]:
        with pytest.raises(StorageReadOnly, match="read-only") as info:
            write()
        assert "nothing stored was lost" in str(info.value)


def test_a_store_on_a_read_only_mount_is_read(read_only_view: tuple[Path, Path]) -> None:
    writable, view = read_only_view
    kept = make_store(writable / "tether.db")
    before = sha256(writable / "tether.db")
    with Tether(db=view / "tether.db", settings=make_settings()) as tether:
        assert_read_only(tether, kept)
    assert sha256(writable / "tether.db") == before


def test_an_immutable_file_is_read(tmp_path: Path) -> None:
    """A file that cannot be written in a folder that can (chmod 444 would not stop root)."""
    sudo_only("chattr +i")
    db = tmp_path / "tether.db"
    kept = make_store(db)
    if shutil.which("chattr") is None:
        pytest.skip("no chattr here")
    done = subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot make the file immutable here ({done.stderr.strip()})")
    try:
        with Tether(db=db, settings=make_settings()) as tether:
            assert_read_only(tether, kept)
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


def test_a_read_only_store_of_an_older_schema_is_refused(
    read_only_view: tuple[Path, Path],
) -> None:
    writable, view = read_only_view
    conn = sqlite3.connect(writable / "tether.db")
    migrate(conn, to=LATEST_VERSION - 1)
    conn.close()
    before = sha256(writable / "tether.db")
    with pytest.raises(StorageReadOnly, match="cannot be upgraded") as info:
        Tether(db=view / "tether.db", settings=make_settings())
    assert "was not changed" in str(info.value)
    assert sha256(writable / "tether.db") == before


def test_the_cli_reads_a_read_only_store_and_refuses_to_write(
    read_only_view: tuple[Path, Path], tmp_path: Path
) -> None:
    writable, view = read_only_view
    kept = make_store(writable / "tether.db")
    db = str(view / "tether.db")
    searched = run_cli("search", "kestrel", "--db", db)
    assert searched.returncode == 0, searched.stderr
    assert kept in searched.stdout
    listed = run_cli("docs", "list", "--db", db)
    assert listed.returncode == 0, listed.stderr
    note = tmp_path / "falcon.md"
    note.write_text(f"# Falcon\n\n{FALCON}\n")
    assert "read-only" in one_error_line("add", str(note), "--db", db)
    assert "read-only" in one_error_line("docs", "rm", kept, "--db", db)


def test_a_read_only_postgres_database_is_read(postgres_url: str) -> None:
    import psycopg

    with Tether(db=postgres_url, settings=make_settings()) as tether:
        (kept,) = tether.add(text=KESTREL, title="Kestrel")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    with Tether(db=postgres_url, settings=make_settings()) as tether:
        assert kept.document_id is not None
        assert_read_only(tether, kept.document_id)
        with pytest.raises(StorageReadOnly) as info:
            tether.keys.create(global_write=True)
        assert isinstance(info.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)


# -- damaged files --------------------------------------------------------------------------------

PAGE = 4096


def _garbage(size: int) -> bytes:
    return random.Random(size).randbytes(size)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated to 50 bytes": lambda data: data[:50],
    "only the header": lambda data: data[:100],
    "truncated in the middle": lambda data: data[: len(data) // 2],
    "a broken first page": lambda data: data[:100] + _garbage(PAGE - 100) + data[PAGE:],
    "garbage after the header": lambda data: data[:100] + _garbage(len(data) - 100),
    "a zero-filled page 2": lambda data: data[:PAGE] + bytes(PAGE) + data[2 * PAGE :],
    "zeros after page 1": lambda data: data[:PAGE] + bytes(len(data) - PAGE),
    "garbage from the start": lambda data: _garbage(len(data)),
}


@pytest.fixture
def healthy_store(tmp_path: Path) -> bytes:
    """The bytes of a cleanly closed store of a few documents, several pages each."""
    db = tmp_path / "healthy.db"
    with Tether(db=db, settings=make_settings()) as tether:
        tether.add([TextSource(f"{KESTREL} {i}", f"Kestrel {i}") for i in range(20)])
    return db.read_bytes()


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_store_is_refused_unchanged(
    healthy_store: bytes, tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    db = tmp_path / "damaged.db"
    db.write_bytes(damage(healthy_store))
    before = sha256(db)
    with pytest.raises(StoreCorrupt) as info:
        Tether(db=db, settings=make_settings())
    assert str(db) in str(info.value)
    assert "was not changed" in str(info.value)
    assert "restore it from a backup" in str(info.value)
    assert sha256(db) == before
    line = one_error_line("docs", "list", "--db", str(db))
    assert "was not changed" in line
    assert sha256(db) == before


def test_a_damaged_page_met_by_a_read_is_store_corrupt(
    healthy_store: bytes, tmp_path: Path
) -> None:
    """A page that no open reads (a leaf of rag_chunks past the first): the read that
    meets it raises StoreCorrupt, and the reads before it work."""
    db = tmp_path / "damaged.db"
    db.write_bytes(healthy_store)
    conn = sqlite3.connect(db)
    try:
        leaves = conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'rag_chunks' AND pagetype = 'leaf'"
            " ORDER BY pageno"
        ).fetchall()
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        conn.close()
    last = leaves[-1][0]
    with db.open("r+b") as file:
        file.seek((last - 1) * PAGE)
        file.write(bytes(PAGE))
    with Tether(db=db, settings=make_settings()) as tether:
        documents = tether.documents()
        assert len(documents) == 20
        with pytest.raises(StoreCorrupt, match="damaged"):
            for document in documents:
                tether.chunks(document.id)


def test_collected_results_are_plain_index_results(full: tuple[Tether, str]) -> None:
    """A collected store failure is an IndexResult like any other failure: a caller
    that prints ``result.error`` prints the store's message."""
    tether, _ = full
    (result,) = tether.add(text=FALCON, title="Falcon", on_error="collect")
    assert isinstance(result, IndexResult)
    assert result.to_dict()["status"] == "failed"
    assert "disk is full" in str(result.to_dict()["error"])


# -- the service over failing storage (real HTTP on loopback) --------------------------------------


def _serve_checks(url: str, secret: str, kept: str) -> dict[str, httpx.Response]:
    """One of each kind of request: reads, a write, an upload, plain and guarded
    retrievals (each retrieval writes its audit row)."""
    key = {"Authorization": f"Bearer {secret}"}
    question = {"query": "kestrel meadow", "scope": "global"}
    return {
        "list": httpx.get(f"{url}/v1/documents", headers=key),
        "show": httpx.get(f"{url}/v1/documents/{kept}", headers=key),
        "search": httpx.post(f"{url}/v1/search", json=question, headers=key),
        "text": httpx.post(f"{url}/v1/documents/text", json={"text": FALCON}, headers=key),
        "upload": httpx.post(f"{url}/v1/documents", headers=key,
                             files={"files": ("falcon.md", f"# Falcon\n\n{FALCON}\n")}),
        "retrieve": httpx.post(f"{url}/v1/retrieve", json={**question, "debug": True},
                               headers=key),
        "guarded": httpx.post(f"{url}/v1/retrieve", json={**question, "guarded": True},
                              headers=key),
    }  # fmt: skip


def _assert_degraded_service(answers: dict[str, httpx.Response], kind: str, status: int) -> None:
    for read in ("list", "show", "search", "retrieve"):
        assert answers[read].status_code == 200, (read, answers[read].text)
    for write in ("text", "upload"):
        assert answers[write].status_code == status, (write, answers[write].text)
        assert answers[write].json()["error"]["type"] == kind
    degradations = answers["retrieve"].json()["debug"]["degradations"]
    assert any("audit row" in d for d in degradations)
    assert answers["guarded"].status_code == 409
    assert answers["guarded"].json()["error"]["type"] == "AuditUnavailable"


def test_a_server_on_a_full_disk_keeps_reading(tmpfs: Path, serve_app: Any) -> None:
    db = tmpfs / "tether.db"
    with Tether(db=db, settings=make_settings()) as tether:
        (kept,) = tether.add(text=KESTREL, title="Kestrel")
        secret = tether.keys.create(global_write=True)[1]
    tether = Tether(db=db, settings=make_settings())
    with tether, serve_app(create_app(tether, warm=False, mcp=False)) as url:
        fill(tmpfs)
        answers = _serve_checks(url, secret, str(kept.document_id))
    _assert_degraded_service(answers, "StorageFull", 507)


def test_a_server_on_a_read_only_store_keeps_reading(
    read_only_view: tuple[Path, Path], serve_app: Any
) -> None:
    writable, view = read_only_view
    kept = make_store(writable / "tether.db")
    with Tether(db=writable / "tether.db", settings=make_settings()) as tether:
        secret = tether.keys.create(global_write=True)[1]
    tether = Tether(db=view / "tether.db", settings=make_settings())
    with tether, serve_app(create_app(tether, warm=False, mcp=False)) as url:
        answers = _serve_checks(url, secret, kept)
    _assert_degraded_service(answers, "StorageReadOnly", 503)
