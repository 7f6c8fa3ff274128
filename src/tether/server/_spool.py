"""Accepted uploads that survive the server: a 202 means "will be indexed".

An upload is received into ``<spool>/<id>.partial/``; once its form is checked, a
manifest (``job.json``: where it goes, the names it was uploaded under, who sent it) is
written and synced, and the folder renamed to ``<spool>/<id>/`` — only then is the 202
sent. The job indexes the files from there; when it ends, its results go into the
manifest and its files are deleted. A server that starts (:meth:`Spool.recover`) sweeps
``*.partial`` folders (uploads cut off mid-body: never answered 202), and resubmits every
manifest whose job had not ended (files already indexed are skipped by their hash), so a
kill -9 or a power cut loses no accepted upload; a job that cannot resume ends
``failed``, with the reason, visibly. A SIGTERM lets running jobs finish for a while
(``drain``), then leaves the rest to the next start.

The spool is ``server.upload_dir``, by default beside a SQLite store (``t.db`` ->
``t.db-uploads/``); a PostgreSQL or in-memory store's is under the system's temporary
folder unless configured.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether import IndexJob, JobProgress, PathSource, StorageFull, StorageReadOnly, Tether

logger = logging.getLogger("tether.server")

MANIFEST = "job.json"
PARTIAL = ".partial"
#: Ended jobs' manifests are kept this long (seconds), so a client polling after a
#: restart still reads the outcome.
KEEP_ENDED_SECONDS = 7 * 24 * 3600


def spool_root(tether: Tether) -> Path | None:
    """Where a server over ``tether`` keeps accepted uploads until they are indexed;
    None for a store that does not outlive the process (in memory, a connection you
    own): its uploads need not outlive it either."""
    configured = tether.settings.server.upload_dir
    if configured:
        return Path(configured).expanduser()
    location = tether.store.location
    if Path(location).is_file():  # a SQLite file: its spool beside it
        return Path(f"{location}-uploads")
    if "://" not in location:
        return None
    digest = hashlib.sha256(location.encode("utf-8", "replace")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"tether-uploads-{digest}"


@contextlib.contextmanager
def spool_failures(root: Path) -> Iterator[None]:
    """The spool's own disk failing (full, read-only) as the store's typed errors: an
    upload then answers 507 or 503, like a write to the store would."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise StorageFull(
                f"cannot accept the upload: the disk of the upload spool {root} is full."
                " Nothing was stored and nothing stored before was lost; free space and retry"
            ) from exc
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise StorageReadOnly(
                f"cannot accept the upload: the upload spool {root} cannot be written"
                f" ({exc.strerror}). Reads still work; make it writable, or set"
                " server.upload_dir to a writable folder"
            ) from exc
        raise


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as ``path``, whole or not at all, on disk before this returns."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as file:
        json.dump(data, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _sync_folder(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system syncs a folder
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass
class SpooledJob:
    """One accepted upload: its manifest, and the library job indexing it (while one
    runs in this process) or its outcome (once it ended, in this process or before)."""

    id: str
    folder: Path
    workspace_id: str
    session_id: str | None
    tags: dict[str, Any] | None
    #: Each file of the folder -> the name it was uploaded under.
    names: dict[str, str]
    asked_by: str | None
    created_at: float = field(default_factory=time.time)
    job: IndexJob | None = None
    ended: dict[str, Any] | None = None
    bytes: int = 0

    def manifest(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspace_id": self.workspace_id,
            "session_id": self.session_id,
            "tags": self.tags,
            "names": self.names,
            "asked_by": self.asked_by,
            "created_at": self.created_at,
            "ended": self.ended,
        }

    @classmethod
    def read(cls, folder: Path) -> SpooledJob:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        job = cls(
            data["id"],
            folder,
            data["workspace_id"],
            data["session_id"],
            data["tags"],
            data["names"],
            data["asked_by"],
            data["created_at"],
            ended=data["ended"],
        )
        job.bytes = sum(p.stat().st_size for p in job.paths() if p.exists())
        return job

    def paths(self) -> dict[Path, str]:
        """The files to index, each with the name it was uploaded under."""
        return {self.folder / name: shown for name, shown in self.names.items()}

    def sources(self) -> list[PathSource]:
        # Known by the upload name, not the path: the same upload again is the same
        # document, skipped when unchanged (a resumed job skips what was indexed).
        return [
            PathSource(path, tags=self.tags, source=f"upload:{name}")
            for path, name in self.paths().items()
        ]

    @property
    def status(self) -> str:
        """The job's status; an indexing job that finished is still ``running`` until its
        end is recorded in the spool (its manifest written, its files deleted), so that
        a client that saw it end and stops the server leaves nothing to resume."""
        if self.ended is not None:
            return str(self.ended["status"])
        if self.job is None:
            return "queued"
        return "running" if self.job.status in _ENDED else self.job.status

    @property
    def progress(self) -> JobProgress:
        if self.job is not None and self.ended is None:
            return self.job.progress
        total = len(self.names)
        done = total if self.ended is not None else 0
        return JobProgress(done, total, None, f"{done} of {total} files")

    def done(self) -> bool:
        return self.ended is not None


#: Statuses of an indexing job that has ended.
_ENDED = frozenset({"succeeded", "failed", "cancelled"})


class Spool:
    """The folder of accepted uploads (see the module docstring), and the bytes they
    hold until indexed (``max_bytes`` bounds them: a 429 beyond)."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.jobs: dict[str, SpooledJob] = {}
        self.closing = False
        self.temporary = False
        self._lock = threading.Lock()
        #: Bytes being received, and bytes of accepted jobs not yet ended: counted as
        #: they change, since every piece of an upload asks (:meth:`reserve`).
        self._receiving = 0
        self._queued = 0

    # -- receiving -----------------------------------------------------------------------

    def receiving(self) -> Path:
        """A private folder for an upload being received."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        return Path(tempfile.mkdtemp(prefix=uuid.uuid4().hex[:12], suffix=PARTIAL, dir=self.root))

    def reserve(self, size: int) -> bool:
        """Count ``size`` more bytes as queued, if the bound allows them."""
        with self._lock:
            if self._queued + self._receiving + size > self.max_bytes:
                return False
            self._receiving += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._receiving = max(0, self._receiving - size)

    def pending_of(self, key_id: str | None) -> int:
        """Upload jobs of one key that have not ended."""
        return sum(1 for j in self.jobs.values() if j.ended is None and j.asked_by == key_id)

    def accept(self, partial: Path, job: SpooledJob, received: int) -> SpooledJob:
        """Make a received upload durable: its manifest synced, its folder renamed to
        the job's id. After this, the job survives any crash."""
        _write_json(partial / MANIFEST, job.manifest())
        final = self.root / job.id
        os.replace(partial, final)
        _sync_folder(self.root)
        job.folder = final
        job.bytes = received
        with self._lock:
            self._receiving = max(0, self._receiving - received)
            self._queued += received
        self.jobs[job.id] = job
        return job

    # -- ending --------------------------------------------------------------------------

    def end(self, job: SpooledJob, status: str, results: list[dict[str, Any]]) -> None:
        """Record how a job ended, then delete its files (the manifest stays a while).
        Only then does the job read as ended: a client that sees it end and stops the
        server leaves no file behind."""
        if job.ended is None:
            with self._lock:
                self._queued = max(0, self._queued - job.bytes)
        ended = {"status": status, "results": results, "ended_at": time.time()}
        try:
            _write_json(job.folder / MANIFEST, {**job.manifest(), "ended": ended})
        except OSError as exc:  # a full disk: the outcome is still known in memory
            logger.warning("could not record the end of upload job %s: %s", job.id, exc)
        for path in job.paths():
            path.unlink(missing_ok=True)
        job.ended = ended

    # -- starting ------------------------------------------------------------------------

    def recover(self) -> list[SpooledJob]:
        """Read the spool at start: sweep cut-off uploads and long-ended jobs, know every
        other job, and return those that had not ended (to resubmit)."""
        if not self.root.is_dir():
            return []
        pending: list[SpooledJob] = []
        for folder in sorted(self.root.iterdir()):
            if folder.name.endswith(PARTIAL) or not (folder / MANIFEST).is_file():
                if folder.is_dir():  # never answered 202: nothing was promised
                    shutil.rmtree(folder, ignore_errors=True)
                continue
            try:
                job = SpooledJob.read(folder)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                logger.warning("upload spool: unreadable manifest in %s (%s)", folder, exc)
                continue
            ended_at = (job.ended or {}).get("ended_at", time.time())
            if job.ended is not None and time.time() - ended_at > KEEP_ENDED_SECONDS:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            self.jobs[job.id] = job
            if job.ended is None:
                self._queued += job.bytes
                pending.append(job)
            else:  # ended, and the process stopped before its files were deleted
                for path in job.paths():
                    path.unlink(missing_ok=True)
        return pending

    @classmethod
    def of(cls, tether: Tether) -> Spool:
        root = spool_root(tether)
        spool = cls(
            root or Path(tempfile.mkdtemp(prefix="tether-uploads-")),
            tether.settings.server.max_queued_upload_bytes,
        )
        spool.temporary = root is None
        return spool

    def close(self) -> None:
        """Remove a temporary spool (one of a store that does not outlive the process)."""
        if self.temporary:
            shutil.rmtree(self.root, ignore_errors=True)
