"""Governance for agents: tags, a deterministic query builder, guarded retrieval, citation
checks and the helpers that carry retrieval ids into a draft.

For an agent team, retrieval is infrastructure that runs *before* generation and stops
it when it cannot ground it:

    from tether.policy import build_query, require_grounding, verify_citations

    with require_grounding(t, build_query(event, state), scope="workspace",
                           workspace_id="acme") as grounding:
        draft = llm(prompt_with(grounding.context))      # only runs when grounded
    report = verify_citations(draft, grounding.result)   # every [n] was retrieved

:func:`require_grounding` retrieves with the policy's limits (at most
``policy.max_chunks`` chunks, each with relevance >= ``policy.min_relevance``, the whole
retrieval within ``policy.timeout`` seconds) and raises :class:`GenerationBlocked`
when nothing relevant is found, on a timeout, or on any error; an invalid query (not
text, empty, too long) raises :class:`InvalidArgument` before anything runs. Each
retrieval is in the audit log; a blocked one with outcome ``blocked``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether import (
    Decision,
    Filters,
    GenerationBlocked,
    InvalidArgument,
    RetrievalResult,
    RetrievalTimeout,
    Scope,
    Tether,
)
from tether.sanitize import sanitize_query
from tether.store.records import AuditEntry
from tether.tags import validate_tags

__all__ = [
    "EVENT_FIELDS",
    "EVENT_LIST_FIELDS",
    "MAX_BUILT_QUERY_CHARS",
    "MAX_FIELD_CHARS",
    "STATE_FIELDS",
    "CitationReport",
    "Grounding",
    "Violation",
    "attach_retrieval",
    "build_query",
    "require_grounding",
    "retrieval_metadata",
    "validate_tags",
    "verify_citations",
]

logger = logging.getLogger("tether.policy")

# -- the deterministic query builder ------------------------------------------------------

#: Event fields read by :func:`build_query`, in this order (the first present of each group).
EVENT_FIELDS: tuple[tuple[str, ...], ...] = (
    ("type", "event_type", "kind"),
    ("title", "subject", "name"),
    ("summary", "description", "body", "text", "message"),
    ("error", "error_code", "status"),
)
#: Event fields holding lists of keywords.
EVENT_LIST_FIELDS = ("keywords", "tags", "labels", "components")
#: State fields read by :func:`build_query`, in this order.
STATE_FIELDS = ("task", "step", "project_id", "domain")
MAX_FIELD_CHARS = 300
MAX_BUILT_QUERY_CHARS = 1000


def build_query(event: Mapping[str, Any], state: Mapping[str, Any]) -> str:
    """The retrieval query for an agent's ``event`` in ``state``: a pure function of both.

    It reads only the fields named in :data:`EVENT_FIELDS`, :data:`EVENT_LIST_FIELDS` and
    :data:`STATE_FIELDS`, always in that order (keyword lists sorted and de-duplicated),
    so the same event and state give the same query whatever the dict order. No text is
    passed through as it came: each value has control characters dropped, whitespace
    collapsed, secrets, e-mail addresses and tokens masked, and is cut to 300
    characters; the query is capped at 1,000. Raises :class:`InvalidArgument` when
    ``event`` or ``state`` is not a mapping, a field has the wrong type, or nothing
    searchable is left."""
    if not isinstance(event, Mapping):
        raise InvalidArgument(f"event must be a mapping, not {type(event).__name__}")
    if not isinstance(state, Mapping):
        raise InvalidArgument(f"state must be a mapping, not {type(state).__name__}")
    parts: list[str] = []
    for group in EVENT_FIELDS:
        for name in group:
            if event.get(name) is not None:
                parts.append(_field("event", name, event[name]))
                break
    keywords: set[str] = set()
    for name in EVENT_LIST_FIELDS:
        value = event.get(name)
        if value is None:
            continue
        if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
            raise InvalidArgument(f"event[{name!r}] must be a list of text")
        keywords.update(_field("event", name, v) for v in value)
    if keywords:
        parts.append(" ".join(sorted(k for k in keywords if k)))
    context = []
    for name in STATE_FIELDS:
        if state.get(name) is not None:
            context.append(f"{name.replace('_', ' ')} {_field('state', name, state[name])}")
    if context:
        parts.append("(" + "; ".join(context) + ")")
    query = " ".join(p for p in parts if p).strip()
    if not any(ch.isalnum() for ch in query):
        raise InvalidArgument(
            "the event has nothing to search for: give it a title, summary or keywords"
        )
    return sanitize_query(query, MAX_BUILT_QUERY_CHARS)


def _field(where: str, name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidArgument(f"{where}[{name!r}] must be text, not {type(value).__name__}")
    return sanitize_query(str(value), MAX_FIELD_CHARS)


# -- guarded retrieval --------------------------------------------------------------------


@dataclass(frozen=True)
class Grounding:
    """A retrieval that grounds a generation: its context, citations and ids."""

    result: RetrievalResult

    @property
    def context(self) -> str:
        return self.result.context

    @property
    def retrieval_id(self) -> str:
        return self.result.retrieval_id

    @property
    def chunk_ids(self) -> tuple[int, ...]:
        return self.result.selected_chunk_ids

    @property
    def document_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.document_id for c in self.result.citations))

    def metadata(self) -> dict[str, Any]:
        """What a draft carries to say what it stands on (see :func:`retrieval_metadata`)."""
        return retrieval_metadata(self.result)


def retrieval_metadata(result: RetrievalResult) -> dict[str, Any]:
    """The retrieval set of ``result`` as plain data: ids only, never text or scores."""
    return {
        "retrieval_id": result.retrieval_id,
        "chunk_ids": list(result.selected_chunk_ids),
        "document_ids": list(dict.fromkeys(c.document_id for c in result.citations)),
        "citations": [c.ids() for c in result.citations],
    }


def attach_retrieval(draft: Any, grounding: Grounding | RetrievalResult) -> dict[str, Any]:
    """``draft`` with its retrieval set attached under ``"retrieval"``: a dict draft gets
    the key added (a copy), anything else becomes ``{"content": draft, "retrieval": ...}``."""
    result = grounding.result if isinstance(grounding, Grounding) else grounding
    meta = retrieval_metadata(result)
    if isinstance(draft, Mapping):
        return {**draft, "retrieval": meta}
    return {"content": draft, "retrieval": meta}


class require_grounding:
    """Retrieve first; block the generation unless it is grounded.

    As a context manager, ``with require_grounding(t, question, ...) as grounding:`` (or
    ``async with``) retrieves on entry and raises :class:`GenerationBlocked` instead of
    running the block when the retrieval found nothing relevant, ran out of time, or
    failed. As a decorator, ``@require_grounding(t, scope=..., query=fn)`` does the same
    before each call; the question is ``query(*args, **kwargs)`` (default: the
    ``question`` keyword argument, else :func:`build_query` of the first two positional
    arguments, ``event`` and ``state``), and the function receives the
    :class:`Grounding` as its ``grounding`` keyword argument when it has one. Async
    functions are awaited and retrieve with ``aretrieve``.

    The policy's limits apply: ``policy.max_chunks`` (at most 10), ``policy.min_relevance``
    (``min_relevance`` may raise it for this guard, never lower it) and the
    ``policy.timeout`` budget; ``filters`` narrow by tags in SQL. ``history`` (the
    conversation's earlier turns) makes a follow-up question standalone first.
    """

    def __init__(
        self,
        tether: Tether,
        question: str | None = None,
        *,
        query: Callable[..., str] | None = None,
        scope: Scope | str | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
        filters: Filters | None = None,
        min_relevance: float | None = None,
        history: Sequence[dict[str, str]] | None = None,
    ) -> None:
        self.tether = tether
        self.question = question
        self.query = query
        self.scope = scope
        self.session_id = session_id
        self.workspace_id = workspace_id
        self.filters = filters
        self.min_relevance = min_relevance
        self.history = history
        self.grounding: Grounding | None = None

    # -- the retrieval itself --

    def _arguments(self) -> dict[str, Any]:
        """The keyword arguments of the guarded ``retrieve``: the policy's limits."""
        policy = self.tether.settings.policy
        return {
            "scope": self.scope,
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "decision": Decision(True, "question", "guarded retrieval always runs", "local"),
            "filters": self.filters,
            "max_chunks": policy.max_chunks,
            "min_relevance": max(policy.min_relevance, self.min_relevance or 0.0),
            "timeout": policy.timeout,
            "guarded": True,
            "history": self.history,
        }

    def run(self, question: str) -> Grounding:
        """Retrieve for ``question``; the :class:`Grounding`, or GenerationBlocked."""
        _check(question)
        with _blocking_failures():
            result = self.tether.retrieve(question, **self._arguments())
        return _grounded(result)

    async def arun(self, question: str) -> Grounding:
        _check(question)
        with _blocking_failures():
            result = await self.tether.aretrieve(question, **self._arguments())
        return _grounded(result)

    # -- context manager --

    def __enter__(self) -> Grounding:
        if self.question is None:
            raise InvalidArgument("require_grounding as a context manager needs the question")
        self.grounding = self.run(self.question)
        return self.grounding

    def __exit__(self, *exc_info: object) -> None:
        return None

    async def __aenter__(self) -> Grounding:
        if self.question is None:
            raise InvalidArgument("require_grounding as a context manager needs the question")
        self.grounding = await self.arun(self.question)
        return self.grounding

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    # -- decorator --

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        wants_grounding = "grounding" in inspect.signature(fn).parameters

        def question_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
            if self.question is not None:
                return self.question
            if self.query is not None:
                return self.query(*args, **kwargs)
            if isinstance(kwargs.get("question"), str):
                return kwargs["question"]
            if len(args) >= 2:
                return build_query(args[0], args[1])
            raise InvalidArgument(
                f"{fn.__name__}: give require_grounding a question or query=, or call it"
                " with (event, state)"
            )

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                grounding = await self.arun(question_for(args, kwargs))
                if wants_grounding:
                    kwargs["grounding"] = grounding
                return await fn(*args, **kwargs)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            grounding = self.run(question_for(args, kwargs))
            if wants_grounding:
                kwargs["grounding"] = grounding
            return fn(*args, **kwargs)

        return wrapper


@contextlib.contextmanager
def _blocking_failures() -> Iterator[None]:
    """Any failure of a guarded retrieval blocks the generation; a bad query does not
    (it is the caller's error, raised as InvalidArgument)."""
    try:
        yield
    except (InvalidArgument, GenerationBlocked):
        raise
    except RetrievalTimeout as exc:
        raise _blocked_timeout(exc) from exc
    except Exception as exc:  # the store, the model, a bug
        raise _blocked_error(exc) from exc


def _check(question: object) -> None:
    if not isinstance(question, str):
        raise InvalidArgument(f"the query must be text (str), not {type(question).__name__}")


def _grounded(result: RetrievalResult) -> Grounding:
    if result.grounded:
        return Grounding(result)
    found = result.debug.get("candidates", {}).get("reranked", 0)
    detail = "nothing in scope is relevant enough (policy.min_relevance)" if found else "no results"
    advisory = result.guidance or "Add or verify documents that cover this, then retry."
    logger.warning("generation blocked: %s (retrieval %s)", detail, result.retrieval_id)
    raise GenerationBlocked(
        "no_results", f"{detail}. {advisory}", result=result, retrieval_id=result.retrieval_id
    )


def _blocked_timeout(exc: RetrievalTimeout) -> GenerationBlocked:
    return GenerationBlocked(
        "timeout",
        f"{exc} Retry, or narrow the scope or filters so that retrieval is faster.",
        retrieval_id=exc.retrieval_id,
    )


def _blocked_error(exc: Exception) -> GenerationBlocked:
    logger.error("generation blocked: retrieval failed: %s: %s", type(exc).__name__, exc)
    return GenerationBlocked(
        "error",
        f"retrieval failed ({type(exc).__name__}: {exc}); fix it and retry.",
        retrieval_id=getattr(exc, "retrieval_id", None),
    )


# -- citation checks ----------------------------------------------------------------------

#: One cited number or a range of them: ``3``, ``1-3``, ``1–3`` (en dash). Four digits at
#: most, like a plain ``[n]`` always was: ``[2024]`` is a citation, ``[12345]`` is not.
_CITED_ITEM = r"\d{1,4}(?:\s*[-–]\s*\d{1,4})?"
#: A number citation: ``[n]``, a footnote ``[^n]`` (group 1), or a list of numbers and
#: ranges split by commas or semicolons, ``[1, 2]``, ``[1; 3-4]`` (group 2). ``[1][2]`` is
#: two citations; ``[text](url)``, ``[ ]`` and ``[x]`` never match.
_NUMBER_CITATION = re.compile(rf"\[(?:\^(\d{{1,4}})|({_CITED_ITEM}(?:\s*[,;]\s*{_CITED_ITEM})*))\]")
#: An item of a number citation: a number (group 1), or a range ``low-high`` (groups 1, 2).
_CITED_RANGE = re.compile(r"(\d+)(?:\s*[-–]\s*(\d+))?")
#: A wider range than this is a violation rather than that many citations.
_MAX_CITED_RANGE = 50
_DOC_REF = re.compile(r"\[(?:doc|document|source):\s*([^\]\s]+)\]", re.I)
_CHUNK_REF = re.compile(r"\[chunk:\s*(\d+)\]", re.I)
#: A bullet or numbered list item (a reviewer's finding); group 1 is its text.
_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+(.*\S)")
#: A fenced code block's opening or closing line (``` or ~~~, CommonMark's indent).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: An inline code span: a run of backticks, the code, the same run again.
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")


@dataclass(frozen=True)
class Violation:
    # "unknown_citation" | "invalid_citation" (a reversed or too wide range) |
    # "unknown_document" | "unknown_chunk" | "uncited_finding"
    kind: str
    detail: str
    line: int


@dataclass(frozen=True)
class CitationReport:
    """What :func:`verify_citations` found. ``ok`` when there is no violation."""

    cited_numbers: tuple[int, ...]
    cited_documents: tuple[str, ...]
    cited_chunks: tuple[int, ...]
    findings: int
    violations: tuple[Violation, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "cited_numbers": list(self.cited_numbers),
            "cited_documents": list(self.cited_documents),
            "cited_chunks": list(self.cited_chunks),
            "findings": self.findings,
            "violations": [v.__dict__ for v in self.violations],
        }


def verify_citations(
    text: str, result: RetrievalResult | Grounding | AuditEntry, *, review: bool = False
) -> CitationReport:
    """Check that every source ``text`` cites was retrieved in ``result``.

    Citations are numbers of the context, ``[n]``, ``[^n]``, lists and ranges such as
    ``[1, 2]``, ``[1; 2]``, ``[1-3]`` and ``[1, 3–4]`` (each number in them is cited and
    checked on its own; a reversed range or one over 50 numbers is a violation), and
    ``[doc:ID]`` (also ``[document:ID]``, ``[source:ID]``: a document id) and
    ``[chunk:ID]`` (a chunk id); each must be in the retrieval set. Code spans and fenced
    code blocks are not read. With ``review=True`` (a reviewer's findings), every finding
    must also cite at least one source: a finding is a bullet or numbered list item, or,
    when the text has none, a non-empty paragraph."""
    if not isinstance(text, str):
        raise InvalidArgument(f"text must be str, not {type(text).__name__}")
    numbers, documents, chunks = _retrieval_set(result)
    # pattern, how a match reads as an id, the retrieval set, the violation and its words
    checks = (
        (_DOC_REF, str, documents, "unknown_document", "document {!r} was not retrieved"),
        (_CHUNK_REF, int, chunks, "unknown_chunk", "chunk {} was not retrieved"),
    )
    cited_n: list[int] = []
    cited_d: list[str] = []
    cited_c: list[int] = []
    violations: list[Violation] = []
    lines = _without_code(text.splitlines())
    for lineno, line in enumerate(lines, start=1):
        for m in _NUMBER_CITATION.finditer(line):
            cited_n += _check_number_citation(m, numbers, lineno, violations)
        for found, (pattern, parse, allowed, kind, words) in zip(
            (cited_d, cited_c), checks, strict=True
        ):
            for m in pattern.finditer(line):
                found.append(value := parse(m.group(1)))
                if value not in allowed:
                    violations.append(Violation(kind, words.format(value), lineno))
    findings = _check_findings(lines, violations) if review else 0
    return CitationReport(
        cited_numbers=tuple(dict.fromkeys(cited_n)),
        cited_documents=tuple(dict.fromkeys(cited_d)),
        cited_chunks=tuple(dict.fromkeys(cited_c)),
        findings=findings,
        violations=tuple(violations),
    )


def _retrieval_set(
    result: RetrievalResult | Grounding | AuditEntry,
) -> tuple[set[int], set[str], set[int]]:
    """The citation numbers, document ids and chunk ids a retrieval returned, from the
    result itself or from its audit row (which keeps them, ids only)."""
    if isinstance(result, AuditEntry):
        numbers = {int(c["number"]) for c in result.citations}
        return numbers, set(result.document_ids), set(result.chunk_ids)
    res = result.result if isinstance(result, Grounding) else result
    documents = {c.document_id for c in res.citations}
    return {c.number for c in res.citations}, documents, set(res.selected_chunk_ids)


def _check_number_citation(
    match: re.Match[str], known: set[int], lineno: int, violations: list[Violation]
) -> list[int]:
    """The numbers one number citation cites; a violation for each unknown number and for
    each reversed or too wide range."""
    marker = match.group(0)
    cited: list[int] = []
    for bounds in _CITED_RANGE.finditer(match.group(1) or match.group(2)):
        item = bounds.group(0)
        low = int(bounds.group(1))
        high = int(bounds.group(2) or low)
        problem = _range_problem(low, high)
        if problem:
            violations.append(
                Violation("invalid_citation", f"{item} in {marker} {problem}", lineno)
            )
            continue
        for number in range(low, high + 1):
            if number in cited:
                continue
            cited.append(number)
            if number not in known:
                where = "" if marker == f"[{number}]" else f" in {marker}"
                detail = f"[{number}]{where} is not a retrieved source"
                violations.append(Violation("unknown_citation", detail, lineno))
    return cited


def _range_problem(low: int, high: int) -> str | None:
    """Why ``low``-``high`` is not a range of citations, or None when it is one."""
    if high < low:
        return f"is a reversed range; write [{high}-{low}]"
    if high - low + 1 > _MAX_CITED_RANGE:
        return (
            f"spans {high - low + 1} sources (at most {_MAX_CITED_RANGE});"
            " cite the sources you used"
        )
    return None


def _without_code(lines: list[str]) -> list[str]:
    """``lines`` with fenced code blocks emptied and inline code spans blanked, so that
    ``a[1]`` in code is not read as a citation; line numbers are kept."""
    out: list[str] = []
    fence = ""  # the opening fence of the block we are in, if any
    for line in lines:
        m = _FENCE.match(line)
        if fence:
            closing = m is not None and m.group(1)[0] == fence[0]
            if closing and len(m.group(1)) >= len(fence):
                fence = ""
            out.append("")
        elif m:
            fence = m.group(1)
            out.append("")
        else:
            out.append(_INLINE_CODE.sub(lambda c: c[1] + " " * len(c[2]) + c[1], line))
    return out


def _check_findings(lines: list[str], violations: list[Violation]) -> int:
    """Count the findings in ``lines`` and add a violation for each that cites nothing."""
    items = [(i, m.group(1)) for i, line in enumerate(lines, start=1) if (m := _ITEM.match(line))]
    if not items:
        items = _paragraphs(lines)
    for lineno, item in items:
        if not any(p.search(item) for p in (_NUMBER_CITATION, _DOC_REF, _CHUNK_REF)):
            violations.append(
                Violation("uncited_finding", f"finding cites no source: {item[:80]!r}", lineno)
            )
    return len(items)


def _paragraphs(lines: list[str]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    start, buf = 0, []
    for i, line in enumerate([*lines, ""], start=1):
        if line.strip():
            if not buf:
                start = i
            buf.append(line.strip())
        elif buf:
            out.append((start, " ".join(buf)))
            buf = []
    return out
