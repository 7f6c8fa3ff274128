"""The typed records that go into and come out of a :class:`~tether.store.Store`.

Every backend speaks these: no sqlite rows, tuples or dicts cross the store's boundary
(a ranked list of ``(chunk_id, score)`` pairs is the one plain shape, as fusion wants it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from tether.models import Hit, iso_utc


def utcnow() -> str:
    """Now, in the ISO-8601 UTC form every stored timestamp has (it sorts as text)."""
    return iso_utc(datetime.now(UTC))


@dataclass(frozen=True)
class NewChunk:
    """A chunk ready to store (produced by the chunker)."""

    ordinal: int
    content: str
    section_title: str | None
    char_start: int
    char_end: int
    page: int | None
    content_hash: str
    token_count: int | None = None
    #: The printed page label of ``page`` (a PDF's "iv" or "9"), when it differs.
    page_label: str | None = None


@dataclass(frozen=True)
class ChunkVectors:
    """One vector per chunk of a document (same order), all from one model."""

    model: str
    dims: int
    blobs: Sequence[bytes]


@dataclass(frozen=True)
class VectorSnapshot:
    """``rows``: (chunk_id, dims, vector) ordered by chunk id; ``layout``: (chunk_id,
    document_id) in the order the vectors should be laid out in memory; ``seq``: the
    document change the snapshot was read at (see :meth:`Store.vector_delta`).
    A delta's ``documents`` are the documents whose vectors changed after the previous
    ``seq``; their vectors now are ``rows`` (none for a deleted document), in the order
    of ``layout`` (row i is the vector of layout entry i)."""

    rows: list[tuple[int, int, bytes]]
    layout: list[tuple[int, str]]
    seq: int = 0
    documents: tuple[str, ...] = ()


@dataclass(frozen=True)
class NewDocument:
    """A document to insert, or the new version of one to replace."""

    id: str
    workspace_id: str
    title: str
    source_path: str | None
    source_type: str | None
    mime: str
    content_hash: str
    file_size: int | None
    metadata: dict[str, Any]
    project_id: str | None = None
    domain: str | None = None
    version: str | None = None
    last_verified: str | None = None
    status: str = "active"
    #: The chunk settings used, e.g. ``"1000/150"`` (size/overlap).
    chunking: str | None = None


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as stored, with the id the store gave it."""

    id: int
    document_id: str
    ordinal: int
    content: str
    section_title: str | None
    token_count: int | None
    char_start: int
    char_end: int
    page: int | None
    content_hash: str
    page_label: str | None = None


@dataclass(frozen=True)
class CandidateRow:
    """What reranking and context building need of one chunk: its hit (score 0), its
    stored token count, its document's metadata and source type, and ``recency``: when
    its document joined the session asked about (without one, when it was indexed)."""

    hit: Hit
    token_count: int | None
    metadata: dict[str, Any]
    recency: str | None
    source_type: str | None


@dataclass(frozen=True)
class TermStatistics:
    """How common a question's search terms are, for judging evidence: ``chunks`` in the
    whole store, ``store`` the number of those holding each term (its document frequency,
    for IDF), and ``in_scope`` whether the asked scope holds the term at all."""

    chunks: int
    store: dict[str, int]
    in_scope: dict[str, bool]


@dataclass(frozen=True)
class RegistryEntry:
    """What the library registry knows about one file of a watched folder."""

    source_path: str
    workspace_id: str | None
    document_id: str | None
    content_hash: str | None
    status: str
    retry_count: int
    last_seen_at: str | None
    last_indexed_at: str | None
    next_retry_at: str | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit trail: ids, the sanitized query, scope, filters and outcome.

    ``citations`` numbers the context's sources as the retrieval did, ids only
    (``{"number", "document_id", "chunk_ids"}``), so that a draft's ``[n]`` can be checked
    against the row later (:func:`tether.policy.verify_citations`); rows logged before
    tether kept it have none. There is deliberately no field for chunk text, vectors or
    scores: the audit log cannot hold them."""

    retrieval_id: str
    created_at: str
    query: str
    scope: dict[str, Any]
    filters: dict[str, Any]
    chunk_ids: list[int]
    document_ids: list[str]
    outcome: str
    reason: str | None = None
    citations: list[dict[str, Any]] = field(default_factory=list)
    #: The API key that asked (through ``tether serve`` or ``tether mcp``); None: the
    #: library's own caller. A key reads the global library's rows its workspaces asked.
    asked_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ApiKey:
    """A service API key as stored: what it may do, never its secret (only a hash of it
    is kept). ``workspaces`` are the workspaces it is bound to; every key reads the global
    library, ``global_write`` lets it change it, ``read_only`` forbids all writes, and
    ``admin`` may do everything, keys included."""

    id: str
    name: str | None
    workspaces: tuple[str, ...]
    global_write: bool
    read_only: bool
    admin: bool
    created_at: str
    revoked_at: str | None = None
    last_used_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "workspaces": list(self.workspaces), "active": self.active}
