"""Column lists and the decoders of the rows they select: each list sits beside the one
function that knows its order, so the two cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tether.models import Document, Hit, Tags
from tether.store._paths import read_path
from tether.store.dialect import Dialect
from tether.store.records import AuditEntry, CandidateRow, NewChunk, RegistryEntry


def document_columns(dialect: Dialect) -> str:
    """A document with its chunk count and attached sessions (``d`` = rag_documents)."""
    return (
        "d.id, d.workspace_id, d.title, d.source_path, d.source_type, d.mime, d.content_hash,"
        " d.file_size, d.status, d.created_at, d.indexed_at, d.metadata,"
        " d.project_id, d.domain, d.version, d.last_verified, d.stale_at, d.chunking,"
        " (SELECT count(*) FROM rag_chunks c WHERE c.document_id = d.id) AS chunk_count,"
        f" (SELECT {dialect.joined('s.session_id')} FROM rag_document_sessions s"
        "   WHERE s.document_id = d.id) AS session_ids"
    )


#: A hit (``c`` = rag_chunks, ``d`` = rag_documents); queries may add columns after it.
HIT_COLUMNS = (
    "c.id, c.document_id, d.title, c.section_title, c.page, c.content, c.ordinal,"
    " c.char_start, c.char_end, d.source_path, d.workspace_id, c.page_label"
)
HIT_WIDTH = 12

REGISTRY_COLUMNS = ", ".join(RegistryEntry.__dataclass_fields__)
AUDIT_COLUMNS = ", ".join(AuditEntry.__dataclass_fields__)
_AUDIT_JSON = ("scope", "filters", "chunk_ids", "document_ids", "citations")


def document(row: Sequence[Any]) -> Document:
    (id_, ws, title, path, stype, mime, chash, size, status, created, indexed, meta) = row[:12]
    project, domain, version, verified, stale, chunking, n, sids = row[12:]
    tagged = any(v is not None for v in (stype, project, domain, version, verified))
    return Document(
        id=id_,
        workspace_id=ws,
        title=title,
        source_path=read_path(path),
        source_type=stype,
        mime=mime,
        content_hash=chash,
        file_size=size,
        status=status,
        created_at=created,
        indexed_at=indexed,
        chunk_count=n,
        session_ids=tuple(sorted(sids.split("\x1f"))) if sids else (),
        metadata=json.loads(meta),
        tags=Tags(domain, stype, verified, version, project) if tagged else None,
        stale_at=stale,
        chunking=chunking,
    )


def hit(row: Sequence[Any], score: float) -> Hit:
    (chunk_id, doc_id, title, section, page, content, ordinal, start, end, path, ws, label) = row[
        :HIT_WIDTH
    ]
    return Hit(
        document_id=doc_id,
        chunk_id=chunk_id,
        title=title,
        section_title=section,
        page=page,
        text=content,
        score=score,
        ordinal=ordinal,
        char_start=start,
        char_end=end,
        source_path=read_path(path),
        workspace_id=ws,
        page_label=label,
    )


def candidate_row(row: Sequence[Any]) -> CandidateRow:
    """A row of :func:`~tether.store.sql.candidate_rows_sql`."""
    token_count, metadata, recency, source_type = row[HIT_WIDTH:]
    return CandidateRow(hit(row, 0.0), token_count, json.loads(metadata), recency, source_type)


def registry_entry(row: Sequence[Any]) -> RegistryEntry:
    return RegistryEntry(read_path(row[0]), *row[1:])


def audit_entry(row: Sequence[Any]) -> AuditEntry:
    values = dict(zip(AuditEntry.__dataclass_fields__, row, strict=True))
    return AuditEntry(**{**values, **{name: json.loads(values[name]) for name in _AUDIT_JSON}})


def audit_params(entry: AuditEntry) -> list[Any]:
    """The values of :data:`AUDIT_COLUMNS` for ``entry``, JSON where the column is."""
    values = entry.to_dict()
    for name in _AUDIT_JSON:
        values[name] = json.dumps(values[name], sort_keys=True)
    return list(values.values())


def new_chunk(document_id: str, c: NewChunk) -> tuple[Any, ...]:
    """The values of a chunk's row as both backends insert it (after them, PostgreSQL's
    own full-text columns)."""
    return (
        document_id,
        c.ordinal,
        c.content,
        c.section_title,
        c.token_count,
        c.char_start,
        c.char_end,
        c.page,
        c.content_hash,
        c.page_label,
    )
