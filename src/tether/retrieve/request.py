"""One retrieval request: a value object that checks itself once, when it is made."""

from __future__ import annotations

from dataclasses import dataclass

from tether.errors import InvalidArgument
from tether.models import Filters, Scope
from tether.retrieve.decide import Decision
from tether.retrieve.turns import Turn, check_history

MAX_QUESTION_CHARS = 8000


def check_question(question: object) -> None:
    """Raise :class:`InvalidArgument` unless ``question`` is non-empty text within
    :data:`MAX_QUESTION_CHARS`."""
    if not isinstance(question, str):
        raise InvalidArgument(f"the question must be text (str), not {type(question).__name__}")
    if not question.strip():
        raise InvalidArgument("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidArgument(
            f"the question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,}"
        )


@dataclass(frozen=True)
class Request:
    """One retrieval: the question and where to look, plus per-call limits (``None``:
    the settings'), whether a guard will block generation on an ungrounded result (its
    audit outcome is then ``blocked``, not ``ungrounded``), and the turns before it.

    A request has an open document (a chat's PDF) when it is scoped to a session or
    filtered to documents: then a bare "summarize this" asks about that document."""

    question: str
    scope: Scope
    session_id: str | None = None
    decision: Decision | None = None
    filters: Filters | None = None
    max_chunks: int | None = None
    min_relevance: float | None = None
    timeout: float | None = None
    guarded: bool = False
    #: The conversation before the question (oldest first), for follow-ups.
    history: tuple[Turn, ...] = ()
    #: Record each query's candidate lists in ``debug["explain"]`` (the console's
    #: retrieval debugger); off by default, so that a retrieval pays nothing for it.
    explain: bool = False
    #: The API key that asked (audited, never used to widen or narrow the search).
    asked_by: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "history", tuple(check_history(self.history)))
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        filters, max_chunks = self.filters, self.max_chunks
        min_relevance, timeout = self.min_relevance, self.timeout
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

    @property
    def open_document(self) -> bool:
        return self.scope.kind == "session" or bool(self.filters and self.filters.document_ids)
