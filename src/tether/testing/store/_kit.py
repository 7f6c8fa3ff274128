"""What the conformance tests build their rows with."""

from __future__ import annotations

import hashlib
from typing import Any

from tether.models import GLOBAL_WORKSPACE
from tether.store import (
    AuditEntry,
    ChunkVectors,
    NewChunk,
    NewDocument,
    Store,
)

# A compiled FTS match, as ``tether.retrieve.fts.compile_match("beacon")`` writes it.
BEACON = '"beacon"'


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chunk(ordinal: int, text: str) -> NewChunk:
    return NewChunk(ordinal, text, None, 0, len(text), None, sha(text), token_count=len(text))


def new_document(
    document_id: str, workspace_id: str = GLOBAL_WORKSPACE, **fields: Any
) -> NewDocument:
    defaults: dict[str, Any] = {
        "title": document_id,
        "source_path": None,
        "source_type": None,
        "mime": "text/plain",
        "content_hash": sha(document_id),
        "file_size": None,
        "metadata": {},
    }
    return NewDocument(document_id, workspace_id, **{**defaults, **fields})


def put(
    store: Store,
    document_id: str,
    *texts: str,
    workspace_id: str = GLOBAL_WORKSPACE,
    vectors: ChunkVectors | None = None,
    **fields: Any,
) -> list[int]:
    """Insert a document with one chunk per text; its chunk ids."""
    store.ensure_workspace(workspace_id)
    chunks = [chunk(i, text) for i, text in enumerate(texts or ("filler words only",))]
    store.insert_document(new_document(document_id, workspace_id, **fields), chunks, vectors)
    return [c.id for c in store.chunks_of(document_id)]


def vectors(model: str, count: int, dims: int = 2, fill: int = 1) -> ChunkVectors:
    return ChunkVectors(model, dims, [bytes([fill]) * (4 * dims)] * count)


def audit(retrieval_id: str, outcome: str = "grounded", **fields: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "retrieval_id": retrieval_id,
        "created_at": "2024-01-01T00:00:00Z",
        "query": "how fast does the pump prime",
        "scope": {"kind": "global", "id": GLOBAL_WORKSPACE},
        "filters": {},
        "chunk_ids": [1, 2],
        "document_ids": ["d1"],
        "outcome": outcome,
        "reason": None,
    }
    return AuditEntry(**{**values, **fields})
