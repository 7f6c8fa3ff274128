"""Hostile files cost at most their limits: a PDF whose small streams inflate to tens of
MB of text operators is stopped at ``rag.file_timeout`` or ``rag.loader_memory_mb`` in a
worker process that is killed, a file over ``rag.max_file_bytes`` fails before it is
read, and the files beside them are indexed as ever.

Every hostile file is made here: PDFs written byte by byte with zlib, text files on disk
(one sparse), a real SQLite store; memory is measured in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import tracemalloc
import unicodedata
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from helpers import REPO_ROOT, make_pdf, make_settings
from tether import EmptyDocument, Tether, UnreadableFile
from tether.embed.local import packaged_token_counter
from tether.errors import LoadLimitExceeded
from tether.ingest import load_path
from tether.ingest.chunking import _BATCH_CHARS, Section, chunk_sections
from tether.ingest.workers import INLINE_BYTES, SUPPORTED
from tether.text import _CONTROL, _normalized, content_hash, valid_text

needs_workers = pytest.mark.skipif(not SUPPORTED, reason="loader processes need POSIX")

#: One text-showing operation of a content stream: pypdf parses and extracts each.
OPERATION = b"BT /F1 12 Tf 72 720 Td (pump) Tj ET\n"


def inflating_pdf(path: Path, *, pages: int, inflated_mb: int) -> Path:
    """A valid PDF whose every page's content stream inflates (FlateDecode) to
    ``inflated_mb`` MB of text operators: a few kB on disk, minutes of pypdf's time and
    hundreds of MB of its memory."""
    stream = zlib.compress(OPERATION * (inflated_mb * 2**20 // len(OPERATION)), 9)
    font = 3 + 2 * pages
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
    ]
    for i in range(pages):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font"
            f" << /F1 {font} 0 R >> >> /Contents {4 + 2 * i} 0 R >>".encode()
        )
        objects.append(
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream)
            + stream
            + b"\nendstream"
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return path


def note(path: Path, topic: str) -> Path:
    path.write_text(f"# {topic.title()}\n\nThe {topic} note: check the seal weekly.\n")
    return path


def text_file(path: Path, size: int, line: str = "The pump P-101 is primed.\n") -> Path:
    """A text file of exactly ``size`` bytes of ``line`` again and again (at least one)."""
    data = line.encode() * (size // len(line.encode()) + 1)
    path.write_bytes(data[: max(size, len(line.encode()))])
    return path


def loader_processes() -> list[int]:
    """The loader processes this process started that are still there (zombies too)."""
    me, found = str(os.getpid()), []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines())
            command = (status.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if fields.get("PPid", "").strip() == me and b"tether.ingest.workers" in command:
            found.append(int(status.parent.name))
    return found


def by_name(results: list) -> dict:  # type: ignore[type-arg]
    return {Path(r.source).name: r for r in results}


# -- rag.file_timeout -------------------------------------------------------------------------


@needs_workers
def test_a_pdf_that_inflates_past_the_timeout_is_stopped_and_the_add_returns(
    tmp_path: Path,
) -> None:
    """Pages that would keep pypdf busy for minutes: the file fails at the timeout with
    LoadLimitExceeded, its loader is killed (no process outlives the add), and the notes
    and the ordinary PDF beside it are indexed."""
    timeout = 2.0
    bomb = inflating_pdf(tmp_path / "bomb.pdf", pages=3, inflated_mb=8)
    assert bomb.stat().st_size < 100_000
    fine_pdf = make_pdf(tmp_path / "manual.pdf", ["Prime the pump before start-up."] * 2)
    files = [note(tmp_path / "a.md", "valve"), bomb, fine_pdf, note(tmp_path / "b.md", "filter")]
    settings = make_settings(file_timeout=timeout, convert_workers=2)
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        started = time.monotonic()
        results = t.add(files, on_error="collect")
        elapsed = time.monotonic() - started
        assert elapsed < timeout + 5
        if Path("/proc").is_dir():
            assert loader_processes() == []
        results_by_name = by_name(results)
        error = results_by_name["bomb.pdf"].error
        assert isinstance(error, LoadLimitExceeded) and isinstance(error, UnreadableFile)
        assert error.setting == "rag.file_timeout"
        assert f"took longer than {timeout:g}s (rag.file_timeout)" in str(error)
        fine = ("a.md", "manual.pdf", "b.md")
        assert [results_by_name[n].status for n in fine] == ["indexed"] * 3
        assert [Path(r.source).name for r in results] == [f.name for f in files]
        assert {d.title for d in t.documents()} == {"Valve", "Filter", "manual"}
        assert t.search("prime pump", scope="global", mode="lexical")


@needs_workers
def test_a_caller_owned_single_thread_connection_loads_inline_and_still_stops_the_pdf(
    tmp_path: Path,
) -> None:
    """A store on the caller's check_same_thread connection runs no helper threads; its
    PDFs still load in a worker process, so the timeout applies to them."""
    timeout = 2.0
    bomb = inflating_pdf(tmp_path / "bomb.pdf", pages=3, inflated_mb=8)
    conn = sqlite3.connect(tmp_path / "owned.db")
    with Tether(db=conn, settings=make_settings(file_timeout=timeout)) as t:
        assert not t.store.cross_thread
        started = time.monotonic()
        results = t.add([bomb, note(tmp_path / "a.md", "valve")], on_error="collect")
        assert time.monotonic() - started < timeout + 5
        assert [r.status for r in results] == ["failed", "indexed"]
        assert results[0].error.setting == "rag.file_timeout"  # type: ignore[union-attr]


# -- rag.max_file_bytes -----------------------------------------------------------------------


def test_a_file_over_max_file_bytes_fails_before_it_is_read(tmp_path: Path) -> None:
    """The size is checked from the open file (fstat): a sparse 1 GiB "text file" fails
    at once with the default limit, without reading a byte of it; a file over a small
    limit fails with both sizes named; the files within it are indexed."""
    sparse = tmp_path / "huge.txt"
    with sparse.open("wb") as fh:
        fh.truncate(2**30)
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        started = time.monotonic()
        [result] = t.add([sparse], on_error="collect")
        assert time.monotonic() - started < 2
    assert isinstance(result.error, LoadLimitExceeded)
    assert result.error.setting == "rag.max_file_bytes"
    assert "huge.txt: is 1 GB; rag.max_file_bytes is 64 MB" in str(result.error)

    big = text_file(tmp_path / "big.txt", 3 * 2**20)
    small_over = text_file(tmp_path / "over.md", 5000)
    files = [big, small_over, note(tmp_path / "fine.md", "valve")]
    settings = make_settings(max_file_bytes=4096, chunk_by="chars")
    with Tether(db=tmp_path / "small.db", settings=settings) as t:
        results = by_name(t.add(files, on_error="collect"))
    assert "is 3 MB; rag.max_file_bytes is 4 kB" in str(results["big.txt"].error)
    assert "is 4.88 kB; rag.max_file_bytes is 4 kB" in str(results["over.md"].error)
    assert all(isinstance(results[n].error, LoadLimitExceeded) for n in ("big.txt", "over.md"))
    assert results["fine.md"].status == "indexed"


def test_the_library_folder_refuses_a_file_over_max_file_bytes(tmp_path: Path) -> None:
    """A scan hands the indexer the bytes it read: the same limit, the same error."""
    folder = tmp_path / "library"
    folder.mkdir()
    text_file(folder / "big.txt", 20_000)
    note(folder / "fine.md", "valve")
    settings = make_settings(max_file_bytes=10_000, chunk_by="chars")
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        report = t.library(folder, settle=0).scan()
        assert report.failed == [str(folder / "big.txt")]
        assert report.indexed == [str(folder / "fine.md")]
        (row,) = [r for r in t.store.registry(str(folder)) if r.source_path.endswith("big.txt")]
        assert "rag.max_file_bytes is 9.77 kB" in (row.error or "")


def test_a_scan_never_reads_a_file_over_max_file_bytes(tmp_path: Path) -> None:
    """The watcher checks the size from the open file before reading it: a sparse 1 GiB
    file in the library folder fails without its gigabyte ever being allocated, and the
    rest of the folder is indexed."""
    folder = tmp_path / "library"
    folder.mkdir()
    with (folder / "huge.txt").open("wb") as fh:
        fh.truncate(2**30)
    note(folder / "fine.md", "valve")
    with Tether(db=tmp_path / "t.db", settings=make_settings(chunk_by="chars")) as t:
        library = t.library(folder, settle=0)
        tracemalloc.start()
        try:
            report = library.scan()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        (row,) = [r for r in t.store.registry(str(folder)) if r.source_path.endswith("huge.txt")]
    assert report.failed == [str(folder / "huge.txt")]
    assert report.indexed == [str(folder / "fine.md")]
    assert "is 1 GB; rag.max_file_bytes is 64 MB" in (row.error or "")
    assert peak < 64 * 2**20, f"the scan allocated {peak / 2**20:.0f} MiB"


# -- memory below the limit -------------------------------------------------------------------


def test_chunking_in_tokens_measures_a_long_text_in_bounded_batches(tmp_path: Path) -> None:
    """Below ``rag.max_file_bytes`` memory follows the text, not the tokenizer's multiple of
    it: the real tokenizer is handed at most ``_BATCH_CHARS`` characters a call, and
    chunking 2 MB of text allocates (Python side) a small multiple of it."""
    counter = packaged_token_counter()
    assert counter is not None, "make test installs the packaged tokenizer (tether[local])"
    calls: list[int] = []

    class Recording:
        def __call__(self, text: str) -> int | None:
            return counter(text)

        def count_many(self, texts: list[str]) -> list[int | None]:
            calls.append(sum(map(len, texts)))
            return counter.count_many(texts)

        def offsets_many(self, texts: list[str]) -> list[list[tuple[int, int]]] | None:
            calls.append(sum(map(len, texts)))
            return counter.offsets_many(texts)

    sentence = "The valve seat of pump {n} is checked before the seal is replaced. "
    text = "".join(sentence.format(n=i) + ("\n\n" if i % 7 == 0 else "") for i in range(30_000))
    counter("warm the tokenizer up")
    tracemalloc.start()
    try:
        chunks = chunk_sections(
            text,
            [Section(0, len(text))],
            size=1200,
            overlap=150,
            title="Pumps",
            count_tokens=Recording(),
            max_tokens=256,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text.rstrip())
    assert all((c.token_count or 0) <= 256 for c in chunks)
    assert len(calls) > 10 and max(calls) <= _BATCH_CHARS
    assert peak < 12 * len(text), f"{peak / len(text):.1f} bytes allocated per character"


# -- rag.loader_memory_mb ---------------------------------------------------------------------


@needs_workers
def test_a_file_that_needs_more_than_the_loader_memory_fails_alone(tmp_path: Path) -> None:
    """A text file large enough to go to a worker, whose decoding and normalizing need
    more than 128 MB: the worker runs out (RLIMIT_AS), the file fails saying so, and a
    new worker loads the next large file."""
    hungry = text_file(tmp_path / "hungry.txt", 40 * 2**20, "Pumpe P-101 kostet 40 € pro Stunde.\n")
    fine = text_file(tmp_path / "fine.txt", INLINE_BYTES + 10_000)
    settings = make_settings(loader_memory_mb=128, convert_workers=1, chunk_by="chars")
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        results = by_name(t.add([hungry, fine], on_error="collect"))
    error = results["hungry.txt"].error
    assert isinstance(error, LoadLimitExceeded) and error.setting == "rag.loader_memory_mb"
    assert "needed more than 128 MB of memory (rag.loader_memory_mb)" in str(error)
    assert results["fine.txt"].status == "indexed"


MEASURE = """
import json, resource, sys, time
from pathlib import Path
from tether import Settings, Tether

