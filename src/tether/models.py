"""Plain typed records that tether hands back: scopes, documents, index results, hits."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from tether.errors import InvalidArgument, ScopeError
from tether.text import check_identifier

GLOBAL_WORKSPACE = "GLOBAL"
#: Documents' statuses: ``active`` is searchable, ``draft`` not yet published,
#: ``pending`` user-submitted and not yet approved.
DocumentStatus = Literal["active", "draft", "pending"]
#: The most hits one search returns.
MAX_K = 1000

ScopeKind = Literal["session", "workspace", "global"]


@dataclass(frozen=True)
class Scope:
    """Which documents a retrieval may see.

    =========== ===========================================================
    ``session``   documents attached to the session ``id``
    ``workspace`` documents whose workspace is ``id``
    ``global``    documents of the shared library (workspace ``GLOBAL``)
    =========== ===========================================================
    """

    kind: ScopeKind
    id: str

    def __post_init__(self) -> None:
        if self.kind not in ("session", "workspace", "global"):
            raise ScopeError(f"unknown scope {self.kind!r}; use 'session', 'workspace' or 'global'")
        if not isinstance(self.id, str) or not self.id.strip():
            raise ScopeError(f"scope {self.kind!r} needs a non-empty id")
        try:
            check_identifier(f"the {self.kind} id", self.id)
        except InvalidArgument as exc:
            raise ScopeError(str(exc)) from None
        if self.kind == "global" and self.id != GLOBAL_WORKSPACE:
            raise ScopeError(f"the global scope is always {GLOBAL_WORKSPACE!r}")

    @classmethod
    def session(cls, session_id: str) -> Scope:
        return cls("session", session_id)

    @classmethod
    def workspace(cls, workspace_id: str) -> Scope:
        return cls("workspace", workspace_id)

    @classmethod
    def global_(cls) -> Scope:
        return cls("global", GLOBAL_WORKSPACE)

    @classmethod
    def resolve(
        cls,
        scope: Scope | str | None,
        *,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> Scope:
        """``scope`` with the ids it needs, as a Scope; a ScopeError says what is missing
        or what contradicts what.

        Without ``scope``, the ids name it: a session the session scope (a workspace
        beside it is the session's own), else a workspace the workspace scope. With
        ``scope``, the ids must fit it: the global scope takes neither (nor a workspace
        other than the global library's), and a Scope names its own id. A session beside
        a workspace scope is the caller's session (its recency counts in a session
        scope only)."""
        if scope is None:
            if not session_id and not workspace_id:
                raise ScopeError(
                    "name a scope: 'session', 'workspace' or 'global' (scope=, or a"
                    " session_id= / workspace_id= that names one)"
                )
            scope = "session" if session_id else "workspace"
        resolved = (
            scope if isinstance(scope, Scope) else cls._named(scope, session_id, workspace_id)
        )
        _check_ids_fit(resolved, session_id, workspace_id)
        return resolved

    @classmethod
    def _named(cls, kind: str, session_id: str | None, workspace_id: str | None) -> Scope:
        if kind == "session":
            if not session_id:
                raise ScopeError("scope 'session' needs a session id (session_id= / --session)")
            return cls.session(session_id)
        if kind == "workspace":
            if not workspace_id:
                alone = "; a session alone names the session scope" if session_id else ""
                raise ScopeError(
                    f"scope 'workspace' needs a workspace id (workspace_id= / --workspace){alone}"
                )
            return cls.workspace(workspace_id)
        if kind == "global":
            return cls.global_()
        raise ScopeError(f"unknown scope {kind!r}; use 'session', 'workspace' or 'global'")

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id}


def _check_ids_fit(scope: Scope, session_id: str | None, workspace_id: str | None) -> None:
    """A ScopeError when a session or workspace named beside ``scope`` contradicts it."""
    if scope.kind == "global" and session_id:
        raise ScopeError(
            f"scope 'global' contradicts session {session_id!r}: the global library is not a"
            " session's documents; leave out the scope to search the session, or leave out"
            " the session (session_id= / --session)"
        )
    if scope.kind == "global" and (workspace_id or GLOBAL_WORKSPACE) != GLOBAL_WORKSPACE:
        raise ScopeError(
            f"scope 'global' contradicts workspace {workspace_id!r}: the global library is"
            " not a workspace's documents; leave out the scope to search the workspace, or"
            " leave out the workspace (workspace_id= / --workspace)"
        )
    if scope.kind == "session" and session_id and session_id != scope.id:
        raise ScopeError(f"the scope is session {scope.id!r}, yet session_id is {session_id!r}")
    if scope.kind == "workspace" and workspace_id and workspace_id != scope.id:
        raise ScopeError(
            f"the scope is workspace {scope.id!r}, yet workspace_id is {workspace_id!r}"
        )


@dataclass(frozen=True)
class Workspace:
    id: str
    name: str
    created_at: str


@dataclass(frozen=True)
class Session:
    id: str
    workspace_id: str
    created_at: str
    closed_at: str | None = None


@dataclass(frozen=True)
class Tags:
    """A document's governance tags (every chunk inherits them).

    ``project_id`` (``None`` for global knowledge), ``domain`` (one of
    ``policy.domains``), ``source_type`` (``policy | guide | log | link | contract``),
    ``last_verified`` (ISO-8601 date or time) and ``version``. Build from a dict with
    :func:`tether.policy.validate_tags`, which checks every field against the policy."""

    domain: str | None = None
    source_type: str | None = None
    last_verified: str | None = None
    version: str | None = None
    project_id: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {
            "project_id": self.project_id,
            "domain": self.domain,
            "source_type": self.source_type,
            "last_verified": self.last_verified,
            "version": self.version,
        }


@dataclass(frozen=True)
class Filters:
    """Filters applied in SQL like scopes: a chunk passes when its document's tag is
    one of the listed values (``None``: no filter on that tag), and, with
    ``document_ids``, when it belongs to one of those documents (a chat's active PDF).
    ``project_ids`` may hold ``None`` to mean "global knowledge" (documents without a
    project). Filters only narrow a scope: a listed document outside it stays unseen."""

    domains: tuple[str, ...] | None = None
    project_ids: tuple[str | None, ...] | None = None
    source_types: tuple[str, ...] | None = None
    document_ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("domains", "project_ids", "source_types", "document_ids"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, str) or not isinstance(value, tuple | list | set | frozenset):
                raise InvalidArgument(f"Filters.{name} must be a tuple of values, not {value!r}")
            items = tuple(value)
            allowed = (str, type(None)) if name == "project_ids" else (str,)
            if not items or not all(isinstance(v, allowed) for v in items):
                raise InvalidArgument(f"Filters.{name} must be a non-empty tuple of strings")
            for v in items:
                if v is not None:
                    check_identifier(f"a value of Filters.{name}", v)
            object.__setattr__(self, name, items)

    def to_dict(self) -> dict[str, list[str | None] | None]:
        return {
            "domains": list(self.domains) if self.domains is not None else None,
            "project_ids": list(self.project_ids) if self.project_ids is not None else None,
            "source_types": list(self.source_types) if self.source_types is not None else None,
            **({"document_ids": list(self.document_ids)} if self.document_ids is not None else {}),
        }


@dataclass(frozen=True)
class Exclusions:
    """The policy's exclusions, as SQL sees them (built by the searcher from settings):
    logs last verified (or indexed) before ``log_cutoff``, and web documents never
    verified. Drafts and unapproved submissions are excluded by status, always."""

    log_cutoff: str | None = None
    unverified_urls: bool = True


@dataclass(frozen=True)
class Document:
    id: str
    workspace_id: str
    title: str
    source_path: str | None
    source_type: str | None
    mime: str
    content_hash: str
    file_size: int | None
    status: str
    created_at: str
    indexed_at: str | None
    chunk_count: int = 0
    session_ids: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)
    tags: Tags | None = None
    stale_at: str | None = None
    #: The chunk settings it was chunked with, ``"size/overlap"`` (None: stored before
    #: tether recorded them).
    chunking: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspace_id": self.workspace_id,
            "title": self.title,
            "source_path": self.source_path,
            "source_type": self.source_type,
            "mime": self.mime,
            "content_hash": self.content_hash,
            "file_size": self.file_size,
            "status": self.status,
            "created_at": self.created_at,
            "indexed_at": self.indexed_at,
            "chunk_count": self.chunk_count,
            "session_ids": list(self.session_ids),
            "metadata": self.metadata,
            "tags": self.tags.to_dict() if self.tags else None,
            "stale_at": self.stale_at,
        }


IndexStatus = Literal["indexed", "replaced", "updated", "skipped", "failed"]


@dataclass(frozen=True)
class IndexResult:
    """What happened to one source given to :meth:`Tether.add`.

    ``indexed``: a new document. ``replaced``: the document's content changed and its chunks
    were swapped atomically. ``updated``: same content, new tags or status (no re-chunking,
    no re-embedding). ``skipped``: same content hash as stored, nothing done (the
    session attachment is still made). ``failed``: see ``error``; nothing stored changed.
    ``warnings`` names degradations, such as a document stored without vectors because
    the embedding provider failed.
    """

    source: str
    status: IndexStatus
    document_id: str | None = None
    chunk_count: int = 0
    error: Exception | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": self.status,
            "document_id": self.document_id,
            "chunk_count": self.chunk_count,
            "error": None if self.error is None else str(self.error),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk. ``score`` is higher-is-better (for lexical search: -bm25)."""

    document_id: str
    chunk_id: int
    title: str
    section_title: str | None
    page: int | None
    text: str
    score: float
    ordinal: int
    char_start: int
    char_end: int
    source_path: str | None
    workspace_id: str
    #: The printed label of ``page`` where it differs from the physical number.
    page_label: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "chunk_id": self.chunk_id,
            "title": self.title,
            "section_title": self.section_title,
            "page": self.page,
            "text": self.text,
            "score": self.score,
            "ordinal": self.ordinal,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "source_path": self.source_path,
            "workspace_id": self.workspace_id,
            "page_label": self.page_label,
        }


@dataclass(frozen=True)
class Citation:
    """One numbered source of a context block: ``[number]`` in the text.

    Adjacent chunks of one document are merged into one citation; ``chunk_ids`` lists
    them in document order, ``page`` is the first chunk's page and ``pages`` every page
    the citation spans (physical numbers, 1-based); ``page_label`` is the printed label
    of ``page`` where the document has one that differs ("9" on physical page 12).
    ``relevance`` is the evidence that the passage answers the question (0..1, see
    :mod:`tether.retrieve.evidence`). ``text`` is the cited passage as it appears in
    the context."""

    number: int
    document_id: str
    title: str
    section_title: str | None
    page: int | None
    pages: tuple[int, ...]
    chunk_ids: tuple[int, ...]
    source_path: str | None
    workspace_id: str
    relevance: float
    text: str
    page_label: str | None = None

    @property
    def label(self) -> str:
        """``[n]``, as it appears in the context block."""
        return f"[{self.number}]"

    def ids(self) -> dict[str, Any]:
        """What the audit log keeps of it: its number and ids, never text or scores."""
        return {
            "number": self.number,
            "document_id": self.document_id,
            "chunk_ids": list(self.chunk_ids),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "document_id": self.document_id,
            "title": self.title,
            "section_title": self.section_title,
            "page": self.page,
            "pages": list(self.pages),
            "chunk_ids": list(self.chunk_ids),
            "source_path": self.source_path,
            "workspace_id": self.workspace_id,
            "relevance": self.relevance,
            "text": self.text,
            "page_label": self.page_label,
        }


@dataclass(frozen=True)
class RetrievalResult:
    """What :meth:`tether.Tether.retrieve` hands an LLM app.

    ``context`` is the bounded, cited block to put in the prompt ("" when nothing is
    grounded or retrieval was skipped); ``citations`` explain its ``[n]`` markers.
    ``grounded`` is true only when at least one chunk above ``rag.min_relevance`` made it
    into the context. When it is false after a real retrieval, ``guidance`` says in
    words a chat UI can show what to do next, and ``suggested_scope`` names the wider
    scope to try (``None`` when the only step left is adding documents). ``retrieved``
    is false when the decision skipped retrieval (``debug["decision"]`` says why).
    ``queries`` is the original question first, then any rewrites; ``selected_chunk_ids``
    are the context's chunks, best first. ``retrieval_id`` names this retrieval in the
    audit log (``rag_retrieval_log``).
    """

    retrieval_id: str = field(compare=False)
    question: str
    context: str
    citations: tuple[Citation, ...]
    grounded: bool
    guidance: str | None
    suggested_scope: ScopeKind | None
    retrieved: bool
    queries: tuple[str, ...]
    scope: Scope
    selected_chunk_ids: tuple[int, ...]
    debug: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "retrieval_id": self.retrieval_id,
            "question": self.question,
            "context": self.context,
            "citations": [c.to_dict() for c in self.citations],
            "grounded": self.grounded,
            "guidance": self.guidance,
            "suggested_scope": self.suggested_scope,
            "retrieved": self.retrieved,
            "queries": list(self.queries),
            "scope": self.scope.to_dict(),
            "selected_chunk_ids": list(self.selected_chunk_ids),
            "debug": self.debug,
        }


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
                {
                    "id": d.id,
                    "title": d.title,
                    "workspace_id": d.workspace_id,
                    "stale_at": d.stale_at,
                    "chunk_count": d.chunk_count,
                }
                for d in self.documents
            ],
        }


@dataclass(frozen=True)
class CompactReport:
    """What :meth:`Tether.compact` did to the full-text index: its segments and leaf
    pages before and after (None where the backend keeps no such index), and the time."""

    segments_before: int | None
    pages_before: int | None
    segments_after: int | None
    pages_after: int | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def iso_utc(moment: datetime) -> str:
    """``moment`` as stored: ISO-8601 in UTC to the microsecond, with a ``Z`` (it sorts
    as text). A naive ``moment`` is taken to be UTC already."""
    return (moment.astimezone(UTC) if moment.tzinfo else moment).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
