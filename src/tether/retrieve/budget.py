"""The model budget of one retrieval: the time all its model steps may take together."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry.trace import Span, Status, StatusCode

from tether.errors import LLMError
from tether.settings import LLMSettings

T = TypeVar("T")

__all__ = [
    "LOCAL_RESERVE_MIN_S",
    "LOCAL_RESERVE_SHARE",
    "MIN_MODEL_STEP_S",
    "ModelBudget",
    "Skipped",
    "record_failure",
]


#: Of a retrieval's own ``timeout``, the share (and at least the seconds) kept for the
#: local stages after the model steps (search, rerank, context): the model gets the rest
#: at most, so that a slow model is cut short rather than the retrieval timing out.
LOCAL_RESERVE_SHARE = 0.25
LOCAL_RESERVE_MIN_S = 0.25
#: With less than this left of the model budget a model step is skipped, not started:
#: no chat model answers that fast, so starting it would only spend the time.
MIN_MODEL_STEP_S = 0.1


@dataclass
class ModelBudget:
    """The time the model steps of one retrieval may take together: ``seconds`` of model
    time in all, and none of it past ``deadline`` (``time.monotonic()``; ``None``: the
    retrieval has no timeout of its own). Each step gets what is left, and spends what
    it took, retries included."""

    seconds: float
    deadline: float | None = None
    #: The retrieval's timeout, and the seconds of it kept for the model (the rest is
    #: the local stages' reserve).
    timeout: float | None = None
    allowed: float | None = None
    spent: float = 0.0
    #: Each step's seconds, or "skipped".
    steps: dict[str, float | str] = field(default_factory=dict)

    @classmethod
    def start(cls, llm: LLMSettings, timeout: float | None) -> ModelBudget:
        """The budget of a retrieval starting now, with its own ``timeout`` (or none)."""
        seconds = llm.retrieval_budget if llm.retrieval_budget is not None else llm.timeout
        if timeout is None:
            return cls(seconds)
        allowed = max(0.0, timeout - max(LOCAL_RESERVE_MIN_S, LOCAL_RESERVE_SHARE * timeout))
        return cls(seconds, time.monotonic() + allowed, timeout, allowed)

    def left(self) -> float:
        left = self.seconds - self.spent
        if self.deadline is not None:
            left = min(left, self.deadline - time.monotonic())
        return max(0.0, left)

    def describe(self) -> str:
        """What limits the model: the budget, or the retrieval's timeout when it is less."""
        if self.allowed is not None and self.allowed < self.seconds:
            return (
                f"the {self.allowed:.2f} s of the retrieval's {self.timeout:g} s timeout kept"
                " for the model"
            )
        return f"the retrieval's {self.seconds:g} s model budget"

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "timeout": self.timeout,
            "allowed": self.allowed,
            "spent": round(self.spent, 3),
            "steps": self.steps,
        }

    async def ask(self, step: str, span: Span, call: Callable[[], Awaitable[T]], model: str) -> T:
        """``call()``, one model step, within what is left of this budget (``model``
        names the chat model in errors).

        Raises :class:`Skipped` when too little is left to start it, and
        :class:`LLMError` when it fails or runs out of time (the budget's, or the chat
        model's own timeout), saying after how long; a failure is recorded on ``span``."""
        left = self.left()
        if left < MIN_MODEL_STEP_S:
            self.steps[step] = "skipped"
            span.set_attribute("rag.llm.skipped", True)
            raise Skipped(f"{left:.2f} s left of {self.describe()}")
        started = time.perf_counter()
        cut = asyncio.timeout(left)
        try:
            async with cut:
                return await call()
        except TimeoutError:
            if not cut.expired():  # not the budget's (a socket's, say): it is an error
                raise
            late = LLMError(
                f"{model}: no answer in {time.perf_counter() - started:.2f} s, when"
                f" {self.describe()} ran out",
                timeout=True,
            )
            record_failure(span, late)
            raise late from None
        except LLMError as exc:
            record_failure(span, exc)
            raise
        finally:
            elapsed = time.perf_counter() - started
            self.spent += elapsed
            self.steps[step] = round(elapsed, 3)
            span.set_attribute("rag.llm.seconds", round(elapsed, 3))

    async def attempt(
        self,
        step: str,
        span: Span,
        call: Callable[[], Awaitable[T]],
        model: str,
        degrade: Callable[[str], None],
        *,
        what: str,
        instead: str,
        timeout_says: str = "timed out",
    ) -> T | None:
        """:meth:`ask`, or None when the step was skipped or failed: ``degrade`` is then
        told (``"<what> skipped, <instead>: <why>"``; ``failed``, or ``timeout_says``
        when it ran out of time), and the caller goes on without the model."""
        try:
            return await self.ask(step, span, call, model)
        except Skipped as exc:
            degrade(f"{what} skipped, {instead}: {exc}")
        except LLMError as exc:
            degrade(f"{what} {timeout_says if exc.timeout else 'failed'}, {instead}: {exc}")
        return None


class Skipped(Exception):
    """A model step that did not start: too little was left of the model budget."""


def record_failure(span: Span, exc: BaseException) -> None:
    """A step's failure on its span: the exception as an event, and an error status (a
    failure the step recovers from leaves both unset otherwise)."""
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
