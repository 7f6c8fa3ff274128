"""The repository: every SQL statement tether runs lives in this module.

SQL is built apart from its execution (``lexical_search_sql`` returns text and parameters;
``search_lexical`` runs it), and the scope of a search is always part of that SQL.
Methods that write expect to run inside ``Database.write()``; they open one themselves
when called outside of it, so each call is still atomic on its own.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tether.errors import (
    DocumentNotFound,
    ScopeError,
    SessionNotFound,
    WorkspaceNotFound,
)
from tether.models import (
    GLOBAL_WORKSPACE,
    Document,
    Exclusions,
    Filters,
    Hit,
    Scope,
    Session,
    Tags,
    Workspace,
)
from tether.store.database import Database

# bm25 column weights for (content, section_title).
FTS_COLUMN_WEIGHTS = (1.0, 1.0)


def utcnow() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


@dataclass(frozen=True)
class ChunkVectors:
    """One vector per chunk of a document (same order), all from one model."""

    model: str
    dims: int
    blobs: Sequence[bytes]


@dataclass(frozen=True)
class VectorSnapshot:
    """``rows``: (chunk_id, dims, vector) ordered by chunk id; ``layout``: (chunk_id,
    document_id) in the order the vectors should be laid out in memory."""

    rows: list[tuple[int, int, bytes]]
    layout: list[tuple[int, str]]


@dataclass(frozen=True)
class NewDocument:
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


_DOCUMENT_COLUMNS = (
    "d.id, d.workspace_id, d.title, d.source_path, d.source_type, d.mime, d.content_hash,"
    " d.file_size, d.status, d.created_at, d.indexed_at, d.metadata,"
    " d.project_id, d.domain, d.version, d.last_verified, d.stale_at, d.chunking,"
    " (SELECT count(*) FROM rag_chunks c WHERE c.document_id = d.id) AS chunk_count,"
    " (SELECT group_concat(s.session_id, char(31)) FROM rag_document_sessions s"
    "   WHERE s.document_id = d.id) AS session_ids"
)


def _document(row: sqlite3.Row | tuple[Any, ...]) -> Document:
    (id_, ws, title, path, stype, mime, chash, size, status, created, indexed, meta) = row[:12]
    project, domain, version, verified, stale, chunking, n, sids = row[12:]
    tagged = any(v is not None for v in (stype, project, domain, version, verified))
    return Document(
        id=id_,
        workspace_id=ws,
        title=title,
        source_path=path,
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


def _document_params(document: NewDocument) -> dict[str, Any]:
    return {
        **{name: getattr(document, name) for name in NewDocument.__dataclass_fields__},
        "metadata": json.dumps(document.metadata, sort_keys=True),
        "now": utcnow(),
    }


def scope_sql(
    scope: Scope, filters: Filters | None = None, exclusions: Exclusions | None = None
) -> tuple[str, dict[str, Any]]:
    """The WHERE fragment (over ``c`` = rag_chunks, ``d`` = rag_documents) for a scope,
    its tag filters and the policy's exclusions. Values are always bound parameters."""
    params: dict[str, Any] = {"scope_id": scope.id}
    if scope.kind == "session":
        clauses = [
            "c.document_id IN (SELECT ds.document_id FROM rag_document_sessions ds"
            " WHERE ds.session_id = :scope_id)"
        ]
    else:  # workspace and global: GLOBAL is just the shared workspace.
        clauses = ["d.workspace_id = :scope_id"]
    if filters is not None:
        for column, values in (
            ("domain", filters.domains),
            ("project_id", filters.project_ids),
            ("source_type", filters.source_types),
        ):
            if values is None:
                continue
            names = []
            for i, value in enumerate(v for v in values if v is not None):
                params[f"f_{column}_{i}"] = value
                names.append(f":f_{column}_{i}")
            parts = [f"d.{column} IN ({', '.join(names)})"] if names else []
            if None in values:
                parts.append(f"d.{column} IS NULL")
            clauses.append("(" + " OR ".join(parts) + ")")
    if exclusions is not None:
        if exclusions.log_cutoff is not None:
            params["log_cutoff"] = exclusions.log_cutoff
            # NULL-safe throughout: an untagged document is never excluded by accident.
            clauses.append(
                "(d.source_type IS NOT 'log'"
                " OR coalesce(d.last_verified, d.indexed_at, d.created_at) >= :log_cutoff)"
            )
        if exclusions.unverified_urls:
            clauses.append(
                "(d.last_verified IS NOT NULL OR (d.source_type IS NOT 'link'"
                " AND lower(coalesce(d.source_path, '')) NOT LIKE 'http://%'"
                " AND lower(coalesce(d.source_path, '')) NOT LIKE 'https://%'))"
            )
    return " AND ".join(clauses), params


