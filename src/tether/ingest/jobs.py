"""Indexing off the caller's thread: a small worker pool and the job handles it returns.

:meth:`tether.Tether.submit` (and the triggers built on it) returns an :class:`IndexJob`
at once. The job runs on a background thread pool (``rag.index_workers`` threads);
its handle reports ``status`` (``queued``, ``running``, ``succeeded``, ``failed``,
``cancelled``), ``progress`` (sources done of total, and the one being processed), and
``results`` so far. ``wait()`` blocks, ``await job`` waits without blocking an event
loop, ``cancel()`` stops it between sources (a document is never stored half-way), and
progress callbacks fire after each source, on the worker thread.

A job fails when one of its sources failed; the other sources of the job are still
indexed, and other jobs are not affected at all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tether.errors import IndexingCancelled, InvalidArgument
from tether.models import IndexResult

logger = logging.getLogger("tether.jobs")

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
#: Finished jobs kept for :meth:`Tether.jobs` (older ones are forgotten).
KEEP_FINISHED = 1000


@dataclass(frozen=True)
class JobProgress:
    done: int
    total: int
    current: str | None  # the source being processed, if any
    description: str  # e.g. "Processing PDF 3 of 12"

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


ProgressCallback = Callable[["IndexJob", JobProgress], None]


class IndexJob:
    """A handle on background indexing. Thread-safe; cheap to poll."""

    def __init__(
        self, kind: str, labels: Sequence[str], order: Sequence[int] | None = None
    ) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.kind = kind
        self._labels = list(labels)  # in submission order
        # The order the sources are processed in (smallest first), for ``current``.
        self._order = list(order) if order is not None else list(range(len(labels)))
        self._final: list[IndexResult] | None = None
        self._lock = threading.Lock()
        self._status: JobStatus = "queued"
        self._results: list[IndexResult] = []
        self._error: BaseException | None = None
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._future: concurrent.futures.Future[list[IndexResult]] | None = None

    def __repr__(self) -> str:
        p = self.progress
        return f"IndexJob({self.id}, {self.kind}, {self.status}, {p.done}/{p.total})"

    @property
    def status(self) -> JobStatus:
        return self._status

    @property
    def results(self) -> list[IndexResult]:
        """The results: once the job has ended, one per source in submission order; while
        it runs, those of the sources finished so far, in the order they finished."""
        with self._lock:
            return list(self._final if self._final is not None else self._results)

    @property
    def error(self) -> BaseException | None:
        """What stopped the job, when something other than one source failed."""
        return self._error

    @property
    def progress(self) -> JobProgress:
        with self._lock:
            done, total = len(self._results), len(self._labels)
            finished = {r.source for r in self._results}
        current = None
        if self._status == "running":
            current = next(
                (self._labels[i] for i in self._order if self._labels[i] not in finished), None
            )
        shown = min(done + 1, total) if self._status == "running" else done
        return JobProgress(done, total, current, f"Processing {self.kind} {shown} of {total}")

    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> bool:
        """Stop the job: a queued job never starts; a running one stops before its next
        source. False when it had already finished."""
        if self._done.is_set():
            return False
        self._cancel.set()
        if self._future is not None and self._future.cancel():
            self._finish("cancelled")
        return True

    def wait(self, timeout: float | None = None) -> list[IndexResult]:
        """Block until the job ends; its results. Raises TimeoutError after ``timeout``
        seconds, and the job's error when it crashed (not when a source failed: see
        ``status`` and each result's ``error``)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"job {self.id} still {self.status} after {timeout}s")
        if self._error is not None:
            raise self._error
        return self.results

    result = wait

    async def async_wait(self) -> list[IndexResult]:
        """:meth:`wait` for asyncio: the loop keeps running meanwhile."""
        await asyncio.to_thread(self._done.wait)
        return self.wait(0)

    def __await__(self) -> Generator[Any, None, list[IndexResult]]:
        return self.async_wait().__await__()

    # -- called by the worker --

    def _record(self, result: IndexResult) -> None:
        with self._lock:
            self._results.append(result)

    def _start(self) -> bool:
        with self._lock:
            if self._cancel.is_set():
                return False
            self._status = "running"
            return True

    def _finish(
        self,
        status: JobStatus,
        error: BaseException | None = None,
        results: list[IndexResult] | None = None,
    ) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._status = status
            self._error = error
            if results is not None:
                self._final = results
        self._done.set()


class IndexWorker:
    """The thread pool jobs run on. ``index`` is the function that indexes a list of
    sources (:meth:`tether.ingest.indexer.Indexer.add`)."""

    def __init__(self, index: Callable[..., list[IndexResult]], workers: int = 2) -> None:
        if workers < 1:
            raise InvalidArgument(f"workers must be >= 1, not {workers}")
        self._index = index
        self._pool = concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix="tether-index"
        )
        self._jobs: dict[str, IndexJob] = {}

    def submit(
        self,
        kind: str,
        labels: Sequence[str],
        call: dict[str, Any],
        on_progress: ProgressCallback | None = None,
        order: Sequence[int] | None = None,
    ) -> IndexJob:
        job = IndexJob(kind, labels, order)
        self._prune()
        self._jobs[job.id] = job

        def progress(done: int, total: int, result: IndexResult) -> None:
            job._record(result)
            if on_progress is not None:
                try:
                    on_progress(job, job.progress)
                except Exception:  # a UI callback must not break indexing
                    logger.exception("progress callback of job %s failed", job.id)

        def run() -> list[IndexResult]:
            if not job._start():
                job._finish("cancelled")
                return []
            try:
                results = self._index(
                    **call, progress=progress, cancelled=job._cancel.is_set, on_error="collect"
                )
            except BaseException as exc:
                logger.exception("indexing job %s crashed", job.id)
                job._finish("failed", exc)
                raise
            stopped = any(isinstance(r.error, IndexingCancelled) for r in results)
            if job._cancel.is_set() and stopped:
                job._finish("cancelled", results=results)
            elif any(r.error is not None for r in results):
                job._finish("failed", results=results)
            else:  # a cancel that came after the last source started changes nothing
                job._finish("succeeded", results=results)
            return results

        job._future = self._pool.submit(run)
        return job

    def jobs(self) -> list[IndexJob]:
        return list(self._jobs.values())

    def _prune(self) -> None:
        """Forget the oldest finished jobs beyond :data:`KEEP_FINISHED`."""
        finished = [j for j in self._jobs.values() if j.done()]
        for job in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            self._jobs.pop(job.id, None)

    def shutdown(self, *, wait: bool = True) -> None:
        """Cancel queued jobs; with ``wait``, let running ones finish their current source."""
        for job in self._jobs.values():
            if job.status == "queued":
                job.cancel()
        self._pool.shutdown(wait=wait, cancel_futures=True)
