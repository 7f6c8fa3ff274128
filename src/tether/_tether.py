"""The facade: ``Tether(db=...)`` composes the store, the indexer, the searcher and the
retrieval pipeline, and delegates to them. Pieces are made on first use: a command that
only lists documents never loads an embedding model or starts a thread."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from tether.embed import Embedder, default_token_counter, embedder_from_settings
from tether.errors import ConfigurationError, DocumentNotFound, InvalidArgument
from tether.ingest.indexer import Indexer, ProgressCallback, ReembedReport
from tether.ingest.jobs import IndexJob, IndexWorker
from tether.ingest.jobs import ProgressCallback as JobProgressCallback
from tether.ingest.sources import PathSource, TextSource, coerce_sources, smallest_first
from tether.ingest.sources import text_source as make_text_source
from tether.ingest.watcher import LibrarySync, SyncReport
from tether.llm import ChatModel, chat_from_settings
from tether.models import (
    GLOBAL_WORKSPACE,
    MAX_K,
    CleanupReport,
    Document,
    Filters,
    IndexResult,
    RetrievalResult,
    Scope,
    Session,
    Tags,
    Workspace,
    parse_retention,
)
from tether.retrieve.decide import Decision
from tether.retrieve.pipeline import Pipeline, Request
from tether.retrieve.search import Searcher, SearchMode, SearchResults
from tether.settings import Settings
from tether.store import AuditEntry, Database, RegistryEntry, SQLiteStore, Store, StoredChunk
from tether.tags import DOCUMENT_STATUSES, validate_tags

logger = logging.getLogger("tether")

PathLike = str | os.PathLike[str]
ScopeArg = Scope | Literal["session", "workspace", "global"] | None
Status = Literal["active", "draft", "pending"]


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
        all-MiniLM-L6-v2), made on first use; when embeddings are disabled or cannot
        run, retrieval is lexical-only and ``embeddings_unavailable`` says why.
        ``count_tokens`` (stored per chunk, used by the context budget) defaults to the
        embedder's tokenizer, else the packaged all-MiniLM-L6-v2 tokenizer when it is
        installed. ``chat`` (decide, rewrite and rerank by LLM, when the settings turn
        them on) defaults to the ``[llm]`` endpoint.
        """
        self.settings = settings if settings is not None else Settings.load()
        self.store: Store = SQLiteStore(Database(db if db is not None else self.settings.db))
        self._given = (embedder, count_tokens, chat)
        self._lock = threading.RLock()
        self._indexer: Indexer | None = None
        self._pipeline: Pipeline | None = None
        self._jobs: IndexWorker | None = None
        self._searcher = Searcher(
            self.store, self.settings.rag, self._make_embedder, policy=self.settings.policy
        )

    def __repr__(self) -> str:
        return f"Tether(db={self.store.location!r})"

    def __enter__(self) -> Tether:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish running indexing jobs (queued ones are cancelled), then close the store."""
        if self._jobs is not None:
            self._jobs.shutdown(wait=True)
        if self._pipeline is not None:
            self._pipeline.close()
        self._searcher.close()
        self.store.close()

    # -- the pieces, made on first use --------------------------------------------------

    def _make_embedder(self) -> tuple[Embedder | None, str | None]:
        given = self._given[0]
        return (given, None) if given is not None else embedder_from_settings(self.settings)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder (``None`` when embeddings are off or cannot run)."""
        return self._searcher.embedder

    @property
    def embeddings_unavailable(self) -> str | None:
        """Why there is no embedder, when there is none."""
        return self._searcher.embeddings_unavailable

    @property
    def chat(self) -> ChatModel | None:
        return self._retrieval().chat

    @property
    def chat_unavailable(self) -> str | None:
        return self._retrieval().chat_unavailable

    def _index(self) -> Indexer:
        with self._lock:
            if self._indexer is None:
                count_tokens = self._given[1] or default_token_counter(self.embedder)
                self._indexer = Indexer(
                    self.store, self.settings.rag, embedder=self.embedder,
                    count_tokens=count_tokens, policy=self.settings.policy,
                )  # fmt: skip
            return self._indexer

    def _retrieval(self) -> Pipeline:
        with self._lock:
            if self._pipeline is None:
                chat, unavailable = self._given[2], None
                if chat is None:
                    chat, unavailable = chat_from_settings(self.settings.llm)
                self._pipeline = Pipeline(
                    self.store, self.settings, self._searcher, chat, unavailable
                )
            return self._pipeline

    def _worker(self) -> IndexWorker:
        if not self.store.cross_thread:
            raise ConfigurationError(
                "background indexing needs a store usable from other threads; open your"
                " sqlite3 connection with check_same_thread=False, or pass a path"
            )
        with self._lock:
            if self._jobs is None:
                self._jobs = IndexWorker(self._index().add, self.settings.rag.index_workers)
            return self._jobs

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
        status: Status | None = None,
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
            items: list[PathSource | TextSource] = [make_text_source(
                text, title=title, mime=mime, document_id=document_id, source=source,
                metadata=metadata, tags=tags, status=status,
            )]  # fmt: skip
        elif document_id is not None or source is not None or metadata is not None:
            raise InvalidArgument(
                "document_id=, source= and metadata= go with text= (or a TextSource)"
            )
        else:
            items = coerce_sources(sources, tags, status)
        indexer = self._index()
        placement = indexer.place(workspace_id, session_id)
        return indexer.add(items, placement, on_error=on_error, progress=progress)

    def submit(
        self,
        sources: PathLike | TextSource | Iterable[PathLike | TextSource],
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
        tags: Tags | dict[str, Any] | None = None,
        status: Status | None = None,
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
        clock: Callable[[], datetime] | None = None,
    ) -> LibrarySync:
        """The files under ``folder`` as a library kept in ``workspace_id`` (default: the
        global library): ``.scan()`` once, or ``.watch()`` for changes. See
        :mod:`tether.ingest.watcher`. ``clock`` (for retry times) defaults to UTC now."""
        options: dict[str, Any] = {"clock": clock} if clock is not None else {}
        return LibrarySync(
            self._index(), folder, workspace_id=workspace_id, settle=settle, backoff=backoff,
            **options,
        )  # fmt: skip

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

    # -- search and retrieval -----------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        scope: ScopeArg = None,
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
            results.debug["scope_exists"] = self.store.scope_exists(resolved)
        return results

    def retrieve(
        self,
        question: str,
        *,
        scope: ScopeArg = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        decision: Decision | None = None,
        filters: Filters | None = None,
        max_chunks: int | None = None,
        min_relevance: float | None = None,
        timeout: float | None = None,
        guarded: bool = False,
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
        bounds the whole retrieval (:class:`RetrievalTimeout` past it). ``guarded``
        says the caller blocks generation unless the result is grounded (as
        :func:`tether.policy.require_grounding` does): a result that is not grounded, or
        a timeout, is then audited as ``blocked``. Every call is recorded in the audit
        log (``policy.audit``) under ``result.retrieval_id``.
        """
        request = self._request(question, scope, session_id, workspace_id, decision,
                                filters, max_chunks, min_relevance, timeout, guarded)  # fmt: skip
        return self._retrieval().retrieve(request)

    async def aretrieve(
        self,
        question: str,
        *,
        scope: ScopeArg = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        decision: Decision | None = None,
        filters: Filters | None = None,
        max_chunks: int | None = None,
        min_relevance: float | None = None,
        timeout: float | None = None,
        guarded: bool = False,
    ) -> RetrievalResult:
        """:meth:`retrieve` for asyncio: the blocking work runs in threads, the queries
        concurrently (``asyncio.gather``), and LLM calls through the async client."""
        request = await asyncio.to_thread(
            self._request, question, scope, session_id, workspace_id, decision, filters,
            max_chunks, min_relevance, timeout, guarded,
        )  # fmt: skip
        return await self._retrieval().aretrieve(request)

    def _request(self, question: str, scope: ScopeArg, session_id: str | None,
                 workspace_id: str | None, *options: Any) -> Request:  # fmt: skip
        """The request, its options checked, for a scope whose session or workspace
        exists (NotFound otherwise)."""
        decision, filters, max_chunks, min_relevance, timeout, guarded = options
        resolved = self.resolve_scope(scope, session_id=session_id, workspace_id=workspace_id)
        request = Request(question, resolved, session_id, decision, filters, max_chunks,
                          min_relevance, timeout, bool(guarded))  # fmt: skip
        if resolved.kind == "session":
            self.store.get_session(resolved.id)
        elif resolved.kind == "workspace":
            self.store.get_workspace(resolved.id)
        if session_id is not None and resolved.kind != "session":
            self.store.get_session(session_id)
        return request

    def decide(self, message: str) -> Decision:
        """Whether ``message`` needs retrieval, by ``rag.decide`` (the local classifier, or
        the chat model with the classifier as fallback); ``rag.enabled = false`` always
        says no. The first step of :meth:`retrieve`, for callers that route on it."""
        return self._retrieval().decide(message)[0]

    async def adecide(self, message: str) -> Decision:
        return (await self._retrieval().adecide(message))[0]

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
        return self.store.list_documents(workspace_id=workspace_id, session_id=session_id)

    def get_document(self, document_id: str) -> Document:
        return self.store.get_document(document_id)

    def chunks(self, document_id: str) -> list[StoredChunk]:
        self.store.get_document(document_id)
        return self.store.chunks_of(document_id)

    def delete_document(self, document_id: str) -> None:
        """Delete a document with its chunks, FTS rows, embeddings and attachments."""
        self.store.delete_document(document_id)

    def set_status(self, document_id: str, status: Status) -> Document:
        """Publish a draft or approve a submission (``"active"``), or take a document out of
        retrieval (``"draft"``, ``"pending"``) without deleting it."""
        if status not in DOCUMENT_STATUSES:
            raise InvalidArgument(f"status must be one of {DOCUMENT_STATUSES}, not {status!r}")
        self.store.set_status(document_id, status)
        return self.store.get_document(document_id)

    def approve(self, document_id: str) -> Document:
        """Approve a user-submitted (``pending``) or draft document: it becomes searchable."""
        return self.set_status(document_id, "active")

    def set_tags(self, document_id: str, tags: Tags | dict[str, Any]) -> Document:
        """Replace a document's tags (validated against the policy), content unchanged."""
        document = self.store.get_document(document_id)
        checked = validate_tags(document_id, tags, self.settings.policy)
        self.store.set_tags_and_status(document_id, checked, document.status)
        return self.store.get_document(document_id)

    def retrieval_log(self, limit: int = 50, outcome: str | None = None) -> list[AuditEntry]:
        """The newest audit rows: retrieval id, time, sanitized query, scope, filters, the
        retrieved chunk and document ids, and the outcome (``grounded``, ``ungrounded``,
        ``skipped``, ``blocked`` or ``error``) with its reason."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"limit must be a positive integer, not {limit!r}")
        return self.store.retrieval_log(limit, outcome)

    def cleanup(self, retention: str | timedelta = "7d", *, dry_run: bool = False) -> CleanupReport:
        """Delete documents that have been stale for longer than ``retention`` (``"7d"``,
        ``"12h"``, ``"30m"``, ``"2w"`` or a timedelta), with their chunks, embeddings, FTS
        rows and attachments. ``dry_run`` lists them and deletes nothing."""
        cutoff = (datetime.now(UTC) - parse_retention(retention)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        documents = self.store.stale_documents(cutoff)
        for document in documents if not dry_run else ():
            try:
                self.store.delete_document(document.id)
            except DocumentNotFound:
                continue  # deleted meanwhile
        if documents and not dry_run:
            logger.info("cleanup deleted %d stale document(s)", len(documents))
        return CleanupReport(documents=tuple(documents), deleted=not dry_run, cutoff=cutoff)

    # -- workspaces and sessions --------------------------------------------------------

    def create_workspace(self, workspace_id: str, name: str | None = None) -> Workspace:
        _require_id(workspace_id, "workspace_id")
        return self.store.ensure_workspace(workspace_id, name)

    def workspaces(self) -> list[Workspace]:
        return self.store.list_workspaces()

    def create_session(self, session_id: str, *, workspace_id: str) -> Session:
        _require_id(session_id, "session_id")
        _require_id(workspace_id, "workspace_id")
        self.store.ensure_workspace(workspace_id)
        return self.store.ensure_session(session_id, workspace_id)

    def sessions(self, *, workspace_id: str | None = None) -> list[Session]:
        return self.store.list_sessions(workspace_id)

    def close_session(self, session_id: str) -> Session:
        """Close a session. Its ChatPDF documents (imported with :meth:`on_pdf_imported`)
        that no other open session uses are marked stale (``stale_at``), for
        :meth:`cleanup` to delete once the retention window has passed."""
        session, stale = self.store.close_session(session_id)
        if stale:
            logger.info("session %s closed: %d document(s) marked stale", session_id, len(stale))
        return session

    def attach(self, document_id: str, session_id: str) -> bool:
        """Attach a document to a session; False if it already was."""
        return self.store.attach_document_to_session(document_id, session_id)

    def detach(self, document_id: str, session_id: str) -> bool:
        """Detach a document from a session (the document stays); False if it was not."""
        return self.store.detach_document_from_session(document_id, session_id)


def _require_id(value: object, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{name} must be a non-empty string, not {value!r}")
