"""The request and response bodies of the HTTP API (they make its OpenAPI schema).

Responses are the library's ``to_dict()`` shapes, the same JSON that ``tether ... --json``
prints; these models only describe them, with the library's own records (``Hit``,
``Citation``, ``AuditEntry``) where a record is the shape.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.ingest.jobs import JobStatus
from tether.models import (
    MAX_K,
    Citation,
    DocumentStatus,
    Filters,
    IndexStatus,
    Session,
    Workspace,
)
from tether.store import RegistryEntry

ScopeKind = Literal["session", "workspace", "global"]
#: The longest query or question accepted (a pasted page is fine, a book is not).
MAX_QUERY_CHARS = 100_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FiltersIn(_Strict):
    """Tag filters, applied in SQL like scopes (see ``tether.Filters``)."""

    domains: list[str] | None = Field(default=None, min_length=1)
    project_ids: list[str | None] | None = Field(default=None, min_length=1)
    source_types: list[str] | None = Field(default=None, min_length=1)
    document_ids: list[str] | None = Field(default=None, min_length=1)

    def to_filters(self) -> Filters:
        return Filters(
            domains=None if self.domains is None else tuple(self.domains),
            project_ids=None if self.project_ids is None else tuple(self.project_ids),
            source_types=None if self.source_types is None else tuple(self.source_types),
            document_ids=None if self.document_ids is None else tuple(self.document_ids),
        )


class ScopedIn(_Strict):
    scope: ScopeKind | None = Field(
        default=None, description="session, workspace or global (default: rag.scope)"
    )
    session_id: str | None = Field(default=None, max_length=512)
    workspace_id: str | None = Field(default=None, max_length=512)
    filters: FiltersIn | None = None


class SearchIn(ScopedIn):
    query: str = Field(max_length=MAX_QUERY_CHARS)
    k: int = Field(default=10, ge=1, le=MAX_K)
    mode: Literal["hybrid", "lexical", "vector"] = "hybrid"
    judge: bool = Field(
        default=False,
        description="also weigh each hit as retrieve does: its evidence (0..1) that it"
        " answers the query, as each hit's `evidence`",
    )


class HistoryTurn(_Strict):
    role: str = Field(max_length=32)
    content: str = Field(max_length=MAX_QUERY_CHARS)


class RetrieveIn(ScopedIn):
    query: str = Field(max_length=MAX_QUERY_CHARS, description="the user's question")
    max_chunks: int | None = Field(default=None, ge=1, le=MAX_K)
    min_relevance: float | None = Field(default=None, ge=0.0, le=1.0)
    timeout: float | None = Field(
        default=None,
        ge=0.5,
        le=600.0,
        description="seconds for the whole retrieval; past it a 504 RetrievalTimeout",
    )
    guarded: bool = Field(
        default=False,
        description="the agent team's rules (policy.max_chunks, policy.min_relevance,"
        " policy.timeout; max_chunks and timeout here are ignored, min_relevance may only"
        " raise the policy's): nothing grounded, a timeout or an error is a 409"
        " GenerationBlocked with its advisory",
    )
    history: list[HistoryTurn] | None = Field(default=None, max_length=50)
    debug: bool = Field(default=False, description="include the pipeline's debug record")
    explain: bool = Field(
        default=False,
        description="also record each query's lexical, vector and fused candidates with"
        " their ranks and scores (debug.explain; implies debug; not with guarded)",
    )


class ScopeOut(BaseModel):
    kind: ScopeKind
    id: str


class SearchHit(BaseModel):
    """A :class:`~tether.models.Hit`, with its evidence when the search was judged."""

    document_id: str
    chunk_id: int
    title: str
    section_title: str | None
    page: int | None
    page_label: str | None = None
    text: str
    score: float
    ordinal: int
    char_start: int
    char_end: int
    source_path: str | None
    workspace_id: str
    evidence: float | None = None


class SearchOut(BaseModel):
    query: str
    scope: ScopeOut
    k: int
    hits: list[SearchHit]
    debug: dict[str, Any]


class RetrieveOut(BaseModel):
    retrieval_id: str
    question: str
    context: str
    citations: list[Citation]
    grounded: bool
    guidance: str | None
    suggested_scope: ScopeKind | None
    retrieved: bool
    queries: list[str]
    scope: ScopeOut
    selected_chunk_ids: list[int]
    debug: dict[str, Any] | None = None


# -- the resource routes' responses (the to_dict() shapes) ---------------------------------


class TagsOut(BaseModel):
    project_id: str | None
    domain: str | None
    source_type: str | None
    last_verified: str | None
    version: str | None


class DocumentOut(BaseModel):
    id: str
    workspace_id: str
    title: str
    source_path: str | None
    source_type: str | None
    mime: str
    content_hash: str
    file_size: int | None
    status: DocumentStatus
    created_at: str
    indexed_at: str | None
    chunk_count: int
    session_ids: list[str]
    metadata: dict[str, Any]
    tags: TagsOut | None
    stale_at: str | None


class ChunkOut(BaseModel):
    chunk_id: int
    ordinal: int
    section_title: str | None
    page: int | None
    page_label: str | None
    char_start: int
    char_end: int
    token_count: int | None
    text: str


class IndexResultOut(BaseModel):
    source: str
    status: IndexStatus
    document_id: str | None
    chunk_count: int
    error: str | None
    warnings: list[str]


class ProgressOut(BaseModel):
    done: int
    total: int
    current: str | None
    description: str


class JobOut(BaseModel):
    id: str
    kind: str
    status: JobStatus
    workspace_id: str | None = Field(description="None: a job not submitted over HTTP")
    progress: ProgressOut
    results: list[IndexResultOut]


class DocumentsOut(BaseModel):
    documents: list[DocumentOut]


class DocumentShownOut(BaseModel):
    document: DocumentOut
    chunks: list[ChunkOut] | None = Field(default=None, description="with chunks=true")


class DocumentOneOut(BaseModel):
    document: DocumentOut


class DeletedOut(BaseModel):
    deleted: str


class IndexedOut(BaseModel):
    result: IndexResultOut


class UploadResultsOut(BaseModel):
    results: list[IndexResultOut]


class JobOneOut(BaseModel):
    job: JobOut


class JobsOut(BaseModel):
    jobs: list[JobOut]


class CancelledOut(BaseModel):
    cancelled: bool = Field(description="False when the job had already ended")
    job: JobOut


class SessionsOut(BaseModel):
    sessions: list[Session]


class SessionOneOut(BaseModel):
    session: Session


class AttachedOut(BaseModel):
    attached: bool = Field(description="False when it was attached already")
    document_id: str
    session_id: str


class DetachedOut(BaseModel):
    detached: bool = Field(description="False when it was not attached")
    document_id: str
    session_id: str


class WorkspacesOut(BaseModel):
    workspaces: list[Workspace]


class MeOut(BaseModel):
    """What the caller's key may do (``key_id`` None: no key, the local operator)."""

    key_id: str | None
    name: str | None
    admin: bool
    read_only: bool
    global_write: bool
    may_write: bool
    #: The workspaces this key reads besides the global library; None: every workspace.
    workspaces: list[str] | None


class LibraryOut(BaseModel):
    files: list[RegistryEntry]


class FileFormat(BaseModel):
    """One kind of file tether reads."""

    name: str
    extensions: list[str]
    mime: str
    cites: str = Field(description="what a citation of it points at")


class FormatsOut(BaseModel):
    formats: list[FileFormat]


class ErrorDetail(BaseModel):
    type: str
    message: str
    status: int


class ErrorOut(BaseModel):
    error: ErrorDetail


#: The error responses every route may give, for the OpenAPI schema.
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut}
    for code in (400, 401, 403, 404, 409, 413, 415, 421, 422, 429, 503, 504, 507)
}
