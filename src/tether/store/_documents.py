"""Documents and their chunks: reads, the all-or-nothing writes, tags and status."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from tether.errors import DocumentNotFound
from tether.models import Document, Tags
from tether.store import _rows
from tether.store._common import _BATCH, StorePart
from tether.store._paths import stored_path
from tether.store.records import ChunkVectors, NewChunk, NewDocument, StoredChunk, utcnow
from tether.store.sql import find_document_sql, find_documents_sql, list_documents_sql

_INSERT_DOCUMENT = (
    "INSERT INTO rag_documents (id, workspace_id, title, source_path, source_type,"
    " mime, content_hash, file_size, metadata, created_at, indexed_at,"
    " project_id, domain, version, last_verified, status, chunking)"
    " VALUES (:id, :workspace_id, :title, :source_path, :source_type, :mime,"
    " :content_hash, :file_size, :metadata, :now, :now,"
    " :project_id, :domain, :version, :last_verified, :status, :chunking)"
)
_UPDATE_DOCUMENT = (
    "UPDATE rag_documents SET title = :title, source_path = :source_path,"
    " source_type = :source_type, mime = :mime, content_hash = :content_hash,"
    " file_size = :file_size, metadata = :metadata, indexed_at = :now,"
    " project_id = :project_id, domain = :domain, version = :version,"
    " last_verified = :last_verified, status = :status, chunking = :chunking"
    " WHERE id = :id"
)
_INSERT_CHUNK = (
    "INSERT INTO rag_chunks (document_id, ordinal, content, section_title,"
    " token_count, char_start, char_end, page, content_hash, page_label)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _document_params(document: NewDocument) -> dict[str, Any]:
    return {
        **{name: getattr(document, name) for name in NewDocument.__dataclass_fields__},
        "source_path": stored_path(document.source_path),
        "metadata": json.dumps(document.metadata, sort_keys=True),
        "now": utcnow(),
    }


_INSERT_NUMBERED_CHUNK = (
    "INSERT INTO rag_chunks (id, document_id, ordinal, content, section_title,"
    " token_count, char_start, char_end, page, content_hash, page_label)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_EMBEDDING = "INSERT INTO rag_embeddings (chunk_id, model, dims, vector) VALUES (?, ?, ?, ?)"


def _insert_chunks(
    conn: sqlite3.Connection,
    document_id: str,
    chunks: Sequence[NewChunk],
    vectors: ChunkVectors | None,
) -> None:
    """Chunks (and, by trigger, their FTS rows) and their vectors, in the caller's
    transaction."""
    if vectors is not None and len(vectors.blobs) != len(chunks):
        raise ValueError(f"{len(vectors.blobs)} vectors for {len(chunks)} chunks")
    ids = []
    for c in chunks:
        cur = conn.execute(_INSERT_CHUNK, _rows.new_chunk(document_id, c))
        ids.append(cur.lastrowid)
    if vectors is not None:
        conn.executemany(
            _INSERT_EMBEDDING,
            [
                (i, vectors.model, vectors.dims, blob)
                for i, blob in zip(ids, vectors.blobs, strict=True)
            ],
        )


class DocumentsMixin(StorePart):
    # -- reads ---------------------------------------------------------------------------

    def get_document(self, document_id: str) -> Document:
        columns = _rows.document_columns(self.db.dialect)
        row = self._select_one(
            f"SELECT {columns} FROM rag_documents d WHERE d.id = ?", (document_id,)
        )
        if row is None:
            raise DocumentNotFound(document_id)
        return _rows.document(row)

    def find_document(
        self,
        *,
        workspace_id: str,
        document_id: str | None = None,
        source_path: str | None = None,
        content_hash: str | None = None,
    ) -> Document | None:
        query = find_document_sql(
            workspace_id=workspace_id,
            document_id=document_id,
            source_path=source_path,
            content_hash=content_hash,
            dialect=self.db.dialect,
        )
        if query is None:
            return None
        row = self._select_one(*query)
        return None if row is None else _rows.document(row)

    def find_documents(self, lookups: Sequence[Mapping[str, Any]]) -> list[Document | None]:
        # A few statements for the lot, in one snapshot: one per kind of key and workspace.
        wanted: dict[tuple[str, str | None], dict[str, list[int]]] = {}
        for i, lookup in enumerate(lookups):
            found = document_key(lookup)
            if found is not None:
                kind, workspace_id, value = found
                wanted.setdefault((kind, workspace_id), {}).setdefault(value, []).append(i)
        documents: list[Document | None] = [None] * len(lookups)
        with self.db.read() as conn:
            for (kind, workspace_id), where in wanted.items():
                values = list(where)
                for start in range(0, len(values), _BATCH):
                    sql, params = find_documents_sql(
                        kind, values[start : start + _BATCH], workspace_id, self.db.dialect
                    )
                    for row in conn.execute(sql, params).fetchall():
                        document = _rows.document(row)
                        value = _key_value(kind, document)
                        for i in where.get(value or "", ()):
                            if documents[i] is None:  # (oldest first)
                                documents[i] = document
        return documents

    def list_documents(
        self, *, workspace_id: str | None = None, session_id: str | None = None
    ) -> list[Document]:
        rows = self._select(
            *list_documents_sql(
                workspace_id=workspace_id, session_id=session_id, dialect=self.db.dialect
            )
        )
        return [_rows.document(row) for row in rows]

    def chunks_of(self, document_id: str) -> list[StoredChunk]:
        rows = self._select(
            "SELECT id, document_id, ordinal, content, section_title, token_count,"
            " char_start, char_end, page, content_hash, page_label FROM rag_chunks"
            " WHERE document_id = ? ORDER BY ordinal",
            (document_id,),
        )
        return [StoredChunk(*row) for row in rows]

    # -- writes --------------------------------------------------------------------------

    def insert_document(
        self,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None = None,
    ) -> None:
        with self.db.write() as conn:
            conn.execute(_INSERT_DOCUMENT, _document_params(document))
            self._insert_chunks(conn, document, chunks, vectors)

    def insert_documents(
        self,
        documents: Sequence[tuple[NewDocument, Sequence[NewChunk], ChunkVectors | None]],
    ) -> None:
        with self.db.write() as conn:
            self._insert_all(conn, documents)

    def _insert_all(
        self,
        conn: Any,
        documents: Sequence[tuple[NewDocument, Sequence[NewChunk], ChunkVectors | None]],
    ) -> None:
        """New documents, their chunks and vectors in three statements (the chunks
        numbered here, after the highest id, inside the caller's write transaction)."""
        for _, chunks, vectors in documents:
            if vectors is not None and len(vectors.blobs) != len(chunks):
                raise ValueError(f"{len(vectors.blobs)} vectors for {len(chunks)} chunks")
        self._insert_rows(conn, _INSERT_DOCUMENT, [_document_params(d) for d, _, _ in documents])
        last = conn.execute("SELECT coalesce(max(id), 0) FROM rag_chunks").fetchone()[0]
        rows: list[tuple[Any, ...]] = []
        embedded: list[tuple[int, str, int, bytes]] = []
        for document, chunks, vectors in documents:
            first = last + len(rows) + 1
            rows += [(first + n, *_rows.new_chunk(document.id, c)) for n, c in enumerate(chunks)]
            if vectors is not None:
                embedded += [
                    (first + n, vectors.model, vectors.dims, blob)
                    for n, blob in enumerate(vectors.blobs)
                ]
        self._insert_rows(conn, _INSERT_NUMBERED_CHUNK, rows)
        if embedded:
            conn.executemany(_INSERT_EMBEDDING, embedded)

    def replace_document(
        self,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None = None,
    ) -> None:
        with self.db.write() as conn:
            cur = conn.execute(_UPDATE_DOCUMENT, _document_params(document))
            if cur.rowcount == 0:
                raise DocumentNotFound(document.id)
            # Chunks go by cascade with their FTS rows (trigger) and embeddings (FK).
            conn.execute("DELETE FROM rag_chunks WHERE document_id = ?", (document.id,))
            self._insert_chunks(conn, document, chunks, vectors)

    def _insert_chunks(
        self,
        conn: Any,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None,
    ) -> None:
        """Write ``chunks`` (and their vectors) of ``document`` in the caller's
        transaction: the one step of a document write each backend does its own way."""
        _insert_chunks(conn, document.id, chunks, vectors)

    def delete_document(self, document_id: str) -> None:
        self._update_document("DELETE FROM rag_documents WHERE id = ?", (document_id,))

    def set_tags_and_status(
        self, document_id: str, tags: Tags | None, status: str, *, title: str | None = None
    ) -> None:
        t = tags or Tags()
        self._update_document(
            "UPDATE rag_documents SET source_type = ?, project_id = ?, domain = ?,"
            " version = ?, last_verified = ?, status = ?, title = coalesce(?, title)"
            " WHERE id = ?",
            (
                t.source_type,
                t.project_id,
                t.domain,
                t.version,
                t.last_verified,
                status,
                title,
                document_id,
            ),
        )

    def set_status(self, document_id: str, status: str) -> None:
        self._update_document(
            "UPDATE rag_documents SET status = ? WHERE id = ?", (status, document_id)
        )

    def _update_document(self, sql: str, params: Sequence[Any]) -> None:
        """Run one statement on one document (whose id is the last parameter); raise
        ``DocumentNotFound`` when it touched no row."""
        with self.db.write() as conn:
            if conn.execute(sql, params).rowcount == 0:
                raise DocumentNotFound(params[-1])


def document_key(lookup: Mapping[str, Any]) -> tuple[str, str | None, str] | None:
    """The key :meth:`~DocumentsMixin.find_document` finds a source's document by, as
    ``(kind, workspace or None, value)``: its id, else its source, else its content."""
    if lookup.get("document_id") is not None:
        return "id", None, lookup["document_id"]
    if lookup.get("source_path") is not None:
        return "source", lookup["workspace_id"], lookup["source_path"]
    if lookup.get("content_hash") is not None:
        return "content", lookup["workspace_id"], lookup["content_hash"]
    return None


def _key_value(kind: str, document: Document) -> str | None:
    if kind == "id":
        return document.id
    return document.source_path if kind == "source" else document.content_hash
