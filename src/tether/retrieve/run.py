"""One retrieval in flight (:class:`Run`) and what it becomes: its result, and its
audit outcome."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from tether.errors import AuditUnavailable
from tether.models import RetrievalResult
from tether.retrieve.budget import ModelBudget
from tether.retrieve.context import Context, build_context
from tether.retrieve.evidence import explain
from tether.retrieve.grounding import Judged
from tether.retrieve.judge import Verdict
from tether.retrieve.request import Request
from tether.retrieve.rerank import Candidate
from tether.retrieve.search import ms_since
from tether.sanitize import sanitize_query
from tether.settings import Settings
from tether.store import AuditEntry, Store, utcnow

logger = logging.getLogger("tether.retrieve")
tracer = trace.get_tracer("tether")


@dataclass
class Run:
    """One retrieval in flight: its request, effective limits and the debug it builds."""

    request: Request
    retrieval_id: str
    max_chunks: int
    min_relevance: float
    #: The time its model steps may take together.
    budget: ModelBudget
    #: What is searched for: the question, or a follow-up made standalone.
    question: str = ""
    #: How far the question's lexical and vector searches agree (evidence), or None.
    agreed: float | None = None
    started: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    degradations: list[str] = field(default_factory=list)
    debug: dict[str, Any] = field(default_factory=dict)
    #: The ``rag.retrieve`` span, where each degradation is recorded as an event.
    span: Span = trace.INVALID_SPAN

    @classmethod
    def start(cls, request: Request, retrieval_id: str, settings: Settings, span: Span) -> Run:
        """The run of ``request``: the request's limits, else the settings'; the model
        budget starts now. Its debug names the retrieval, scope and filters."""
        rag = settings.rag
        min_relevance = request.min_relevance
        run = cls(
            request,
            retrieval_id,
            question=request.question,
            max_chunks=request.max_chunks or rag.max_chunks,
            min_relevance=min_relevance if min_relevance is not None else rag.min_relevance,
            budget=ModelBudget.start(settings.llm, request.timeout),
            span=span,
        )
        run.debug.update(
            retrieval_id=retrieval_id,
            scope=request.scope.to_dict(),
            filters=request.filters.to_dict() if request.filters else None,
            degradations=run.degradations,
        )
        return run

    def lap(self, name: str, since: float) -> None:
        self.timings[name] = ms_since(since)

    def degrade(self, message: str, *, log: bool = True) -> None:
        """Record that a stage fell back: in ``debug``, the log and the trace."""
        self.degradations.append(message)
        self.span.add_event("degradation", {"rag.degradation": message})
        if log:
            logger.warning("%s", message)

    def build_context(
        self, budget: int, ranked: list[Candidate], verdict: Verdict | None = None
    ) -> Context:
        """The cited context of the candidates at or above ``min_relevance`` (or, with
        an LLM verdict, of the passages it found the answer in), within ``budget``
        tokens."""
        t0 = time.perf_counter()
        with tracer.start_as_current_span("build_context") as context_span:
            if verdict is not None:
                supporting = set(verdict.supporting)
                relevant = [c for c in ranked if c.hit.chunk_id in supporting]
            else:
                relevant = [c for c in ranked if c.relevance >= self.min_relevance]
            context = build_context(relevant, max_chunks=self.max_chunks, budget=budget)
            context_span.set_attribute("rag.context.chunks", len(context.chunk_ids))
            context_span.set_attribute("rag.context.tokens", context.tokens)
        self.lap("context", t0)
        self.debug["candidates"] = {
            "reranked": len(ranked),
            "above_min_relevance": len(relevant),
            "context": len(context.chunk_ids),
        }
        self.debug["context"] = {
            "tokens": context.tokens,
            "budget": budget,
            "max_chunks": self.max_chunks,
            "skipped_for_budget": list(context.skipped_for_budget),
            "truncated": context.truncated,
        }
        return context

    def record_judgment(self, ranked: list[Candidate], judged: Judged) -> None:
        """Say in the debug record how the candidates were judged: their order and
        relevance, the best, and why the result is grounded or not."""
        self.debug["ranked"] = [
            [c.hit.chunk_id, c.hit.document_id, round(c.relevance, 4)] for c in ranked
        ]
        best = max(ranked, key=lambda c: c.relevance, default=None)
        best_evidence = judged.evidence.get(best.hit.chunk_id) if best else None
        self.debug["relevance"] = {
            "definition": "evidence" if judged.vectors else "evidence (lexical)",
            "min_relevance": self.min_relevance,
            "best": round(best.relevance, 4) if best else 0.0,
            "below_min": [c.hit.chunk_id for c in ranked if c.relevance < self.min_relevance],
        }
        grounded = best is not None and best.relevance >= self.min_relevance
        terms = judged.terms
        self.debug["grounding"] = {
            "why": explain(terms, best_evidence, self.min_relevance, grounded=grounded),
            "absent_terms": list(terms.absent),
            "distinctive_absent": list(terms.distinctive_absent),
            "missing": round(terms.missing, 4),
            "agreement": None if self.agreed is None else round(self.agreed, 4),
            "evidence": {cid: e.to_dict() for cid, e in judged.evidence.items()},
        }
        if judged.model:
            self.debug["relevance"]["definition"] = "cross-encoder"
            self.debug["grounding"]["model"] = {cid: round(p, 4) for cid, p in judged.model.items()}

    def record_verdict(self, verdict: Verdict, shown: int) -> None:
        """Say in the debug record what the LLM judge found in the ``shown`` passages."""
        grounding = self.debug.setdefault("grounding", {})
        grounding["judge"] = {"by": "llm", "shown": shown, **verdict.to_dict()}
        grounding["why"] = (
            f"grounded: the LLM judge found the answer in {len(verdict.supporting)} of the"
            f" {shown} passages shown"
            if verdict.answerable
            else f"not grounded: the LLM judge found no answer in the {shown} passages shown"
        )


EMPTY_CONTEXT = Context(
    text="", citations=(), chunk_ids=(), tokens=0, skipped_for_budget=(), truncated=False
)


def audit_entry(
    request: Request,
    retrieval_id: str,
    result: RetrievalResult | None,
    outcome: str,
    reason: str | None,
) -> AuditEntry:
    """The audit row of a retrieval: ids, the sanitized query, the outcome; never text,
    vectors or scores."""
    return AuditEntry(
        retrieval_id=retrieval_id,
        created_at=utcnow(),
        query=sanitize_query(request.question),
        scope=request.scope.to_dict(),
        filters=request.filters.to_dict() if request.filters else {},
        chunk_ids=list(result.selected_chunk_ids) if result else [],
        document_ids=sorted({c.document_id for c in result.citations}) if result else [],
        outcome=outcome,
        reason=reason,
        citations=[c.ids() for c in result.citations] if result else [],
        asked_by=request.asked_by,
    )


def audit_outcome(request: Request, result: RetrievalResult) -> tuple[str, str | None]:
    """The audit outcome of a finished retrieval, and its reason."""
    if not result.retrieved:
        return "skipped", result.debug["decision"]["reason"]
    if result.grounded:
        return "grounded", None
    reranked = result.debug.get("candidates", {}).get("reranked")
    reason = "no chunk above min_relevance" if reranked else "no results"
    return ("blocked" if request.guarded else "ungrounded"), reason


def tag_exception(exc: BaseException, retrieval_id: str) -> None:
    """Name the retrieval on an exception that escapes it (for the audit trail)."""
    with contextlib.suppress(AttributeError):  # exceptions with __slots__
        exc.retrieval_id = retrieval_id  # type: ignore[attr-defined]


def make_result(
    run: Run,
    queries: list[str],
    context: Context,
    suggestion: tuple[str | None, Any],
) -> RetrievalResult:
    request = run.request
    return RetrievalResult(
        retrieval_id=run.retrieval_id,
        question=request.question,
        context=context.text,
        citations=context.citations,
        grounded=bool(context.chunk_ids),
        guidance=suggestion[0],
        suggested_scope=suggestion[1],
        retrieved=True,
        queries=tuple(queries),
        scope=request.scope,
        selected_chunk_ids=context.chunk_ids,
        debug=run.debug,
    )


def skipped_result(run: Run) -> RetrievalResult:
    request = run.request
    return RetrievalResult(
        retrieval_id=run.retrieval_id,
        question=request.question,
        context="",
        citations=(),
        grounded=False,
        guidance=None,
        suggested_scope=None,
        retrieved=False,
        queries=(request.question,),
        scope=request.scope,
        selected_chunk_ids=(),
        debug=run.debug,
    )


async def append_audit(store: Store, entry: AuditEntry) -> str | None:
    """Append ``entry`` to the audit log; why it could not be written (a full or
    read-only store), if it could not."""
    try:
        await asyncio.to_thread(store.log_retrieval, entry)
    except Exception as exc:
        message = f"the audit row of retrieval {entry.retrieval_id} was not written: {exc}"
        logger.error("%s", message)
        return message
    return None


def unaudited(request: Request, result: RetrievalResult, problem: str) -> None:
    """A retrieval whose audit row could not be written. A guarded one fails closed: the
    agent team's rule is that every retrieval set is logged, so its generation is
    blocked. A plain one answers, and says so in ``debug["degradations"]``."""
    if request.guarded:
        raise AuditUnavailable(
            "audit",
            f"{problem}; every guarded retrieval must be logged, so generation is blocked."
            " Make the store writable (free space, a writable file) and retry",
            result=result,
            retrieval_id=result.retrieval_id,
        )
    result.debug.setdefault("degradations", []).append(problem)
