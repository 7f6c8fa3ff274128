"""The store: the backend interface (:class:`Store`), its typed records, the SQL builders,
and the SQLite backend (schema, numbered migrations, connections, all the SQL)."""

from tether.store.base import Store
from tether.store.database import Database, migrate
from tether.store.migrations import LATEST_VERSION, MIGRATIONS
from tether.store.records import (
    AuditEntry,
    CandidateRow,
    ChunkVectors,
    NewChunk,
    NewDocument,
    RegistryEntry,
    StoredChunk,
    VectorSnapshot,
    utcnow,
)
from tether.store.sql import (
    FTS_COLUMN_WEIGHTS,
    candidate_rows_sql,
    document_chunks_sql,
    find_document_sql,
    hits_sql,
    lexical_search_sql,
    list_documents_sql,
    list_sessions_sql,
    registry_sql,
    retrieval_log_sql,
    scope_documents_sql,
    scope_sql,
    upsert_registry_sql,
    vectors_for_hashes_sql,
)
from tether.store.sqlite import SQLiteStore

__all__ = [
    "FTS_COLUMN_WEIGHTS",
    "LATEST_VERSION",
    "MIGRATIONS",
    "AuditEntry",
    "CandidateRow",
    "ChunkVectors",
    "Database",
    "NewChunk",
    "NewDocument",
    "RegistryEntry",
    "SQLiteStore",
    "Store",
    "StoredChunk",
    "VectorSnapshot",
    "candidate_rows_sql",
    "document_chunks_sql",
    "find_document_sql",
    "hits_sql",
    "lexical_search_sql",
    "list_documents_sql",
    "list_sessions_sql",
    "migrate",
    "registry_sql",
    "retrieval_log_sql",
    "scope_documents_sql",
    "scope_sql",
    "upsert_registry_sql",
    "utcnow",
    "vectors_for_hashes_sql",
]
