"""Loading in worker processes, which can be stopped where a thread cannot.

A loader turns bytes into a :class:`~tether.ingest.loaders.LoadedDocument` (PDF parsing,
decoding, normalization, sections): pure work that a hostile file can make endless or
huge (a 150 kB PDF whose streams inflate to tens of MB of text operators keeps pypdf busy
for minutes). A thread running it cannot be killed; a process can. :class:`LoaderPool`
keeps worker processes for one indexing batch, gives each the bytes of one file at a
time and reuses it for the next, and:

- kills a worker (SIGKILL, at once: nothing waits for it) whose file takes longer than
  ``rag.file_timeout``, and ``rag.ocr_page_timeout`` more for each page the worker says
  it has begun to read by OCR (a :class:`FileBudget`): the file fails with
  :class:`~tether.errors.LoadLimitExceeded`, and the next file gets a fresh worker;
- limits each worker's memory to ``rag.loader_memory_mb`` (``RLIMIT_AS``, set in the
  worker): a file that needs more fails with the same error, whether the worker saw a
  ``MemoryError`` or died of it, and the worker is replaced.

So a hostile file costs its timeout and a bounded amount of memory, none of it in the
indexing process. Workers are new interpreters (``subprocess``: fork and exec at once,
so no thread of the indexing process, torch's or a tokenizer's, is copied half-way, as a
plain fork would), started in the background when a batch has files for them. They
import the loading modules only (0.2-0.3 s; the whole library would take 0.9 s), not the
caller's main script, which multiprocessing's spawn and forkserver methods would run
again in every worker. Without POSIX processes (Windows), files load in the calling
thread.

Which files go to a worker: see :func:`loads_in_process`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tether.errors import IngestError, LoadLimitExceeded, UnreadableFile
from tether.ingest.formats import by_extension, format_of, load_file, load_path
from tether.ingest.loaders import FileBytes, LoadedDocument, read_file, too_large
from tether.ingest.ocr_engine import OcrOptions, configure, on_each_page
from tether.ingest.sources import PathSource, Source

T = TypeVar("T")

#: Text, Markdown and HTML files up to this size load in the indexing process.
INLINE_BYTES = 1 << 20
#: Worker processes need fork and exec, and a socket handed to the child.
SUPPORTED = os.name == "posix" and bool(sys.executable) and not getattr(sys, "frozen", False)
#: How long closing the pool waits for its killed workers to be gone, in all.
REAP_SECONDS = 2.0
#: The exit status of a worker out of memory that could not say so.
OUT_OF_MEMORY = 75
#: The least time a worker process is given to start, whatever ``rag.file_timeout``.
START_SECONDS = 30.0
#: What a worker sends as each page's OCR starts, before its reply.
OCR_PAGE = "ocr page"
#: A worker whose file runs this long past the timeout ends itself: the pool that would
#: have killed it is gone (its process was killed).
ORPHAN_GRACE = 10.0

_HERE = Path(__file__).resolve().parent
# The worker imports the loading modules under bare packages: tether/__init__.py (the
# facade, pydantic, numpy) is not needed to load a file and triples the start-up time.
_PACKAGES = (("tether", str(_HERE.parent)), ("tether.ingest", str(_HERE)))
_BOOTSTRAP = """\
import sys, types
from multiprocessing.connection import Connection
conn = Connection(int(sys.argv[1]))
sys.path[:], packages, limits = conn.recv()
for name, folder in packages:
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = [folder]
from tether.ingest.workers import serve
serve(conn, limits)
"""


def loads_in_process(path: Path, size: int) -> bool:
    """Whether a file of ``size`` bytes at ``path`` is loaded in the indexing process
    rather than in a worker, as far as its name says.

    Text, Markdown, HTML and source files up to :data:`INLINE_BYTES` (1 MiB) are: their
    loaders are linear in the file (1 MiB of text: 50 ms, Markdown: 160 ms, 6 MB at
    most), so they cannot be made to hang, and a batch of notes starts no process at all
    (500 small notes: 1.1 s either way; through workers, 1.9 s). A PDF, an Office file,
    an e-book or an image always goes to a worker (its few kB can inflate to any amount
    of work), and so does any larger file. A file whose name says nothing is read here
    and goes where its content says (:func:`load_path_source`)."""
    found = by_extension(path)
    return found is not None and found.inline and size <= INLINE_BYTES


def timed_out(
    source: str, timeout: float, how: str, budget: FileBudget | None = None
) -> LoadLimitExceeded:
    pages = ""
    if budget is not None and budget.pages:
        pages = f" and {budget.per_page:g}s for each of its {budget.pages} pages read by OCR"
    return LoadLimitExceeded(
        source,
        f"loading took longer than {timeout:g}s (rag.file_timeout){pages}; {how}. Raise"
        " rag.file_timeout to give such a file longer",
        setting="rag.file_timeout",
    )


class FileBudget:
    """A file's time: ``rag.file_timeout``, and ``rag.ocr_page_timeout`` more for each
    page its loader reads by OCR (a page is bounded by that on its own), so that a long
    scanned book is read to its end while a file that hangs still stops at the timeout.
    The worker process is stopped past it, and the indexer waits for the file as long."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.pages = 0
        self.per_page = 0.0

    def ocr_page(self, seconds: float) -> None:
        """A page's OCR started: the file gets ``seconds`` more."""
        self.pages += 1
        self.per_page = seconds

    @property
    def total(self) -> float:
        return self.seconds + self.pages * self.per_page

    def waited(self, future: concurrent.futures.Future[T]) -> T:
        """``future``'s result, waited for as long as this budget says (it grows while the
        file's pages are read); ``TimeoutError`` past it."""
        started = time.monotonic()
        while True:
            left = started + self.total - time.monotonic()
            try:
                return future.result(timeout=max(left, 0.0))
            except concurrent.futures.TimeoutError:
                if time.monotonic() >= started + self.total:
                    raise


