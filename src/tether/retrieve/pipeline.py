"""The retrieval pipeline: decide, rewrite, retrieve per query, fuse, rerank, build context.

::

    question ─▶ decide ─▶ rewrite (original + 0..3) ─▶ per query, in parallel:
        lexical top-k_lexical ∥ vector top-k_vector ─▶ fused (rag.fusion)
    ─▶ RRF across queries (rag.rrf_k; skipped for one query) ─▶ top rerank_top_n
    ─▶ relevance ─▶ rerank (heuristic | LLM, original question)
    ─▶ min_relevance ─▶ context (max_chunks, context_budget, citations)

Relevance, the number ``rag.min_relevance`` is compared with, is the cosine between the
*original question* and the chunk, clipped to 0..1, when both have vectors of the
configured model: one scale for every query, whatever the fusion score of the chunk
was. A chunk without a vector (or a store without embeddings) gets the share of the
question's search terms that occur in it, also 0..1.

:meth:`Pipeline.aretrieve` runs on the caller's event loop, with the blocking work
(SQLite, the embedding model) in threads; :meth:`Pipeline.retrieve` runs the same
coroutine on a private event-loop thread, so it also works where a loop is already
running. OpenTelemetry spans: ``rag.retrieve`` with ``generate_sub_queries`` (only when
rewriting), one ``retrieve`` per query (attribute ``rag.query_index``),
``rerank_chunks`` and ``build_context``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from tether.embed import Embedder
from tether.errors import (
    ConfigurationError,
    EmbeddingError,
    InvalidArgument,
    LLMError,
    RetrievalTimeout,
)
from tether.llm import ChatModel
from tether.models import Exclusions, Filters, RetrievalResult, Scope, ScopeKind
from tether.retrieve.context import build_context
from tether.retrieve.decide import Decision, adecide_with_llm, decide_locally
from tether.retrieve.fts import term_coverage
from tether.retrieve.fusion import reciprocal_rank_fusion
from tether.retrieve.rerank import Candidate, allm_rerank, heuristic_rerank, metadata_priority
from tether.retrieve.rewrite import Rewrite, arewrite_query
from tether.retrieve.search import Searcher
from tether.sanitize import sanitize_query
from tether.settings import Settings
from tether.store import Repository
from tether.store.repository import utcnow

logger = logging.getLogger("tether.retrieve")
tracer = trace.get_tracer("tether")

MAX_QUESTION_CHARS = 8000
T = TypeVar("T")


class _LoopThread:
    """One daemon thread running an event loop, for the synchronous API."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure()).result()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                loop.set_default_executor(
                    concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="tether-io")
                )
                threading.Thread(
                    target=loop.run_forever, name="tether-retrieve", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result()
            loop.call_soon_threadsafe(loop.stop)


@dataclass(frozen=True)
class Request:
    """One retrieval: the question and where to look, plus per-call limits (``None``:
    the settings') and whether a guard will block on an ungrounded result."""

    question: str
    scope: Scope
    session_id: str | None = None
    decision: Decision | None = None
    filters: Filters | None = None
    max_chunks: int | None = None
    min_relevance: float | None = None
    timeout: float | None = None
    guarded: bool = False


class Pipeline:
    def __init__(
        self,
        repo: Repository,
        settings: Settings,
        searcher: Searcher,
        embedder: Embedder | None,
        chat: ChatModel | None,
        chat_unavailable: str | None,
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.searcher = searcher
        self.embedder = embedder
        self.chat = chat
        self.chat_unavailable = chat_unavailable
        self._loop = _LoopThread()

    def close(self) -> None:
        self._loop.close()

    def _check_threads(self) -> None:
        if not self.repo.db.cross_thread:
            raise ConfigurationError(
                "retrieve runs its searches in threads, and this store was opened on your own"
                " sqlite3 connection made with check_same_thread=True; open it with"
                " sqlite3.connect(..., check_same_thread=False), or pass a path"
            )

    def retrieve(self, request: Request) -> RetrievalResult:
        _check_question(request.question)
        self._check_threads()
        parent = otel_context.get_current()
        return self._loop.run(self._audited(request, parent))

    async def aretrieve(self, request: Request) -> RetrievalResult:
        _check_question(request.question)
        self._check_threads()
        return await self._audited(request, otel_context.get_current())

    def decide(self, question: str) -> tuple[Decision, list[str]]:
        """The decision alone, and its degradations (an LLM decision that fell back)."""
        _check_question(question)
        degradations: list[str] = []
        return self._loop.run(self._decide(question, degradations)), degradations

    async def adecide(self, question: str) -> tuple[Decision, list[str]]:
        _check_question(question)
        degradations: list[str] = []
        return await self._decide(question, degradations), degradations

    # -- the coroutine both entry points run --------------------------------------------

    async def _audited(self, request: Request, parent: Any) -> RetrievalResult:
        """:meth:`_run` within the request's time budget, with one audit row per call."""
        retrieval_id = uuid.uuid4().hex
        budget = asyncio.timeout(request.timeout)
        try:
            async with budget:
                result = await self._run(request, parent, retrieval_id)
        except TimeoutError as exc:
            if not budget.expired():  # a timeout inside (a socket, a provider): an error
                await self._audit(request, retrieval_id, None, "error", type(exc).__name__)
                _tag(exc, retrieval_id)
                raise
            message = f"retrieval took longer than its {request.timeout:g}s budget"
            logger.error("%s (retrieval %s)", message, retrieval_id)
            await self._audit(request, retrieval_id, None, "blocked" if request.guarded else
                              "error", f"timeout: {message}")  # fmt: skip
            raise RetrievalTimeout(message, retrieval_id=retrieval_id) from None
        except Exception as exc:
            await self._audit(request, retrieval_id, None, "error", type(exc).__name__)
            _tag(exc, retrieval_id)
            raise
        if not result.retrieved:
            outcome, reason = "skipped", result.debug["decision"]["reason"]
        elif result.grounded:
            outcome, reason = "grounded", None
        else:
            outcome = "blocked" if request.guarded else "ungrounded"
            reason = "no chunk above min_relevance" if result.debug.get("candidates", {}).get(
                "reranked") else "no results"  # fmt: skip
        await self._audit(request, retrieval_id, result, outcome, reason)
        return result

    async def _audit(
        self,
        request: Request,
        retrieval_id: str,
        result: RetrievalResult | None,
        outcome: str,
        reason: str | None,
    ) -> None:
        if not self.settings.policy.audit:
            return
        entry = {
            "retrieval_id": retrieval_id,
            "created_at": utcnow(),
            "query": sanitize_query(request.question),
            "scope": request.scope.to_dict(),
            "filters": request.filters.to_dict() if request.filters else {},
            "chunk_ids": list(result.selected_chunk_ids) if result else [],
            "document_ids": sorted({c.document_id for c in result.citations}) if result else [],
            "outcome": outcome,
            "reason": reason,
        }
        try:
            await asyncio.to_thread(self.repo.log_retrieval, entry)
        except Exception:  # the audit must not turn an answer into a failure, but is loud
            logger.exception("could not write the audit row of retrieval %s", retrieval_id)

    async def _run(self, request: Request, parent: Any, retrieval_id: str) -> RetrievalResult:
        question, scope, session_id = request.question, request.scope, request.session_id
        decision = request.decision
        rag = self.settings.rag
        max_chunks = request.max_chunks or rag.max_chunks
        min_relevance = (
            request.min_relevance if request.min_relevance is not None else rag.min_relevance
        )
        started = time.perf_counter()
        timings: dict[str, float] = {}
        degradations: list[str] = []
        debug: dict[str, Any] = {
            "retrieval_id": retrieval_id,
            "scope": scope.to_dict(),
            "filters": request.filters.to_dict() if request.filters else None,
            "degradations": degradations,
        }
        with tracer.start_as_current_span(
            "rag.retrieve",
            context=parent,
            attributes={"rag.scope.kind": scope.kind, "rag.scope.id": scope.id},
        ) as span:
            if decision is None:
                decision = await self._decide(question, degradations)
            timings["decide"] = _ms(started)
            debug["decision"] = decision.to_dict()
            if not decision.needed:
                span.set_attribute("rag.skipped", decision.reason)
                timings["total"] = _ms(started)
                debug["timings_ms"] = timings
                logger.debug("retrieval skipped: %s", decision.reason)
                return _skipped(question, scope, debug, retrieval_id)

            queries = [question]
            if rag.enable_query_rewrite:
                t0 = time.perf_counter()
                with tracer.start_as_current_span(
                    "generate_sub_queries", attributes={"rag.rewrite_count": rag.rewrite_count}
                ) as sub:
                    rewrite = await self._rewrite(question)
                    sub.set_attribute("rag.rewrites", len(rewrite.queries))
                if rewrite.degradation:
                    degradations.append(rewrite.degradation)
                    logger.warning("%s", rewrite.degradation)
                queries += rewrite.queries
                debug["rewrite"] = {"asked": rag.rewrite_count, "got": len(rewrite.queries),
                                    "notes": rewrite.notes}  # fmt: skip
                timings["rewrite"] = _ms(t0)
            span.set_attribute("rag.queries", len(queries))

            t0 = time.perf_counter()
            exclusions = self.searcher.exclusions()
            per_query = await asyncio.gather(
                *(
                    self._retrieve_one(i, q, scope, request.filters, exclusions)
                    for i, q in enumerate(queries)
                )
            )
            timings["retrieve"] = _ms(t0)
            for item in per_query:
                degradations.extend(item.pop("degradations"))
            question_vector = per_query[0].pop("query_vector")
            for item in per_query[1:]:
                item.pop("query_vector")

            t0 = time.perf_counter()
            lists = [item.pop("fused") for item in per_query]
            if len(lists) == 1:
                fused = lists[0]
            else:
                fused = reciprocal_rank_fusion(
                    [[cid for cid, _ in ranked] for ranked in lists], k=rag.rrf_k
                )
            top = fused[: rag.rerank_top_n]
            timings["fuse"] = _ms(t0)
            debug["queries"] = per_query
            debug["method"] = "hybrid" if question_vector is not None else "lexical"
            debug["across_queries"] = (
                {"method": "rrf", "rrf_k": rag.rrf_k, "lists": len(lists)}
                if len(lists) > 1
                else None
            )

            t0 = time.perf_counter()
            with tracer.start_as_current_span("rerank_chunks") as rerank_span:
                candidates, relevance_kind = await asyncio.to_thread(
                    self._candidates, question, question_vector, top, session_id
                )
                ranked, rerank_debug = heuristic_rerank(
                    question, candidates, rag.rerank, in_session=scope.kind == "session"
                )
                if rag.enable_llm_rerank and ranked:
                    ranked, rerank_debug = await self._llm_rerank(
                        question, ranked, rerank_debug, degradations
                    )
                rerank_span.set_attribute("rag.rerank.method", rerank_debug["method"])
                rerank_span.set_attribute("rag.rerank.candidates", len(candidates))
            timings["rerank"] = _ms(t0)

            t0 = time.perf_counter()
            with tracer.start_as_current_span("build_context") as context_span:
                relevant = [c for c in ranked if c.relevance >= min_relevance]
                context = build_context(relevant, max_chunks=max_chunks, budget=rag.context_budget)
                context_span.set_attribute("rag.context.chunks", len(context.chunk_ids))
                context_span.set_attribute("rag.context.tokens", context.tokens)
            timings["context"] = _ms(t0)

            grounded = bool(context.chunk_ids)
            guidance, suggested = (None, None)
            if not grounded:
                guidance, suggested = await asyncio.to_thread(
                    self._guidance, scope, len(fused), ranked
                )
            span.set_attribute("rag.grounded", grounded)
            timings["total"] = _ms(started)
            debug.update(
                candidates={
                    "fused": len(fused),
                    "reranked": len(ranked),
                    "above_min_relevance": len(relevant),
                    "context": len(context.chunk_ids),
                },
                rerank=rerank_debug,
                ranked=[[c.hit.chunk_id, c.hit.document_id, round(c.relevance, 4)] for c in ranked],
                relevance={
                    "definition": relevance_kind,
                    "min_relevance": min_relevance,
                    "best": round(max((c.relevance for c in ranked), default=0.0), 4),
                    "below_min": [c.hit.chunk_id for c in ranked if c.relevance < min_relevance],
                },
                context={
                    "tokens": context.tokens,
                    "budget": rag.context_budget,
                    "max_chunks": max_chunks,
                    "skipped_for_budget": list(context.skipped_for_budget),
                    "truncated": context.truncated,
                },
                timings_ms=timings,
            )
            return RetrievalResult(
                retrieval_id=retrieval_id,
                question=question,
                context=context.text,
                citations=context.citations,
                grounded=grounded,
                guidance=guidance,
                suggested_scope=suggested,
                retrieved=True,
                queries=tuple(queries),
                scope=scope,
                selected_chunk_ids=context.chunk_ids,
                debug=debug,
            )

    # -- stages -------------------------------------------------------------------------

    async def _decide(self, question: str, degradations: list[str]) -> Decision:
        rag = self.settings.rag
        if not rag.enabled:
            return Decision(False, "question", "rag.enabled is off")
        if rag.decide == "llm":
            if self.chat is None:
                degradations.append(
                    f"LLM decision unavailable ({self.chat_unavailable}), local decision used"
                )
            else:
                try:
                    return await adecide_with_llm(self.chat, question)
                except LLMError as exc:
                    degradations.append(f"LLM decision failed, local decision used: {exc}")
                    logger.warning("LLM decision failed, local decision used: %s", exc)
        return decide_locally(question)

    async def _rewrite(self, question: str) -> Rewrite:
        if self.chat is None:
            return Rewrite(
                degradation=f"query rewrite is on but {self.chat_unavailable}; original query only"
            )
        return await arewrite_query(self.chat, question, self.settings.rag.rewrite_count)

    async def _retrieve_one(
        self,
        index: int,
        query: str,
        scope: Scope,
        filters: Filters | None,
        exclusions: Exclusions,
    ) -> dict[str, Any]:
        rag = self.settings.rag
        with tracer.start_as_current_span("retrieve", attributes={"rag.query_index": index}) as sp:
            t0 = time.perf_counter()
            lexical, (vector_hits, vector, problem) = await asyncio.gather(
                asyncio.to_thread(
                    self.searcher.lexical_candidates,
                    query,
                    scope,
                    rag.k_lexical,
                    filters,
                    exclusions,
                ),
                asyncio.to_thread(self._vector_side, query, scope, filters, exclusions),
            )
            fusion: dict[str, Any] | None = None
            if vector is None:
                fused = lexical
            else:
                fused, fusion = self.searcher.fuse(lexical, vector_hits)
            sp.set_attribute("rag.candidates.lexical", len(lexical))
            sp.set_attribute("rag.candidates.vector", len(vector_hits))
        return {
            "index": index,
            "query": query,
            "lexical": len(lexical),
            "vector": len(vector_hits),
            "fused": fused,
            "fusion": fusion,
            "ms": _ms(t0),
            "query_vector": vector,
            "degradations": [problem] if problem else [],
        }

    def _vector_side(
        self, query: str, scope: Scope, filters: Filters | None, exclusions: Exclusions
    ) -> tuple[list[tuple[int, float]], Any, str | None]:
        searcher = self.searcher
        if searcher.embedder is None or searcher.vectors is None:
            reason = searcher.embeddings_unavailable or "no embedder configured"
            return [], None, f"lexical only: {reason}"
        try:
            vector = searcher.embedder.embed_query(query)
        except EmbeddingError as exc:
            logger.warning("query embedding failed, lexical only: %s", exc)
            return [], None, f"query embedding failed, lexical only: {exc}"
        found = searcher.vectors.search(
            scope, vector, self.settings.rag.k_vector, filters, exclusions
        )
        return found, vector, None

    def _candidates(
        self,
        question: str,
        question_vector: Any,
        top: list[tuple[int, float]],
        session_id: str | None,
    ) -> tuple[list[Candidate], str]:
        rows = self.repo.candidate_rows([cid for cid, _ in top], session_id)
        cosines: dict[int, float] = {}
        if question_vector is not None and self.searcher.vectors is not None:
            cosines = self.searcher.vectors.cosines(question_vector, [cid for cid, _ in top])
        candidates = []
        for chunk_id, fused in top:
            if chunk_id not in rows:
                continue  # deleted since the search
            hit, token_count, metadata, recency, source_type = rows[chunk_id]
            if chunk_id in cosines:
                relevance = max(0.0, min(1.0, cosines[chunk_id]))
            else:
                relevance = term_coverage(question, hit.text)
            candidates.append(
                Candidate(
                    hit=hit,
                    fused=fused,
                    relevance=relevance,
                    priority=metadata_priority(
                        metadata, self.settings.policy.priorities.get(source_type or "", 0.0)
                    ),
                    recency=recency,
                    token_count=token_count,
                )
            )
        return candidates, "cosine" if cosines else "term_coverage"

    async def _llm_rerank(
        self,
        question: str,
        ranked: list[Candidate],
        heuristic_debug: dict[str, Any],
        degradations: list[str],
    ) -> tuple[list[Candidate], dict[str, Any]]:
        if self.chat is None:
            degradations.append(
                f"LLM rerank is on but {self.chat_unavailable}; heuristic order kept"
            )
            return ranked, heuristic_debug
        try:
            reordered, llm_debug = await allm_rerank(
                self.chat, question, ranked, self.settings.rag.rerank
            )
        except LLMError as exc:
            what = "timed out" if exc.timeout else "failed"
            degradations.append(f"LLM rerank {what}, heuristic order kept: {exc}")
            logger.warning("LLM rerank %s, heuristic order kept: %s", what, exc)
            return ranked, heuristic_debug
        return reordered, {**llm_debug, "heuristic": heuristic_debug}

    def _guidance(
        self, scope: Scope, found: int, ranked: list[Candidate]
    ) -> tuple[str, ScopeKind | None]:
        where = {
            "session": "this chat's documents",
            "workspace": "this workspace",
            "global": "the global library",
        }[scope.kind]
        if not self.repo.scope_document_ids(scope):
            opening = {
                "session": "This chat has no documents yet.",
                "workspace": "This workspace has no documents yet.",
                "global": "The global library has no documents yet.",
            }[scope.kind]
        elif not found:
            opening = f"Nothing in {where} matches the question."
        else:
            opening = f"Nothing in {where} is relevant enough to answer from."
        if scope.kind == "session":
            return (
                f"{opening} Search the whole workspace instead, or add a document that"
                " covers this to the chat.",
                "workspace",
            )
        if scope.kind == "workspace":
            return (
                f"{opening} Search the global library instead, or add documents that cover"
                " this to the workspace.",
                "global",
            )
        return f"{opening} Add documents that cover this to the library.", None


def _tag(exc: BaseException, retrieval_id: str) -> None:
    """Name the retrieval on an exception that escapes it (for the audit trail)."""
    with contextlib.suppress(AttributeError):  # exceptions with __slots__
        exc.retrieval_id = retrieval_id  # type: ignore[attr-defined]


def _check_question(question: object) -> None:
    if not isinstance(question, str):
        raise InvalidArgument(f"the question must be text (str), not {type(question).__name__}")
    if not question.strip():
        raise InvalidArgument("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidArgument(
            f"the question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,}"
        )


def _skipped(
    question: str, scope: Scope, debug: dict[str, Any], retrieval_id: str
) -> RetrievalResult:
    return RetrievalResult(
        retrieval_id=retrieval_id,
        question=question,
        context="",
        citations=(),
        grounded=False,
        guidance=None,
        suggested_scope=None,
        retrieved=False,
        queries=(question,),
        scope=scope,
        selected_chunk_ids=(),
        debug=debug,
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
