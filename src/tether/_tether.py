"""The facade: ``Tether(db=...)`` composes the store, the indexer, the searcher and the
retrieval pipeline, and delegates to them. Pieces are made on first use: a command that
only lists documents never loads an embedding model or starts a thread."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from opentelemetry import trace

from tether._catalog import Catalog
from tether._indexing import Indexing
from tether.access import current_asker
from tether.embed import (
    Embedder,
    default_token_counter,
    embedder_from_settings,
    sizing_embedder,
)
from tether.errors import ConfigurationError, InvalidArgument, ScopeError
from tether.ingest.indexer import Indexer, ProgressCallback
from tether.ingest.jobs import IndexWorker
from tether.ingest.sources import TextSource
from tether.llm import ChatModel, chat_from_settings
from tether.models import (
    MAX_K,
    DocumentStatus,
    Filters,
    IndexResult,
    RetrievalResult,
    Scope,
    Tags,
)
from tether.retrieve.decide import Decision
from tether.retrieve.pipeline import Pipeline, Request
from tether.retrieve.search import Searcher, SearchMode, SearchResults
from tether.settings import Settings
from tether.store import Store, open_store
from tether.text import check_identifier, valid_text

logger = logging.getLogger("tether")
tracer = trace.get_tracer("tether")

PathLike = str | os.PathLike[str]
ScopeArg = Scope | Literal["session", "workspace", "global"] | None


class Tether(Indexing, Catalog):
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
        """Open (creating or migrating) the store ``db``: a SQLite path, ``":memory:"``
        or connection, or a PostgreSQL URL (``postgresql://user@host/dbname``, the
        ``postgres`` extra); default ``settings.db``.

        ``embedder`` defaults to the one the settings describe (the local
        all-MiniLM-L6-v2), made on first use; when embeddings are disabled or cannot
        run, retrieval is lexical-only and ``embeddings_unavailable`` says why.
        ``count_tokens`` (stored per chunk, used by the context budget) defaults to the
        embedder's tokenizer, else the packaged all-MiniLM-L6-v2 tokenizer when it is
        installed. ``chat`` (decide, rewrite and rerank by LLM, when the settings turn
        them on) defaults to the ``[llm]`` endpoint.
        """
        self.settings = settings if settings is not None else Settings.load()
        self.store: Store = open_store(
            db if db is not None else self.settings.db, language=self.settings.rag.language
        )
        self._given = (embedder, count_tokens, chat)
        self._lock = threading.RLock()
        self._indexer: Indexer | None = None
        self._pipeline: Pipeline | None = None
        self._jobs: IndexWorker | None = None
        self._searcher = Searcher(
            self.store, self.settings.rag, self._make_embedder, policy=self.settings.policy
        )
        self._warming: threading.Thread | None = None
        if self.settings.rag.embeddings.warm_at_open and self.settings.rag.embeddings.enabled:
            self._warming = threading.Thread(target=self.warmup, name="tether-warmup", daemon=True)
            self._warming.start()

    def warmup(self) -> dict[str, float]:
        """Load the embedding model (running it once) and the stored vectors now, rather
        than in the first search: a local model takes seconds to load. Returns how many
        milliseconds each took (empty when already warm, or without embeddings). Every
        retrieval warms up first, outside its time budget (``timeout``,
        ``policy.timeout``), in a span of its own (``tether.warm_up``);
        ``rag.embeddings.warm_at_open`` runs this in the background when a Tether opens.
        """
        if self._searcher.warm:
            return {}
        with tracer.start_as_current_span("tether.warm_up") as span:
            timings = self._searcher.warm_up()
            for name, ms in timings.items():
                span.set_attribute(f"tether.warm_up.{name}", ms)
        return timings

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
        if given is not None:
            return given, None
        config = self.settings.rag.embeddings
        auto = config.enabled and config.provider == "local" and config.runtime == "auto"
        # runtime = "auto" keeps the runtime whose vectors the store already holds.
        stored = self.store.embedding_counts() if auto else None
        return embedder_from_settings(self.settings, stored)

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
                embedder = self.embedder
                sizer = embedder
                if sizer is None and self._given[0] is None:
                    sizer = sizing_embedder(self.settings)
                count_tokens = self._given[1] or default_token_counter(sizer)
                self._indexer = Indexer(
                    self.store,
                    self.settings.rag,
                    embedder=embedder,
                    count_tokens=count_tokens,
                    policy=self.settings.policy,
                    sizer=sizer,
                )
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

    async def aadd(
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
        """:meth:`add` for asyncio: loading, chunking, embedding and storing run in a
        worker thread (``asyncio.to_thread``), so the event loop goes on serving
        meanwhile; ``progress`` is called on that thread. To queue work and return at
        once instead, see :meth:`submit`."""
        self._check_threads("aadd")
        return await asyncio.to_thread(
            self.add,
            sources,
            text=text,
            title=title,
            mime=mime,
            url=url,
            workspace_id=workspace_id,
            session_id=session_id,
            document_id=document_id,
            source=source,
            metadata=metadata,
            tags=tags,
            status=status,
            on_error=on_error,
            progress=progress,
        )

    def _check_threads(self, method: str) -> None:
        if not self.store.cross_thread:
            raise ConfigurationError(
                f"{method} runs in a worker thread, and this store was opened on your own"
                " sqlite3 connection made with check_same_thread=True; open it with"
                " sqlite3.connect(..., check_same_thread=False), or pass a path"
            )

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
        judge: bool = False,
        min_relevance: float | None = None,
    ) -> SearchResults:
        """The ``k`` best chunks for ``query`` inside ``scope`` (see :meth:`resolve_scope`:
        a session or workspace named without a scope is the scope), best first.

        ``mode="hybrid"`` fuses FTS5 top-``rag.lexical_depth`` and vector top-``rag.k_vector``
        (``rag.fusion``: RRF with ``rag.rrf_k`` by default, or z-score); ``"lexical"`` and
        ``"vector"`` run one side. Without embeddings, hybrid runs lexical-only and
        ``results.debug["degradations"]`` says why. The scope is part of both queries, so
        top-k is exact within it. Hit scores are the fused score in hybrid mode, -bm25 for
        lexical, cosine for vector. When nothing is found in a session or workspace scope,
        ``debug["scope_exists"]`` says whether that session or workspace exists at all.

        ``judge`` also weighs each hit as :meth:`retrieve` weighs its candidates: the
        evidence (0..1) that it answers ``query``, in ``results.evidence`` by chunk id
        (and as each hit's ``evidence`` in ``results.to_dict()``); it costs a few more
        queries, so it is off by default. ``min_relevance`` (0..1) judges the hits and
        keeps those whose evidence reaches it.
        """
        _check_search(query, k, mode, filters, min_relevance)
        query = valid_text(query)
        resolved = self.resolve_scope(scope, session_id=session_id, workspace_id=workspace_id)
        self._check_session_workspace(session_id, workspace_id)
        results = self._searcher.search(query, resolved, k, mode, filters)
        if judge or min_relevance is not None:
            self._judge(results, filters, min_relevance)
        if not results and resolved.kind != "global":
            # Nothing found: say whether the session or workspace exists at all (a typo in
            # an id otherwise looks like an empty scope).
            results.debug["scope_exists"] = self.store.scope_exists(resolved)
        return results

    def _judge(
        self, results: SearchResults, filters: Filters | None, min_relevance: float | None
    ) -> None:
        """Set each hit's evidence; keep only those at ``min_relevance`` or above."""
        results.evidence = self._retrieval().grounder.judge(results, filters) if results else {}
        if min_relevance is not None:
            evidence = results.evidence
            results[:] = [h for h in results if evidence.get(h.chunk_id, 0.0) >= min_relevance]
            results.debug["returned"] = len(results)
            results.debug["min_relevance"] = min_relevance

    async def asearch(
        self,
        query: str,
        *,
        scope: ScopeArg = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        k: int = 10,
        mode: SearchMode = "hybrid",
        filters: Filters | None = None,
        judge: bool = False,
        min_relevance: float | None = None,
    ) -> SearchResults:
        """:meth:`search` for asyncio: the search runs in a worker thread
        (``asyncio.to_thread``), so the event loop goes on serving meanwhile."""
        self._check_threads("asearch")
        return await asyncio.to_thread(
            self.search,
            query,
            scope=scope,
            session_id=session_id,
            workspace_id=workspace_id,
            k=k,
            mode=mode,
            filters=filters,
            judge=judge,
            min_relevance=min_relevance,
        )

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
        history: Sequence[dict[str, str]] | None = None,
        explain: bool = False,
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
        a timeout, is then audited as ``blocked``. ``history`` (the turns before the
        question, ``{"role", "content"}``, oldest first) turns a follow-up ("and page
        12?", "what about the battery?") into a standalone question: by the chat model
        when one is configured, else by rule. Requests about a document itself
        ("summarize this document", "what does page 12 say?") read its opening and
        outline, or that page, inside the scope. Every call is recorded in the audit log
        (``policy.audit``) under ``result.retrieval_id``. ``explain`` also records, in
        ``result.debug["explain"]``, each query's lexical, vector and fused candidates
        with their ranks and scores, and the chunks they name (title, page, section):
        what the console's retrieval debugger draws.
        """
        options = (decision, filters, max_chunks, min_relevance, timeout, guarded, history, explain)
        request = self._request(question, scope, session_id, workspace_id, *options)
        self.warmup()  # the model loads outside the retrieval's time budget
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
        history: Sequence[dict[str, str]] | None = None,
        explain: bool = False,
    ) -> RetrievalResult:
        """:meth:`retrieve` for asyncio: the blocking work runs in threads, the queries
        concurrently (``asyncio.gather``), and LLM calls through the async client."""
        request = await asyncio.to_thread(
            self._request,
            question,
            scope,
            session_id,
            workspace_id,
            decision,
            filters,
            max_chunks,
            min_relevance,
            timeout,
            guarded,
            history,
            explain,
        )
        await asyncio.to_thread(self.warmup)  # outside the retrieval's time budget
        return await self._retrieval().aretrieve(request)

    def _request(
        self,
        question: str,
        scope: ScopeArg,
        session_id: str | None,
        workspace_id: str | None,
        *options: Any,
    ) -> Request:
        """The request, its options checked, for a scope whose session or workspace
        exists (NotFound otherwise)."""
        decision, filters, max_chunks, min_relevance, timeout, guarded, history, explain = options
        if isinstance(question, str):
            question = valid_text(question)
        if history and isinstance(history, list | tuple):  # (anything else: Request says)
            history = [
                {**turn, "content": valid_text(turn["content"])}
                if isinstance(turn, dict) and isinstance(turn.get("content"), str)
                else turn
                for turn in history
            ]
        if session_id is not None:
            check_identifier("session_id", session_id)
        resolved = self.resolve_scope(scope, session_id=session_id, workspace_id=workspace_id)
        self._check_session_workspace(session_id, workspace_id)
        request = Request(
            question,
            resolved,
            session_id,
            decision,
            filters,
            max_chunks,
            min_relevance,
            timeout,
            bool(guarded),
            history or (),
            bool(explain),
            current_asker(),
        )
        if resolved.kind == "session":
            self.store.get_session(resolved.id)
        elif resolved.kind == "workspace":
            self.store.get_workspace(resolved.id)
        if session_id is not None and resolved.kind != "session":
            self.store.get_session(session_id)
        return request

    def decide(self, message: str, *, open_document: bool = False) -> Decision:
        """Whether ``message`` needs retrieval, by ``rag.decide`` (the local classifier, or
        the chat model with the classifier as fallback); ``rag.enabled = false`` always
        says no. The first step of :meth:`retrieve`, for callers that route on it. A
        request about a document itself ("summarize this document", "what does page 12
        say?") is category ``document``; with ``open_document`` (a chat's PDF is open)
        a bare "summarize this" is one too, rather than a request to reformat."""
        message = valid_text(message) if isinstance(message, str) else message
        return self._retrieval().decide(message, open_document=open_document)[0]

    async def adecide(self, message: str, *, open_document: bool = False) -> Decision:
        message = valid_text(message) if isinstance(message, str) else message
        return (await self._retrieval().adecide(message, open_document=open_document))[0]

    def resolve_scope(
        self,
        scope: Scope | str | None = None,
        *,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> Scope:
        """``scope`` with the ids it needs, as a Scope (:meth:`Scope.resolve`).

        Without ``scope``, the ids name it: ``session_id`` the session scope (a
        ``workspace_id`` beside it must be the session's own; :meth:`search` and
        :meth:`retrieve` check it when the session exists), else ``workspace_id`` the
        workspace scope, else ``rag.scope`` applies. A ``scope`` that the ids contradict
        is a ScopeError: ``"global"`` with a session or a workspace, a Scope with another
        session or workspace id than its own."""
        if scope is None and not session_id and not workspace_id:
            scope = self.settings.rag.scope
        return Scope.resolve(scope, session_id=session_id, workspace_id=workspace_id)

    def _check_session_workspace(self, session_id: str | None, workspace_id: str | None) -> None:
        """A ScopeError when ``session_id`` names a session of another workspace than
        ``workspace_id`` (a session that does not exist is left to the scope's checks)."""
        if not session_id or not workspace_id:
            return
        session = self.store.find_session(session_id)
        if session is not None and session.workspace_id != workspace_id:
            raise ScopeError(
                f"session {session_id!r} belongs to workspace {session.workspace_id!r}, not"
                f" {workspace_id!r}: name the session alone, or a session of {workspace_id!r}"
            )


def _check_search(
    query: object, k: object, mode: object, filters: object, min_relevance: object
) -> None:
    """InvalidArgument for a search argument of the wrong kind or out of range."""
    if not isinstance(query, str):
        raise InvalidArgument(f"query must be str, not {type(query).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidArgument(f"k must be an integer from 1 to {MAX_K}, not {k!r}")
    if mode not in ("hybrid", "lexical", "vector"):
        raise InvalidArgument(f"mode must be 'hybrid', 'lexical' or 'vector', not {mode!r}")
    if filters is not None and not isinstance(filters, Filters):
        raise InvalidArgument(f"filters must be a tether.Filters, not {type(filters).__name__}")
    if min_relevance is not None and (
        isinstance(min_relevance, bool)
        or not isinstance(min_relevance, int | float)
        or not 0.0 <= min_relevance <= 1.0
    ):
        raise InvalidArgument(f"min_relevance must be between 0 and 1, not {min_relevance!r}")
