"""The library folder keeps what lies outside it out, even when a file inside is swapped
for a symbolic link between the containment check and the read.

Real files in tmp_path and a real SQLite store. The race is made deterministic: the
swap is done from a hook right after the check (``LibrarySync._inside``) or right
before the bytes are parsed, so every test runs the window the attack needs. Each
asserts that the secret outside the folder never reaches the store: no search finds
its word, no document or registry row has its path, and the scan reports the file
refused.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import make_pdf, make_settings
from tether import Tether
from tether.ingest import loaders
from tether.ingest import workers as loading_module
from tether.ingest.watcher import LibrarySync, SyncReport
from tether.testing import HashEmbedder

pytestmark = pytest.mark.skipif(
    not hasattr(os, "symlink") or os.name == "nt", reason="needs POSIX symbolic links"
)

SECRET_WORD = "kimberlite"
INSIDE_WORD = "peridotite"
WAIT = 30.0


# -- helpers --------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def swap_for_link(path: Path, target: Path) -> None:
    """Replace ``path`` (a file or a folder) by a symbolic link to ``target``; a file is
    replaced atomically, as an attacker's ``rename`` would."""
    if path.is_dir() and not path.is_symlink():
        path.rename(path.with_name(path.name + ".moved-away"))
    temporary = path.with_name(path.name + ".link-tmp")
    temporary.symlink_to(target)
    os.replace(temporary, path)


def swap_after_check(lib: LibrarySync, path: Path, swap: Callable[[], None]) -> None:
    """Run ``swap`` once, right after ``lib`` checked that ``path`` lies inside its root
    and before anything reads it: the window of the race, made deterministic."""
    real_inside = lib._inside
    pending = [swap]

    def inside_then_swap(candidate: Path) -> Path | None:
        resolved = real_inside(candidate)
        if Path(candidate) == path and resolved is not None and pending:
            pending.pop()()
        return resolved

    lib._inside = inside_then_swap  # type: ignore[method-assign]


def assert_secret_kept_out(t: Tether, root: Path, outside: Path) -> None:
    assert t.search(SECRET_WORD, scope="global", mode="lexical") == []
    texts = " ".join(c.content for d in t.documents() for c in t.chunks(d.id))
    assert SECRET_WORD not in texts
    for document in t.documents():
        assert document.source_path is not None
        assert Path(document.source_path).is_relative_to(root), document.source_path
        assert not Path(document.source_path).is_relative_to(outside)
    assert t.registry(outside) == []


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.05)


@pytest.fixture
def store(db_path: Path) -> Iterator[Tether]:
    with Tether(db=db_path, settings=make_settings(), embedder=HashEmbedder()) as t:
        yield t


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = (tmp_path / "outside").resolve()
    write(folder / "secret.md", f"# Secret\n\nThe {SECRET_WORD} coordinates.\n")
    write(folder / "notes" / "a.md", f"# Secret notes\n\nMore {SECRET_WORD} sites.\n")
    return folder