class FileLoader(Protocol):
    """What loads a file that must not load in the indexing process."""

    def load(self, file: FileBytes) -> LoadedDocument: ...


@dataclass(frozen=True)
class BudgetedLoader:
    """The pool, for one file: the OCR pages of what it loads grow ``budget``."""

    pool: LoaderPool
    budget: FileBudget

    def load(self, file: FileBytes) -> LoadedDocument:
        return self.pool.load(file, self.budget)


class LoaderPool:
    """Worker processes that load files for one indexing batch (see the module's
    docstring). ``load`` may be called from several threads at once, each call using a
    worker of its own; ``close`` kills them all, busy or not."""

    def __init__(
        self,
        *,
        timeout: float,
        memory_mb: int,
        ocr: bool = True,
        ocr_page_timeout: float = 60.0,
        language: str = "english",
        ocr_engine: str = "auto",
    ) -> None:
        self.timeout = timeout
        self.memory_mb = memory_mb
        #: rag.ocr, rag.ocr_page_timeout, rag.language and rag.ocr_engine, for each worker.
        self.ocr = OcrOptions(
            enabled=ocr, page_timeout=ocr_page_timeout, language=language, engine=ocr_engine
        )
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._gone: list[_Worker] = []  # killed, not yet reaped
        self._closed = False

    def __enter__(self) -> LoaderPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self, count: int) -> None:
        """Start up to ``count`` workers now, so that they boot while the batch's first
        files are read and chunked."""
        if not SUPPORTED:
            return
        with self._lock:
            while not self._closed and len(self._idle) + len(self._busy) < count:
                try:
                    self._idle.append(self._new_worker())
                except OSError:  # (out of processes or descriptors: ``load`` says so)
                    return

    def budgeted(self, budget: FileBudget) -> BudgetedLoader:
        """This pool for one file, whose OCR pages grow ``budget``."""
        return BudgetedLoader(self, budget)

    def load(self, file: FileBytes, budget: FileBudget | None = None) -> LoadedDocument:
        """``file`` loaded by a worker: its document, or the loader's error raised here.
        A file stopped by the timeout or the memory limit is :class:`LoadLimitExceeded`;
        each page read by OCR adds ``rag.ocr_page_timeout`` to its time (and ``budget``)."""
        if not SUPPORTED:
            configure(self.ocr)  # (this process's options: the last pool's win)
            return load_file(file)
        try:
            worker = self._take()
        except OSError as exc:
            problem = f"no loader process could be started ({exc.strerror or exc})"
            raise UnreadableFile(str(file.path), problem) from exc
        try:
            reply = worker.load(file, budget or FileBudget(self.timeout))
        except BaseException:
            worker.kill()  # (interrupted mid-message, it cannot take another file)
            raise
        finally:
            self._give_back(worker)
        if reply[0] == "loaded":
            return reply[1]  # type: ignore[no-any-return]
        if reply[0] == "refused":  # an IngestError of the loader: not text, no text...
            kind, source, reason = reply[1:]
            raise kind(source, reason)
        raise reply[1]  # anything else, as the loader raised it

    def close(self) -> None:
        """Kill every worker now, busy or not (a busy one's file fails), and reap the
        others (a busy one is reaped by the thread that gave it its file)."""
        with self._lock:
            self._closed = True
            busy = list(self._busy)
            done, self._idle, self._gone = [*self._idle, *self._gone], [], []
        for worker in [*busy, *done]:
            worker.kill()
        deadline = time.monotonic() + REAP_SECONDS
        for worker in done:
            worker.reap(max(0.0, deadline - time.monotonic()))

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise RuntimeError("the loader pool is closed")
            worker = self._idle.pop() if self._idle else self._new_worker()
            self._busy.add(worker)
            return worker

    def _new_worker(self) -> _Worker:
        return _Worker(timeout=self.timeout, memory_mb=self.memory_mb, ocr=self.ocr)

    def _give_back(self, worker: _Worker) -> None:
        """Back to the idle workers; or, killed (or out of memory), to be reaped at
        close, or now when the pool is closed already."""
        with self._lock:
            self._busy.discard(worker)
            closed = self._closed
            if worker.healthy and not closed:
                self._idle.append(worker)
                return
            if not closed:
                self._gone.append(worker)
        worker.kill()
        if closed:
            worker.reap(REAP_SECONDS)


