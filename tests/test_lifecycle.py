"""The indexing lifecycle: triggers, background jobs, the library folder (scan and watch),
the registry, stale ChatPDF documents and cleanup, and their CLI commands.

Everything runs on real files in tmp_path and a real SQLite store. Tests that need a job
to stay "running" hold it with a gate (an embedder or token counter that blocks until the
test lets it go) rather than on timing; the few timing thresholds are generous.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from helpers import make_pdf, make_settings
from tether import (
    GLOBAL_WORKSPACE,
    DocumentNotFound,
    IngestError,
    InvalidArgument,
    SessionNotFound,
    Tether,
    TextSource,
    UnreadableFile,
)
from tether.cli import app
from tether.errors import IndexingCancelled
from tether.ingest.jobs import IndexJob, JobProgress
from tether.ingest.watcher import SyncReport
from tether.models import CleanupReport, parse_retention
from tether.testing import HashEmbedder

WAIT = 30.0  # generous: another CI run may be using the CPU
REGISTRY_KEYS = {
    "source_path", "workspace_id", "document_id", "content_hash", "status", "retry_count",
    "last_seen_at", "last_indexed_at", "next_retry_at", "error",
}  # fmt: skip

runner = CliRunner()


# -- helpers --------------------------------------------------------------------------------


class GatedEmbedder(HashEmbedder):
    """A HashEmbedder whose batches block until ``release`` is set: a job using it stays
    "running" for as long as the test wants. ``entered`` is set by the first batch."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.entered.set()
        assert self.release.wait(WAIT), "the test never released the gate"
        return super().embed_batch(texts)


class SlowEmbedder(HashEmbedder):
    """Sleeps ``delay`` seconds per batch of more than one text (query embeddings, one
    text each, stay fast), as a real model would on a CPU."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if len(texts) > 1:
            time.sleep(self.delay)
        return super().embed_batch(texts)


class TokenGate:
    """A ``count_tokens`` for Tether that blocks on a chunk containing ``marker``: it holds
    a job between loading one source and starting the next."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, text: str) -> int | None:
        if self.marker in text:
            self.entered.set()
            assert self.release.wait(WAIT), "the test never released the gate"
        return None


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(step)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def corrupt_pdf(path: Path) -> Path:
    path.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage without an xref\n")
    return path


def fts_rowids(t: Tether, word: str) -> list[int]:
    """Rowids the FTS index itself returns for ``word`` (not via rag_chunks)."""
    conn = t.store.db.connection()
    rows = conn.execute(
        "SELECT rowid FROM rag_chunks_fts WHERE rag_chunks_fts MATCH ?", (word,)
    ).fetchall()
    return [r[0] for r in rows]


