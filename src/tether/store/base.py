"""The backend interface: what tether asks of a store, and what a store promises.

:class:`Store` is written against the records of :mod:`tether.store.records` and the
models of :mod:`tether.models`, one abstract class per role (:class:`Documents`,
:class:`ScopedSearch`, :class:`Embeddings`, ...). Its conformance suite ships in
:mod:`tether.testing.store`, a test class per role; ``tests/store/test_store_contract.py``
runs it against every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # numpy is not loaded by a loading worker, which imports the store
    import numpy as np

from tether.models import (
    Document,
    Exclusions,
    Filters,
    Hit,
    Scope,
    Session,
    Tags,
    Workspace,
)
from tether.store.dialect import Dialect
from tether.store.records import (
    ApiKey,
    AuditEntry,
    CandidateRow,
    ChunkVectors,
    NewChunk,
    NewDocument,
    RegistryEntry,
    StoredChunk,
    TermStatistics,
    VectorSnapshot,
)


class Connection(Protocol):
    """What a backend's parts write their SQL against: SQLite's ``sqlite3.Connection``,
    or PostgreSQL's connection, which reads the same SQL in its own dialect."""

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> Any: ...

    @property
    def in_transaction(self) -> bool: ...


class Database(Protocol):
    """One backend's database: snapshots to read in, transactions to write in (nested:
    a savepoint), and its lifetime. Both backends implement it
    (:class:`~tether.store.sqlite.SQLiteDatabase`,
    :class:`~tether.store.postgres.database.PgDatabase`); the parts every store shares
    are written over it."""

    #: Where the data lives, for messages (a path, ``:memory:``, a URL without password).
    path: str
    #: Whether connections may be used from several threads (each thread its own).
    cross_thread: bool
    #: How its SQL spells what the dialects spell differently.
    dialect: Dialect
    #: The language of its lexical side, as the store records it (once opened).
    language: str | None

    def read(self) -> AbstractContextManager[Any]: ...

    def write(self) -> AbstractContextManager[Any]: ...

    def thread_in_transaction(self) -> bool: ...

    def schema_version(self) -> int: ...

    def close(self) -> None: ...


class NativeVectors(Protocol):
    """A vector search a backend runs itself (PostgreSQL's pgvector), in place of the
    in-memory :class:`~tether.retrieve.vector.VectorIndex`: the same calls."""

    @property
    def loaded(self) -> bool: ...

    def load(self) -> int: ...

    def search(
        self,
        scope: Scope,
        query: np.ndarray,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]: ...

    def cosines(self, query: np.ndarray, chunk_ids: list[int]) -> dict[int, float]: ...


class StoreLifetime(ABC):
    """Transactions, where the data lives, and closing: what every role shares."""

    @abstractmethod
    def write(self) -> AbstractContextManager[None]:
        """A write transaction: every store write inside the block commits together when
        it ends, or none does if it raises. Nested, it is a savepoint: the inner block's
        failure undoes only the inner block (and still raises)."""

    @property
    @abstractmethod
    def cross_thread(self) -> bool:
        """Whether the store may be used from threads other than the one that made it."""

    @property
    def in_transaction(self) -> bool:
        """Whether the calling thread is inside a transaction of this store: a search then
        reads on this thread alone, inside it. A backend that cannot tell says True."""
        return True

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the data lives, for messages and ``repr`` (a path, ``:memory:``, a DSN
        without its password)."""

    @property
    @abstractmethod
    def language(self) -> str:
        """The language the store was made for (``rag.language``): how its full-text
        index stems words, and what a query's terms are stemmed as."""

    @abstractmethod
    def close(self) -> None:
        """Release every connection; the store is not used after this."""


class Workspaces(ABC):
    """Workspaces: the ``GLOBAL`` library and the ones documents are added to."""

    @abstractmethod
    def ensure_workspace(self, workspace_id: str, name: str | None = None) -> Workspace:
        """Create the workspace unless it exists (its name defaults to its id); a
        ``name`` given renames an existing one. Returns it."""

    @abstractmethod
    def get_workspace(self, workspace_id: str) -> Workspace:
        """The workspace; raises ``WorkspaceNotFound``."""

    @abstractmethod
    def list_workspaces(self) -> list[Workspace]:
        """Every workspace (``GLOBAL`` included), by id."""


