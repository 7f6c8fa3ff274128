"""The indexer: load, hash, skip if unchanged, chunk, store atomically, attach to the session."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.errors import IngestError, ScopeError
from tether.ingest.chunking import chunk_sections
from tether.ingest.loaders import LoadedDocument, load_path, load_text
from tether.ingest.text import content_hash
from tether.models import GLOBAL_WORKSPACE, IndexResult
from tether.settings import RagSettings
from tether.store import NewDocument, Repository

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Placement:
    """Where a document goes: its workspace, and the session to attach it to (if any)."""

    workspace_id: str
    session_id: str | None


class Indexer:
    def __init__(
        self,
        repo: Repository,
        rag: RagSettings,
        *,
        count_tokens: TokenCounter | None = None,
    ) -> None:
        self.repo = repo
        self.rag = rag
        self.count_tokens = count_tokens

    def place(self, workspace_id: str | None, session_id: str | None) -> Placement:
        """Resolve (and create on first use) the workspace and session for new documents.

        With only a session, documents go to the session's workspace. A new session is
        created in ``workspace_id`` (default: the global workspace).
        """
        if session_id is not None:
            session = self.repo.find_session(session_id)
            if session is None:
                session = self.repo.ensure_session(session_id, workspace_id or GLOBAL_WORKSPACE)
            if workspace_id not in (None, session.workspace_id, GLOBAL_WORKSPACE):
                raise ScopeError(
                    f"session {session_id!r} belongs to workspace {session.workspace_id!r};"
                    f" cannot add documents of workspace {workspace_id!r} to it"
                )
            return Placement(workspace_id or session.workspace_id, session_id)
        workspace_id = workspace_id or GLOBAL_WORKSPACE
        self.repo.ensure_workspace(workspace_id)
        return Placement(workspace_id, None)

    def index_path(self, path: str | Path, placement: Placement) -> IndexResult:
        source = str(path)
        try:
            resolved = Path(path).expanduser().resolve()
            loaded = load_path(resolved)
            return self._store(
                loaded,
                placement,
                source=source,
                source_path=str(resolved),
                document_id=None,
                metadata={},
            )
        except IngestError as exc:
            return IndexResult(source=source, status="failed", error=exc)

    def index_text(
        self,
        text: str,
        placement: Placement,
        *,
        title: str,
        mime: str = "text/plain",
        document_id: str | None = None,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IndexResult:
        label = source or document_id or title
        try:
            loaded = load_text(text, title=title, mime=mime)
            return self._store(
                loaded,
                placement,
                source=label,
                source_path=source,
                document_id=document_id,
                metadata=metadata or {},
            )
        except IngestError as exc:
            return IndexResult(source=label, status="failed", error=exc)

    def _store(
        self,
        loaded: LoadedDocument,
        placement: Placement,
        *,
        source: str,
        source_path: str | None,
        document_id: str | None,
        metadata: dict[str, Any],
    ) -> IndexResult:
        digest = content_hash(loaded.text)
        lookup = {
            "workspace_id": placement.workspace_id,
            "document_id": document_id,
            "source_path": source_path,
            "content_hash": digest,
        }
        existing = self.repo.find_document(**lookup)
        if existing is not None and existing.content_hash == digest:
            self._attach(existing.id, placement)
            return IndexResult(source, "skipped", existing.id, existing.chunk_count)

        # Chunking is pure work: do it before taking the write lock.
        chunks = chunk_sections(
            loaded.text,
            list(loaded.sections),
            size=self.rag.chunk_size,
            overlap=self.rag.chunk_overlap,
            count_tokens=self.count_tokens,
        )
        with self.repo.db.write():
            # Look again inside the transaction: another writer may have got here first.
            existing = self.repo.find_document(**lookup)
            if existing is not None and existing.workspace_id != placement.workspace_id:
                raise ScopeError(
                    f"document {existing.id!r} belongs to workspace {existing.workspace_id!r},"
                    f" not {placement.workspace_id!r}"
                )
            if existing is not None and existing.content_hash == digest:
                self._attach(existing.id, placement)
                return IndexResult(source, "skipped", existing.id, existing.chunk_count)
            record = NewDocument(
                id=existing.id if existing else (document_id or uuid.uuid4().hex[:16]),
                workspace_id=placement.workspace_id,
                title=loaded.title,
                source_path=source_path,
                source_type=None,
                mime=loaded.mime,
                content_hash=digest,
                file_size=loaded.file_size,
                metadata={**(existing.metadata if existing else {}), **metadata},
            )
            if existing is None:
                self.repo.insert_document(record, chunks)
            else:
                self.repo.replace_document(record, chunks)
            self._attach(record.id, placement)
        status = "indexed" if existing is None else "replaced"
        return IndexResult(source, status, record.id, len(chunks))

    def _attach(self, document_id: str, placement: Placement) -> None:
        if placement.session_id is not None:
            self.repo.attach_document_to_session(document_id, placement.session_id)
