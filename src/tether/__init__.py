"""tether: a local-first retrieval layer for LLM applications and agents.

One SQLite file holds documents, chunks, session attachments and embeddings; search is
scoped to a session, a workspace or the global library inside SQL.

    from tether import Tether

    t = Tether(db="tether.db")
    t.add(["guide.md", "manual.pdf"], session_id="chat-1")
    for hit in t.search("reset the sensor", scope="session", session_id="chat-1"):
        print(hit.title, hit.page, hit.text[:80])
"""

import logging

from tether._tether import Tether
from tether.access import Access, KeyRing
from tether.embed import Embedder, LocalEmbedder, OnnxEmbedder, OpenAIEmbedder
from tether.errors import (
    AuditUnavailable,
    ConfigurationError,
    DocumentNotFound,
    EmbeddingError,
    EmbeddingsUnavailable,
    EmptyDocument,
    GenerationBlocked,
    IndexingCancelled,
    IndexingFailed,
    IngestError,
    InvalidArgument,
    InvalidTag,
    LLMError,
    LoadLimitExceeded,
    NotFound,
    RetrievalTimeout,
    SchemaVersionError,
    ScopeError,
    SessionNotFound,
    StorageFull,
    StorageReadOnly,
    StoreCorrupt,
    StoredVectorsInvalid,
    StoreError,
    TetherError,
    UnreadableFile,
    UnsupportedFileType,
    WorkspaceNotFound,
)
from tether.ingest.indexer import ReembedReport
from tether.ingest.jobs import IndexJob, JobProgress
from tether.ingest.sources import PathSource, TextSource
from tether.ingest.watcher import LibrarySync, SyncReport
from tether.llm import ChatModel, OpenAIChat
from tether.models import (
    GLOBAL_WORKSPACE,
    MAX_K,
    Citation,
    CleanupReport,
    CompactReport,
    Document,
    Filters,
    Hit,
    IndexResult,
    RetrievalResult,
    Scope,
    Session,
    Tags,
    Workspace,
)
from tether.retrieve.decide import Decision
from tether.retrieve.search import SearchMode, SearchResults
from tether.settings import Settings
from tether.store import ApiKey, AuditEntry, RegistryEntry

__version__ = "0.1.0"

# The application decides where a library's records go: without a handler of tether's
# own, Python's last-resort handler would print tether's warnings to stderr in a program
# that configured no logging.
logging.getLogger("tether").addHandler(logging.NullHandler())

__all__ = [
    "GLOBAL_WORKSPACE",
    "MAX_K",
    "Access",
    "ApiKey",
    "AuditEntry",
    "AuditUnavailable",
    "ChatModel",
    "Citation",
    "CleanupReport",
    "CompactReport",
    "ConfigurationError",
    "Decision",
    "Document",
    "DocumentNotFound",
    "Embedder",
    "EmbeddingError",
    "EmbeddingsUnavailable",
    "EmptyDocument",
    "Filters",
    "GenerationBlocked",
    "Hit",
    "IndexJob",
    "IndexResult",
    "IndexingCancelled",
    "IndexingFailed",
    "IngestError",
    "InvalidArgument",
    "InvalidTag",
    "JobProgress",
    "KeyRing",
    "LLMError",
    "LibrarySync",
    "LoadLimitExceeded",
    "LocalEmbedder",
    "NotFound",
    "OnnxEmbedder",
    "OpenAIChat",
    "OpenAIEmbedder",
    "PathSource",
    "ReembedReport",
    "RegistryEntry",
    "RetrievalResult",
    "RetrievalTimeout",
    "SchemaVersionError",
    "Scope",
    "ScopeError",
    "SearchMode",
    "SearchResults",
    "Session",
    "SessionNotFound",
    "Settings",
    "StorageFull",
    "StorageReadOnly",
    "StoreCorrupt",
    "StoreError",
    "StoredVectorsInvalid",
    "SyncReport",
    "Tags",
    "Tether",
    "TetherError",
    "TextSource",
    "UnreadableFile",
    "UnsupportedFileType",
    "Workspace",
    "WorkspaceNotFound",
    "__version__",
]