class _Worker:
    """One worker process, and the socket that carries its files and documents."""

    def __init__(self, *, timeout: float, memory_mb: int, ocr: OcrOptions) -> None:
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.page_timeout = ocr.page_timeout
        ours, theirs = socket.socketpair()
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        self.conn = Connection(ours.detach())
        # Plain values only: unpickling a tether class would import tether before the
        # worker has set up its bare packages.
        ocr_limits = (ocr.enabled, ocr.page_timeout, ocr.language, ocr.engine)
        limits = (memory_mb * 2**20, timeout + ORPHAN_GRACE, ocr_limits)
        self.conn.send((sys.path, _PACKAGES, limits))
        self.ready = False
        self.healthy = True

    def load(self, file: FileBytes, budget: FileBudget) -> tuple[Any, ...]:
        """The worker's reply for ``file``: ("loaded", document), ("refused", error
        class, source, reason) or ("raised", exception). :class:`LoadLimitExceeded`
        when it was stopped or died; it is then unhealthy, never given another file.
        The worker says when each page's OCR starts: ``budget`` grows by the page's time."""
        source = str(file.path)
        if not self.ready:
            self._start(source)
        try:
            self.conn.send(file.path)
            self.conn.send_bytes(file.data)
        except OSError:
            raise self._died(source) from None
        deadline = time.monotonic() + self.timeout
        while True:
            if not self._answers(max(0.0, deadline - time.monotonic())):
                raise timed_out(source, self.timeout, "its loader was stopped", budget)
            reply: tuple[Any, ...] = self._receive(source)
            if reply[0] != OCR_PAGE:
                break
            deadline += self.page_timeout
            budget.ocr_page(self.page_timeout)
        if reply[0] == "memory":
            raise self._out_of_memory(source, "it ran out")
        return reply

    def _start(self, source: str) -> None:
        """Wait for the worker to be ready. Its start-up is not the file's time, but one
        that cannot start in as long (and :data:`START_SECONDS` at least: a busy machine
        boots slowly) fails the file rather than hang the batch."""
        seconds = max(self.timeout, START_SECONDS)
        if not self._answers(seconds):
            raise timed_out(source, seconds, "its loader process did not start in time")
        with contextlib.suppress(EOFError, OSError):
            self.ready = self.conn.recv() == "ready"
        if not self.ready:
            self.kill()
            raise UnreadableFile(
                source,
                f"its loader process could not start (exit status {self.reap(1.0)});"
                " run `python -c 'import tether.ingest.loaders'` to see why",
            )

    def _answers(self, timeout: float) -> bool:
        """Whether the worker answers within ``timeout``; when not, it is killed."""
        if self.conn.poll(timeout):
            return True
        self.kill()
        return False

    def _receive(self, source: str) -> Any:
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise self._died(source) from None

    def _died(self, source: str) -> LoadLimitExceeded:
        """A worker that went mid-file: the memory limit (a C allocation that failed
        aborts it, the kernel may kill it) or a crash, which looks the same from here."""
        self.healthy = False
        code = self.reap(1.0)
        if code == OUT_OF_MEMORY:
            how = "it ran out"
        elif code is not None and code < 0:
            how = f"its loader process died of signal {-code}"
        else:
            how = f"its loader process died (exit status {code})"
        return self._out_of_memory(source, how)

    def _out_of_memory(self, source: str, how: str) -> LoadLimitExceeded:
        self.healthy = False
        return LoadLimitExceeded(
            source,
            f"loading needed more than {self.memory_mb} MB of memory (rag.loader_memory_mb):"
            f" {how}. Raise rag.loader_memory_mb to load such a file",
            setting="rag.loader_memory_mb",
        )

    def kill(self) -> None:
        """SIGKILL, without waiting for the process to go."""
        self.healthy = False
        with contextlib.suppress(OSError):
            self.process.kill()

    def reap(self, timeout: float) -> int | None:
        """The exit status, once the process is gone (within ``timeout``), its socket
        closed; None when it is still there (``subprocess`` reaps it later). Only by the
        thread that uses the socket, or once none does."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout)
        if self.process.returncode is not None:
            self.conn.close()
        return self.process.returncode


# -- in the worker ---------------------------------------------------------------------------


def serve(conn: Connection, limits: tuple[int, float, tuple[bool, float, str, str]]) -> None:
    """The worker's loop: a path and its bytes in, a reply out, until the pool goes.
    ``limits``: the bytes of memory it may use, the seconds a file may take before it
    ends itself (the pool kills it sooner, unless the pool is gone), and its OCR options
    (``rag.ocr``, ``rag.ocr_page_timeout``, ``rag.language``, ``rag.ocr_engine``; the
    engine is loaded by the first scan).

    Out of memory, it replies so if it still can, and goes (a worker that ran out may be
    in any state: the pool starts another); when it cannot even reply, it goes quietly,
    and the pool reads its death as the memory limit."""
    memory, seconds, (ocr, page_timeout, language, engine) = limits
    configure(OcrOptions(ocr, page_timeout, language, engine))
    on_each_page(lambda: _ocr_page(conn, page_timeout))
    _limit_memory(memory)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the pool's to handle
    conn.send("ready")
    try:
        while True:
            try:
                path = conn.recv()
                data = conn.recv_bytes()
            except EOFError:
                return
            signal.setitimer(signal.ITIMER_REAL, seconds)  # SIGALRM ends the process
            reply = _load(FileBytes(path, data))
            signal.setitimer(signal.ITIMER_REAL, 0)
            del data
            conn.send(reply)
            if reply[0] == "memory":
                return
    except MemoryError:
        os._exit(OUT_OF_MEMORY)


def _ocr_page(conn: Connection, seconds: float) -> None:
    """A page's OCR starts: the file gets ``seconds`` more, here and in the pool."""
    with contextlib.suppress(ValueError):  # (not on the main thread: the pool's clock only)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, left + seconds)
    conn.send((OCR_PAGE,))


