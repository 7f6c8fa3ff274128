"""The PostgreSQL store: :class:`~tether.store.Store` over one PostgreSQL database.

Its parts are the SQLite store's mixins wherever their SQL is also PostgreSQL's (run
through :class:`~tether.store.postgres.database.PgConnection`), and the methods below
where it is not: chunk and vector writes (generated ids, a ``tsvector`` per chunk, pgvector
values), the vector reads, and the scoped searches (:mod:`tether.store.postgres.search`).
The scope of every read is the same predicate as SQLite's
(:func:`~tether.store.sql.scope_sql`), in the statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tether.models import Exclusions, Filters, Scope, Tags
from tether.store import _rows
from tether.store._audit import AuditMixin
from tether.store._documents import _INSERT_DOCUMENT, DocumentsMixin, _document_params
from tether.store._embeddings import (
    EmbeddingsMixin,
    changes_since,
    delta_snapshot,
    newest_change,
)
from tether.store._keys import KeysMixin
from tether.store._registry import RegistryMixin
from tether.store._sessions import SessionsMixin
from tether.store.base import Store
from tether.store.dialect import POSTGRES
from tether.store.postgres.database import PgConnection, PgDatabase
from tether.store.postgres.schema import ensure_vector_index
from tether.store.postgres.search import PgSearch, PgVectors
from tether.store.postgres.terms import index_text, index_under_titles
from tether.store.records import ChunkVectors, NewChunk, NewDocument, VectorSnapshot
from tether.store.sql import scope_sql

_INSERT_CHUNK = (
    "INSERT INTO rag_chunks (document_id, ordinal, content, section_title,"
    " token_count, char_start, char_end, page, content_hash, page_label, terms, tsv)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('tether', %s))"
    " RETURNING id"
)
_UPSERT_EMBEDDING = (
    "INSERT INTO rag_embeddings (chunk_id, model, dims, embedding) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (model, chunk_id) DO UPDATE"
    " SET dims = excluded.dims, embedding = excluded.embedding"
)


def _vector(blob: bytes, dims: int) -> np.ndarray:
    if len(blob) != 4 * dims:
        raise ValueError(f"a vector of {len(blob)} bytes is not {dims} float32 dims")
    return np.frombuffer(blob, dtype="<f4")


def _blob(value: Any) -> bytes:
    """A pgvector value (pgvector's ``Vector``, or an array) as the float32 bytes the
    store interface speaks."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype="<f4").tobytes()


def _insert_vectors(conn: PgConnection, model: str, rows: Sequence[tuple[int, int, bytes]]) -> None:
    for dims in sorted({dims for _, dims, _ in rows}):
        ensure_vector_index(conn, model, dims)
    with conn.raw.cursor() as cur:
        cur.executemany(
            _UPSERT_EMBEDDING,
            [(chunk_id, model, dims, _vector(blob, dims)) for chunk_id, dims, blob in rows],
        )


def _insert_chunks(
    conn: PgConnection,
    document: NewDocument,
    chunks: Sequence[NewChunk],
    vectors: ChunkVectors | None,
) -> None:
    if vectors is not None and len(vectors.blobs) != len(chunks):
        raise ValueError(f"{len(vectors.blobs)} vectors for {len(chunks)} chunks")
    if not chunks:
        return
    rows = []
    for c in chunks:
        terms, text = index_text(c.content, c.section_title or document.title)
        rows.append((*_rows.new_chunk(document.id, c), terms, text))
    ids: list[int] = []
    with conn.raw.cursor() as cur:
        cur.executemany(_INSERT_CHUNK, rows, returning=True)
        while True:
            ids.append(cur.fetchone()[0])
            if not cur.nextset():
                break
    if vectors is not None:
        _insert_vectors(
            conn,
            vectors.model,
            [(i, vectors.dims, blob) for i, blob in zip(ids, vectors.blobs, strict=True)],
        )


class PostgresStore(
    PgSearch,
    SessionsMixin,
    DocumentsMixin,
    EmbeddingsMixin,
    RegistryMixin,
    AuditMixin,
    KeysMixin,
    Store,
):
    """All reads and writes of the tether schema, in one PostgreSQL database."""

    db: PgDatabase

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._scope_shares: dict[tuple[Any, ...], tuple[int, float, int]] = {}
        self._lexeme_cache: dict[str, tuple[str, ...]] = {}

    @classmethod
    def connect(cls, url: str, *, language: str | None = None) -> PostgresStore:
        """The store in the database at ``url`` (created or migrated as needed; a new
        one made for ``language``, an existing one checked against it: see
        :func:`~tether.store.open_store`)."""
        return cls(PgDatabase(url, language=language))

    def __repr__(self) -> str:
        return f"PostgresStore({self.location!r})"

    # -- documents -----------------------------------------------------------------------

    def _insert_chunks(
        self,
        conn: PgConnection,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None,
    ) -> None:
        _insert_chunks(conn, document, chunks, vectors)

    def _insert_all(
        self,
        conn: PgConnection,
        documents: Sequence[tuple[NewDocument, Sequence[NewChunk], ChunkVectors | None]],
    ) -> None:
        for document, chunks, vectors in documents:
            conn.execute(_INSERT_DOCUMENT, _document_params(document))
            _insert_chunks(conn, document, chunks, vectors)

    def set_tags_and_status(
        self, document_id: str, tags: Tags | None, status: str, *, title: str | None = None
    ) -> None:
        """As every store does; a new title also re-indexes the chunks indexed under it
        (those without a section title: see :func:`index_under_titles`)."""
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT title FROM rag_documents WHERE id = ?", (document_id,)
            ).fetchone()
            super().set_tags_and_status(document_id, tags, status, title=title)
            if row is not None and title is not None and title != row[0]:
                index_under_titles(conn.raw, "c.document_id = %s", (document_id,))

    # -- vectors -------------------------------------------------------------------------

    def vectors_for_hashes(self, model: str, hashes: Iterable[str]) -> dict[str, tuple[int, bytes]]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = self._select(
            "SELECT c.content_hash, e.dims, e.embedding FROM rag_chunks c"
            " JOIN rag_embeddings e ON e.chunk_id = c.id AND e.model = :model"
            " WHERE c.content_hash = ANY(:hashes)",
            {"model": model, "hashes": wanted},
        )
        return {content_hash: (dims, _blob(vector)) for content_hash, dims, vector in rows}

    def insert_embeddings(self, model: str, rows: Sequence[tuple[int, int, bytes]]) -> None:
        if not rows:
            return
        with self.db.write() as conn:
            _insert_vectors(conn, model, rows)

    def load_vectors(self, model: str) -> VectorSnapshot:
        with self.db.read() as conn:
            cursor = conn.execute(
                "SELECT chunk_id, dims, embedding FROM rag_embeddings WHERE model = ?"
                " ORDER BY chunk_id",
                (model,),
            )
            rows: list[tuple[int, int, bytes]] = []
            while batch := cursor.fetchmany(20_000):
                rows.extend((chunk_id, dims, _blob(v)) for chunk_id, dims, v in batch)
            order = conn.execute(
                "SELECT c.id, c.document_id FROM rag_chunks c"
                " JOIN rag_documents d ON d.id = c.document_id"
                " JOIN rag_embeddings e ON e.chunk_id = c.id AND e.model = ?"
                " ORDER BY d.workspace_id, c.document_id, c.id",
                (model,),
            ).fetchall()
            seq = newest_change(conn)
        return VectorSnapshot(rows=rows, layout=[tuple(r) for r in order], seq=seq)

    def vector_delta(self, model: str, since: int, limit: int) -> VectorSnapshot | None:
        with self.db.read() as conn:
            changes = changes_since(conn, since, limit, vectors=True)
            if changes is None:
                return None
            seq, changed = changes
            found = conn.execute(
                "SELECT d.workspace_id, c.document_id, c.id, e.dims, e.embedding"
                " FROM rag_documents d JOIN rag_chunks c ON c.document_id = d.id"
                " JOIN rag_embeddings e ON e.model = :model AND e.chunk_id = c.id"
                " WHERE d.id = ANY(:changed)",
                {"model": model, "changed": changed},
            ).fetchall()
        return delta_snapshot(found, seq, changed, _blob)

    def change_counters(self) -> dict[str, int]:
        rows = self._select(
            "SELECT key, value FROM rag_state WHERE key IN ('embeddings', 'documents')"
        )
        return dict(rows)

    def native_vectors(self, model: str) -> PgVectors:
        return PgVectors(self, model)

    # -- scoped reads that SQLite writes with json_each ----------------------------------

    def scope_document_ids(
        self,
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
        among: Sequence[str] | None = None,
    ) -> list[str]:
        where, params = scope_sql(
            scope, filters, exclusions, document_column="d.id", dialect=POSTGRES
        )
        sql = f"SELECT d.id FROM rag_documents d WHERE {where}"
        if among is not None:
            sql += " AND d.id = ANY(:among)"
            params["among"] = list(among)
        return [row[0] for row in self._select(sql, params)]