class Sessions(ABC):
    """Chat sessions of a workspace, and the documents attached to them."""

    @abstractmethod
    def ensure_session(self, session_id: str, workspace_id: str) -> Session:
        """Create the session in ``workspace_id`` (creating the workspace too) unless it
        exists. A session exists in one workspace only: asking for it in another raises
        ``ScopeError``."""

    @abstractmethod
    def get_session(self, session_id: str) -> Session:
        """The session; raises ``SessionNotFound``."""

    @abstractmethod
    def find_session(self, session_id: str) -> Session | None:
        """The session, or None."""

    @abstractmethod
    def scope_exists(self, scope: Scope) -> bool:
        """Whether the session or workspace a scope names exists (the global one always)."""

    @abstractmethod
    def list_sessions(self, workspace_id: str | None = None) -> list[Session]:
        """Sessions (of ``workspace_id``, if given), oldest first."""

    @abstractmethod
    def close_session(self, session_id: str) -> tuple[Session, list[str]]:
        """Close a session (closing it again keeps the first time) and mark stale the
        documents imported into it (metadata ``origin = "chatpdf"``) that no open session
        uses and no library registry row owns. Returns the session and the sorted ids of
        the documents marked now. Raises ``SessionNotFound``."""

    @abstractmethod
    def stale_documents(self, cutoff: str) -> list[Document]:
        """Documents marked stale at or before ``cutoff`` (ISO time), oldest first."""

    # -- attachments ---------------------------------------------------------------------

    @abstractmethod
    def attach_document_to_session(self, document_id: str, session_id: str) -> bool:
        """Attach; True if it was not attached before. Only a document of the session's
        own workspace or of ``GLOBAL`` may be attached (else ``ScopeError``). Attaching
        to an open session clears the document's stale mark. Raises
        ``DocumentNotFound`` / ``SessionNotFound``."""

    def attach_documents_to_session(self, document_ids: Sequence[str], session_id: str) -> int:
        """:meth:`attach_document_to_session` for each of ``document_ids``, all or none
        (one transaction); how many were not attached before. A store may do it in a few
        statements."""
        with self.write():
            return sum(self.attach_document_to_session(d, session_id) for d in document_ids)

    @abstractmethod
    def detach_document_from_session(self, document_id: str, session_id: str) -> bool:
        """Detach; True if it was attached. The document stays. Raises
        ``DocumentNotFound`` / ``SessionNotFound``."""


