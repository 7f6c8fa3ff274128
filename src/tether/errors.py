"""tether's errors: one small tree, so callers can catch as broadly or narrowly as they need.

    TetherError
    ├── ConfigurationError        settings that cannot work together
    ├── InvalidArgument           a bad value passed to the API (also a ValueError)
    │   └── ScopeError            a scope that names no session/workspace, or crosses workspaces
    ├── NotFound                  (also a LookupError)
    │   ├── DocumentNotFound
    │   ├── SessionNotFound
    │   └── WorkspaceNotFound
    ├── StoreError                the store itself (its file, its disk, its server)
    │   ├── SchemaVersionError    the file was written by a newer tether
    │   ├── StorageFull           no space left: the write was not stored, nothing lost
    │   ├── StorageReadOnly       reads work, writes cannot (read-only file, mount, server)
    │   └── StoreCorrupt          the file is damaged; it was not changed
    ├── EmbeddingError            a provider failed to embed (``retryable`` says if worth retrying)
    │   ├── EmbeddingsUnavailable no model installed, no API key: nothing to embed with
    │   └── StoredVectorsInvalid  stored vectors of one model disagree in size
    ├── LLMError                  a chat model call failed, timed out or answered nonsense
    ├── RetrievalTimeout          a retrieval ran past its time budget
    └── IngestError               one source could not be indexed; names the source
        ├── UnsupportedFileType
        ├── UnreadableFile
        │   └── LoadLimitExceeded too large, too slow or too hungry to load; ``.setting``
        ├── EmptyDocument
        ├── InvalidTag            a missing or invalid tag; ``.field`` names it
        ├── IndexingCancelled     the job was cancelled before this source started
        └── IndexingFailed        a batch finished, some sources failed (``.results`` has all)
    GenerationBlocked             (also TetherError) a guarded generation may not run:
    │                             nothing relevant, a timeout or an error; ``.advisory`` says why
    └── AuditUnavailable          its audit row could not be written, so it may not run either

Every message says what was wrong and what to do about it, in the library's words
(``Tether.reembed``, not a command line). An error whose advice a shell words its own
way keeps what was wrong apart, in ``problem``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class TetherError(Exception):
    """Base class of every error tether raises on purpose."""

    @property
    def problem(self) -> str:
        """What was wrong, without the advice (the whole message, unless a subclass
        keeps them apart)."""
        return str(self)


class ConfigurationError(TetherError):
    """Settings that are individually valid but cannot work together."""


class InvalidArgument(TetherError, ValueError):
    """A value passed to the API is not acceptable."""


class ScopeError(InvalidArgument):
    """A retrieval scope is incomplete or crosses a workspace boundary."""


class NotFound(TetherError, LookupError):
    """Something named by id does not exist."""


class DocumentNotFound(NotFound):
    def __init__(self, document_id: str) -> None:
        super().__init__(f"no document with id {document_id!r}")
        self.document_id = document_id


class SessionNotFound(NotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no session with id {session_id!r}; create it (Tether.create_session) or pass"
            " session_id when adding a document"
        )
        self.session_id = session_id

    @property
    def problem(self) -> str:
        return f"no session with id {self.session_id!r}"


class WorkspaceNotFound(NotFound):
    def __init__(self, workspace_id: str) -> None:
        super().__init__(f"no workspace with id {workspace_id!r}")
        self.workspace_id = workspace_id


class StoreError(TetherError):
    """The store cannot be used as a tether store, or cannot do what was asked of it."""


class SchemaVersionError(StoreError):
    """The file's schema is newer than this version of tether understands."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, but this tether only knows versions up to"
            f" {supported}; it was written by a newer tether. Upgrade tether"
            " (pip install -U tether) to open it. The file was not changed."
        )
        self.found = found
        self.supported = supported


class StorageFull(StoreError):
    """The store's disk (or its PostgreSQL server's) is full: nothing of the write that
    met it was stored, and what was stored before is intact. Free space and retry."""


class StorageReadOnly(StoreError):
    """The store can be read but not written (a read-only file, folder, mount or
    database): reads work; each write fails with this."""