def _load(file: FileBytes) -> tuple[Any, ...]:
    try:
        return ("loaded", load_file(file))
    except MemoryError:
        pass  # replied below, once the traceback (and the half-built document) is gone
    except IngestError as exc:
        kind = type(exc)
        try:
            kind(exc.source, exc.reason)
        except TypeError:  # an error made otherwise (none of the loaders' own)
            kind = UnreadableFile
        return ("refused", kind, exc.source, exc.reason)
    except Exception as exc:
        return ("raised", _portable(exc))
    return ("memory",)


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling (the pool raises it as it is), else a
    RuntimeError that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"the loader raised {type(exc).__name__}: {exc}")
    return exc


def _limit_memory(memory: int) -> None:
    """Cap the worker's address space at ``memory`` bytes: past it, allocations fail
    (``MemoryError``) instead of the machine swapping. Where the platform refuses, the
    timeout still bounds the worker."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            memory = min(memory, hard)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ImportError, ValueError, OSError):
        pass


def load_path_source(
    source: PathSource, loaders: FileLoader, max_bytes: int
) -> tuple[Path, LoadedDocument]:
    """The file's path as stored, and its document, from one read of the file (or from
    the bytes the source brings, read by the caller; the path is then taken as given).

    A file over ``max_bytes`` (``rag.max_file_bytes``) fails before it is read. Small text
    files load here, PDFs and larger files in a worker process (:func:`loads_in_process`);
    a file whose name says nothing goes where its content says.
    """
    if source.content is not None:
        path = Path(source.path).expanduser().absolute()
        return path, load_bytes(FileBytes(path, source.content), loaders, max_bytes)
    resolved = Path(source.path).expanduser().resolve()
    size = _file_size(resolved)
    if size is None or (size <= max_bytes and loads_in_process(resolved, size)):
        return resolved, load_path(resolved)  # (which says what is wrong with the path)
    return resolved, load_bytes(read_file(resolved, max_bytes=max_bytes), loaders, max_bytes)


def load_bytes(file: FileBytes, loaders: FileLoader, max_bytes: int) -> LoadedDocument:
    """``file`` loaded here when it is small text (by its name, else its content), else
    by a worker; a file of no format tether reads fails here, whatever its size."""
    found = format_of(file.path, file.data)
    if file.size > max_bytes:
        raise too_large(str(file.path), file.size, max_bytes)
    if found.inline and file.size <= INLINE_BYTES:
        return load_file(file)
    return loaders.load(file)


def _file_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def loads_in_worker(source: Source, max_bytes: int) -> bool:
    """Whether ``source`` will be loaded by a worker process (as far as its name and size
    say now), so that the batch starts workers for it at once."""
    if not isinstance(source, PathSource):
        return False
    path = Path(source.path).expanduser()
    size = len(source.content) if source.content is not None else _file_size(path)
    known = by_extension(path) is not None
    return size is not None and size <= max_bytes and known and not loads_in_process(path, size)


class InlineExecutor:
    """``submit`` runs the call at once, in this thread: no timeout applies to the thread,
    only to the files it hands to worker processes."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def shutdown(self, **_: Any) -> None:
        return None