class Documents(ABC):
    """Documents and their chunks, written whole (see :class:`Store`'s atomicity)."""

    @abstractmethod
    def get_document(self, document_id: str) -> Document:
        """The document with its chunk count and sessions; raises ``DocumentNotFound``."""

    @abstractmethod
    def find_document(
        self,
        *,
        workspace_id: str,
        document_id: str | None = None,
        source_path: str | None = None,
        content_hash: str | None = None,
    ) -> Document | None:
        """The document that a new source would update: by id, else by path in the
        workspace, else (for text without a path) by identical content in the workspace;
        the oldest if several. None if there is none, or no key is given."""

    def find_documents(self, lookups: Sequence[Mapping[str, Any]]) -> list[Document | None]:
        """:meth:`find_document` for each of ``lookups`` (its keyword arguments), in order;
        a store may answer them in a few statements."""
        return [self.find_document(**lookup) for lookup in lookups]

    @abstractmethod
    def list_documents(
        self, *, workspace_id: str | None = None, session_id: str | None = None
    ) -> list[Document]:
        """Documents of a workspace and/or attached to a session (all without either),
        by workspace, title, id. Every status is listed."""

    @abstractmethod
    def insert_document(
        self,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None = None,
    ) -> None:
        """Store a new document with its chunks, their search-index rows and, when given,
        one vector per chunk (``ValueError`` if the counts differ): all or nothing."""

    def insert_documents(
        self,
        documents: Sequence[tuple[NewDocument, Sequence[NewChunk], ChunkVectors | None]],
    ) -> None:
        """Store several new documents, each as :meth:`insert_document` would, all or
        nothing (a store may take them in fewer statements than one call each)."""
        with self.write():
            for document, chunks, vectors in documents:
                self.insert_document(document, chunks, vectors)

    @abstractmethod
    def replace_document(
        self,
        document: NewDocument,
        chunks: Sequence[NewChunk],
        vectors: ChunkVectors | None = None,
    ) -> None:
        """Swap a document's fields, chunks, index rows and vectors at once (its
        ``created_at`` and attachments stay); readers see the old version or the new one.
        Raises ``DocumentNotFound``."""

    @abstractmethod
    def delete_document(self, document_id: str) -> None:
        """Delete a document with its chunks, index rows, embeddings and attachments.
        Raises ``DocumentNotFound``."""

    @abstractmethod
    def chunks_of(self, document_id: str) -> list[StoredChunk]:
        """The document's chunks by ordinal ([] for an unknown document)."""

    @abstractmethod
    def set_tags_and_status(
        self, document_id: str, tags: Tags | None, status: str, *, title: str | None = None
    ) -> None:
        """Set a document's tags (None clears them) and status, and its title when given;
        content, chunks and vectors stay. Raises ``DocumentNotFound``."""

    @abstractmethod
    def set_status(self, document_id: str, status: str) -> None:
        """Set a document's status; only ``active`` documents are searched. Raises
        ``DocumentNotFound``."""