@pytest.fixture(params=[True, False], ids=["openat", "open-then-check"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways a file is opened under the root: a walk with openat(O_NOFOLLOW) where
    the platform has it, else an open whose descriptor is checked against the path."""
    monkeypatch.setattr(loaders, "_OPENAT", request.param and loaders._OPENAT)
    return bool(request.param)


# -- scan: a link swapped in after the check ------------------------------------------------


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_new_file_swapped_for_an_outside_link_after_the_check_is_refused(
    store: Tether, root: Path, outside: Path, walk: bool, what: str
) -> None:
    victim = write(root / "notes" / "a.md", f"# Notes\n\nThe {INSIDE_WORD} notes.\n")
    other = write(root / "other.md", "# Other\n\nAn ordinary file about basalt.\n")
    lib = store.library(root, settle=0, backoff=0)
    if what == "file":
        swap_after_check(lib, victim, lambda: swap_for_link(victim, outside / "secret.md"))
    else:
        swap_after_check(lib, victim, lambda: swap_for_link(root / "notes", outside / "notes"))

    report = lib.scan()

    assert report.refused == [str(victim)]
    assert report.indexed == [str(other)]
    assert report.failed == []
    assert_secret_kept_out(store, root, outside)
    assert {Path(r.source_path).name for r in store.registry(root)} == {"other.md"}
    # The next pass finds the link at the check itself (a linked folder is not walked).
    again = lib.scan()
    assert again.refused == ([str(victim)] if what == "file" else [])
    assert str(victim) not in again.indexed
    assert_secret_kept_out(store, root, outside)


def test_an_indexed_file_swapped_for_an_outside_link_after_the_check_loses_its_document(
    store: Tether, root: Path, outside: Path, walk: bool
) -> None:
    victim = write(root / "a.md", f"# Notes\n\nThe {INSIDE_WORD} notes.\n")
    lib = store.library(root, settle=0, backoff=0)
    assert lib.scan().indexed == [str(victim)]
    (document,) = store.documents()

    swap_after_check(lib, victim, lambda: swap_for_link(victim, outside / "secret.md"))
    report = lib.scan()

    assert report.refused == [str(victim)]
    assert report.deleted == [str(victim)]
    assert report.indexed == [] and report.unchanged == []
    assert store.documents() == []
    assert store.search(INSIDE_WORD, scope="global", mode="lexical") == []
    assert store.registry(root) == []
    assert_secret_kept_out(store, root, outside)
    assert document.id not in {d.id for d in store.documents()}


def test_a_pdf_swapped_for_an_outside_link_after_the_check_is_refused(
    store: Tether, root: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    secret_pdf = make_pdf(tmp_path / "outside" / "secret.pdf", [f"The {SECRET_WORD} survey."])
    victim = make_pdf(root / "report.pdf", [f"The {INSIDE_WORD} survey."])
    lib = store.library(root, settle=0, backoff=0)
    swap_after_check(lib, victim, lambda: swap_for_link(victim, secret_pdf))

    report = lib.scan()

    assert report.refused == [str(victim)] and report.indexed == []
    assert_secret_kept_out(store, root, tmp_path / "outside")


def test_a_swap_after_the_read_cannot_change_what_is_indexed(
    store: Tether, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is read once: a link swapped in after that read (here: while the bytes
    are parsed) changes nothing that pass, and the next pass drops the document."""
    victim = write(root / "a.md", f"# Notes\n\nThe {INSIDE_WORD} notes.\n")
    read = victim.read_bytes()
    real_load_file = loading_module.load_file
    swapped: list[Path] = []

    def swap_then_load(file: loaders.FileBytes) -> loaders.LoadedDocument:
        if not swapped:
            swap_for_link(victim, outside / "secret.md")
            swapped.append(file.path)
        return real_load_file(file)

    monkeypatch.setattr(loading_module, "load_file", swap_then_load)
    lib = store.library(root, settle=0, backoff=0)

    report = lib.scan()

    assert swapped == [victim]
    assert report.indexed == [str(victim)]
    (document,) = store.documents()
    assert document.source_path == str(victim)
    assert document.file_size == len(read)
    assert INSIDE_WORD in " ".join(c.content for c in store.chunks(document.id))
    (row,) = store.registry(root)
    assert row.content_hash == loaders.FileBytes(victim, read).sha256  # the bytes indexed
    assert_secret_kept_out(store, root, outside)

    after = lib.scan()
    assert after.refused == [str(victim)] and after.deleted == [str(victim)]
    assert store.documents() == [] and store.registry(root) == []
    assert_secret_kept_out(store, root, outside)


def test_randomized_swaps_never_let_the_secret_in(store: Tether, root: Path, outside: Path) -> None:
    """An attacker flipping a file between itself and an outside link as fast as it can,
    across many passes: whatever each pass sees, the secret is never stored."""
    victim = root / "a.md"
    body = f"# Notes\n\nThe {INSIDE_WORD} notes.\n"
    write(victim, body)
    stop = threading.Event()

    def flip() -> None:
        n = 0
        while not stop.is_set():
            temporary = root / f".flip-{n}"
            if n % 2:
                temporary.write_text(body + f"Revision {n}.\n")
            else:
                temporary.symlink_to(outside / "secret.md")
            os.replace(temporary, victim)
            n += 1

    flipper = threading.Thread(target=flip)
    flipper.start()
    lib = store.library(root, settle=0, backoff=0)
    reports: list[SyncReport] = []
    try:
        for _ in range(60):
            reports.append(lib.scan())
            assert_secret_kept_out(store, root, outside)
    finally:
        stop.set()
        flipper.join()
    assert any(r.refused for r in reports)
    assert_secret_kept_out(store, root, outside)


# -- what containment means -------------------------------------------------------------


def test_links_that_stay_inside_are_followed_to_their_target(store: Tether, root: Path) -> None:
    real = write(root / "real.md", f"# Real\n\nThe {INSIDE_WORD} notes.\n")
    (root / "alias.md").symlink_to(real)
    (root / "sub").mkdir()
    (root / "sub" / "relative.md").symlink_to(Path("..") / "real.md")

    report = store.library(root, settle=0, backoff=0).scan()

    assert report.indexed == [str(real)]
    assert report.refused == [] and report.failed == []
    (document,) = store.documents()
    assert document.source_path == str(real)


def test_a_hard_link_is_the_file_itself_and_is_indexed(
    store: Tether, root: Path, outside: Path
) -> None:
    """As docs/indexing.md says: a hard link into the folder cannot be told from a file
    made there."""
    hard = root / "hard.md"
    os.link(outside / "secret.md", hard)

    report = store.library(root, settle=0, backoff=0).scan()

    assert report.indexed == [str(hard)] and report.refused == []
    (document,) = store.documents()
    assert document.source_path == str(hard)
    assert store.search(SECRET_WORD, scope="global", mode="lexical")


# -- watch --------------------------------------------------------------------------------


def test_a_watch_pass_deletes_the_document_of_a_file_replaced_by_an_outside_link(
    store: Tether, root: Path, outside: Path
) -> None:
    """The pass ``watch`` runs for a batch of events: the touched path is refused, and
    once the grace for renames is over its document and registry row are deleted."""
    victim = write(root / "a.md", f"# Notes\n\nThe {INSIDE_WORD} notes.\n")
    lib = store.library(root, settle=0, backoff=0)
    assert lib.scan().indexed == [str(victim)]
    swap_for_link(victim, outside / "secret.md")

    first = lib.scan({victim})
    assert first.refused == [str(victim)]
    assert first.unsettled == [str(victim)]  # within the grace: perhaps a rename
    assert first.deleted == []
    lib.grace = 0.0
    second = lib.scan({victim})
    assert second.refused == [str(victim)] and second.deleted == [str(victim)]
    assert store.documents() == [] and store.registry(root) == []
    assert_secret_kept_out(store, root, outside)


def test_a_watch_pass_refuses_a_link_swapped_in_after_its_check(
    store: Tether, root: Path, outside: Path
) -> None:
    victim = write(root / "a.md", f"# Notes\n\nThe {INSIDE_WORD} notes.\n")
    lib = store.library(root, settle=0, backoff=0)
    assert lib.scan().indexed == [str(victim)]
    write(victim, f"# Notes\n\nThe {INSIDE_WORD} notes, edited.\n")
    swap_after_check(lib, victim, lambda: swap_for_link(victim, outside / "secret.md"))
    lib.grace = 0.0

    report = lib.scan({victim})

    assert report.refused == [str(victim)] and report.deleted == [str(victim)]
    assert report.indexed == []
    assert store.documents() == []
    assert_secret_kept_out(store, root, outside)


def test_watch_deletes_a_file_replaced_by_an_outside_link(
    store: Tether, root: Path, outside: Path
) -> None:
    """``LibrarySync.watch`` on a thread, with real file-system events."""
    pytest.importorskip("watchfiles")
    victim = write(root / "a.md", f"# Notes\n\nThe {INSIDE_WORD} notes.\n")
    lib = store.library(root, settle=0.1, backoff=0)
    stop = threading.Event()
    passes: list[SyncReport] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            lib.watch(stop=stop, debounce_ms=50, on_pass=passes.append)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    watcher = threading.Thread(target=run, daemon=True)
    watcher.start()
    try:
        wait_until(lambda: passes or errors)
        assert errors == [] and passes[0].indexed == [str(victim)]
        swap_for_link(victim, outside / "secret.md")
        wait_until(lambda: store.documents() == [])
        wait_until(lambda: store.registry(root) == [])
    finally:
        stop.set()
        watcher.join(WAIT)
    assert not watcher.is_alive() and errors == []
    assert any(str(victim) in p.refused for p in passes)
    assert any(p.deleted == [str(victim)] for p in passes)
    assert_secret_kept_out(store, root, outside)


# -- tether add: one descriptor -----------------------------------------------------------


def test_add_takes_text_and_size_from_the_same_read(
    store: Tether, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file replaced while it is parsed: the document is the content that was read,
    and its size is that content's, not the new file's."""
    path = write(tmp_path / "note.md", f"# Note\n\nThe {INSIDE_WORD} note.\n")
    read = path.read_bytes()
    real_loader = loaders.load_markdown

    def load_then_replace(file: loaders.FileBytes) -> loaders.LoadedDocument:
        loaded = real_loader(file)
        write(path, f"# Other\n\nA much longer replacement about {SECRET_WORD}.\n" * 20)
        return loaded

    monkeypatch.setattr(loaders, "load_markdown", load_then_replace)

    (result,) = store.add(path)

    assert result.status == "indexed"
    document = store.get_document(result.document_id)
    assert document.file_size == len(read)
    assert document.title == "Note"
    assert store.search(SECRET_WORD, scope="global", mode="lexical") == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_add_refuses_a_pipe_at_once(store: Tether, tmp_path: Path) -> None:
    """The descriptor is checked with fstat before reading: a FIFO named like a note is
    refused without waiting for a writer."""
    pipe = tmp_path / "pipe.md"
    os.mkfifo(pipe)
    started = time.monotonic()
    (result,) = store.add(pipe, on_error="collect")
    assert result.status == "failed"
    assert "not a regular file" in str(result.error)
    assert time.monotonic() - started < 5