_HIT_COLUMNS = (
    "c.id, c.document_id, d.title, c.section_title, c.page, c.content, c.ordinal,"
    " c.char_start, c.char_end, d.source_path, d.workspace_id"
)


_REGISTRY_KEYS = (
    "source_path", "workspace_id", "document_id", "content_hash", "status", "retry_count",
    "last_seen_at", "last_indexed_at", "next_retry_at", "error",
)  # fmt: skip


def _hit(row: Sequence[Any], score: float) -> Hit:
    (chunk_id, doc_id, title, section, page, content, ordinal, start, end, path, ws) = row[:11]
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
        source_path=path,
        workspace_id=ws,
    )


def lexical_search_sql(
    scope: Scope,
    match: str,
    k: int,
    *,
    ids_only: bool = False,
    filters: Filters | None = None,
    exclusions: Exclusions | None = None,
) -> tuple[str, dict[str, Any]]:
    """SQL for an FTS5 bm25 search of ``match`` (already compiled, safe FTS5) inside ``scope``.

    Rows are the hit columns then the bm25 rank score (lower is better); with
    ``ids_only``, just the chunk id and that score (a deep candidate list is cheap)."""
    where, params = scope_sql(scope, filters, exclusions)
    w_content, w_section = (float(w) for w in FTS_COLUMN_WEIGHTS)
    columns = "c.id" if ids_only else _HIT_COLUMNS
    sql = f"""
        SELECT {columns},
               bm25(rag_chunks_fts, {w_content!r}, {w_section!r}) AS rank_score
        FROM rag_chunks_fts
        JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid
        JOIN rag_documents d ON d.id = c.document_id
        WHERE rag_chunks_fts MATCH :match
          AND d.status = 'active'
          AND {where}
        ORDER BY rank_score, c.id
        LIMIT :k
    """
    return sql, {**params, "match": match, "k": int(k)}


