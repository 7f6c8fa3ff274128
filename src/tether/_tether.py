"""The facade: ``Tether(db=...)``: add, search, retrieve and the document lifecycle."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from tether.embed import Embedder, default_token_counter, embedder_from_settings
from tether.errors import (
    ConfigurationError,
    DocumentNotFound,
    IndexingFailed,
    InvalidArgument,
)
from tether.ingest import Indexer
from tether.ingest.indexer import DOCUMENT_STATUSES, PathSource, ReembedReport, TextSource
from tether.ingest.jobs import IndexJob, IndexWorker
from tether.ingest.jobs import ProgressCallback as JobProgressCallback
from tether.ingest.watcher import LibrarySync, SyncReport
from tether.llm import ChatModel, chat_from_settings
from tether.models import (
    GLOBAL_WORKSPACE,
    Document,
    Filters,
    IndexResult,
    RetrievalResult,
    Scope,
    Session,
    Tags,
    Workspace,
)
from tether.policy import validate_tags
from tether.retrieve.decide import Decision
from tether.retrieve.pipeline import Pipeline, Request
from tether.retrieve.search import Searcher, SearchMode, SearchResults
from tether.settings import Settings
from tether.store import Database, Repository, StoredChunk

logger = logging.getLogger("tether")

MAX_K = 1000
PathLike = str | os.PathLike[str]
ProgressCallback = Callable[[int, int, IndexResult], None]
_TEXT_MIMES = ("text/plain", "text/markdown")


class Tether:
    """A tether knowledge store in one SQLite file.

    >>> t = Tether(db=":memory:")
    >>> [r.status for r in t.add(text="Reset the sensor with the pin.", title="Guide")]
    ['indexed']
    >>> t.search("reset", scope="global")[0].title
    'Guide'
    """

    def __init__(
        self,
        db: PathLike | sqlite3.Connection | None = None,
        *,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        count_tokens: Callable[[str], int | None] | None = None,
        chat: ChatModel | None = None,
    ) -> None:
        """Open (creating or migrating) the store ``db``: a path, ``":memory:"`` or a
        connection; default ``settings.db``.

        ``embedder`` defaults to the one the settings describe (the local
        all-MiniLM-L6-v2); when embeddings are disabled or cannot run, retrieval is
        lexical-only and ``embeddings_unavailable`` says why. ``count_tokens`` (stored
        per chunk, used by the context budget) defaults to the embedder's tokenizer, else
        the packaged all-MiniLM-L6-v2 tokenizer when it is installed. ``chat`` (decide,
        rewrite and rerank by LLM, when the settings turn them on) defaults to the
        ``[llm]`` endpoint.
        """
        self.settings = settings if settings is not None else Settings.load()
        self.db = Database(db if db is not None else self.settings.db)
        self.repo = Repository(self.db)
        self.embeddings_unavailable: str | None = None
        if embedder is None:
            embedder, self.embeddings_unavailable = embedder_from_settings(self.settings)
        self.embedder = embedder
        if count_tokens is None:
            count_tokens = default_token_counter(embedder)
        self._indexer = Indexer(
            self.repo,
            self.settings.rag,
            embedder=embedder,
            count_tokens=count_tokens,
            policy=self.settings.policy,
        )
        self._searcher = Searcher(
            self.repo,
            self.settings.rag,
            embedder,
            embeddings_unavailable=self.embeddings_unavailable,
            policy=self.settings.policy,
        )
        self.chat_unavailable: str | None = None
        if chat is None:
            chat, self.chat_unavailable = chat_from_settings(self.settings.llm)
        self.chat = chat
        self._jobs: IndexWorker | None = None
        self._jobs_lock = threading.Lock()
        self._pipeline = Pipeline(
            self.repo, self.settings, self._searcher, embedder, chat, self.chat_unavailable
        )

    def __repr__(self) -> str:
        return f"Tether(db={self.db.path!r})"

    def __enter__(self) -> Tether:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish running indexing jobs (queued ones are cancelled), then close the store."""
        if self._jobs is not None:
            self._jobs.shutdown(wait=True)
        self._pipeline.close()
        self.db.close()

    # -- indexing -----------------------------------------------------------------------

    def add(
        self,
        sources: PathLike | TextSource | Iterable[PathLike | TextSource] | None = None,
        *,
        text: str | None = None,
        title: str | None = None,
        mime: Literal["text/plain", "text/markdown"] = "text/plain",
        workspace_id: str | None = None,
        session_id: str | None = None,
        document_id: str | None = None,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: Tags | dict[str, Any] | None = None,
        status: Literal["active", "draft", "pending"] | None = None,
        on_error: Literal["raise", "collect"] = "raise",
        progress: ProgressCallback | None = None,
    ) -> list[IndexResult]:
        """Index files and texts: ``add(["a.pdf", "b.md"])``, ``add(text=..., title=...)``,
        or many texts at once with ``add([TextSource(text, title, document_id=...), ...])``.

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
        if (sources is None) == (text is None):
            raise InvalidArgument("give either sources or text=, not both and not neither")
        if on_error not in ("raise", "collect"):
            raise InvalidArgument(f"on_error must be 'raise' or 'collect', not {on_error!r}")
        if text is not None:
            if not isinstance(text, str):
                raise InvalidArgument(f"text must be str, not {type(text).__name__}")
            if mime not in _TEXT_MIMES:
                raise InvalidArgument(f"mime must be one of {_TEXT_MIMES}, not {mime!r}")
            items: list[PathSource | TextSource] = [
                TextSource(
                    text,
                    title or source or document_id or "Untitled",
                    mime=mime,
                    document_id=document_id,
                    source=source,
                    metadata=metadata,
                    tags=tags,
                    status=status,
                )
            ]
        else:
            if document_id is not None or source is not None or metadata is not None:
                raise InvalidArgument(
                    "document_id=, source= and metadata= go with text= (or a TextSource)"
                )
            assert sources is not None
            items = _sources(sources, tags, status)
        placement = self._indexer.place(workspace_id, session_id)
        return self._index_now(items, placement, on_error=on_error, progress=progress)

    def _index_now(
        self,
        items: list[PathSource | TextSource],
        placement: Any,
        *,
        on_error: Literal["raise", "collect"],
        progress: ProgressCallback | None,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[IndexResult]:
        done = 0

        def report(result: IndexResult) -> None:
            nonlocal done
            done += 1
            if progress:
                progress(done, len(items), result)

        # Small files first: the first results (and progress) come sooner.
        order = sorted(range(len(items)), key=lambda i: _size(items[i]))
        ranked = self._indexer.index(
            [items[i] for i in order], placement, progress=report, cancelled=cancelled
        )
        results: list[IndexResult] = [ranked[0]] * len(items) if items else []
        for position, i in enumerate(order):
            results[i] = ranked[position]
        if on_error == "raise" and any(r.error is not None for r in results):
            raise IndexingFailed(results)
        return results

    # -- background indexing and triggers ------------------------------------------------

    def submit(
        self,
        sources: PathLike | TextSource | Iterable[PathLike | TextSource],
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
        tags: Tags | dict[str, Any] | None = None,
        status: Literal["active", "draft", "pending"] | None = None,
        on_progress: JobProgressCallback | None = None,
        kind: str = "document",
    ) -> IndexJob:
        """:meth:`add` on a background thread: returns an :class:`IndexJob` at once.

        Sources are checked here (bad arguments raise now); each one's own failure is in
        the job's results, and fails only this job. ``on_progress(job, progress)`` runs
        on the worker after each source; ``job.progress.description`` reads like
        "Processing PDF 3 of 12"."""
        items = _sources(sources, tags, status)
        placement = self._indexer.place(workspace_id, session_id)
        labels = [str(i.path) if isinstance(i, PathSource) else i.title for i in items]
        order = sorted(range(len(items)), key=lambda i: _size(items[i]))
        return self._worker().submit(
            kind, labels, {"items": items, "placement": placement}, on_progress, order
        )

    def on_pdf_imported(
        self,
        path: PathLike,
        session_id: str,
        workspace_id: str | None = None,
        *,
        on_progress: JobProgressCallback | None = None,
    ) -> IndexJob:
        """A PDF was imported into a chat session: index it (skipped when its content is
        unchanged) and attach it to the session, in the background."""
        if not session_id:
            raise InvalidArgument("on_pdf_imported needs the session_id the PDF belongs to")
        # Marked as the session's ChatPDF document: closing the session makes it stale.
        if not isinstance(path, str | os.PathLike):
            raise InvalidArgument(f"path must be a path, not {type(path).__name__}")
        source = PathSource(path, metadata={"origin": "chatpdf", "session_id": session_id})
        placement = self._indexer.place(workspace_id, session_id)
        return self._worker().submit(
            "PDF", [str(path)], {"items": [source], "placement": placement}, on_progress
        )

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
            logger.debug("text artifact %s not indexed: rag.index_text_artifacts is off",
                         artifact_id)  # fmt: skip
            return None
        source = TextSource(text, title or artifact_id, source=f"artifact:{artifact_id}")
        return self.submit(
            source, workspace_id=workspace_id, session_id=session_id,
            on_progress=on_progress, kind="text artifact",
        )  # fmt: skip

    def library(
        self,
        folder: PathLike,
        *,
        workspace_id: str = GLOBAL_WORKSPACE,
        settle: float = 0.5,
        backoff: float = 30.0,
    ) -> LibrarySync:
        """The files under ``folder`` as a library kept in ``workspace_id`` (default: the
        global library): ``.scan()`` once, or ``.watch()`` for changes. See
        :mod:`tether.ingest.watcher`."""
        return LibrarySync(self, folder, workspace_id=workspace_id, settle=settle, backoff=backoff)

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

    def registry(self, folder: PathLike | None = None) -> list[dict[str, Any]]:
        """What the library registry knows about each file (under ``folder``, if given)."""
        under = str(Path(folder).expanduser().resolve()) if folder is not None else None
        return self.repo.registry(under)

    def jobs(self) -> list[IndexJob]:
        """Every job submitted through this Tether, oldest first."""
        return self._jobs.jobs() if self._jobs is not None else []

    def _worker(self) -> IndexWorker:
        if not self.db.cross_thread:
            raise ConfigurationError(
                "background indexing needs a store usable from other threads; open your"
                " sqlite3 connection with check_same_thread=False, or pass a path"
            )
        with self._jobs_lock:
            if self._jobs is None:
                self._jobs = IndexWorker(self._index_now, self.settings.rag.index_workers)
            return self._jobs

    # -- search -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        scope: Scope | Literal["session", "workspace", "global"] | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        k: int = 10,
        mode: SearchMode = "hybrid",
        filters: Filters | None = None,
    ) -> SearchResults:
        """The ``k`` best chunks for ``query`` inside ``scope`` (default ``rag.scope``),
        best first.

        ``mode="hybrid"`` fuses FTS5 top-``rag.k_lexical`` and vector top-``rag.k_vector``
        (``rag.fusion``: z-score by default, or RRF with ``rag.rrf_k``); ``"lexical"`` and
        ``"vector"`` run one side. Without embeddings, hybrid runs lexical-only and
        ``results.debug["degradations"]`` says why. The scope is part of both queries, so
        top-k is exact within it. Hit scores are the fused score in hybrid mode, -bm25 for
        lexical, cosine for vector. When nothing is found in a session or workspace scope,
        ``debug["scope_exists"]`` says whether that session or workspace exists at all.
        """
        if not isinstance(query, str):
            raise InvalidArgument(f"query must be str, not {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InvalidArgument(f"k must be an integer from 1 to {MAX_K}, not {k!r}")
        if mode not in ("hybrid", "lexical", "vector"):
            raise InvalidArgument(f"mode must be 'hybrid', 'lexical' or 'vector', not {mode!r}")
        resolved = self.resolve_scope(scope, session_id=session_id, workspace_id=workspace_id)
        if filters is not None and not isinstance(filters, Filters):
            raise InvalidArgument(f"filters must be a tether.Filters, not {type(filters).__name__}")
        results = self._searcher.search(query, resolved, k, mode, filters)
        if not results and resolved.kind != "global":
            # Nothing found: say whether the session or workspace exists at all (a typo in
            # an id otherwise looks like an empty scope).
            results.debug["scope_exists"] = self.repo.scope_exists(resolved)
        return results

    def retrieve(
        self,
        question: str,
        *,
        scope: Scope | Literal["session", "workspace", "global"] | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        decision: Decision | None = None,
        filters: Filters | None = None,
        max_chunks: int | None = None,
        min_relevance: float | None = None,
        timeout: float | None = None,
    ) -> RetrievalResult:
        """Everything an LLM app needs before it answers ``question``: a bounded context
        block with numbered citations, or ``grounded=False`` with ``guidance``.

        Decides first whether the message needs retrieval at all (greetings, thanks,
        small talk, arithmetic and reformatting requests do not); then retrieves inside
        ``scope`` (default ``rag.scope``) with the original question plus, when
        ``rag.enable_query_rewrite`` (or ``RAG_FUSION_ENABLED``) is on, 1-3 LLM rewrites,
        all in parallel; reranks against the original question; and keeps at most
        ``rag.max_chunks`` chunks with relevance >= ``rag.min_relevance`` within
        ``rag.context_budget`` tokens. ``session_id`` also drives the session-recency
        factor of the rerank. Model failures degrade (see ``result.debug``), they do not
        raise; a question that is not text, empty or too long raises InvalidArgument,
        and a scope naming an unknown session or workspace raises NotFound. A
        ``decision`` made earlier (:meth:`decide`) is used instead of deciding again.
        ``filters`` narrow the scope by tags (in SQL); ``max_chunks`` and
        ``min_relevance`` override the settings for this call; ``timeout`` (seconds)
        bounds the whole retrieval (:class:`RetrievalTimeout` past it). Every call is
        recorded in the audit log (``policy.audit``) under ``result.retrieval_id``.
        """
        request = self._request(
            question, scope, session_id, workspace_id, decision, filters, max_chunks,
            min_relevance, timeout,
        )  # fmt: skip
        return self._pipeline.retrieve(request)

    async def aretrieve(
        self,
        question: str,
        *,
        scope: Scope | Literal["session", "workspace", "global"] | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        decision: Decision | None = None,
        filters: Filters | None = None,
        max_chunks: int | None = None,
        min_relevance: float | None = None,
        timeout: float | None = None,
    ) -> RetrievalResult:
        """:meth:`retrieve` for asyncio: the blocking work runs in threads, the queries
        concurrently (``asyncio.gather``), and LLM calls through the async client."""
        request = await asyncio.to_thread(
            self._request, question, scope, session_id, workspace_id, decision, filters,
            max_chunks, min_relevance, timeout,
        )  # fmt: skip
        return await self._pipeline.aretrieve(request)

    def _request(
        self,
        question: str,
        scope: Scope | str | None,
        session_id: str | None,
        workspace_id: str | None,
        decision: Decision | None,
        filters: Filters | None,
        max_chunks: int | None,
        min_relevance: float | None,
        timeout: float | None,
        *,
        guarded: bool = False,
    ) -> Request:
        if filters is not None and not isinstance(filters, Filters):
            raise InvalidArgument(f"filters must be a tether.Filters, not {type(filters).__name__}")
        if max_chunks is not None and (
            isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1
        ):
            raise InvalidArgument(f"max_chunks must be a positive integer, not {max_chunks!r}")
        if min_relevance is not None and not (
            isinstance(min_relevance, int | float) and 0.0 <= min_relevance <= 1.0
        ):
            raise InvalidArgument(f"min_relevance must be between 0 and 1, not {min_relevance!r}")
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise InvalidArgument(f"timeout must be a positive number of seconds, not {timeout!r}")
        resolved = self._retrieval_scope(scope, session_id, workspace_id)
        return Request(
            question=question,
            scope=resolved,
            session_id=session_id,
            decision=decision,
            filters=filters,
            max_chunks=max_chunks,
            min_relevance=min_relevance,
            timeout=timeout,
            guarded=guarded,
        )

    def decide(self, message: str) -> Decision:
        """Whether ``message`` needs retrieval, by ``rag.decide`` (the local classifier, or
        the chat model with the classifier as fallback); ``rag.enabled = false`` always
        says no. The first step of :meth:`retrieve`, for callers that route on it."""
        return self._pipeline.decide(message)[0]

    async def adecide(self, message: str) -> Decision:
        return (await self._pipeline.adecide(message))[0]

    def _retrieval_scope(
        self, scope: Scope | str | None, session_id: str | None, workspace_id: str | None
    ) -> Scope:
        resolved = self.resolve_scope(scope, session_id=session_id, workspace_id=workspace_id)
        if resolved.kind == "session":
            self.repo.get_session(resolved.id)
        elif resolved.kind == "workspace":
            self.repo.get_workspace(resolved.id)
        if session_id is not None and resolved.kind != "session":
            self.repo.get_session(session_id)
        return resolved

    def reembed(self, progress: Callable[[int, int], None] | None = None) -> ReembedReport:
        """Embed, with the configured model, every chunk that has no vector for it yet
        (after switching models, or for documents stored while embedding failed)."""
        return self._indexer.reembed(progress)

    def resolve_scope(
        self,
        scope: Scope | str | None = None,
        *,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> Scope:
        return Scope.resolve(
            scope if scope is not None else self.settings.rag.scope,
            session_id=session_id,
            workspace_id=workspace_id,
        )

    # -- documents ----------------------------------------------------------------------

    def documents(
        self, *, workspace_id: str | None = None, session_id: str | None = None
    ) -> list[Document]:
        return self.repo.list_documents(workspace_id=workspace_id, session_id=session_id)

    def get_document(self, document_id: str) -> Document:
        return self.repo.get_document(document_id)

    def chunks(self, document_id: str) -> list[StoredChunk]:
        self.repo.get_document(document_id)
        return self.repo.chunks_of(document_id)

    def delete_document(self, document_id: str) -> None:
        """Delete a document with its chunks, FTS rows, embeddings and attachments."""
        self.repo.delete_document(document_id)

    # -- workspaces and sessions --------------------------------------------------------

    def set_status(
        self, document_id: str, status: Literal["active", "draft", "pending"]
    ) -> Document:
        """Publish a draft or approve a submission (``"active"``), or take a document out of
        retrieval (``"draft"``, ``"pending"``) without deleting it."""
        if status not in DOCUMENT_STATUSES:
            raise InvalidArgument(f"status must be one of {DOCUMENT_STATUSES}, not {status!r}")
        self.repo.set_status(document_id, status)
        return self.repo.get_document(document_id)

    def approve(self, document_id: str) -> Document:
        """Approve a user-submitted (``pending``) or draft document: it becomes searchable."""
        return self.set_status(document_id, "active")

    def set_tags(self, document_id: str, tags: Tags | dict[str, Any]) -> Document:
        """Replace a document's tags (validated against the policy), content unchanged."""
        document = self.repo.get_document(document_id)
        checked = validate_tags(document_id, tags, self.settings.policy)
        self.repo.set_tags_and_status(document_id, checked, document.status)
        return self.repo.get_document(document_id)

    def retrieval_log(self, limit: int = 50, outcome: str | None = None) -> list[dict[str, Any]]:
        """The newest audit rows: retrieval id, time, sanitized query, scope, filters, the
        retrieved chunk and document ids, and the outcome (``grounded``, ``ungrounded``,
        ``skipped``, ``blocked`` or ``error``) with its reason."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"limit must be a positive integer, not {limit!r}")
        return self.repo.retrieval_log(limit, outcome)

    def create_workspace(self, workspace_id: str, name: str | None = None) -> Workspace:
        _require_id(workspace_id, "workspace_id")
        return self.repo.ensure_workspace(workspace_id, name)

    def workspaces(self) -> list[Workspace]:
        return self.repo.list_workspaces()

    def create_session(self, session_id: str, *, workspace_id: str) -> Session:
        _require_id(session_id, "session_id")
        _require_id(workspace_id, "workspace_id")
        self.repo.ensure_workspace(workspace_id)
        return self.repo.ensure_session(session_id, workspace_id)

    def sessions(self, *, workspace_id: str | None = None) -> list[Session]:
        return self.repo.list_sessions(workspace_id)

    def close_session(self, session_id: str) -> Session:
        """Close a session. Its ChatPDF documents (imported with :meth:`on_pdf_imported`)
        that no other open session uses are marked stale (``stale_at``), for
        :meth:`cleanup` to delete once the retention window has passed."""
        session, stale = self.repo.close_session(session_id)
        if stale:
            logger.info("session %s closed: %d document(s) marked stale", session_id, len(stale))
        return session

    def cleanup(self, retention: str | timedelta = "7d", *, dry_run: bool = False) -> CleanupReport:
        """Delete documents that have been stale for longer than ``retention`` (``"7d"``,
        ``"12h"``, ``"30m"``, ``"2w"`` or a timedelta), with their chunks, embeddings, FTS
        rows and attachments. ``dry_run`` lists them and deletes nothing."""
        window = parse_retention(retention)
        cutoff = (datetime.now(UTC) - window).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        documents = self.repo.stale_documents(cutoff)
        if not dry_run:
            for document in documents:
                try:
                    self.repo.delete_document(document.id)
                except DocumentNotFound:
                    continue  # deleted meanwhile
            if documents:
                logger.info("cleanup deleted %d stale document(s)", len(documents))
        return CleanupReport(documents=tuple(documents), deleted=not dry_run, cutoff=cutoff)

    def attach(self, document_id: str, session_id: str) -> bool:
        """Attach a document to a session; False if it already was."""
        return self.repo.attach_document_to_session(document_id, session_id)

    def detach(self, document_id: str, session_id: str) -> bool:
        """Detach a document from a session (the document stays); False if it was not."""
        return self.repo.detach_document_from_session(document_id, session_id)


def _require_id(value: object, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{name} must be a non-empty string, not {value!r}")


def _size(item: PathSource | TextSource) -> int:
    if isinstance(item, TextSource):
        return len(item.text)
    try:
        return os.path.getsize(item.path)
    except OSError:
        return 0  # unreadable: fails fast, first


@dataclass(frozen=True)
class CleanupReport:
    """What :meth:`Tether.cleanup` deleted (or, in a dry run, would delete)."""

    documents: tuple[Document, ...]
    deleted: bool
    cutoff: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "deleted": self.deleted,
            "cutoff": self.cutoff,
            "documents": [
                {"id": d.id, "title": d.title, "workspace_id": d.workspace_id,
                 "stale_at": d.stale_at, "chunk_count": d.chunk_count}
                for d in self.documents
            ],
        }  # fmt: skip


_RETENTION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_retention(value: str | timedelta) -> timedelta:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"`` (or a timedelta) as a timedelta."""
    if isinstance(value, timedelta):
        window = value
    elif isinstance(value, str) and (m := _RETENTION.fullmatch(value.lower())):
        window = timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
    else:
        raise InvalidArgument(f"retention must look like 7d, 12h, 30m, 45s or 2w, not {value!r}")
    if window < timedelta(0):
        raise InvalidArgument(f"retention must not be negative, not {value!r}")
    return window


def _sources(sources: Any, tags: Any, status: str | None) -> list[PathSource | TextSource]:
    """The sources of an add or submit, checked now: paths, TextSources or PathSources."""
    single = str | os.PathLike | TextSource | PathSource
    if isinstance(sources, single):
        many = [sources]
    elif isinstance(sources, Iterable) and not isinstance(sources, bytes):
        many = list(sources)
    else:
        raise InvalidArgument(
            f"sources must be a path, a TextSource or a list of them, not {type(sources).__name__}"
        )
    items: list[PathSource | TextSource] = []
    for source in many:
        if isinstance(source, TextSource | PathSource):
            items.append(source)
        elif isinstance(source, str | os.PathLike):
            items.append(PathSource(source, tags=tags, status=status))
        else:
            raise InvalidArgument(
                f"a source must be a path or a TextSource, not {type(source).__name__}"
                f" ({source!r:.60})"
            )
    return items
