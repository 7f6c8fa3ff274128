"""The facade's indexing half: add, background jobs and their triggers, the library
folder, re-embedding. A part of :class:`tether.Tether`; it delegates to the indexer."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from tether.errors import IndexingFailed, IngestError, InvalidArgument
from tether.ingest.indexer import Indexer, ProgressCallback, ReembedReport, Writer
from tether.ingest.jobs import IndexJob, IndexWorker
from tether.ingest.jobs import ProgressCallback as JobProgressCallback
from tether.ingest.sources import PathSource, TextSource, coerce_sources, smallest_first
from tether.ingest.sources import text_source as make_text_source
from tether.ingest.watcher import LibrarySync, SyncReport
from tether.ingest.web import fetch
from tether.models import GLOBAL_WORKSPACE, DocumentStatus, IndexResult, Tags
from tether.settings import Settings
from tether.store import RegistryEntry, Store
from tether.text import check_identifier

logger = logging.getLogger("tether")

PathLike = str | os.PathLike[str]


class Indexing:
    """Indexing methods of :class:`tether.Tether` (which makes the indexer and the
    background worker on first use)."""

    settings: Settings
    store: Store
    _jobs: IndexWorker | None

    def _index(self) -> Indexer:
        raise NotImplementedError

    def _worker(self) -> IndexWorker:
        raise NotImplementedError

    def add(
        self,
        sources: PathLike | TextSource | Iterable[PathLike | TextSource] | None = None,
        *,
        text: str | None = None,
        title: str | None = None,
        mime: Literal["text/plain", "text/markdown"] = "text/plain",
        url: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        document_id: str | None = None,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: Tags | dict[str, Any] | None = None,
        status: DocumentStatus | None = None,
        on_error: Literal["raise", "collect"] = "raise",
        progress: ProgressCallback | None = None,
    ) -> list[IndexResult]:
        """Index files and texts: ``add(["a.pdf", "b.md"])``, ``add(text=..., title=...)``,
        or many texts at once with ``add([TextSource(text, title, document_id=...), ...])``;
        or a web page, ``add(url="https://...")``, fetched within the ``[fetch]`` limits
        (see :meth:`add_url`).

        Documents go to ``workspace_id`` (default: the session's workspace, else the global
        library) and are attached to ``session_id`` when given; workspace and session are
        created on first use. Unchanged content is skipped; changed content replaces the
        document's chunks and vectors atomically. Embedding is batched across sources. A
        source that cannot be indexed does not stop the rest: with ``on_error="raise"``
        (the default) :class:`IndexingFailed` is raised at the end, carrying every result;
        with ``"collect"`` the failures are returned as results with ``status="failed"``.
        ``progress(done, total, result)`` is called after each source.

        ``tags`` (``domain``, ``source_type``, ``last_verified``, ``version``,
        ``project_id``; see :func:`tether.policy.validate_tags`) and ``status``
        (``draft`` and ``pending`` documents are never searched until made ``active``;
        default: a document keeps its status, a new one is active) apply to every file
        and to ``text=``; a TextSource carries its own. A bad or (with
        ``policy.require_tags``) missing tag fails that source with :class:`InvalidTag`.
        Re-adding unchanged content with new tags or status updates them in place.
        """
        if on_error not in ("raise", "collect"):
            raise InvalidArgument(f"on_error must be 'raise' or 'collect', not {on_error!r}")
        if url is not None and sources is None and text is None:
            page = {"metadata": metadata, "tags": tags, "status": status, "on_error": on_error}
            return self.add_url(url, workspace_id=workspace_id, session_id=session_id, **page)
        if sources is None:
            if text is None or url is not None:
                raise InvalidArgument("give one of sources, text= and url=")
            text_fields = {"document_id": document_id, "source": source, "metadata": metadata}
            items = [
                make_text_source(
                    text, title=title, mime=mime, tags=tags, status=status, **text_fields
                )
            ]
        else:
            also = text if url is None else url
            items = _sources_alone(sources, also, document_id, source, metadata, tags, status)
        indexer = self._index()
        placement = indexer.place(workspace_id, session_id)
        return indexer.add(items, placement, on_error=on_error, progress=progress)

    def add_url(
        self,
        url: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: Tags | dict[str, Any] | None = None,
        status: DocumentStatus | None = None,
        on_error: Literal["raise", "collect"] = "raise",
    ) -> list[IndexResult]:
        """Fetch the web page (or PDF, or any file tether reads) at ``url`` and index it
        as a document whose source is the URL, with the final URL and the fetch time in
        its metadata (``url``, ``fetched_at``). Adding the same URL again is the same
        document: skipped when its content did not change.

        The fetch keeps to ``[fetch]``: http and https only, no credentials in the URL,
        no loopback, private or link-local address (``fetch.allow_private``), at most
        ``fetch.max_bytes``, ``fetch.timeout`` seconds and ``fetch.max_redirects``
        redirects, each checked again. A page that cannot be fetched fails as any
        source does: :class:`IndexingFailed` (or, with ``on_error="collect"``, a failed
        result)."""
        check_identifier("url", url)
        try:
            fetched = fetch(url, self.settings.fetch)
        except IngestError as exc:
            failed = [IndexResult(url, "failed", error=exc)]
            if on_error == "raise":
                raise IndexingFailed(failed) from exc
            return failed
        page = PathSource(
            fetched.filename,
            tags=tags,
            status=status,
            metadata={"url": fetched.url, "fetched_at": fetched.fetched_at, **(metadata or {})},
            content=fetched.data,
            source=url,
        )
        indexer = self._index()
        placement = indexer.place(workspace_id, session_id)
        first, *inside = indexer.add([page], placement, on_error=on_error)
        return [dataclasses.replace(first, source=url), *inside]  # (named as it was asked for)

    def submit(
        self,
        sources: PathLike | TextSource | Iterable[PathLike | TextSource],
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
        tags: Tags | dict[str, Any] | None = None,
        status: DocumentStatus | None = None,
        on_progress: JobProgressCallback | None = None,
        kind: str = "document",
    ) -> IndexJob:
        """:meth:`add` on a background thread: returns an :class:`IndexJob` at once.

        Sources are checked here (bad arguments raise now); each one's own failure is in
        the job's results, and fails only this job. ``on_progress(job, progress)`` runs
        on the worker after each source; ``job.progress.description`` reads like
        "Processing PDF 3 of 12"."""
        items = coerce_sources(sources, tags, status)
        placement = self._index().place(workspace_id, session_id)
        labels = [i.label for i in items]
        call = {"items": items, "placement": placement}
        return self._worker().submit(kind, labels, call, on_progress, smallest_first(items))

    def on_pdf_imported(
        self,
        path: PathLike,
        session_id: str,
        workspace_id: str | None = None,
        *,
        on_progress: JobProgressCallback | None = None,
    ) -> IndexJob:
        """A PDF was imported into a chat session: index it (skipped when its content is
        unchanged) and attach it to the session, in the background. It is the session's
        ChatPDF document: closing the session makes it stale."""
        if not session_id:
            raise InvalidArgument("on_pdf_imported needs the session_id the PDF belongs to")
        if not isinstance(path, str | os.PathLike):
            raise InvalidArgument(f"path must be a path, not {type(path).__name__}")
        source = PathSource(path, metadata={"origin": "chatpdf", "session_id": session_id})
        placement = self._index().place(workspace_id, session_id)
        call = {"items": [source], "placement": placement}
        return self._worker().submit("PDF", [str(path)], call, on_progress)

    def on_text_artifact_saved(
        self,
        artifact_id: str,
        text: str,
        session_id: str | None = None,
        workspace_id: str | None = None,
        *,
        title: str | None = None,
        on_progress: JobProgressCallback | None = None,
    ) -> IndexJob | None:
        """A text artifact (a note, a generated document) was saved: index it when
        ``rag.index_text_artifacts`` is on (``None`` otherwise: nothing is done). The
        artifact id is its stable key, so a changed text replaces the earlier version
        and an unchanged one is skipped by hash."""
        if not isinstance(artifact_id, str) or not artifact_id.strip():
            raise InvalidArgument("artifact_id must be a non-empty string")
        if not isinstance(text, str):
            raise InvalidArgument(f"text must be str, not {type(text).__name__}")
        if not self.settings.rag.index_text_artifacts:
            logger.debug(
                "text artifact %s not indexed: rag.index_text_artifacts is off", artifact_id
            )
            return None
        source = TextSource(text, title or artifact_id, source=f"artifact:{artifact_id}")
        return self.submit(
            source,
            workspace_id=workspace_id,
            session_id=session_id,
            on_progress=on_progress,
            kind="text artifact",
        )

    def library(
        self,
        folder: PathLike,
        *,
        workspace_id: str = GLOBAL_WORKSPACE,
        settle: float = 0.5,
        backoff: float = 30.0,
        clock: Callable[[], datetime] | None = None,
    ) -> LibrarySync:
        """The files under ``folder`` as a library kept in ``workspace_id`` (default: the
        global library): ``.scan()`` once, or ``.watch()`` for changes. See
        :mod:`tether.ingest.watcher`. ``clock`` (for retry times) defaults to UTC now."""
        options: dict[str, Any] = {"clock": clock} if clock is not None else {}
        return LibrarySync(
            self._index(),
            folder,
            workspace_id=workspace_id,
            settle=settle,
            backoff=backoff,
            **options,
        )

    def scan(self, folder: PathLike, *, workspace_id: str = GLOBAL_WORKSPACE) -> SyncReport:
        """One pass over ``folder``: index new and changed files, follow renames, delete
        the documents of removed files, retry failures that are due."""
        return self.library(folder, workspace_id=workspace_id).scan()

    def watch(
        self,
        folder: PathLike,
        *,
        workspace_id: str = GLOBAL_WORKSPACE,
        stop: threading.Event | None = None,
        on_pass: Callable[[SyncReport], None] | None = None,
    ) -> None:
        """Keep ``folder`` indexed until ``stop`` is set (blocks; run it in a thread)."""
        self.library(folder, workspace_id=workspace_id).watch(stop=stop, on_pass=on_pass)

    def registry(self, folder: PathLike | None = None) -> list[RegistryEntry]:
        """What the library registry knows about each file (under ``folder``, if given)."""
        under = str(Path(folder).expanduser().resolve()) if folder is not None else None
        return self.store.registry(under)

    def jobs(self) -> list[IndexJob]:
        """Every job submitted through this Tether, oldest first."""
        return self._jobs.jobs() if self._jobs is not None else []

    def reembed(self, progress: Callable[[int, int], None] | None = None) -> ReembedReport:
        """Embed, with the configured model, every chunk that has no vector for it yet
        (after switching models, or for documents stored while embedding failed)."""
        return self._index().reembed(progress)

    def set_writer(self, writer: Writer[Any] | None) -> None:
        """Run indexing's write transactions through ``writer`` (``writer(fn)`` calls
        ``fn()`` and returns its result) instead of on the thread that indexed them: a
        server keeps every write on its one writer thread this way. Loading, chunking
        and embedding stay on the indexing threads; only the short transactions that
        store documents, create their workspace and session, and store re-embedded
        vectors move. ``None`` writes in place again."""
        if writer is not None and not callable(writer):
            raise InvalidArgument(f"writer must be callable, not {type(writer).__name__}")
        self._index().writer = writer


def _sources_alone(
    sources: PathLike | TextSource | Iterable[PathLike | TextSource],
    also: str | None,
    document_id: str | None,
    source: str | None,
    metadata: dict[str, Any] | None,
    tags: Tags | dict[str, Any] | None,
    status: DocumentStatus | None,
) -> list[PathSource | TextSource]:
    """``sources`` as what :meth:`Indexing.add` indexes, when no ``text=`` or ``url=``
    (``also``), nor what goes with a text, is given too."""
    if also is not None:
        raise InvalidArgument("give one of sources, text= and url=")
    if document_id is not None or source is not None or metadata is not None:
        raise InvalidArgument("document_id=, source= and metadata= go with text= (or a TextSource)")
    return coerce_sources(sources, tags, status)