class Repository:
    """All reads and writes of the tether schema, on one :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- workspaces ---------------------------------------------------------------------

    def ensure_workspace(self, workspace_id: str, name: str | None = None) -> Workspace:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (workspace_id, name or workspace_id, utcnow()),
            )
            if name is not None:
                conn.execute("UPDATE workspaces SET name = ? WHERE id = ?", (name, workspace_id))
        return self.get_workspace(workspace_id)

    def get_workspace(self, workspace_id: str) -> Workspace:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT id, name, created_at FROM workspaces WHERE id = ?", (workspace_id,)
            ).fetchone()
        if row is None:
            raise WorkspaceNotFound(workspace_id)
        return Workspace(*row)

    def list_workspaces(self) -> list[Workspace]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT id, name, created_at FROM workspaces ORDER BY id")
            return [Workspace(*row) for row in rows]

    # -- sessions -----------------------------------------------------------------------

    def ensure_session(self, session_id: str, workspace_id: str) -> Session:
        """Create the session in ``workspace_id`` unless it exists; it must not be elsewhere."""
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT workspace_id FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                self.ensure_workspace(workspace_id)
                conn.execute(
                    "INSERT INTO sessions (id, workspace_id, created_at) VALUES (?, ?, ?)",
                    (session_id, workspace_id, utcnow()),
                )
            elif row[0] != workspace_id:
                raise ScopeError(
                    f"session {session_id!r} belongs to workspace {row[0]!r}, not {workspace_id!r}"
                )
        return self.get_session(session_id)

    def get_session(self, session_id: str) -> Session:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT id, workspace_id, created_at, closed_at FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return Session(*row)

    def find_session(self, session_id: str) -> Session | None:
        try:
            return self.get_session(session_id)
        except SessionNotFound:
            return None

    def scope_exists(self, scope: Scope) -> bool:
        """Whether the session or workspace a scope names exists (the global one always)."""
        table = {"session": "sessions", "workspace": "workspaces"}.get(scope.kind)
        if table is None:
            return True
        with self.db.read() as conn:
            row = conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (scope.id,)).fetchone()
        return row is not None

    def list_sessions(self, workspace_id: str | None = None) -> list[Session]:
        sql = "SELECT id, workspace_id, created_at, closed_at FROM sessions"
        params: tuple[Any, ...] = ()
        if workspace_id is not None:
            sql += " WHERE workspace_id = ?"
            params = (workspace_id,)
        with self.db.read() as conn:
            return [Session(*row) for row in conn.execute(sql + " ORDER BY created_at", params)]

    def close_session(self, session_id: str) -> tuple[Session, list[str]]:
        """Close a session and mark its ChatPDF documents stale: those imported into it
        (metadata ``origin = "chatpdf"``) that no other open session uses. Returns the
        session and the ids of the documents marked."""
        now = utcnow()
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET closed_at = coalesce(closed_at, ?) WHERE id = ?",
                (now, session_id),
            )
            if cur.rowcount == 0:
                raise SessionNotFound(session_id)
            rows = conn.execute(
                "UPDATE rag_documents SET stale_at = ? WHERE stale_at IS NULL"
                " AND json_extract(metadata, '$.origin') = 'chatpdf'"
                # A file of a watched library folder is the library's, not the chat's.
                " AND NOT EXISTS (SELECT 1 FROM rag_index_registry r"
                "   WHERE r.document_id = rag_documents.id)"
                " AND id IN (SELECT document_id FROM rag_document_sessions WHERE session_id = ?)"
                " AND NOT EXISTS (SELECT 1 FROM rag_document_sessions ds"
                "   JOIN sessions s ON s.id = ds.session_id"
                "   WHERE ds.document_id = rag_documents.id AND s.closed_at IS NULL)"
                " RETURNING id",
                (now, session_id),
            ).fetchall()
        return self.get_session(session_id), sorted(r[0] for r in rows)

    def stale_documents(self, cutoff: str) -> list[Document]:
        """Documents marked stale at or before ``cutoff`` (ISO time), oldest first."""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM rag_documents d"
                " WHERE d.stale_at IS NOT NULL AND d.stale_at <= ? ORDER BY d.stale_at, d.id",
                (cutoff,),
            ).fetchall()
        return [_document(row) for row in rows]

    # -- attachments --------------------------------------------------------------------

    def attach_document_to_session(self, document_id: str, session_id: str) -> bool:
        """Attach; True if it was not attached before. A session sees its own workspace's
        documents and the global library, nothing from other workspaces."""
        with self.db.write() as conn:
            document = self.get_document(document_id)
            session = self.get_session(session_id)
            if document.workspace_id not in (session.workspace_id, GLOBAL_WORKSPACE):
                raise ScopeError(
                    f"document {document_id!r} is in workspace {document.workspace_id!r};"
                    f" session {session_id!r} is in {session.workspace_id!r}. A session can"
                    " only attach documents of its own workspace or of the global library."
                )
            cur = conn.execute(
                "INSERT INTO rag_document_sessions (document_id, session_id, created_at)"
                " VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (document_id, session_id, utcnow()),
            )
            if session.closed_at is None:  # in use again: no longer stale
                conn.execute(
                    "UPDATE rag_documents SET stale_at = NULL WHERE id = ?", (document_id,)
                )
            return cur.rowcount > 0

    def detach_document_from_session(self, document_id: str, session_id: str) -> bool:
        """Detach; True if it was attached. The document itself stays."""
        with self.db.write() as conn:
            self.get_document(document_id)
            self.get_session(session_id)
            cur = conn.execute(
                "DELETE FROM rag_document_sessions WHERE document_id = ? AND session_id = ?",
                (document_id, session_id),
            )
            return cur.rowcount > 0

    # -- documents ----------------------------------------------------------------------

    def get_document(self, document_id: str) -> Document:
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM rag_documents d WHERE d.id = ?", (document_id,)
            ).fetchone()
        if row is None:
            raise DocumentNotFound(document_id)
        return _document(row)

    def find_document(
        self,
        *,
        workspace_id: str,
        document_id: str | None = None,
        source_path: str | None = None,
        content_hash: str | None = None,
    ) -> Document | None:
        """The document that a new source would update: by id, else by path, else (for
        text without a path) by identical content in the same workspace."""
        if document_id is not None:
            where, params = "d.id = ?", (document_id,)
        elif source_path is not None:
            where, params = "d.workspace_id = ? AND d.source_path = ?", (workspace_id, source_path)
        elif content_hash is not None:
            where = "d.workspace_id = ? AND d.source_path IS NULL AND d.content_hash = ?"
            params = (workspace_id, content_hash)
        else:
            return None
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM rag_documents d WHERE {where}"
                " ORDER BY d.created_at LIMIT 1",
                params,
            ).fetchone()
        return None if row is None else _document(row)

    def list_documents(
        self, *, workspace_id: str | None = None, session_id: str | None = None
    ) -> list[Document]:
        clauses, params = [], []
        if workspace_id is not None:
            clauses.append("d.workspace_id = ?")
            params.append(workspace_id)
        if session_id is not None:
            clauses.append(
                "d.id IN (SELECT document_id FROM rag_document_sessions WHERE session_id = ?)"
            )
            params.append(session_id)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM rag_documents d {where}"
                " ORDER BY d.workspace_id, d.title, d.id",
                params,
            ).fetchall()
        return [_document(row) for row in rows]

    def insert_document(
        self,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None = None,
    ) -> None:
        """Store a new document with its chunks (and, by trigger, their FTS rows) and, when
        given, every chunk's vector: all in one transaction."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO rag_documents (id, workspace_id, title, source_path, source_type,"
                " mime, content_hash, file_size, metadata, created_at, indexed_at,"
                " project_id, domain, version, last_verified, status, chunking)"
                " VALUES (:id, :workspace_id, :title, :source_path, :source_type, :mime,"
                " :content_hash, :file_size, :metadata, :now, :now,"
                " :project_id, :domain, :version, :last_verified, :status, :chunking)",
                _document_params(document),
            )
            self._insert_chunks(conn, document.id, chunks, vectors)

    def replace_document(
        self,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None = None,
    ) -> None:
        """Swap a document's content, chunks and vectors in one transaction: readers see
        the old version or the new one, never a mix."""
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE rag_documents SET title = :title, source_path = :source_path,"
                " source_type = :source_type, mime = :mime, content_hash = :content_hash,"
                " file_size = :file_size, metadata = :metadata, indexed_at = :now,"
                " project_id = :project_id, domain = :domain, version = :version,"
                " last_verified = :last_verified, status = :status, chunking = :chunking"
                " WHERE id = :id",
                _document_params(document),
            )
            if cur.rowcount == 0:
                raise DocumentNotFound(document.id)
            conn.execute("DELETE FROM rag_chunks WHERE document_id = ?", (document.id,))
            self._insert_chunks(conn, document.id, chunks, vectors)

    def _insert_chunks(
        self,
        conn: sqlite3.Connection,
        document_id: str,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None,
    ) -> None:
        if vectors is not None and len(vectors.blobs) != len(chunks):
            raise ValueError(f"{len(vectors.blobs)} vectors for {len(chunks)} chunks")
        ids = []
        for c in chunks:
            cur = conn.execute(
                "INSERT INTO rag_chunks (document_id, ordinal, content, section_title,"
                " token_count, char_start, char_end, page, content_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (document_id, c.ordinal, c.content, c.section_title, c.token_count,
                 c.char_start, c.char_end, c.page, c.content_hash),
            )  # fmt: skip
            ids.append(cur.lastrowid)
        if vectors is not None:
            conn.executemany(
                "INSERT INTO rag_embeddings (chunk_id, model, dims, vector) VALUES (?, ?, ?, ?)",
                [
                    (i, vectors.model, vectors.dims, blob)
                    for i, blob in zip(ids, vectors.blobs, strict=True)
                ],
            )

    def delete_document(self, document_id: str) -> None:
        """Delete a document; its chunks, FTS rows, embeddings and attachments go with it."""
        with self.db.write() as conn:
            cur = conn.execute("DELETE FROM rag_documents WHERE id = ?", (document_id,))
            if cur.rowcount == 0:
                raise DocumentNotFound(document_id)

    def chunks_of(self, document_id: str) -> list[StoredChunk]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, document_id, ordinal, content, section_title, token_count,"
                " char_start, char_end, page, content_hash FROM rag_chunks"
                " WHERE document_id = ? ORDER BY ordinal",
                (document_id,),
            ).fetchall()
        return [StoredChunk(*row) for row in rows]

    # -- search -------------------------------------------------------------------------

    def search_lexical(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[Hit]:
        sql, params = lexical_search_sql(scope, match, k, filters=filters, exclusions=exclusions)
        with self.db.read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [_hit(row, -row[11]) for row in rows]

    def search_lexical_scores(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, bm25)`` of the top ``k`` matches in ``scope``, best (highest) first:
        the same ranking as :meth:`search_lexical`, without reading the chunks' text."""
        sql, params = lexical_search_sql(
            scope, match, k, ids_only=True, filters=filters, exclusions=exclusions
        )
        with self.db.read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [(row[0], -row[1]) for row in rows]

    def scope_document_ids(
        self,
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[str]:
        """The active documents a scope may see: the same predicate as every search."""
        where, params = scope_sql(scope, filters, exclusions)
        where = where.replace("c.document_id", "d.id")
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT d.id FROM rag_documents d WHERE d.status = 'active' AND {where}", params
            ).fetchall()
        return [r[0] for r in rows]

    def set_tags_and_status(
        self, document_id: str, tags: Tags | None, status: str, *, title: str | None = None
    ) -> None:
        """Change a document's tags and status (and title, when given) in place: its
        content, chunks and vectors are unchanged."""
        t = tags or Tags()
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE rag_documents SET source_type = ?, project_id = ?, domain = ?,"
                " version = ?, last_verified = ?, status = ?, title = coalesce(?, title)"
                " WHERE id = ?",
                (t.source_type, t.project_id, t.domain, t.version, t.last_verified, status,
                 title, document_id),
            )  # fmt: skip
            if cur.rowcount == 0:
                raise DocumentNotFound(document_id)

    def set_status(self, document_id: str, status: str) -> None:
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE rag_documents SET status = ? WHERE id = ?", (status, document_id)
            )
            if cur.rowcount == 0:
                raise DocumentNotFound(document_id)

    def log_retrieval(self, entry: dict[str, Any]) -> None:
        """Append one audit row. ``entry`` holds ids, the sanitized query, scope, filters
        and the outcome: never chunk text, vectors or scores (the columns cannot hold
        them: the row is built here from named fields only)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO rag_retrieval_log (retrieval_id, created_at, query, scope, filters,"
                " chunk_ids, document_ids, outcome, reason)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry["retrieval_id"],
                    entry["created_at"],
                    entry["query"],
                    json.dumps(entry["scope"], sort_keys=True),
                    json.dumps(entry["filters"], sort_keys=True),
                    json.dumps(entry["chunk_ids"]),
                    json.dumps(entry["document_ids"]),
                    entry["outcome"],
                    entry.get("reason"),
                ),
            )

    def retrieval_log(self, limit: int = 50, outcome: str | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` audit rows, newest first."""
        where, params = ("WHERE outcome = ?", [outcome]) if outcome else ("", [])
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT retrieval_id, created_at, query, scope, filters, chunk_ids,"
                f" document_ids, outcome, reason FROM rag_retrieval_log {where}"
                " ORDER BY id DESC LIMIT ?",
                [*params, limit],
            ).fetchall()
        return [
            {
                "retrieval_id": r[0],
                "created_at": r[1],
                "query": r[2],
                "scope": json.loads(r[3]),
                "filters": json.loads(r[4]),
                "chunk_ids": json.loads(r[5]),
                "document_ids": json.loads(r[6]),
                "outcome": r[7],
                "reason": r[8],
            }
            for r in rows
        ]

    # -- the library registry -----------------------------------------------------------

    def registry(self, under: str | None = None) -> list[dict[str, Any]]:
        """Registry rows (for paths under the folder ``under``, if given), by path."""
        sql = (
            "SELECT source_path, workspace_id, document_id, content_hash, status, retry_count,"
            " last_seen_at, last_indexed_at, next_retry_at, error FROM rag_index_registry"
        )
        params: list[Any] = []
        if under is not None:
            sql += " WHERE substr(source_path, 1, ?) = ?"
            prefix = under.rstrip("/") + "/"
            params = [len(prefix), prefix]
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY source_path", params).fetchall()
        return [dict(zip(_REGISTRY_KEYS, row, strict=True)) for row in rows]

    def upsert_registry(self, source_path: str, **fields: Any) -> None:
        """Create or update the registry row of ``source_path`` with ``fields``."""
        allowed = {"workspace_id", "document_id", "content_hash", "status", "retry_count",
                   "last_seen_at", "last_indexed_at", "next_retry_at", "error"}  # fmt: skip
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown registry fields {sorted(unknown)}")
        updates = ", ".join(f"{c} = excluded.{c}" for c in fields) or "status = status"
        inserted = {"status": "queued", **fields}  # a new row needs a status
        columns = ["source_path", *inserted]
        with self.db.write() as conn:
            conn.execute(
                f"INSERT INTO rag_index_registry ({', '.join(columns)})"
                f" VALUES ({', '.join('?' * len(columns))})"
                f" ON CONFLICT (source_path) DO UPDATE SET {updates}",
                [source_path, *inserted.values()],
            )

    def delete_registry(self, source_path: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM rag_index_registry WHERE source_path = ?", (source_path,))

    def rename_source(self, old_path: str, new_path: str, document_id: str | None) -> None:
        """A file moved: its document and registry row follow it (nothing is re-indexed)."""
        with self.db.write() as conn:
            if document_id is not None:
                conn.execute(
                    "UPDATE rag_documents SET source_path = ? WHERE id = ?", (new_path, document_id)
                )
            conn.execute("DELETE FROM rag_index_registry WHERE source_path = ?", (new_path,))
            conn.execute(
                "UPDATE rag_index_registry SET source_path = ? WHERE source_path = ?",
                (new_path, old_path),
            )

    def candidate_rows(
        self, chunk_ids: Sequence[int], session_id: str | None = None
    ) -> dict[int, tuple[Hit, int | None, dict[str, Any], str | None, str | None]]:
        """For reranking and context building: per chunk id, its hit (score 0), stored
        token count, document metadata, when its document joined ``session_id`` (or,
        without a session, when it was indexed), and its source type. Ids that no longer
        exist are absent."""
        found: dict[int, tuple[Hit, int | None, dict[str, Any], str | None, str | None]] = {}
        recency = "ds.created_at" if session_id is not None else "d.indexed_at"
        join = (
            " LEFT JOIN rag_document_sessions ds ON ds.document_id = d.id AND ds.session_id = ?"
            if session_id is not None
            else ""
        )
        with self.db.read() as conn:
            for i in range(0, len(chunk_ids), 500):
                part = list(chunk_ids[i : i + 500])
                params: list[Any] = [session_id] if session_id is not None else []
                rows = conn.execute(
                    f"SELECT {_HIT_COLUMNS}, c.token_count, d.metadata, {recency}, d.source_type"
                    " FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id"
                    f"{join} WHERE c.id IN ({','.join('?' * len(part))})",
                    [*params, *part],
                ).fetchall()
                for row in rows:
                    found[row[0]] = (_hit(row, 0.0), row[11], json.loads(row[12]), row[13], row[14])
        return found

    def hits_for_chunks(self, chunk_ids: Sequence[int]) -> dict[int, Hit]:
        """Hits (score 0) for chunk ids, keyed by id; ids that no longer exist are absent."""
        found: dict[int, Hit] = {}
        with self.db.read() as conn:
            for i in range(0, len(chunk_ids), 500):
                part = list(chunk_ids[i : i + 500])
                rows = conn.execute(
                    f"SELECT {_HIT_COLUMNS} FROM rag_chunks c"
                    " JOIN rag_documents d ON d.id = c.document_id"
                    f" WHERE c.id IN ({','.join('?' * len(part))})",
                    part,
                ).fetchall()
                found.update((row[0], _hit(row, 0.0)) for row in rows)
        return found

    # -- embeddings ---------------------------------------------------------------------

    def vectors_for_hashes(self, model: str, hashes: Iterable[str]) -> dict[str, tuple[int, bytes]]:
        """Stored (dims, vector) for chunk content hashes already embedded with ``model``."""
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, tuple[int, bytes]] = {}
        with self.db.read() as conn:
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                rows = conn.execute(
                    "SELECT c.content_hash, e.dims, e.vector FROM rag_chunks c"
                    " JOIN rag_embeddings e ON e.chunk_id = c.id AND e.model = ?"
                    f" WHERE c.content_hash IN ({','.join('?' * len(part))})",
                    [model, *part],
                ).fetchall()
                found.update((h, (dims, blob)) for h, dims, blob in rows)
        return found

    def insert_embeddings(self, model: str, rows: Sequence[tuple[int, int, bytes]]) -> None:
        """Store ``(chunk_id, dims, vector)`` rows for ``model`` (replacing same-key rows)."""
        with self.db.write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO rag_embeddings (chunk_id, model, dims, vector)"
                " VALUES (?, ?, ?, ?)",
                [(chunk_id, model, dims, blob) for chunk_id, dims, blob in rows],
            )

    def documents_missing_embeddings(self, model: str) -> list[str]:
        """Documents with at least one chunk that has no vector for ``model``."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT c.document_id FROM rag_chunks c"
                " LEFT JOIN rag_embeddings e ON e.chunk_id = c.id AND e.model = ?"
                " WHERE e.chunk_id IS NULL ORDER BY c.document_id",
                (model,),
            ).fetchall()
        return [r[0] for r in rows]

    def embedding_counts(self) -> dict[str, int]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT model, count(*) FROM rag_embeddings GROUP BY model")
            return dict(rows.fetchall())

    def load_vectors(self, model: str) -> VectorSnapshot:
        """Every vector of ``model`` with its chunk id, and the order in which to lay them
        out (by workspace, then document), read in one consistent snapshot.

        The vectors are read in key order with no join or sort (sorting 1.5 kB rows is
        what made a naive query slow); only the narrow (chunk, document) rows are sorted.
        """
        with self.db.read() as conn:
            count = conn.execute(
                "SELECT count(*) FROM rag_embeddings WHERE model = ?", (model,)
            ).fetchone()[0]
            cursor = conn.execute(
                "SELECT chunk_id, dims, vector FROM rag_embeddings WHERE model = ?"
                " ORDER BY chunk_id",
                (model,),
            )
            rows: list[tuple[int, int, bytes]] = []
            while batch := cursor.fetchmany(20_000):
                rows.extend(batch)
            order = conn.execute(
                "SELECT c.id, c.document_id FROM rag_chunks c"
                " JOIN rag_documents d ON d.id = c.document_id"
                " WHERE c.id IN (SELECT chunk_id FROM rag_embeddings WHERE model = ?)"
                " ORDER BY d.workspace_id, c.document_id, c.id",
                (model,),
            ).fetchall()
        assert len(rows) == count
        return VectorSnapshot(rows=rows, layout=order)

    def change_counters(self) -> dict[str, int]:
        """Counters bumped by triggers on every change of embeddings and of document scopes."""
        with self.db.read() as conn:
            return dict(conn.execute("SELECT key, value FROM rag_state").fetchall())

    # -- maintenance --------------------------------------------------------------------

    def fts_integrity_check(self) -> None:
        """Raise ``sqlite3.DatabaseError`` unless the FTS index matches rag_chunks exactly
        (FTS5's integrity check in its content-comparing form, rank = 1)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO rag_chunks_fts (rag_chunks_fts, rank) VALUES ('integrity-check', 1)"
            )

    def counts(self) -> dict[str, int]:
        tables = (
            "workspaces",
            "sessions",
            "rag_documents",
            "rag_document_sessions",
            "rag_chunks",
            "rag_embeddings",
        )
        with self.db.read() as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