class StoreCorrupt(StoreError):
    """The file is damaged beyond what SQLite can read (a broken page, a truncated file);
    it was not changed. Restore it from a backup, or rebuild the index into a new file."""


class EmbeddingError(TetherError):
    """An embedding provider failed. ``retryable`` is True for timeouts, rate limits and
    server errors, which the Embedder base class retries with backoff."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class EmbeddingsUnavailable(EmbeddingError):
    """No embedder can run: the model is not installed, or a remote provider has no key."""


class StoredVectorsInvalid(EmbeddingError):
    """The store holds vectors of the configured model that cannot be used together
    (their sizes disagree): delete that model's vectors and re-embed (Tether.reembed)."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem}; delete the model's vectors and re-embed (Tether.reembed)")
        self._problem = problem

    @property
    def problem(self) -> str:
        return self._problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._problem,))


class IngestError(TetherError):
    """A source could not be indexed. ``source`` names it (a path, or a text title)."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source
        self.reason = message


class UnsupportedFileType(IngestError):
    """No loader handles this kind of file."""


class UnreadableFile(IngestError):
    """The file exists (or should) but could not be read or parsed."""


class LoadLimitExceeded(UnreadableFile):
    """Loading the file was stopped by a limit: its size (``rag.max_file_bytes``, checked
    before it is read), its time (``rag.file_timeout``) or its loader's memory
    (``rag.loader_memory_mb``). ``setting`` names the limit; raise it to load the file."""

    def __init__(self, source: str, message: str, *, setting: str) -> None:
        super().__init__(source, message)
        self.setting = setting


class EmptyDocument(IngestError):
    """The source holds no text to index (for example, a scanned PDF with no text layer)."""


class IndexingFailed(IngestError):
    """A batch finished and some of its sources failed; the others were indexed.

    ``results`` holds one :class:`~tether.IndexResult` per source, failures included.
    """

    def __init__(self, results: Sequence[Any]) -> None:
        failed = [r for r in results if r.error is not None]
        lines = "; ".join(str(r.error) for r in failed[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        indexed = len(results) - len(failed)
        super().__init__(
            f"{len(failed)} of {len(results)} sources",
            f"failed to index: {lines}{more}. The other {indexed} were indexed.",
        )
        self.results = list(results)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.results,))


class LLMError(TetherError):
    """A chat model call failed (HTTP error, timeout) or its answer was unusable.

    Retrieval never lets this escape: decide, rewrite and rerank fall back and record the
    degradation in ``debug``. ``timeout`` says whether the call ran out of time."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class InvalidTag(IngestError):
    """A document's tag is missing (when the policy requires tags) or invalid."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        super().__init__(source, f"tag {field!r}: {problem}")
        self.field = field


class GenerationBlocked(TetherError):
    """Retrieval did not ground the generation, so it must not run.

    ``reason`` is ``"no_results"``, ``"timeout"`` or ``"error"``; ``advisory`` is the
    next step in words (widen the scope, add or verify documents, retry); ``result`` is
    the retrieval when there was one; ``retrieval_id`` ties it to the audit log."""

    def __init__(
        self,
        reason: str,
        advisory: str,
        *,
        result: Any = None,
        retrieval_id: str | None = None,
    ) -> None:
        super().__init__(f"generation blocked ({reason}): {advisory}")
        self.reason = reason
        self.advisory = advisory
        self.result = result
        self.retrieval_id = retrieval_id


class RetrievalTimeout(TetherError):
    """A retrieval ran longer than the time budget it was given."""

    def __init__(self, message: str, *, retrieval_id: str | None = None) -> None:
        super().__init__(message)
        self.retrieval_id = retrieval_id


class IndexingCancelled(IngestError):
    """The indexing job was cancelled before this source was started; nothing of it was
    stored."""


class AuditUnavailable(GenerationBlocked):
    """A guarded retrieval whose audit row could not be written: the agent team's rule is
    that every retrieval set is logged, so generation is blocked (``reason`` is
    ``"audit"``)."""