def scalar(t: Tether, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return t.store.db.connection().execute(sql, params).fetchone()[0]


def registry_by_name(t: Tether, folder: Path) -> dict[str, dict[str, Any]]:
    return {Path(row.source_path).name: row for row in t.registry(folder)}


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture
def stores(db_path: Path) -> Iterator[Callable[..., Tether]]:
    """Open Tethers on ``db_path`` (each with its own options); all closed at teardown,
    after every gate handed to ``gates`` was released (so no job can hang the close)."""
    opened: list[Tether] = []
    gates: list[Any] = []

    def open_store(
        *, embedder: Any = None, count_tokens: Any = None, gate: Any = None, **rag: Any
    ) -> Tether:
        if gate is not None:
            gates.append(gate)
        t = Tether(
            db=db_path,
            settings=make_settings(**rag),
            embedder=embedder if embedder is not None else HashEmbedder(),
            count_tokens=count_tokens,
        )
        opened.append(t)
        return t

    yield open_store
    for gate in gates:
        gate.release.set()
    for t in opened:
        t.close()


@pytest.fixture
def store(stores: Callable[..., Tether]) -> Tether:
    return stores()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "library"
    folder.mkdir()
    return folder.resolve()


# -- 1. triggers ----------------------------------------------------------------------------


def test_on_pdf_imported_returns_a_job_at_once_then_indexes_and_attaches(
    stores: Callable[..., Tether], tmp_path: Path
) -> None:
    gate = GatedEmbedder()
    t = stores(embedder=gate, gate=gate)
    pdf = make_pdf(
        tmp_path / "manual.pdf",
        ["Page one explains the quartzite calibration routine.",
         "Page two covers the obsidian filter replacement."],
    )  # fmt: skip

    started = time.monotonic()
    job = t.on_pdf_imported(pdf, "chat-1")
    assert time.monotonic() - started < 5  # it did not wait for the embedder
    assert isinstance(job, IndexJob)
    assert job.kind == "PDF"
    assert not job.done()
    assert job.status in ("queued", "running")
    assert gate.entered.wait(WAIT)
    assert job.status == "running"
    assert t.documents(session_id="chat-1") == []  # nothing visible half-way
    assert t.jobs() == [job]

    gate.release.set()
    results = job.wait(WAIT)
    assert job.status == "succeeded"
    assert job.done()
    assert job.error is None
    assert [r.status for r in results] == ["indexed"]
    assert job.progress == JobProgress(1, 1, None, "Processing PDF 1 of 1")
    assert job.progress.fraction == 1.0

    (document,) = t.documents(session_id="chat-1")
    assert document.id == results[0].document_id
    assert document.session_ids == ("chat-1",)
    assert document.source_path == str(pdf.resolve())
    assert document.metadata["origin"] == "chatpdf"
    assert document.stale_at is None
    chunks = t.chunks(document.id)
    assert {c.page for c in chunks} == {1, 2}
    assert any("quartzite" in c.content and c.page == 1 for c in chunks)
    assert any("obsidian" in c.content and c.page == 2 for c in chunks)
    hits = t.search("obsidian filter", scope="session", session_id="chat-1")
    assert hits and hits[0].document_id == document.id and hits[0].page == 2

    # The same PDF again: skipped by hash; into another session: attached there too.
    embedded = len(gate.embedded_texts)
    again = t.on_pdf_imported(pdf, "chat-1").wait(WAIT)
    assert [(r.status, r.document_id) for r in again] == [("skipped", document.id)]
    other = t.on_pdf_imported(pdf, "chat-2").wait(WAIT)
    assert [(r.status, r.document_id) for r in other] == [("skipped", document.id)]
    assert t.get_document(document.id).session_ids == ("chat-1", "chat-2")
    assert len(gate.embedded_texts) == embedded
    assert len(t.documents()) == 1
    assert len(t.jobs()) == 3


def test_on_pdf_imported_bad_arguments_raise_at_once(store: Tether, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "a.pdf", ["some text about turbines"])
    with pytest.raises(InvalidArgument):
        store.on_pdf_imported(pdf, "")
    with pytest.raises(InvalidArgument):
        store.on_pdf_imported(pdf, None)  # type: ignore[arg-type]
    store.create_session("lab-chat", workspace_id="lab")
    with pytest.raises(InvalidArgument):  # a ScopeError: the session is in "lab"
        store.on_pdf_imported(pdf, "lab-chat", workspace_id="other")
    assert store.jobs() == []
    assert store.documents() == []


def test_on_pdf_imported_missing_file_fails_the_job_not_the_caller(
    store: Tether, tmp_path: Path
) -> None:
    job = store.on_pdf_imported(tmp_path / "gone.pdf", "chat-1")
    (result,) = job.wait(WAIT)  # a source's failure is in its result, not raised
    assert job.status == "failed"
    assert job.error is None
    assert result.status == "failed"
    assert isinstance(result.error, IngestError)
    assert store.documents() == []


def test_a_source_that_is_not_a_path_raises_invalid_argument_at_call_time(
    store: Tether,
) -> None:
    with pytest.raises(InvalidArgument):
        store.on_pdf_imported(123, "chat-1")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.submit([123])  # type: ignore[list-item]


def test_text_artifacts_are_ignored_when_the_setting_is_off(store: Tether) -> None:
    assert store.settings.rag.index_text_artifacts is False
    assert store.on_text_artifact_saved("note-1", "The tungsten crucible notes.", "chat") is None
    assert store.jobs() == []
    assert store.documents() == []
    assert store.search("tungsten", scope="global", mode="lexical") == []


def test_text_artifacts_indexed_skipped_and_replaced(stores: Callable[..., Tether]) -> None:
    t = stores(index_text_artifacts=True)
    job = t.on_text_artifact_saved("note-1", "The tungsten crucible melts at high heat.", "chat")
    assert isinstance(job, IndexJob)
    assert job.kind == "text artifact"
    (first,) = job.wait(WAIT)
    assert first.status == "indexed"
    document = t.get_document(first.document_id)
    assert document.source_path == "artifact:note-1"
    assert document.session_ids == ("chat",)
    assert document.title == "note-1"

    (same,) = t.on_text_artifact_saved(
        "note-1", "The tungsten crucible melts at high heat.", "chat"
    ).wait(WAIT)
    assert (same.status, same.document_id) == ("skipped", first.document_id)

    changed = t.on_text_artifact_saved(
        "note-1", "The graphite crucible replaced it.", "chat", title="Crucibles"
    )
    (replaced,) = changed.wait(WAIT)
    assert (replaced.status, replaced.document_id) == ("replaced", first.document_id)
    assert changed.status == "succeeded"
    assert len(t.documents()) == 1
    assert t.get_document(first.document_id).title == "Crucibles"
    text = " ".join(c.content for c in t.chunks(first.document_id))
    assert "graphite" in text and "tungsten" not in text
    assert t.search("tungsten", scope="global", mode="lexical") == []
    assert fts_rowids(t, "tungsten") == []
    assert [h.document_id for h in t.search("graphite", scope="global", mode="lexical")] == [
        first.document_id
    ]

    # Another artifact id is another document, even with the same text.
    (other,) = t.on_text_artifact_saved("note-2", "The graphite crucible replaced it.").wait(WAIT)
    assert other.status == "indexed" and other.document_id != first.document_id
    t.store.fts_integrity_check()


@pytest.mark.parametrize(
    ("artifact_id", "text"),
    [("", "text"), ("   ", "text"), (None, "text"), (42, "text"), ("a-1", None), ("a-1", b"x")],
)
def test_text_artifact_bad_arguments_raise(
    stores: Callable[..., Tether], artifact_id: Any, text: Any
) -> None:
    t = stores(index_text_artifacts=True)
    with pytest.raises(InvalidArgument):
        t.on_text_artifact_saved(artifact_id, text)
    assert t.jobs() == []
    assert t.documents() == []


# -- 2. job lifecycle -----------------------------------------------------------------------


def test_progress_callbacks_after_each_source(store: Tether, tmp_path: Path) -> None:
    files = [
        write(tmp_path / "a.md", "# Alpha\n\nAlpha text about basalt."),
        write(tmp_path / "b.md", "# Beta\n\nBeta text about granite. " * 20),
        write(tmp_path / "c.md", "# Gamma\n\nGamma text about marble. " * 80),
    ]
    seen: list[tuple[IndexJob, JobProgress, str]] = []
    job = store.submit(files, on_progress=lambda j, p: seen.append((j, p, j.status)))
    results = job.wait(WAIT)
    assert job.status == "succeeded"
    assert sorted(r.status for r in results) == ["indexed"] * 3
    assert [p.done for _, p, _ in seen] == [1, 2, 3]
    assert all(j is job for j, _, _ in seen)
    assert all(p.total == 3 for _, p, _ in seen)
    assert all(status == "running" for _, _, status in seen)  # called on the worker, mid-job
    assert [round(p.fraction, 3) for _, p, _ in seen] == [0.333, 0.667, 1.0]
    assert "2 of 3" in seen[0][1].description
    assert "3 of 3" in seen[-1][1].description
    assert job.progress.done == 3 and job.progress.current is None

    # A callback that raises does not break the job.
    calls: list[int] = []

    def broken(j: IndexJob, p: JobProgress) -> None:
        calls.append(p.done)
        raise RuntimeError("the UI went away")

    more = [write(tmp_path / f"d{i}.md", f"# D{i}\n\nDiorite note number {i}.") for i in range(3)]
    job2 = store.submit(more, on_progress=broken)
    assert [r.status for r in job2.wait(WAIT)] == ["indexed"] * 3
    assert job2.status == "succeeded" and job2.error is None
    assert calls == [1, 2, 3]
    assert len(store.documents()) == 6


def test_progress_description_reads_processing_kind_n_of_total(
    store: Tether, tmp_path: Path
) -> None:
    pdfs = [make_pdf(tmp_path / f"p{i}.pdf", [f"Report {i} on pumice stones."]) for i in range(3)]
    seen: list[str] = []
    job = store.submit(pdfs, kind="PDF", on_progress=lambda j, p: seen.append(p.description))
    job.wait(WAIT)
    assert seen[0] == "Processing PDF 2 of 3"


def test_progress_current_names_a_source_not_yet_finished(store: Tether, tmp_path: Path) -> None:
    big = write(tmp_path / "big.md", "# Big\n\n" + "Basalt columns cool slowly. " * 400)
    small = write(tmp_path / "small.md", "# Small\n\nA pebble.")
    mid = write(tmp_path / "mid.md", "# Mid\n\n" + "Granite is coarse. " * 40)
    seen: list[tuple[str | None, list[str]]] = []
    job = store.submit(
        [big, small, mid],
        on_progress=lambda j, p: seen.append((p.current, [r.source for r in j.results])),
    )
    job.wait(WAIT)
    for current, finished in seen:
        assert current not in finished


def test_wait_times_out_while_running(stores: Callable[..., Tether], tmp_path: Path) -> None:
    gate = GatedEmbedder()
    t = stores(embedder=gate, gate=gate)
    job = t.submit(write(tmp_path / "a.md", "# A\n\nAndesite notes."))
    assert gate.entered.wait(WAIT)
    with pytest.raises(TimeoutError):
        job.wait(0.05)
    assert job.status == "running" and not job.done()
    assert job.progress.current == str(tmp_path / "a.md")
    assert job.progress.description.endswith("1 of 1")
    gate.release.set()
    assert [r.status for r in job.wait(WAIT)] == ["indexed"]
    assert job.result(0) == job.results  # done: no waiting


def test_await_job_inside_asyncio_keeps_the_loop_running(
    stores: Callable[..., Tether], tmp_path: Path
) -> None:
    gate = GatedEmbedder()
    t = stores(embedder=gate, gate=gate)
    a = write(tmp_path / "a.md", "# A\n\nAlabaster carving.")
    b = write(tmp_path / "b.md", "# B\n\nBreccia layers.")

    async def main() -> tuple[list[Any], list[Any], int]:
        job = t.submit(a)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while not job.done():
                ticks += 1
                await asyncio.sleep(0.01)

        timer = threading.Timer(0.3, gate.release.set)
        timer.start()
        try:
            first, _ = await asyncio.wait_for(asyncio.gather(job, ticker()), WAIT)
        finally:
            timer.cancel()
        second = await asyncio.wait_for(t.submit(b).async_wait(), WAIT)
        return first, second, ticks

    first, second, ticks = asyncio.run(main())
    assert [r.status for r in first] == ["indexed"]
    assert [r.status for r in second] == ["indexed"]
    assert ticks >= 5  # the loop ran while the job was held for 0.3 s
    assert len(t.documents()) == 2


def test_cancel_a_queued_job(stores: Callable[..., Tether], tmp_path: Path) -> None:
    gate = GatedEmbedder()
    t = stores(embedder=gate, gate=gate, index_workers=1)
    first = t.submit(write(tmp_path / "first.md", "# First\n\nFirst file on feldspar."))
    assert gate.entered.wait(WAIT)
    second = t.submit(write(tmp_path / "second.md", "# Second\n\nSecond file on gneiss."))
    assert second.status == "queued"
    assert second.progress.description.endswith("0 of 1")

    assert second.cancel() is True
    assert second.status == "cancelled"
    assert second.done()
    assert second.wait(1) == []

    gate.release.set()
    assert [r.status for r in first.wait(WAIT)] == ["indexed"]
    assert first.status == "succeeded"
    assert first.cancel() is False  # already finished
    assert second.cancel() is False
    assert [d.title for d in t.documents()] == ["First"]
    assert t.search("gneiss", scope="global", mode="lexical") == []
    assert fts_rowids(t, "gneiss") == []


def test_cancel_a_running_job_stops_before_the_next_file(
    stores: Callable[..., Tether], tmp_path: Path
) -> None:
    gate = TokenGate("holdmarker")
    t = stores(count_tokens=gate, gate=gate)
    # Small files run first: "first" (the smallest, held by the gate) runs before the rest.
    first = write(tmp_path / "first.md", "# First\n\nholdmarker schist.")
    second = write(tmp_path / "second.md", "# Second\n\n" + "Slate splits cleanly. " * 30)
    third = write(tmp_path / "third.md", "# Third\n\n" + "Quartzite is hard. " * 90)
    job = t.submit([third, first, second])
    assert gate.entered.wait(WAIT)
    assert job.status == "running"
    assert job.cancel() is True
    gate.release.set()

    results = job.wait(WAIT)  # no error raised: each source says what happened
    assert job.status == "cancelled"
    by_name = {Path(r.source).name: r for r in results}
    assert by_name["first.md"].status == "indexed"
    for name in ("second.md", "third.md"):
        assert by_name[name].status == "failed"
        assert isinstance(by_name[name].error, IndexingCancelled)
    (document,) = t.documents()
    assert document.id == by_name["first.md"].document_id
    assert document.chunk_count == len(t.chunks(document.id)) >= 1  # stored whole
    embedded = scalar(
        t,
        "SELECT count(*) FROM rag_embeddings e JOIN rag_chunks c ON c.id = e.chunk_id"
        " WHERE c.document_id = ?",
        (document.id,),
    )
    assert embedded == document.chunk_count
    assert (
        t.search("slate", scope="global", mode="lexical") == []
        and t.search("quartzite", scope="global", mode="lexical") == []
    )
    t.store.fts_integrity_check()


def test_a_failing_file_fails_only_its_own_job(
    stores: Callable[..., Tether], tmp_path: Path
) -> None:
    t = stores(index_workers=2)
    good1 = write(tmp_path / "good1.md", "# Good one\n\nObsidian is volcanic glass.")
    bad = corrupt_pdf(tmp_path / "bad.pdf")
    good2 = write(tmp_path / "good2.md", "# Good two\n\nPumice floats on water.")
    other = [write(tmp_path / f"o{i}.md", f"# Other {i}\n\nScoria sample {i}.") for i in range(3)]

    mixed = t.submit([good1, bad, good2])
    clean = t.submit(other)
    mixed_results = mixed.wait(WAIT)  # does not raise: the failure is in the results
    clean_results = clean.wait(WAIT)

    assert mixed.status == "failed"
    assert mixed.error is None
    by_name = {Path(r.source).name: r for r in mixed_results}
    assert isinstance(by_name["bad.pdf"].error, UnreadableFile)
    assert by_name["bad.pdf"].status == "failed"
    assert by_name["good1.md"].status == by_name["good2.md"].status == "indexed"
    assert clean.status == "succeeded"
    assert [r.status for r in clean_results] == ["indexed"] * 3
    titles = sorted(d.title for d in t.documents())
    assert titles == ["Good one", "Good two", "Other 0", "Other 1", "Other 2"]


def test_two_jobs_indexing_the_same_files_store_each_once(
    stores: Callable[..., Tether], tmp_path: Path
) -> None:
    t = stores(index_workers=2)
    files = [write(tmp_path / f"f{i}.md", f"# File {i}\n\nMigmatite sample {i}.") for i in range(4)]
    jobs = [t.submit(files), t.submit(list(reversed(files)))]
    outcomes: dict[str, list[str]] = {}
    for job in jobs:
        for r in job.wait(WAIT):
            outcomes.setdefault(Path(r.source).name, []).append(r.status)
        assert job.status == "succeeded"
    assert {name: sorted(s) for name, s in outcomes.items()} == {
        f"f{i}.md": ["indexed", "skipped"] for i in range(4)
    }
    assert len(t.documents()) == 4
    assert scalar(t, "SELECT count(*) FROM rag_chunks") == 4
    t.store.fts_integrity_check()


def test_small_files_run_first(store: Tether, tmp_path: Path) -> None:
    big = write(tmp_path / "big.md", "# Big\n\n" + "Dolomite weathers. " * 500)
    small = write(tmp_path / "small.md", "# Small\n\nChalk.")
    order: list[str] = []
    job = store.submit([big, small], on_progress=lambda j, p: order.append(j.results[-1].source))
    job.wait(WAIT)
    assert [Path(s).name for s in order] == ["small.md", "big.md"]
    # Once the job has ended, ``results`` (like ``wait()``) are in submission order.
    assert [Path(r.source).name for r in job.results] == ["big.md", "small.md"]


def test_wait_returns_results_in_submission_order(store: Tether, tmp_path: Path) -> None:
    big = write(tmp_path / "big.md", "# Big\n\n" + "Dolomite weathers. " * 500)
    small = write(tmp_path / "small.md", "# Small\n\nChalk.")
    results = store.submit([big, small]).wait(WAIT)
    assert [Path(r.source).name for r in results] == ["big.md", "small.md"]


def test_close_cancels_queued_jobs_and_finishes_the_running_one(
    db_path: Path, tmp_path: Path
) -> None:
    gate = GatedEmbedder()
    t = Tether(db=db_path, settings=make_settings(index_workers=1), embedder=gate)
    try:
        running = t.submit(write(tmp_path / "run.md", "# Run\n\nRunning on rhyolite."))
        assert gate.entered.wait(WAIT)
        queued = t.submit(write(tmp_path / "queue.md", "# Queue\n\nQueued on tuff."))
        closer = threading.Thread(target=t.close)
        closer.start()
        wait_until(lambda: queued.done())
        assert queued.status == "cancelled"
        assert closer.is_alive()  # close waits for the running job
    finally:
        gate.release.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert running.status == "succeeded"
    with Tether(db=db_path, settings=make_settings()) as reopened:
        assert [d.title for d in reopened.documents()] == ["Run"]


# -- 3. the caller's thread stays responsive -----------------------------------------------


def test_caller_thread_responsive_while_a_large_pdf_indexes(
    stores: Callable[..., Tether], tmp_path: Path
) -> None:
    words = "reactor coolant pump seal inspection torque valve gasket flange".split()
    pages = [
        f"Page {n}. " + " ".join(f"{words[(n * 7 + j) % len(words)]}{j % 11}" for j in range(220))
        for n in range(1, 81)
    ]
    pdf = make_pdf(tmp_path / "handbook.pdf", pages)
    t = stores(embedder=SlowEmbedder(delay=0.15))
    t.add(text="Quick reference: the coolant pump seal.", title="Quick reference")

    started = time.monotonic()
    job = t.on_pdf_imported(pdf, "chat-1")
    assert time.monotonic() - started < 2.0
    busy_at_start = not job.done()

    latencies = []
    found = 0
    busy_iterations = 0
    for _ in range(50):
        before = time.monotonic()
        time.sleep(0.01)
        found += bool(t.search("coolant pump", scope="global", k=3))
        latencies.append(time.monotonic() - before)
        busy_iterations += not job.done()

    assert busy_at_start
    assert busy_iterations >= 5  # the loop above really ran alongside the job
    assert found == 50
    assert statistics.median(latencies) < 0.2, latencies
    # No search waited for the job (which embeds for many seconds); one slow search is
    # a loaded machine's pause, not a lock, so the bound is loose.
    assert max(latencies) < 5.0, latencies

    (result,) = job.wait(60)
    assert job.status == "succeeded"
    assert result.status == "indexed"
    pages_seen = {c.page for c in t.chunks(result.document_id)}
    assert pages_seen == set(range(1, 81))


# -- 4. library scan ------------------------------------------------------------------------


def test_scan_indexes_new_skips_unchanged_reindexes_changed_deletes_removed(
    store: Tether, root: Path
) -> None:
    a = write(root / "a.md", "# Alpha\n\nThe aragonite shelf.")
    b = write(root / "notes" / "b.txt", "Bauxite mining notes, first draft.")
    c = write(root / "c.html", "<html><body><h1>Calcite</h1><p>Calcite crystals.</p></body></html>")
    d = make_pdf(root / "d.pdf", ["Dolerite dyke survey."])
    ignored = root / "ignored.bin"
    ignored.write_bytes(bytes(range(256)) * 4)
    write(root / ".hidden.md", "# Hidden\n\nhiddenword")
    lib = store.library(root, settle=0, backoff=0)

    first = lib.scan()
    assert sorted(first.indexed) == sorted(str(p) for p in (a, b, c, d))
    assert first.failed == first.refused == first.unsettled == first.deleted == []
    assert first.unsupported == [str(ignored)]  # listed, left alone
    documents = store.documents(workspace_id=GLOBAL_WORKSPACE)
    assert len(documents) == 4
    assert store.search("hiddenword", scope="global", mode="lexical") == []
    rows = registry_by_name(store, root)
    assert set(rows) == {"a.md", "b.txt", "c.html", "d.pdf"}
    assert all(r.status == "indexed" and r.retry_count == 0 for r in rows.values())
    assert all(r.workspace_id == GLOBAL_WORKSPACE for r in rows.values())
    assert {r.document_id for r in rows.values()} == {doc.id for doc in documents}
    a_id = rows["a.md"].document_id

    second = lib.scan()
    assert second.indexed == [] and sorted(second.unchanged) == sorted(first.indexed)
    assert second.to_dict()["unchanged"] == 4

    write(a, "# Alpha\n\nThe andalusite shelf, revised.")
    third = lib.scan()
    assert third.indexed == [str(a)]
    assert len(third.unchanged) == 3
    assert registry_by_name(store, root)["a.md"].document_id == a_id
    assert registry_by_name(store, root)["a.md"].content_hash != rows["a.md"].content_hash
    assert [h.document_id for h in store.search("andalusite", scope="global", mode="lexical")] == [
        a_id
    ]
    assert store.search("aragonite", scope="global", mode="lexical") == []

    b_id = rows["b.txt"].document_id
    b_chunks = [ch.id for ch in store.chunks(b_id)]
    assert fts_rowids(store, "bauxite") == b_chunks
    b.unlink()
    fourth = lib.scan()
    assert fourth.deleted == [str(b)]
    with pytest.raises(DocumentNotFound):
        store.get_document(b_id)
    assert scalar(store, "SELECT count(*) FROM rag_chunks WHERE document_id = ?", (b_id,)) == 0
    placeholders = ",".join("?" * len(b_chunks))
    embeddings = scalar(
        store, f"SELECT count(*) FROM rag_embeddings WHERE chunk_id IN ({placeholders})",
        tuple(b_chunks),
    )  # fmt: skip
    assert embeddings == 0
    assert fts_rowids(store, "bauxite") == []
    store.store.fts_integrity_check()
    assert "b.txt" not in registry_by_name(store, root)
    assert len(store.documents()) == 3


def test_scan_follows_a_rename_without_reembedding(
    stores: Callable[..., Tether], root: Path
) -> None:
    embedder = HashEmbedder()
    t = stores(embedder=embedder)
    old = write(root / "old-name.md", "# Gabbro\n\nGabbro is a coarse mafic rock.\n" * 5)
    lib = t.library(root, settle=0, backoff=0)
    lib.scan()
    document_id = registry_by_name(t, root)["old-name.md"].document_id
    calls, texts = len(embedder.calls), len(embedder.embedded_texts)

    new = root / "moved" / "new-name.md"
    new.parent.mkdir()
    old.rename(new)
    report = lib.scan()
    assert report.renamed == [(str(old), str(new))]
    assert report.indexed == [] and report.deleted == []
    assert len(embedder.calls) == calls and len(embedder.embedded_texts) == texts
    rows = registry_by_name(t, root)
    assert set(rows) == {"new-name.md"}
    assert rows["new-name.md"].document_id == document_id
    assert rows["new-name.md"].status == "indexed"
    assert t.get_document(document_id).source_path == str(new)
    (hit, *_) = t.search("gabbro", scope="global", mode="lexical")
    assert hit.document_id == document_id and hit.source_path == str(new)

    # Edited at its new place: the same document, re-indexed.
    write(new, "# Gabbro\n\nGabbro and norite, revised.")
    again = lib.scan()
    assert again.indexed == [str(new)]
    assert [d.id for d in t.documents()] == [document_id]
    assert "norite" in t.chunks(document_id)[0].content


def test_scan_leaves_a_file_still_being_written_for_later(store: Tether, root: Path) -> None:
    path = root / "growing.md"
    path.write_text("# Growing\n\nFirst line about serpentinite.\n")
    stop = threading.Event()

    def keep_writing() -> None:
        n = 0
        while not stop.is_set():
            with path.open("a") as fh:
                fh.write(f"line {n} still arriving\n")
            n += 1
            time.sleep(0.02)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        lib = store.library(root, settle=0.3, backoff=0)
        report = lib.scan()
    finally:
        stop.set()
        writer.join()
    assert report.unsettled == [str(path)]
    assert report.indexed == []
    assert store.documents() == []
    assert registry_by_name(store, root) == {}

    with path.open("a") as fh:
        fh.write("The final line mentions lherzolite.\n")
    done = lib.scan()
    assert done.indexed == [str(path)] and done.unsettled == []
    (document,) = store.documents()
    assert "lherzolite" in " ".join(c.content for c in store.chunks(document.id))


def test_scan_burst_of_100_files(store: Tether, root: Path) -> None:
    for i in range(100):
        write(root / f"batch{i // 25}" / f"note{i:03d}.md", f"# Note {i}\n\nSpecimen {i} label.")
    report = store.library(root, settle=0, backoff=0).scan()
    assert len(report.indexed) == 100
    assert report.failed == []
    rows = store.registry(root)
    assert len(rows) == 100
    assert {r.status for r in rows} == {"indexed"}
    assert len({r.document_id for r in rows}) == 100
    assert len(store.documents(workspace_id=GLOBAL_WORKSPACE)) == 100
    assert set(rows[0].to_dict()) == REGISTRY_KEYS
    store.store.fts_integrity_check()


def test_scan_refuses_paths_leading_outside_the_root(
    store: Tether, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    secret = write(outside / "secret.md", "# Secret\n\nThe kimberlite coordinates.")
    write(outside / "dir" / "deep.md", "# Deep\n\nThe komatiite field.")
    inside = write(root / "inside.md", "# Inside\n\nPeridotite notes.")
    link = root / "link.md"
    link.symlink_to(secret)
    (root / "linked-dir").symlink_to(outside / "dir", target_is_directory=True)
    lib = store.library(root, settle=0, backoff=0)

    report = lib.scan()
    assert report.refused == [str(link)]
    assert report.indexed == [str(inside)]
    sneaky = root / ".." / "outside" / "secret.md"
    assert lib.scan({sneaky}).refused == [str(sneaky)]

    assert [d.title for d in store.documents()] == ["Inside"]
    assert store.search("kimberlite", scope="global", mode="lexical") == []
    assert store.search("komatiite", scope="global", mode="lexical") == []
    assert set(registry_by_name(store, root)) == {"inside.md"}
    assert store.registry(outside) == []


def test_scan_retries_a_broken_file_then_gives_up_then_indexes_it_fixed(
    store: Tether, root: Path
) -> None:
    pdf = corrupt_pdf(root / "broken.pdf")
    write(root / "fine.md", "# Fine\n\nA fine file.")
    lib = store.library(root, settle=0, backoff=0)

    for attempt in (1, 2):
        report = lib.scan()
        assert report.failed == [str(pdf)]
        row = registry_by_name(store, root)["broken.pdf"]
        assert (row.status, row.retry_count) == ("error", attempt)
        assert row.next_retry_at is not None
        assert "broken.pdf" in row.error and "PDF" in row.error
    report = lib.scan()
    assert report.failed == [str(pdf)]
    row = registry_by_name(store, root)["broken.pdf"]
    assert (row.status, row.retry_count, row.next_retry_at) == ("failed", 3, None)
    assert row.document_id is None
    # Given up on this content: not tried again.
    report = lib.scan()
    assert report.waiting == [str(pdf)] and report.failed == []
    assert registry_by_name(store, root)["broken.pdf"].retry_count == 3
    assert registry_by_name(store, root)["fine.md"].status == "indexed"

    pdf.unlink()
    make_pdf(pdf, ["The repaired report on eclogite."])
    report = lib.scan()
    assert report.indexed == [str(pdf)]
    row = registry_by_name(store, root)["broken.pdf"]
    assert (row.status, row.retry_count, row.error, row.next_retry_at) == (
        "indexed", 0, None, None,
    )  # fmt: skip
    assert store.get_document(row.document_id).source_path == str(pdf)
    assert store.search("eclogite", scope="global", mode="lexical")


def test_scan_backoff_waits_before_retrying(store: Tether, root: Path) -> None:
    pdf = corrupt_pdf(root / "broken.pdf")
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    lib = store.library(root, settle=0, backoff=60, clock=lambda: now[0])

    assert lib.scan().failed == [str(pdf)]
    row = registry_by_name(store, root)["broken.pdf"]
    assert (row.status, row.retry_count) == ("error", 1)
    assert row.next_retry_at.startswith("2030-01-01T00:01:00")  # 60 s later

    report = lib.scan()  # not due yet
    assert report.waiting == [str(pdf)] and report.failed == []
    assert registry_by_name(store, root)["broken.pdf"].retry_count == 1

    now[0] += timedelta(seconds=61)
    assert lib.scan().failed == [str(pdf)]
    row = registry_by_name(store, root)["broken.pdf"]
    assert (row.status, row.retry_count) == ("error", 2)
    assert row.next_retry_at.startswith("2030-01-01T00:03:01")  # 120 s: doubled

    now[0] += timedelta(seconds=100)
    assert lib.scan().waiting == [str(pdf)]
    now[0] += timedelta(seconds=21)
    assert lib.scan().failed == [str(pdf)]
    row = registry_by_name(store, root)["broken.pdf"]
    assert (row.status, row.retry_count) == ("failed", 3)


# -- 5. watching ----------------------------------------------------------------------------


@contextmanager
def watching(
    t: Tether,
    root: Path,
    *,
    force_polling: bool,
    on_first_pass: Callable[[], None] | None = None,
    settle: float = 0.1,
) -> Iterator[list[SyncReport]]:
    """``LibrarySync.watch`` on a thread, live (a sentinel file written after the first
    pass has been indexed) when the block starts; stopped cleanly when it ends."""
    lib = t.library(root, settle=settle, backoff=0)
    stop = threading.Event()
    passes: list[SyncReport] = []
    errors: list[BaseException] = []

    def on_pass(report: SyncReport) -> None:
        if not passes and on_first_pass is not None:
            on_first_pass()
        passes.append(report)

    def run() -> None:
        try:
            lib.watch(stop=stop, debounce_ms=50, on_pass=on_pass, force_polling=force_polling)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    watcher = threading.Thread(target=run, daemon=True)
    watcher.start()
    try:
        wait_until(lambda: passes or errors)  # the first full pass is done
        assert errors == []

        def sentinel_indexed() -> bool:
            row = registry_by_name(t, root).get("ready.md")
            if row is not None and row.status == "indexed":
                return True
            write(root / "ready.md", f"# Ready\n\nSentinel {time.monotonic()}.")
            time.sleep(max(0.5, 2 * settle))  # long enough to settle before it is rewritten
            return False

        wait_until(sentinel_indexed, step=0)
        yield passes
    finally:
        stop.set()
        watcher.join(WAIT)
    assert not watcher.is_alive()
    assert errors == []


def indexed_row(t: Tether, root: Path, name: str) -> dict[str, Any] | None:
    row = registry_by_name(t, root).get(name)
    return row if row is not None and row.status == "indexed" else None


@pytest.mark.parametrize("force_polling", [False, True], ids=["native", "polling"])
def test_watch_follows_creations_edits_renames_and_deletions(
    store: Tether, root: Path, force_polling: bool
) -> None:
    later = itertools.count(1)

    def edit(path: Path, text: str) -> Path:
        write(path, text)
        # The polling watcher compares mtimes in whole seconds: give every write its own.
        stamp = time.time() + 5 * next(later)
        os.utime(path, (stamp, stamp))
        return path

    with watching(store, root, force_polling=force_polling) as passes:
        new = edit(root / "new.md", "# New\n\nA fresh note on tonalite.")
        row = wait_until(lambda: indexed_row(store, root, "new.md"))
        document_id = row.document_id
        hits = store.search("tonalite", scope="global", mode="lexical")
        assert [h.document_id for h in hits] == [document_id]

        edit(new, "# New\n\nA fresh note on tonalite and trondhjemite, edited.")
        wait_until(lambda: store.search("trondhjemite", scope="global", mode="lexical"))

        # The search sees the edit once the document is written; the registry row takes
        # the new hash after, in its own transaction: wait for that too.
        def rehashed() -> Any:
            now = indexed_row(store, root, "new.md")
            return now if now is not None and now.content_hash != row.content_hash else None

        edited = wait_until(rehashed)
        assert edited.document_id == document_id
        assert [d.id for d in store.documents() if d.title == "New"] == [document_id]

        moved = root / "moved.md"
        new.rename(moved)
        wait_until(lambda: indexed_row(store, root, "moved.md"))
        wait_until(lambda: "new.md" not in registry_by_name(store, root))
        assert registry_by_name(store, root)["moved.md"].document_id == document_id
        assert store.get_document(document_id).source_path == str(moved)
        # The store shows the rename while its pass still runs; the pass's report comes
        # when the pass ends (a race a loaded machine lost in CI).
        wait_until(lambda: any(p.renamed == [(str(new), str(moved))] for p in passes))

        moved.unlink()
        # The document goes first, its registry row in a second transaction, and the
        # pass reports the deletion at its end: wait for the report, which covers both.
        wait_until(lambda: any(p.deleted == [str(moved)] for p in passes))
        assert document_id not in {d.id for d in store.documents()}
        assert "moved.md" not in registry_by_name(store, root)
        assert store.search("trondhjemite", scope="global", mode="lexical") == []
    store.store.fts_integrity_check()


def test_watch_indexes_a_folder_moved_into_the_library(
    store: Tether, root: Path, tmp_path: Path
) -> None:
    staging = tmp_path / "staging" / "reports"
    write(staging / "x.md", "# X\n\nXenolith report.")
    write(staging / "y.md", "# Y\n\nYttrium report.")
    with watching(store, root, force_polling=False):
        shutil.move(staging, root / "reports")
        # Events are handled in order: once this later file is in, the move was handled.
        write(root / "after.md", "# After\n\nWritten after the move.")
        wait_until(lambda: indexed_row(store, root, "after.md"))
        assert indexed_row(store, root, "x.md") and indexed_row(store, root, "y.md")


def test_watch_indexes_a_file_created_while_the_first_pass_finishes(
    store: Tether, root: Path
) -> None:
    early = root / "early.md"
    with watching(
        store,
        root,
        force_polling=False,
        on_first_pass=lambda: write(early, "# Early\n\nArrived during the first pass."),
    ):
        assert early.exists()
        wait_until(lambda: indexed_row(store, root, "early.md"))


# -- 6. CLI ---------------------------------------------------------------------------------


def test_cli_scan_and_status(tmp_path: Path, root: Path) -> None:
    db = str(tmp_path / "cli.db")
    Tether(db).close()  # an empty store (status refuses a file that does not exist)
    assert "registry is empty" in cli("status", "--db", db)
    write(root / "a.md", "# A\n\nAmphibolite.")
    write(root / "b.txt", "Blueschist facies.")

    data = json.loads(cli("scan", str(root), "--db", db, "--json"))
    assert sorted(data["indexed"]) == [str(root / "a.md"), str(root / "b.txt")]
    assert data["unchanged"] == 0 and data["failed"] == [] and data["renamed"] == []
    data = json.loads(cli("scan", str(root), "--db", db, "--json"))
    assert data["indexed"] == [] and data["unchanged"] == 2
    assert "2 file(s) unchanged" in cli("scan", str(root), "--db", db)

    files = json.loads(cli("status", "--db", db, "--json"))["files"]
    assert [Path(f["source_path"]).name for f in files] == ["a.md", "b.txt"]
    for f in files:
        assert set(f) == REGISTRY_KEYS
        assert f["status"] == "indexed" and f["retry_count"] == 0 and f["document_id"]
        assert f["workspace_id"] == GLOBAL_WORKSPACE and f["last_indexed_at"]
    assert json.loads(cli("status", str(root), "--db", db, "--json"))["files"] == files
    assert json.loads(cli("status", str(tmp_path / "elsewhere"), "--db", db, "--json")) == {
        "files": []
    }

    text = cli("status", "--db", db)
    for header in ("file", "status", "retries"):
        assert header in text
    assert text.count("│ indexed │") == 2  # one row per file

    corrupt_pdf(root / "c.pdf")
    data = json.loads(cli("scan", str(root), "--db", db, "--json", code=1))
    assert data["failed"] == [str(root / "c.pdf")]
    (row,) = [
        f for f in json.loads(cli("status", "--db", db, "--json"))["files"]
        if f["source_path"].endswith("c.pdf")
    ]  # fmt: skip
    assert (row["status"], row["retry_count"]) == ("error", 1)
    assert "PDF" in row["error"]
    assert "error" in cli("status", "--db", db)


def test_cli_cleanup_dry_run_then_delete(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    pdf = make_pdf(tmp_path / "import.pdf", ["Imported manual about the larvikite polish."])
    with Tether(db=db, settings=make_settings()) as t:
        (result,) = t.on_pdf_imported(pdf, "chat-1").wait(WAIT)
        t.add(text="A kept note on larvikite.", title="Kept", session_id="chat-1")
        t.close_session("chat-1")
        stale_id = result.document_id

    assert "Nothing stale for longer than 7d" in cli("cleanup", "--db", str(db))
    out = cli("cleanup", "--dry-run", "--retention", "0s", "--db", str(db))
    assert f"would delete {stale_id}" in out
    data = json.loads(cli("cleanup", "--dry-run", "--retention", "0s", "--db", str(db), "--json"))
    assert data["deleted"] is False
    assert [d["id"] for d in data["documents"]] == [stale_id]
    assert data["documents"][0]["stale_at"] and data["documents"][0]["chunk_count"] >= 1
    with Tether(db=db, settings=make_settings()) as t:
        assert len(t.documents()) == 2

    out = cli("cleanup", "--retention", "0s", "--db", str(db))
    assert f"deleted {stale_id}" in out and "would" not in out
    with Tether(db=db, settings=make_settings()) as t:
        assert [d.title for d in t.documents()] == ["Kept"]
        t.store.fts_integrity_check()
    assert "Nothing stale" in cli("cleanup", "--retention", "0s", "--db", str(db))
    cli("cleanup", "--retention", "soon", "--db", str(db), code=1)


# -- 7. stale documents and cleanup ---------------------------------------------------------


def _import(t: Tether, pdf: Path, session_id: str) -> str:
    (result,) = t.on_pdf_imported(pdf, session_id).wait(WAIT)
    assert result.status in ("indexed", "skipped")
    assert result.document_id is not None
    return result.document_id


def test_close_session_marks_only_its_chatpdf_documents_stale(
    store: Tether, tmp_path: Path
) -> None:
    imported = _import(store, make_pdf(tmp_path / "a.pdf", ["Alpha import on jadeite."]), "s1")
    (plain,) = store.add(text="A plain note on nephrite.", title="Plain", session_id="s1")
    shared = _import(store, make_pdf(tmp_path / "c.pdf", ["Shared import on lapis."]), "s1")
    assert _import(store, tmp_path / "c.pdf", "s2") == shared
    elsewhere = _import(store, make_pdf(tmp_path / "d.pdf", ["Another chat on opal."]), "s9")

    session = store.close_session("s1")
    assert session.closed_at is not None
    stale = {d.id: d.stale_at for d in store.documents()}
    assert stale[imported] == session.closed_at
    assert stale[plain.document_id] is None  # not a ChatPDF import
    assert stale[shared] is None  # still used by the open session s2
    assert stale[elsewhere] is None  # another session's import
    assert store.get_document(imported).session_ids == ("s1",)  # attachments stay

    with pytest.raises(SessionNotFound):
        store.close_session("no-such-session")
    closed_again = store.close_session("s1")
    assert closed_again.closed_at == session.closed_at
    store.close_session("s2")
    assert store.get_document(shared).stale_at is not None
    assert store.get_document(plain.document_id).stale_at is None
    assert store.get_document(elsewhere).stale_at is None


def test_cleanup_deletes_stale_documents_with_everything_they_own(
    store: Tether, tmp_path: Path
) -> None:
    stale_id = _import(
        store, make_pdf(tmp_path / "old.pdf", ["Chapter on xylophonic resonance.", "More."]), "s1"
    )
    keep_id = _import(store, make_pdf(tmp_path / "keep.pdf", ["Chapter on zircon dating."]), "s2")
    store.close_session("s1")
    stale_chunks = [c.id for c in store.chunks(stale_id)]
    marks = ",".join("?" * len(stale_chunks))

    def owned() -> dict[str, int]:
        return {
            "chunks": scalar(
                store, "SELECT count(*) FROM rag_chunks WHERE document_id = ?", (stale_id,)
            ),
            "embeddings": scalar(
                store, f"SELECT count(*) FROM rag_embeddings WHERE chunk_id IN ({marks})",
                tuple(stale_chunks),
            ),
            "fts": len(fts_rowids(store, "xylophonic")),
            "attachments": scalar(
                store, "SELECT count(*) FROM rag_document_sessions WHERE document_id = ?",
                (stale_id,),
            ),
        }  # fmt: skip

    before = owned()
    assert before["chunks"] == len(stale_chunks) >= 1
    assert before["embeddings"] == len(stale_chunks)
    assert before["fts"] >= 1 and before["attachments"] == 1

    kept = store.cleanup("7d")
    assert isinstance(kept, CleanupReport)
    assert kept.documents == () and kept.deleted is True
    kept = store.cleanup("1h")
    assert kept.documents == ()

    dry = store.cleanup("0s", dry_run=True)
    assert [d.id for d in dry.documents] == [stale_id]
    assert dry.deleted is False
    assert dry.to_dict()["documents"][0]["id"] == stale_id
    assert owned() == before
    assert store.get_document(stale_id).stale_at is not None

    report = store.cleanup(timedelta(0))
    assert [d.id for d in report.documents] == [stale_id]
    assert report.deleted is True
    assert report.cutoff <= datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with pytest.raises(DocumentNotFound):
        store.get_document(stale_id)
    assert owned() == {"chunks": 0, "embeddings": 0, "fts": 0, "attachments": 0}
    store.store.fts_integrity_check()

    # The document of the open session is untouched, vectors and all.
    assert [d.id for d in store.documents()] == [keep_id]
    kept_chunks = store.chunks(keep_id)
    kept_vectors = scalar(
        store,
        "SELECT count(*) FROM rag_embeddings e JOIN rag_chunks c ON c.id = e.chunk_id"
        " WHERE c.document_id = ?",
        (keep_id,),
    )
    assert kept_vectors == len(kept_chunks) >= 1
    assert store.search("zircon", scope="session", session_id="s2")[0].document_id == keep_id
    assert store.cleanup("0s").documents == ()


def test_reusing_a_stale_document_clears_stale_at(store: Tether, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "a.pdf", ["Notes on the chalcedony sample."])
    document_id = _import(store, pdf, "s1")
    store.close_session("s1")
    assert store.get_document(document_id).stale_at is not None

    assert store.attach(document_id, "s1") is False  # a closed session: still stale
    assert store.get_document(document_id).stale_at is not None

    store.create_session("s3", workspace_id=GLOBAL_WORKSPACE)
    assert store.attach(document_id, "s3") is True
    assert store.get_document(document_id).stale_at is None
    assert store.cleanup("0s").documents == ()

    store.close_session("s3")
    assert store.get_document(document_id).stale_at is not None
    assert _import(store, pdf, "s4") == document_id  # imported again into an open chat
    assert store.get_document(document_id).stale_at is None
    assert store.cleanup("0s").documents == ()
    assert store.get_document(document_id).session_ids == ("s1", "s3", "s4")


def test_cleanup_of_a_chat_import_does_not_lose_a_library_file(store: Tether, root: Path) -> None:
    pdf = make_pdf(root / "manual.pdf", ["The variscite handbook, chapter one."])
    _import(store, pdf, "chat")  # the user opened a library file in a chat
    lib = store.library(root, settle=0, backoff=0)
    assert lib.scan().indexed == [str(pdf)]
    store.close_session("chat")
    store.cleanup("0s")
    lib.scan()
    assert store.search("variscite", scope="global", mode="lexical")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", timedelta(days=7)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("45s", timedelta(seconds=45)),
        ("2w", timedelta(weeks=2)),
        ("0s", timedelta(0)),
        (" 3D ", timedelta(days=3)),
        ("1.5h", timedelta(minutes=90)),
        (timedelta(hours=5), timedelta(hours=5)),
    ],
)
def test_parse_retention_accepts(text: Any, expected: timedelta) -> None:
    assert parse_retention(text) == expected


@pytest.mark.parametrize(
    "junk",
    ["", "7", "d7", "7y", "-1d", "7 days", "1d2h", "soon", None, 7, timedelta(seconds=-1)],
)
def test_parse_retention_rejects_junk(junk: Any, store: Tether) -> None:
    with pytest.raises(InvalidArgument):
        parse_retention(junk)
    with pytest.raises(InvalidArgument):
        store.cleanup(junk)


# -- odds and ends --------------------------------------------------------------------------


def test_submit_text_sources_into_a_workspace(store: Tether) -> None:
    job = store.submit(
        [TextSource("Hornfels forms by contact.", "Hornfels", source="kb:1"),
         TextSource("Skarn forms near intrusions.", "Skarn", source="kb:2")],
        workspace_id="geo",
    )  # fmt: skip
    results = job.wait(WAIT)
    assert [r.status for r in results] == ["indexed", "indexed"]
    assert job.progress.total == 2 and job.progress.done == 2
    assert {d.title for d in store.documents(workspace_id="geo")} == {"Hornfels", "Skarn"}
    assert store.documents(workspace_id=GLOBAL_WORKSPACE) == []
    assert repr(job).startswith(f"IndexJob({job.id}, document, succeeded, 2/2")


def test_library_rejects_a_folder_that_does_not_exist(store: Tether, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        store.library(tmp_path / "nope")
    file = write(tmp_path / "file.md", "x")
    with pytest.raises(InvalidArgument):
        store.library(file)


def test_watch_indexes_a_burst_of_100_files(store: Tether, root: Path) -> None:
    """100 files written at once while watching: every one is indexed, once."""
    with watching(store, root, force_polling=False):
        for i in range(100):
            write(root / "burst" / f"note-{i:03}.md", f"# Note {i}\n\nBurst note number {i}.")
        wait_until(
            lambda: (
                sum(
                    1
                    for name, row in registry_by_name(store, root).items()
                    if name.startswith("note-") and row.status == "indexed"
                )
                == 100
            )
        )
    titles = [d.title for d in store.documents(workspace_id=GLOBAL_WORKSPACE)]
    assert sorted(t for t in titles if t.startswith("Note ")) == sorted(
        f"Note {i}" for i in range(100)
    )
    store.store.fts_integrity_check()


@pytest.mark.slow
def test_watch_never_indexes_a_file_half_written(store: Tether, root: Path) -> None:
    """A file still being written (changing within the settle window) is not indexed
    until it holds still: it is indexed once, complete."""
    target = root / "slow.md"
    parts = [f"Part {i} of the slow report on basalt." for i in range(12)]
    # A settle window of 1 s, far above the writer's pauses of 0.03 s: a loaded machine
    # may stretch one of them, and the window must still hold.
    with watching(store, root, force_polling=False, settle=1.0) as passes:
        with target.open("w") as fh:
            fh.write("# Slow report\n\n")
            for part in parts:
                fh.write(part + "\n")
                fh.flush()
                time.sleep(0.03)  # faster than the settle window
        row = wait_until(lambda: indexed_row(store, root, "slow.md"))
        time.sleep(1.5)  # any later pass (after another settle window) would show up below
    indexed_in = [p for p in passes if str(target) in p.indexed]
    assert len(indexed_in) == 1, [p.to_dict() for p in passes]
    text = " ".join(c.content for c in store.chunks(row.document_id))
    assert all(part in text for part in parts)
    assert [d.title for d in store.documents() if d.title == "Slow report"] == ["Slow report"]
