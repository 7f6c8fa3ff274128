"""The retrieval pipeline: decide, rewrite, retrieve per query, fuse, rerank, build context.

::

    question ─▶ decide ─▶ rewrite (original + 0..3) ─▶ per query, in parallel:
        lexical top-k_lexical ∥ vector top-k_vector ─▶ fused (rag.fusion)
    ─▶ RRF across queries (rag.rrf_k; skipped for one query) ─▶ top rerank_top_n
    ─▶ relevance ─▶ rerank (heuristic | LLM, original question)
    ─▶ evidence ≥ min_relevance (or the LLM judge) ─▶ context (max_chunks, context_budget,
    citations) ─▶ a closer match in the wider scope?

Relevance, the number ``rag.min_relevance`` is compared with, is the *evidence* that the
chunk answers the original question (:mod:`tether.retrieve.evidence`): 0..1, made of
the question-chunk cosine (when both have vectors of the configured model), the
IDF-weighted coverage of the question's terms in the chunk's best two-sentence window,
and the share of the question's terms the scope lacks altogether. One scale for every
query, whatever the fusion score of the chunk was. ``debug["grounding"]`` says why the
result is grounded or not.

When the best evidence clears the threshold in a session (or a workspace), the scope the
guidance would suggest next (its workspace, or the global library) is searched too: if
a document there is clearly closer (``rag.wider_scope_margin`` more evidence), the
answer is not grounded here and the guidance says where it is.

**Threads.** :meth:`Pipeline.aretrieve` runs on the caller's event loop, the blocking
work (SQLite, the model) in worker threads. :meth:`Pipeline.retrieve` runs the same
coroutine (one flow to keep right) on the pipeline's private loop thread
(:class:`~tether.retrieve.loop.LoopThread`: it works where the caller's thread already
runs a loop) while the caller waits; the lexical and vector sides of a query run on two
workers at once. So the store is used from several threads (SQLite: a connection each),
and a store on a caller's own ``check_same_thread`` connection is refused.

The model steps (decide, condense, rewrite, LLM rerank, judge) share one budget per
retrieval (:class:`~tether.retrieve.budget.ModelBudget`): ``[llm] retrieval_budget``
seconds of model time (default ``[llm] timeout``), and never past a deadline that keeps
a reserve of the request's own ``timeout`` for the local stages. Each step gets what the
steps before it left, retries included; a step with too little left is skipped. Either
way it degrades with the time it really took, and the local stages still produce the
result: a slow model never makes a retrieval raise
:class:`~tether.errors.RetrievalTimeout`.

OpenTelemetry spans: ``rag.retrieve`` with ``decide_retrieval`` and
``condense_question`` (only when the chat model is asked), ``generate_sub_queries``
(only when rewriting), one ``retrieve`` per query (attribute ``rag.query_index``),
``rerank_chunks``, ``judge_answerability`` (only with the LLM judge) and
``build_context``. A model step that fails records its exception on its span, with an
error status; every degradation is an event (``degradation``, attribute
``rag.degradation``) on ``rag.retrieve``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from tether.errors import ConfigurationError, RetrievalTimeout
from tether.llm import ChatModel
from tether.models import Exclusions, RetrievalResult
from tether.retrieve.budget import ModelBudget
from tether.retrieve.context import begin_sentences, continue_over_pages, finish_sentences
from tether.retrieve.decide import Decision, adecide_with_llm, decide_locally
from tether.retrieve.documents import describe as describe_document_request
from tether.retrieve.documents import document_candidates, outline_text
from tether.retrieve.explain import explain_candidates
from tether.retrieve.fusion import reciprocal_rank_fusion
from tether.retrieve.grounding import Grounder, agreed
from tether.retrieve.judge import Verdict, ajudge
from tether.retrieve.loop import LoopThread
from tether.retrieve.request import MAX_QUESTION_CHARS, Request, check_question
from tether.retrieve.rerank import Candidate, allm_rerank, heuristic_rerank
from tether.retrieve.rewrite import Rewrite, arewrite_query
from tether.retrieve.run import (
    EMPTY_CONTEXT,
    Run,
    append_audit,
    audit_entry,
    audit_outcome,
    make_result,
    skipped_result,
    tag_exception,
    unaudited,
)
from tether.retrieve.search import Candidates, Ranked, Searcher, ms_since
from tether.retrieve.turns import (
    DocumentRequest,
    acondense_with_llm,
    document_request,
    standalone_question,
)
from tether.settings import Settings
from tether.store import Store

__all__ = ["MAX_QUESTION_CHARS", "Pipeline", "Request"]

logger = logging.getLogger("tether.retrieve")
tracer = trace.get_tracer("tether")


class Pipeline:
    """The retrieval flow over one store: see the module docstring for its stages."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        searcher: Searcher,
        chat: ChatModel | None,
        chat_unavailable: str | None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.searcher = searcher
        self.grounder = Grounder(store, settings, searcher)
        self.chat = chat
        self.chat_unavailable = chat_unavailable
        self._loop = LoopThread()

    @property
    def _model(self) -> str:
        """The chat model, as errors name it."""
        return f"chat model {self.chat.model!r}" if self.chat else "the chat model"

    def close(self) -> None:
        self._loop.close()

    def _check_threads(self) -> None:
        if not self.store.cross_thread:
            raise ConfigurationError(
                "retrieve runs its searches in threads, and this store was opened on your own"
                " sqlite3 connection made with check_same_thread=True; open it with"
                " sqlite3.connect(..., check_same_thread=False), or pass a path"
            )

    def retrieve(self, request: Request) -> RetrievalResult:
        check_question(request.question)
        self._check_threads()
        parent = otel_context.get_current()
        return self._loop.run(self._audited(request, parent))

    async def aretrieve(self, request: Request) -> RetrievalResult:
        check_question(request.question)
        self._check_threads()
        return await self._audited(request, otel_context.get_current())

    def decide(self, question: str, *, open_document: bool = False) -> tuple[Decision, list[str]]:
        """The decision alone, and its degradations (an LLM decision that fell back)."""
        check_question(question)
        degradations: list[str] = []
        decided = self._decide_alone(question, degradations, open_document=open_document)
        return self._loop.run(decided), degradations

    async def adecide(
        self, question: str, *, open_document: bool = False
    ) -> tuple[Decision, list[str]]:
        check_question(question)
        degradations: list[str] = []
        decided = await self._decide_alone(question, degradations, open_document=open_document)
        return decided, degradations

    async def _decide_alone(
        self, question: str, degradations: list[str], *, open_document: bool
    ) -> Decision:
        """A decision outside a retrieval: the model budget is its own."""

        def degrade(message: str) -> None:
            degradations.append(message)
            logger.warning("%s", message)

        budget = ModelBudget.start(self.settings.llm, None)
        return await self._decide(question, budget, degrade, open_document=open_document)

    # -- the coroutine both entry points run --------------------------------------------

    async def _audited(self, request: Request, parent: Any) -> RetrievalResult:
        """:meth:`_run` within the request's time budget, with one audit row per call,
        in the ``rag.retrieve`` span (an exception that escapes is recorded on it)."""
        retrieval_id = uuid.uuid4().hex
        attributes = {"rag.scope.kind": request.scope.kind, "rag.scope.id": request.scope.id}
        with tracer.start_as_current_span(
            "rag.retrieve", context=parent, attributes=attributes
        ) as span:
            budget = asyncio.timeout(request.timeout)
            try:
                async with budget:
                    result = await self._run(request, span, retrieval_id)
            except TimeoutError as exc:
                if not budget.expired():  # a timeout inside (a socket, a provider): an error
                    await self._audit(request, retrieval_id, None, "error", type(exc).__name__)
                    tag_exception(exc, retrieval_id)
                    raise
                message = f"retrieval took longer than its {request.timeout:g}s budget"
                logger.error("%s (retrieval %s)", message, retrieval_id)
                await self._audit(
                    request,
                    retrieval_id,
                    None,
                    "blocked" if request.guarded else "error",
                    f"timeout: {message}",
                )
                raise RetrievalTimeout(message, retrieval_id=retrieval_id) from None
            except Exception as exc:
                await self._audit(request, retrieval_id, None, "error", type(exc).__name__)
                tag_exception(exc, retrieval_id)
                raise
            outcome, reason = audit_outcome(request, result)
            unlogged = await self._audit(request, retrieval_id, result, outcome, reason)
            if unlogged is not None:
                unaudited(request, result, unlogged)
        return result

    async def _audit(
        self,
        request: Request,
        retrieval_id: str,
        result: RetrievalResult | None,
        outcome: str,
        reason: str | None,
    ) -> str | None:
        """Append the retrieval's audit row (``policy.audit``); why it could not be
        written, if it could not: the caller decides what that means."""
        if not self.settings.policy.audit:
            return None
        entry = audit_entry(request, retrieval_id, result, outcome, reason)
        return await append_audit(self.store, entry)

    async def _run(self, request: Request, span: Span, retrieval_id: str) -> RetrievalResult:
        run = Run.start(request, retrieval_id, self.settings, span)
        result = await self._flow(run, span)
        run.debug["model_budget"] = run.budget.to_dict()
        return result

    async def _flow(self, run: Run, span: Span) -> RetrievalResult:
        """Decide, then answer a request about a document, or search for a question."""
        request = run.request
        decision = request.decision or await self._decide(
            request.question, run.budget, run.degrade, open_document=request.open_document
        )
        run.lap("decide", run.started)
        run.debug["decision"] = decision.to_dict()
        if not decision.needed:
            span.set_attribute("rag.skipped", decision.reason)
            run.lap("total", run.started)
            run.debug["timings_ms"] = run.timings
            logger.debug("retrieval skipped: %s", decision.reason)
            return skipped_result(run)
        wanted = document_request(request.question, open_document=request.open_document)
        if wanted is not None and decision.category == "document":
            return await self._document(run, wanted, span)
        return await self._search(run, span)

    async def _search(self, run: Run, span: Any) -> RetrievalResult:
        """Search, rerank and build the context: the flow for a question."""
        rag, scope = self.settings.rag, run.request.scope
        run.question = await self._standalone(run)
        queries = await self._queries(run)
        span.set_attribute("rag.queries", len(queries))
        fused, question_vector = await self._retrieve_all(run, queries)
        ranked = await self._rerank(run, fused[: rag.rerank_top_n], question_vector)
        verdict = await self._judge(run, ranked) if rag.enable_llm_judge and ranked else None
        if verdict is None:
            ranked = await asyncio.to_thread(
                continue_over_pages, ranked, self.store.hits_for_chunks,
                min_relevance=run.min_relevance, short_tokens=rag.chunk_tokens // 2,
                token_counts=lambda ids: {
                    i: row.token_count for i, row in self.store.candidate_rows(ids).items()
                },
            )  # fmt: skip
        ranked = await asyncio.to_thread(finish_sentences, ranked, self.store.hits_for_chunks)
        ranked = await asyncio.to_thread(begin_sentences, ranked, self.store.hits_for_chunks)
        context = run.build_context(self.settings.rag.context_budget, ranked, verdict)
        grounded = bool(context.chunk_ids)
        closer = None
        if grounded and rag.wider_scope_margin is not None:
            t0 = time.perf_counter()
            request = run.request
            closer, compared = await asyncio.to_thread(
                self.grounder.closer_elsewhere,
                run.question,
                scope,
                ranked,
                vectors=question_vector is not None,
                session_id=request.session_id,
                filters=request.filters,
            )
            if compared is not None:
                run.lap("wider_scope", t0)
                run.debug["wider_scope"] = compared
            if closer is not None:
                context, grounded = EMPTY_CONTEXT, False
        run.debug["grounding"] = {**run.debug.get("grounding", {}), "grounded": grounded}
        if closer is not None:
            run.debug["grounding"]["why"] = (
                f"not grounded here: {closer.where} holds a closer match (evidence"
                f" {closer.evidence:.2f} vs {closer.here:.2f} in scope)"
            )
        suggestion = (None, None)
        if not grounded:
            suggestion = await asyncio.to_thread(self.grounder.guidance, scope, len(fused), closer)
        span.set_attribute("rag.grounded", grounded)
        run.lap("total", run.started)
        run.debug["candidates"] = {"fused": len(fused), **run.debug["candidates"]}
        run.debug["timings_ms"] = run.timings
        return make_result(run, queries, context, suggestion)

    async def _document(self, run: Run, wanted: DocumentRequest, span: Any) -> RetrievalResult:
        """A request about the document itself: its page, or its opening and outline."""
        request, t0 = run.request, time.perf_counter()
        candidates, outline = await asyncio.to_thread(
            document_candidates,
            self.store,
            request,
            wanted,
            self.searcher.exclusions(),
            max_chunks=run.max_chunks,
        )
        run.lap("retrieve", t0)
        run.debug["document_request"] = describe_document_request(wanted, candidates)
        run.debug["relevance"] = {"definition": "asked_for", "min_relevance": run.min_relevance}
        context = run.build_context(self.settings.rag.context_budget, candidates)
        overview = outline_text(candidates, outline)
        if overview and context.chunk_ids:
            context = dataclasses.replace(context, text=f"{overview}\n\n{context.text}")
        suggestion = (None, None)
        if not context.chunk_ids:
            suggestion = await asyncio.to_thread(self.grounder.guidance, request.scope, 0)
        span.set_attribute("rag.grounded", bool(context.chunk_ids))
        run.lap("total", run.started)
        run.debug["timings_ms"] = run.timings
        return make_result(run, [request.question], context, suggestion)

    async def _standalone(self, run: Run) -> str:
        """The question to search: a follow-up made standalone from the history (by the
        chat model when there is one, else by rule); any other question as it is."""
        question, history = run.request.question, run.request.history
        if not history:
            return question
        how, standalone = "rules", standalone_question(question, history)
        chat = self.chat
        if chat is not None:
            with tracer.start_as_current_span("condense_question") as condense_span:
                condensed = await run.budget.attempt(
                    "condense",
                    condense_span,
                    lambda: acondense_with_llm(chat, question, history),
                    self._model,
                    run.degrade,
                    what="LLM condensing",
                    instead="rule-based follow-up used",
                    timeout_says="failed",
                )
            if condensed is not None:
                how, standalone = "llm", condensed
        run.debug["standalone"] = {
            "question": standalone,
            "by": how,
            "changed": standalone != question,
        }
        return standalone

    # -- stages -------------------------------------------------------------------------

    async def _decide(
        self,
        question: str,
        budget: ModelBudget,
        degrade: Callable[[str], None],
        *,
        open_document: bool = False,
    ) -> Decision:
        rag = self.settings.rag
        if not rag.enabled:
            return Decision(False, "question", "rag.enabled is off")
        wanted = document_request(question, open_document=open_document)
        if wanted is not None:
            return Decision(True, "document", wanted.describe())
        chat = self.chat
        if rag.decide == "llm" and chat is None:
            degrade(f"LLM decision unavailable ({self.chat_unavailable}), local decision used")
        elif rag.decide == "llm" and chat is not None:
            with tracer.start_as_current_span("decide_retrieval") as decide_span:
                decided = await budget.attempt(
                    "decide",
                    decide_span,
                    lambda: adecide_with_llm(chat, question),
                    self._model,
                    degrade,
                    what="LLM decision",
                    instead="local decision used",
                    timeout_says="failed",
                )
            if decided is not None:
                return decided
        return decide_locally(question)

    async def _queries(self, run: Run) -> list[str]:
        """The original question, plus its LLM rewrites when rewriting is on."""
        rag = self.settings.rag
        question = run.question
        if not rag.enable_query_rewrite:
            return [question]
        t0 = time.perf_counter()
        with tracer.start_as_current_span(
            "generate_sub_queries", attributes={"rag.rewrite_count": rag.rewrite_count}
        ) as sub:
            rewrite = await self._rewrite(run, question, sub)
            sub.set_attribute("rag.rewrites", len(rewrite.queries))
        if rewrite.degradation:
            run.degrade(rewrite.degradation)
        run.debug["rewrite"] = {
            "asked": rag.rewrite_count,
            "got": len(rewrite.queries),
            "notes": rewrite.notes,
        }
        run.lap("rewrite", t0)
        return [question, *rewrite.queries]

    async def _rewrite(self, run: Run, question: str, span: Span) -> Rewrite:
        """The LLM's rewrites of ``question``; any failure leaves the original alone."""
        chat, count = self.chat, self.settings.rag.rewrite_count
        if chat is None:
            return Rewrite(
                degradation=f"query rewrite is on but {self.chat_unavailable}; original query only"
            )
        problems: list[str] = []
        rewrite = await run.budget.attempt(
            "rewrite",
            span,
            lambda: arewrite_query(chat, question, count),
            self._model,
            problems.append,
            what="query rewrite",
            instead="original query only",
            timeout_says="failed",
        )
        return rewrite if rewrite is not None else Rewrite(degradation=problems[0])

    async def _retrieve_all(self, run: Run, queries: list[str]) -> tuple[Ranked, np.ndarray | None]:
        """Every query's candidates, in parallel, fused across queries by RRF (one query:
        its own fused list); and the original question's vector (``None`` without one)."""
        rag = self.settings.rag
        t0 = time.perf_counter()
        exclusions = self.searcher.exclusions()
        per_query = await asyncio.gather(
            *(self._retrieve_one(run, i, q, exclusions) for i, q in enumerate(queries))
        )
        run.lap("retrieve", t0)
        for found in per_query:  # in query order, whatever order they finished in
            for degradation in found.degradations:
                run.degrade(degradation, log=False)  # the search logged what needs it
        t0 = time.perf_counter()
        lists = [found.fused for found in per_query]
        if len(lists) == 1:
            fused = lists[0]
        else:
            fused = reciprocal_rank_fusion(
                [[cid for cid, _ in ranked] for ranked in lists], k=rag.rrf_k
            )
        run.lap("fuse", t0)
        question_vector = per_query[0].query_vector
        run.agreed = agreed(per_query[0])
        run.debug["queries"] = [
            {
                "index": i,
                "query": q,
                "lexical": len(found.lexical),
                "vector": len(found.vector),
                "fusion": found.fusion,
                "ms": found.timings_ms.get("total"),
            }
            for i, (q, found) in enumerate(zip(queries, per_query, strict=True))
        ]
        if run.request.explain:
            run.debug["explain"] = explain_candidates(self.store, queries, per_query, fused)
        run.debug["method"] = "hybrid" if question_vector is not None else "lexical"
        run.debug["across_queries"] = (
            {"method": "rrf", "rrf_k": rag.rrf_k, "lists": len(lists)} if len(lists) > 1 else None
        )
        return fused, question_vector

    async def _retrieve_one(
        self, run: Run, index: int, query: str, exclusions: Exclusions
    ) -> Candidates:
        rag = self.settings.rag
        with tracer.start_as_current_span("retrieve", attributes={"rag.query_index": index}) as sp:
            t0 = time.perf_counter()
            found = await asyncio.to_thread(
                self.searcher.candidates,
                query,
                run.request.scope,
                mode="hybrid",
                lexical_depth=rag.lexical_depth,
                vector_depth=rag.k_vector,
                filters=run.request.filters,
                exclusions=exclusions,
                parallel=True,
            )
            found.timings_ms["total"] = ms_since(t0)
            sp.set_attribute("rag.candidates.lexical", len(found.lexical))
            sp.set_attribute("rag.candidates.vector", len(found.vector))
        return found

    async def _rerank(
        self, run: Run, top: Ranked, question_vector: np.ndarray | None
    ) -> list[Candidate]:
        """The top candidates judged against the original question (relevance), then
        reordered by the heuristic, or by the chat model when LLM rerank is on."""
        question, rag = run.question, self.settings.rag
        t0 = time.perf_counter()
        with tracer.start_as_current_span("rerank_chunks") as rerank_span:
            request = run.request
            candidates, judged = await asyncio.to_thread(
                self.grounder.candidates,
                question,
                question_vector,
                top,
                request.scope,
                session_id=request.session_id,
                filters=request.filters,
                agreed=run.agreed,
            )
            ranked, rerank_debug = heuristic_rerank(
                question,
                candidates,
                rag.rerank,
                in_session=run.request.scope.kind == "session",
                language=rag.language,
            )
            if rag.enable_llm_rerank and ranked:
                ranked, rerank_debug = await self._llm_rerank(
                    run, ranked, rerank_debug, rerank_span
                )
            rerank_span.set_attribute("rag.rerank.method", rerank_debug["method"])
            rerank_span.set_attribute("rag.rerank.candidates", len(candidates))
        run.lap("rerank", t0)
        run.debug["rerank"] = rerank_debug
        run.record_judgment(ranked, judged)
        return ranked

    async def _judge(self, run: Run, ranked: list[Candidate]) -> Verdict | None:
        """The LLM judge's verdict on the first candidates (``None``: it could not judge,
        and the local judgment stands)."""
        rag, chat = self.settings.rag, self.chat
        if chat is None:
            run.degrade(f"LLM judge is on but {self.chat_unavailable}; local judgment used")
            return None
        shown = ranked[: rag.judge_candidates]
        t0 = time.perf_counter()
        with tracer.start_as_current_span("judge_answerability") as judge_span:
            verdict = await run.budget.attempt(
                "judge",
                judge_span,
                lambda: ajudge(chat, run.question, shown),
                self._model,
                run.degrade,
                what="LLM judge",
                instead="local judgment used",
            )
            if verdict is None:
                return None
            judge_span.set_attribute("rag.judge.answerable", verdict.answerable)
        run.lap("judge", t0)
        run.record_verdict(verdict, len(shown))
        return verdict

    async def _llm_rerank(
        self, run: Run, ranked: list[Candidate], heuristic_debug: dict[str, Any], span: Span
    ) -> tuple[list[Candidate], dict[str, Any]]:
        chat, question, settings = self.chat, run.question, self.settings.rag.rerank
        if chat is None:
            run.degrade(f"LLM rerank is on but {self.chat_unavailable}; heuristic order kept")
            return ranked, heuristic_debug
        reranked = await run.budget.attempt(
            "rerank",
            span,
            lambda: allm_rerank(chat, question, ranked, settings),
            self._model,
            run.degrade,
            what="LLM rerank",
            instead="heuristic order kept",
        )
        if reranked is None:
            return ranked, heuristic_debug
        reordered, llm_debug = reranked
        return reordered, {**llm_debug, "heuristic": heuristic_debug}
