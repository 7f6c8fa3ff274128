"""The global library: a folder whose files are kept indexed, once (scan) or live (watch).

A pass over the folder (:meth:`LibrarySync.scan`) does, for every supported file under
the root (``.md .markdown .txt .pdf .html .htm``):

1. **Safety.** The path is resolved; a symlink or name that leads outside the root is
   refused and logged, never read. A symlink that stays inside is followed: the file is
   its target's, under the target's path. The resolved path is then opened from the
   root one name at a time without following links (``openat`` with ``O_NOFOLLOW``; the
   descriptor must be a regular file) and read once: the hash and the indexed text come
   from those same bytes. So a file swapped for a link after the check is refused too,
   never read, and a registered file that became a link counts as removed. A hard link
   is the file itself: one into the root is indexed like any other file there.
2. **Settling.** A file is only read once its size and modification time have stayed
   the same for ``settle`` seconds, so a file still being written is never indexed
   half-way (it is picked up by the next pass or event).
3. **Change detection.** The file's bytes are hashed (sha256); a file whose hash the
   registry already has as indexed is left alone.
4. **Renames.** A new path whose hash matches a registered file that has vanished is a
   rename: the document's ``source_path`` and the registry row follow it, and nothing
   is re-read or re-embedded.
5. **Indexing** of new and changed files, from the bytes read (in groups of up to
   ``GROUP_BYTES``, smallest first), into the library's workspace (``GLOBAL`` by
   default), embeddings batched across files.
6. **Deletions.** A registered file that no longer exists (or is now a symbolic link)
   has its document deleted (while watching, after a grace of max(1 s, 2 x settle), so
   that a rename reported as a removal and a later addition is still a rename).
7. **Retries.** A file that fails is retried on later passes, up to 3 times, with
   exponential backoff (``backoff`` x 2^(retries-1) seconds); then it stays ``failed``
   until its content changes.

``rag_index_registry`` records, per path: status (``indexed``, ``error``, ``failed``),
content hash, document id, retries, when it was last seen and last indexed, when it
will be retried, and the last error. :meth:`LibrarySync.watch` runs a pass, then one
more for every debounced batch of file-system events (``watchfiles``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tether.errors import ConfigurationError, DocumentNotFound, InvalidArgument, UnreadableFile
from tether.ingest.formats import by_extension, sniff
from tether.ingest.indexer import Indexer
from tether.ingest.loaders import FileBytes, OutsideFolder, read_file, resolves_to_itself
from tether.ingest.sources import PathSource, smallest_first
from tether.models import GLOBAL_WORKSPACE, iso_utc
from tether.store import RegistryEntry, utcnow

logger = logging.getLogger("tether.watch")

MAX_RETRIES = 3
GROUP_BYTES = 64 << 20  # the most file bytes a pass holds, read, before indexing them


@dataclass
class SyncReport:
    """What one pass did, by path."""

    indexed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # failed before; retry not due yet
    #: Files of no format tether reads (by name or content): left alone, not registered.
    unsupported: list[str] = field(default_factory=list)
    #: Why each failed file failed.
    errors: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "indexed": self.indexed,
            "unchanged": len(self.unchanged),
            "renamed": [{"from": a, "to": b} for a, b in self.renamed],
            "deleted": self.deleted,
            "failed": self.failed,
            "refused": self.refused,
            "unsettled": self.unsettled,
            "waiting": self.waiting,
            "unsupported": self.unsupported,
            "errors": self.errors,
        }


class LibrarySync:
    """Keeps the files under ``root`` indexed in ``workspace_id`` (default: GLOBAL)."""

    def __init__(
        self,
        indexer: Indexer,
        root: str | os.PathLike[str],
        *,
        workspace_id: str = GLOBAL_WORKSPACE,
        settle: float = 0.5,
        backoff: float = 30.0,
        max_retries: int = MAX_RETRIES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise InvalidArgument(f"{root} is not a directory")
        self.indexer = indexer
        self.store = indexer.store
        self.root = path.resolve()
        self.workspace_id = workspace_id
        self.settle = settle
        self.backoff = backoff
        self.max_retries = max_retries
        self.clock = clock
        self.grace = max(1.0, 2 * settle)
        self._missing_since: dict[str, float] = {}
        self._lock = threading.Lock()

    # -- one pass -----------------------------------------------------------------------

    def scan(self, paths: set[Path] | None = None) -> SyncReport:
        """One pass over the whole folder (or, when ``paths`` is given, just those files
        plus the registered files that have vanished). Passes never overlap."""
        with self._lock:
            return self._scan(paths)

    def _scan(self, only: set[Path] | None) -> SyncReport:
        report = SyncReport()
        registered = {row.source_path: row for row in self.store.registry(str(self.root))}
        # Vanished files: every registered path that no longer names a file of its own.
        vanished = {p: row for p, row in registered.items() if not _still_there(p)}
        # Each file is read once: the bytes hashed are the bytes indexed. Files to index
        # go to the indexer in groups, so a pass holds at most GROUP_BYTES of them.
        present = self._present(only, registered, report)
        for group in _groups(self._changed(present, registered, vanished, report)):
            self._index(group, registered, report)
        # A registered file refused now (a link swapped in since the look above) went too.
        vanished.update((p, registered[p]) for p in report.refused if p in registered)
        self._delete_vanished(vanished, only, report)
        return report

    def _present(
        self, only: set[Path] | None, registered: dict[str, RegistryEntry], report: SyncReport
    ) -> Iterator[FileBytes]:
        """The settled files of this pass, by resolved path, each read when it is reached
        (from the root, following no link) and marked seen in the registry."""
        candidates = self._files() if only is None else self._expand(only)
        now = utcnow()
        files: dict[Path, None] = {}  # (a link inside and its target are one file)
        for path in candidates:
            resolved = self._inside(path)
            if resolved is None:
                report.refused.append(str(path))
                continue
            if resolved.is_file():
                files[resolved] = None
        for resolved in self._settled(list(files), report):
            key = str(resolved)
            if not self._readable(resolved):
                report.unsupported.append(key)  # (its name and its content say nothing)
                continue
            try:
                file = read_file(
                    resolved, within=self.root, max_bytes=self.indexer.rag.max_file_bytes
                )
            except OutsideFolder as exc:  # a link swapped in since _inside looked
                logger.warning("refused %s", exc)
                report.refused.append(key)
                continue
            except UnreadableFile as exc:
                self._failed(key, registered.get(key), str(exc))
                report.failed.append(key)
                report.errors[key] = exc.reason
                continue
            self.store.upsert_registry(key, last_seen_at=now, workspace_id=self.workspace_id)
            yield file

    def _changed(
        self,
        present: Iterable[FileBytes],
        registered: dict[str, RegistryEntry],
        vanished: dict[str, RegistryEntry],
        report: SyncReport,
    ) -> Iterator[FileBytes]:
        """The present files to index; renames are followed here (a vanished file's hash
        at a new path), unchanged files and retries not yet due are reported."""
        by_hash = {
            row.content_hash: p
            for p, row in vanished.items()
            if row.content_hash and row.status == "indexed"
        }
        existing = {d.id for d in self.store.list_documents(workspace_id=self.workspace_id)}
        for file in present:
            key, digest = str(file.path), file.sha256
            row = registered.get(key)
            same = row is not None and row.content_hash == digest
            if same and row.status == "indexed" and row.document_id in existing:
                report.unchanged.append(key)  # (a document deleted meanwhile: index again)
            elif row is None and digest in by_hash:
                old = by_hash.pop(digest)
                self.store.rename_source(old, key, vanished.pop(old).document_id)
                self._missing_since.pop(old, None)
                report.renamed.append((old, key))
                logger.info("renamed %s -> %s (not re-indexed)", old, key)
            elif same and (row.status == "failed" or not self._retry_due(row)):
                # Given up on this content (a change retries), or its retry is not due.
                report.waiting.append(key)
            else:
                yield file

    def _retry_due(self, row: RegistryEntry) -> bool:
        if row.status != "error":
            return True
        due = row.next_retry_at
        return due is None or due <= iso_utc(self.clock())

    def _delete_vanished(
        self, vanished: dict[str, RegistryEntry], only: set[Path] | None, report: SyncReport
    ) -> None:
        for old, row in vanished.items():
            if only is not None and Path(old) not in only and not _gone_under(old, only):
                continue
            if only is not None:
                # While watching, a rename can reach us as a removal in one batch and an
                # addition in the next: wait ``grace`` seconds before deleting, so that
                # the addition is still recognised as a rename (nothing re-indexed).
                since = self._missing_since.setdefault(old, time.monotonic())
                if time.monotonic() - since < self.grace:
                    report.unsettled.append(old)
                    continue
            self._missing_since.pop(old, None)
            if row.document_id:
                with contextlib.suppress(DocumentNotFound):  # deleted by hand meanwhile
                    self.store.delete_document(row.document_id)
            self.store.delete_registry(old)
            report.deleted.append(old)
            logger.info("deleted %s from the library (file removed)", old)

    def _index(
        self, files: list[FileBytes], registered: dict[str, RegistryEntry], report: SyncReport
    ) -> None:
        """Index ``files`` from the bytes read and hashed: no file is opened again."""
        sources = [PathSource(file.path, content=file.data) for file in files]
        # Smallest first, as indexing runs: the report lists files in that order.
        order = smallest_first(sources)
        files, sources = [files[i] for i in order], [sources[i] for i in order]
        placement = self.indexer.place(self.workspace_id, None)
        results = self.indexer.add(sources, placement, on_error="collect")
        # (Past the files: their attachments' results, kept with the file that holds them.)
        for file, result in zip(files, results[: len(files)], strict=True):
            key, digest = str(file.path), file.sha256
            if result.error is None:
                self.store.upsert_registry(
                    key,
                    content_hash=digest,
                    status="indexed",
                    retry_count=0,
                    document_id=result.document_id,
                    last_indexed_at=utcnow(),
                    next_retry_at=None,
                    error=None,
                )
                report.indexed.append(key)
            else:
                row = registered.get(key)
                if row is not None and row.content_hash != digest:
                    row = None  # new content: the retry count starts again
                self._failed(key, row, str(result.error), digest)
                report.failed.append(key)
                report.errors[key] = getattr(result.error, "reason", str(result.error))

    def _failed(
        self, key: str, row: RegistryEntry | None, error: str, digest: str | None = None
    ) -> None:
        retries = (row.retry_count if row else 0) + 1
        gave_up = retries >= self.max_retries
        delay = timedelta(seconds=self.backoff * 2 ** (retries - 1))
        due = None if gave_up else iso_utc(self.clock() + delay)
        self.store.upsert_registry(
            key,
            content_hash=digest,
            status="failed" if gave_up else "error",
            retry_count=retries,
            next_retry_at=due,
            error=error[:500],
        )
        log = logger.error if gave_up else logger.warning
        log("%s failed (attempt %d of %d): %s", key, retries, self.max_retries, error)

    # -- checks ---------------------------------------------------------------------------

    def _readable(self, path: Path) -> bool:
        """Whether ``path`` is of a format tether reads: by its name, else by its first
        bytes (a file that cannot be read is left to the full read to report)."""
        if by_extension(path) is not None:
            return True
        try:
            head = read_file(path, within=self.root, head=4096)
        except UnreadableFile:
            return True
        return sniff(head.data) is not None

    def _expand(self, touched: set[Path]) -> list[Path]:
        """Touched paths, with a touched folder (say, one moved in) standing for its files."""
        out: set[Path] = set()
        for path in touched:
            if path.is_dir() and not path.is_symlink() and self._inside(path) is not None:
                out.update(self._files(path))
            else:
                out.add(path)
        return sorted(out)

    def _files(self, top: Path | None = None) -> list[Path]:
        out = []
        for dirpath, dirnames, filenames in os.walk(top or self.root, followlinks=False):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if not name.startswith("."):
                    out.append(Path(dirpath) / name)
        return sorted(out)

    def _inside(self, path: Path) -> Path | None:
        """``path`` resolved, when it stays under the root; else None (and a log line)."""
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            logger.warning("refused %s: cannot resolve it (%s)", path, exc)
            return None
        if resolved != self.root and self.root not in resolved.parents:
            logger.warning("refused %s: it leads outside %s (to %s)", path, self.root, resolved)
            return None
        return resolved

    def _settled(self, files: list[Path], report: SyncReport) -> list[Path]:
        """The files whose size and mtime did not move during ``settle`` seconds (one
        wait for all of them); the others are reported as unsettled."""

        def stamp(path: Path) -> tuple[int, int] | None:
            try:
                st = os.lstat(path)  # a link swapped in is a change, never followed
            except OSError:
                return None
            return st.st_size, st.st_mtime_ns

        before = {p: stamp(p) for p in files}
        if self.settle > 0 and files:
            time.sleep(self.settle)
        settled = []
        for path in files:
            now = stamp(path)
            if now is not None and now == before[path]:
                settled.append(path)
            elif now is not None:
                report.unsettled.append(str(path))
        return settled

    # -- live ---------------------------------------------------------------------------

    def watch(
        self,
        *,
        stop: threading.Event | None = None,
        debounce_ms: int = 800,
        on_pass: Callable[[SyncReport], None] | None = None,
        force_polling: bool | None = None,
    ) -> None:
        """Scan once, then after every debounced batch of changes, until ``stop`` is set.
        Files that were still being written are looked at again on the next batch (and
        on a timeout tick, so a quiet folder still settles)."""
        try:
            import watchfiles
        except ImportError as exc:
            raise ConfigurationError(
                "watching a folder needs watchfiles: pip install 'tether[watch]'"
            ) from exc
        stop = stop or threading.Event()
        report = self.scan()
        if on_pass:
            on_pass(report)
        pending: set[Path] = {Path(p) for p in report.unsettled}
        # The watcher starts with its first iteration, after that first scan: the first
        # batch (or timeout tick) rescans everything, so that nothing created in between
        # is missed.
        first = True
        for changes in watchfiles.watch(
            self.root,
            debounce=debounce_ms,
            stop_event=stop,
            yield_on_timeout=True,
            rust_timeout=max(1000, 2 * debounce_ms),
            force_polling=force_polling,
        ):
            touched = pending | {Path(p) for _, p in changes}
            if not touched and not first:
                continue
            report = self.scan(None if first else touched)
            first = False
            pending = {Path(p) for p in report.unsettled}
            if on_pass:
                on_pass(report)


def _still_there(path: str) -> bool:
    """A registered (resolved) path still names a regular file of its own: one replaced
    by a symbolic link (which may lead outside the root) counts as removed, as does one
    swapped between a link and a file while it is resolved (``realpath`` then fails)."""
    return os.path.isfile(path) and resolves_to_itself(path)


def _groups(files: Iterable[FileBytes], limit: int = GROUP_BYTES) -> Iterator[list[FileBytes]]:
    """``files`` in lists of at most ``limit`` bytes (a larger file alone)."""
    group: list[FileBytes] = []
    size = 0
    for file in files:
        if group and size + file.size > limit:
            yield group
            group, size = [], 0
        group.append(file)
        size += file.size
    if group:
        yield group


def _gone_under(old: str, touched: set[Path]) -> bool:
    """A vanished registered file under a touched directory (a folder was removed)."""
    return any(str(t) == old or old.startswith(str(t).rstrip("/") + "/") for t in touched)