class ScopedSearch(ABC):
    """Reads inside a scope, which carry it in the query (see :class:`Store`'s scope
    invariant), and reads by the chunk ids such a read returned."""

    @abstractmethod
    def search_lexical(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[Hit]:
        """The top ``k`` chunks of ``scope`` for ``match`` (a compiled, safe full-text
        expression), best first, ties by chunk id; ``score`` is higher-is-better."""

    @abstractmethod
    def search_lexical_scores(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, score)`` of the same ranking as :meth:`search_lexical`, without
        reading the chunks' text."""

    @abstractmethod
    def term_statistics(
        self,
        terms: Sequence[str],
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> TermStatistics:
        """How many chunks the whole store holds, how many of them hold each of
        ``terms`` (matched as the full-text index matches a quoted term), and whether
        ``scope`` under ``filters`` and ``exclusions`` holds each term at all (in the
        query, as for every scoped read). A term that starts with a dash is an option
        (``--ipv4``): the scope holds it where a chunk names it with a dash before it
        (:func:`~tether.store.sql.option_literals`), not wherever its word occurs; a word
        in capitals (``MERGE``, ``LATERAL``) where a chunk writes it with a capital
        (``MERGE`` or "Merge"), not wherever the everyday word occurs."""

    @abstractmethod
    def scope_document_ids(
        self,
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
        among: Sequence[str] | None = None,
    ) -> list[str]:
        """Ids of the documents ``scope`` may see: the predicate of every scoped search
        (the document set a vector scan reads). In no particular order. ``among``: only
        those of these documents (what a scope memo asks after a few documents changed)."""

    # -- reads by chunk id (of chunks a scoped search returned) --------------------------

    @abstractmethod
    def hits_for_chunks(
        self, chunk_ids: Sequence[int], scores: Sequence[float] | None = None
    ) -> dict[int, Hit]:
        """Hits for chunk ids, keyed by id; ids that no longer exist are absent. Each hit's
        score is the one at its id's position in ``scores``, or 0 without them."""

    @abstractmethod
    def document_chunk_ids(
        self,
        scope: Scope,
        *,
        page: int | None = None,
        first: int | None = None,
        limit: int = 50,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[int]:
        """Ids of the chunks a request about a document itself wants ("what does page
        12 say?", "summarize this"), inside ``scope`` under ``filters`` and
        ``exclusions`` (in the query, as for every scoped read): those on ``page`` (the
        page printed with that number, in a document whose pages carry labels; else the
        physical page), or the first ``first`` chunks of each document. Newest
        document first, then reading order; at most ``limit``."""

    @abstractmethod
    def candidate_rows(
        self, chunk_ids: Sequence[int], session_id: str | None = None
    ) -> dict[int, CandidateRow]:
        """Per chunk id, what reranking and context building need of it (recency: when
        its document joined ``session_id``, or without one, when it was indexed). Ids
        that no longer exist are absent."""


class Embeddings(ABC):
    """Vectors by content hash, and the change counters that keep an in-memory index in
    step (or the backend's own vector search)."""

    @abstractmethod
    def vectors_for_hashes(self, model: str, hashes: Iterable[str]) -> dict[str, tuple[int, bytes]]:
        """``(dims, vector)`` per chunk content hash already embedded with ``model``
        (hashes not embedded are absent)."""

    @abstractmethod
    def insert_embeddings(self, model: str, rows: Sequence[tuple[int, int, bytes]]) -> None:
        """Store ``(chunk_id, dims, vector)`` rows for ``model``, replacing a chunk's
        existing vector of that model. Vectors are float32 little-endian bytes."""

    @abstractmethod
    def documents_missing_embeddings(self, model: str) -> list[str]:
        """Ids of documents with at least one chunk that has no ``model`` vector, sorted."""

    @abstractmethod
    def embedding_counts(self) -> dict[str, int]:
        """How many vectors each model has."""

    @abstractmethod
    def load_vectors(self, model: str) -> VectorSnapshot:
        """Every vector of ``model`` and the order to lay them out in (by workspace, then
        document, then chunk), read in one consistent snapshot."""

    @abstractmethod
    def vector_delta(self, model: str, since: int, limit: int) -> VectorSnapshot | None:
        """What changed in the vectors of ``model`` after change ``since`` (a snapshot's
        ``seq``; the sequence counts every document change, see :meth:`document_changes`),
        read in one snapshot: the documents whose vectors changed and their vectors now,
        laid out as :meth:`load_vectors` does; ``seq`` is where it ends. None when more
        than ``limit`` documents changed (load everything instead)."""

    @abstractmethod
    def document_changes(self, since: int, limit: int) -> tuple[int, list[str]] | None:
        """The documents changed in any way (vectors, existence, workspace, status, tags,
        path, attachments) after change ``since``, and the newest change's seq; None when
        more than ``limit`` changed."""

    @abstractmethod
    def change_counters(self) -> dict[str, int]:
        """Counters readers poll to know a cache is stale: ``embeddings`` grows with every
        change of a vector; ``documents`` with every change of a document's existence,
        workspace, status, tags or path, or of an attachment."""

    def native_vectors(self, model: str) -> NativeVectors | None:
        """A vector search the backend runs itself (``search``, ``cosines``, ``load``, as
        :class:`~tether.retrieve.vector.VectorIndex` has), or None: retrieval then keeps
        ``model``'s vectors in memory, read through :meth:`load_vectors` and
        :meth:`vector_delta`. PostgreSQL answers with pgvector."""
        return None


class LibraryRegistry(ABC):
    """The library registry: each watched file's status, retries and last error."""

    @abstractmethod
    def registry(self, under: str | None = None) -> list[RegistryEntry]:
        """Registry entries (of paths under the folder ``under``, if given), by path."""

    @abstractmethod
    def upsert_registry(self, source_path: str, **fields: Any) -> None:
        """Create the entry of ``source_path`` (status ``queued`` unless given) or update
        only ``fields`` of it. A field :class:`RegistryEntry` lacks is a ``ValueError``."""

    @abstractmethod
    def delete_registry(self, source_path: str) -> None:
        """Forget ``source_path`` (nothing if unknown)."""

    @abstractmethod
    def rename_source(self, old_path: str, new_path: str, document_id: str | None) -> None:
        """A file moved: its document (if any) and registry entry follow it, replacing any
        entry ``new_path`` had. Nothing is re-indexed."""


class AuditLog(ABC):
    """The audit log of retrievals: ids, the sanitized query and a time, never content,
    vectors or scores."""

    @abstractmethod
    def log_retrieval(self, entry: AuditEntry) -> None:
        """Append one audit entry (its retrieval id is unique)."""

    @abstractmethod
    def retrieval_log(
        self,
        limit: int = 50,
        outcome: str | None = None,
        *,
        workspace_ids: Sequence[str] | None = None,
        retrieval_id: str | None = None,
        since: str | None = None,
        until: str | None = None,
        global_askers: Sequence[str] | None = None,
    ) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first: with ``outcome``, of scopes in
        ``workspace_ids`` (a session scope is in its session's workspace), with
        ``retrieval_id``, written at or after ``since`` and before ``until`` (ISO-8601
        UTC, as :func:`~tether.store.records.utcnow` writes), each if given. With
        ``global_askers``, the global library's entries asked by those API keys are kept
        too (beside those of ``workspace_ids``)."""


class ApiKeys(ABC):
    """The service's API keys, kept by hash and bound to workspaces."""

    @abstractmethod
    def insert_api_key(self, key: ApiKey, key_hash: str) -> None:
        """Store ``key`` under the hash of its secret (the secret itself is never stored)."""

    @abstractmethod
    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """The key whose secret hashes to ``key_hash``, revoked or not; None if none."""

    @abstractmethod
    def api_keys(self) -> list[ApiKey]:
        """Every key, oldest first."""

    @abstractmethod
    def touch_api_key(self, key_id: str, at: str) -> bool:
        """Record that ``key_id`` was used at ``at`` (ISO UTC), best-effort: False when a
        full or read-only store could not record it (never an error)."""

    @abstractmethod
    def revoke_api_key(self, key_id: str) -> ApiKey:
        """Mark ``key_id`` revoked (once: revoking again keeps the first time); NotFound
        if there is no such key."""


class Maintenance(ABC):
    """Compaction and row counts."""

    def compact(self) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """Rewrite the lexical index compactly; its (segments, leaf pages) before and
        after, or Nones where the backend keeps no index to compact (PostgreSQL's
        postings are rows that autovacuum keeps)."""
        return None, None

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Rows per table: ``workspaces``, ``sessions``, ``rag_documents``,
        ``rag_document_sessions``, ``rag_chunks``, ``rag_embeddings``."""


class Store(
    StoreLifetime,
    Workspaces,
    Sessions,
    Documents,
    ScopedSearch,
    Embeddings,
    LibraryRegistry,
    AuditLog,
    ApiKeys,
    Maintenance,
):
    """Documents, chunks, sessions, embeddings, the library registry and the audit log.

    **The scope invariant.** A scoped read — the lexical candidates
    (:meth:`search_lexical`, :meth:`search_lexical_scores`) and the document set a vector
    scan may read (:meth:`scope_document_ids`) — carries its scope (the documents
    attached to the session, the documents of the workspace, or those of the ``GLOBAL``
    workspace), its tag :class:`~tether.models.Filters` and the policy's
    :class:`~tether.models.Exclusions` in the query itself. They are never a filter
    applied in Python after ranking. Top-k inside a scope is therefore exact, and filled
    whenever the scope has k matches, however many better matches lie outside it. Only
    documents with ``status = 'active'`` are ever searched.

    **Atomicity.** Each writing method is atomic on its own. A document's chunks, their
    search-index rows and their embeddings change together: a reader sees the old
    version or the new one, never a mix, and a failed write leaves what was stored.
    Several writes grouped in :meth:`write` commit together, or not at all.

    Methods that read one thing by id raise the ``*NotFound`` error of
    :mod:`tether.errors` when it does not exist; ``find_*`` methods return None instead.

    The interface is one role per concern (:class:`Documents`, :class:`ScopedSearch`,
    :class:`Embeddings`, ...): a part of tether that needs one role can take that type,
    and :mod:`tether.testing.store` holds each role's conformance tests.
    """