def peak_mb(who):
    return resource.getrusage(who).ru_maxrss / 1024

folder = Path(sys.argv[1])
settings = Settings.load(rag={"file_timeout": 60, "loader_memory_mb": 128,
                              "chunk_by": "chars", "embeddings": {"enabled": False}})
with Tether(db=folder / "t.db", settings=settings) as t:
    t.add([folder / "warm.md"])  # the store and the loaders' first use, before measuring
    before = peak_mb(resource.RUSAGE_SELF)
    started = time.monotonic()
    [result] = t.add([folder / "bomb.pdf"], on_error="collect")
    elapsed = time.monotonic() - started
print(json.dumps({
    "seconds": elapsed, "error": str(result.error),
    "setting": getattr(result.error, "setting", None),
    "parent_growth_mb": peak_mb(resource.RUSAGE_SELF) - before,
    "worker_peak_mb": peak_mb(resource.RUSAGE_CHILDREN),
}))
"""


@pytest.mark.slow
@needs_workers
def test_an_inflating_pdf_costs_the_worker_its_memory_limit_and_the_indexer_nothing(
    tmp_path: Path,
) -> None:
    """Measured in a fresh interpreter: the PDF's parsing grows its worker to the 128 MB
    limit, where the worker dies and the file fails; the indexing process itself does
    not grow with the file (what the file made pypdf hold stayed in the worker)."""
    inflating_pdf(tmp_path / "bomb.pdf", pages=3, inflated_mb=8)
    note(tmp_path / "warm.md", "valve")
    run = subprocess.run(
        [sys.executable, "-c", MEASURE, str(tmp_path)],
        capture_output=True, text=True, check=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    measured = json.loads(run.stdout.splitlines()[-1])
    assert measured["setting"] == "rag.loader_memory_mb", measured
    assert measured["worker_peak_mb"] > 80, measured  # the file took what it could
    assert measured["parent_growth_mb"] < 30, measured
    assert measured["seconds"] < 60


# -- the worker path loads as the indexing process does ----------------------------------------


@needs_workers
@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("binary.txt", b"\x00\x01" * (INLINE_BYTES // 2 + 10), UnreadableFile),
        ("blank.md", b"\n \t\n" * (INLINE_BYTES // 4 + 10), EmptyDocument),
        ("not.pdf", b"%PDF-1.4 but nothing after it", UnreadableFile),
        ("empty.pdf", b"", UnreadableFile),
    ],
)
def test_a_worker_fails_a_file_as_loading_here_does(
    tmp_path: Path, name: str, content: bytes, error: type[Exception]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(error) as here:
        load_path(path)
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        [result] = t.add([path], on_error="collect")
    assert type(result.error) is type(here.value)
    assert str(result.error) == str(here.value)


@needs_workers
def test_a_worker_loads_the_same_document_as_loading_here(tmp_path: Path) -> None:
    """Large text and Markdown files and PDFs load in workers: the same text, title and
    chunks as loaded here (chunks sized in characters, to keep the test quick)."""
    paragraph = "The pump P-{0} is primed before start-up; check the seal.\r\n\n\n" * 20
    body = "".join(f"## Part {i}\n\n{paragraph.format(i)}" for i in range(1000))
    files = [
        text_file(tmp_path / "long.md", 0, f"---\ntitle: Long\n---\n\n{body}"),
        text_file(tmp_path / "long.txt", INLINE_BYTES + 1, "Seal\u0301 \t\n\n\n"),
        make_pdf(tmp_path / "manual.pdf", ["Prime the pump.", "Check the seal."], title="Pumps"),
    ]
    assert all(f.stat().st_size > INLINE_BYTES for f in files[:2])
    with Tether(db=tmp_path / "t.db", settings=make_settings(chunk_size=2000)) as t:
        results = t.add(files)
        for path, result in zip(files, results, strict=True):
            here = load_path(path)
            document = t.get_document(result.document_id)
            assert (document.title, document.mime) == (here.title, here.mime)
            assert document.content_hash == content_hash(here.text)
            assert document.file_size == path.stat().st_size
            chunks = t.chunks(result.document_id)
            assert chunks
            assert all(here.text[c.char_start : c.char_end] == c.content for c in chunks)


# -- normalize_text in pieces -----------------------------------------------------------------


def whole_text_normalization(text: str) -> str:
    """normalize_text as it was, on the whole text at once: the definition it keeps."""
    text = unicodedata.normalize("NFC", valid_text(text))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip(" \t\u00a0") for line in text.split("\n"))
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip("\n").rstrip()


TRICKY = "\n\n\n\r\r\n  \t\u00a0\x0b\x0c\x1f\u200b\ufeff\u3000\u2028\x85e\u0301\u0327\u00e9\ud800a"


@hsettings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(TRICKY)), max_size=40), st.integers(1, 9))
def test_normalizing_in_pieces_is_normalizing_the_whole_text(text: str, piece: int) -> None:
    """Pieces of whole lines, their blank runs joined across the cuts: the same text as
    one pass over the whole (NFC, line breaks, controls, trailing and blank lines)."""
    assert _normalized(text, piece) == whole_text_normalization(text)
