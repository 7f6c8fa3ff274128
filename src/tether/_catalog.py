"""The facade's catalogue half: documents, their status and tags, workspaces, sessions
and attachments, the audit log and cleanup. A part of :class:`tether.Tether`; each
method is one call to the store."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tether.access import KeyRing
from tether.errors import DocumentNotFound, InvalidArgument
from tether.models import (
    CleanupReport,
    CompactReport,
    Document,
    DocumentStatus,
    Session,
    Tags,
    Workspace,
    iso_utc,
    parse_retention,
)
from tether.settings import Settings
from tether.store import AuditEntry, Store, StoredChunk
from tether.tags import DOCUMENT_STATUSES, validate_tags
from tether.text import check_identifier

logger = logging.getLogger("tether")


class Catalog:
    """Document, workspace and session methods of :class:`tether.Tether`."""

    settings: Settings
    store: Store

    # -- documents ----------------------------------------------------------------------

    def documents(
        self, *, workspace_id: str | None = None, session_id: str | None = None
    ) -> list[Document]:
        return self.store.list_documents(workspace_id=workspace_id, session_id=session_id)

    def get_document(self, document_id: str) -> Document:
        return self.store.get_document(document_id)

    def chunks(self, document_id: str) -> list[StoredChunk]:
        self.store.get_document(document_id)
        return self.store.chunks_of(document_id)

    def document_text(self, document_id: str) -> str:
        """The document's normalized text as its chunks hold it (each chunk is exactly
        ``text[char_start:char_end]``: overlaps are read once, and a gap no chunk holds,
        whitespace between sections, becomes a line break)."""
        parts: list[str] = []
        end = 0
        for chunk in sorted(self.chunks(document_id), key=lambda c: (c.char_start, c.ordinal)):
            if parts and chunk.char_start > end:
                parts.append("\n")
            parts.append(chunk.content[max(0, end - chunk.char_start) :])
            end = max(end, chunk.char_end)
        return "".join(parts)

    def delete_document(self, document_id: str) -> None:
        """Delete a document with its chunks, FTS rows, embeddings and attachments."""
        self.store.delete_document(document_id)

    def set_status(self, document_id: str, status: DocumentStatus) -> Document:
        """Publish a draft or approve a submission (``"active"``), or take a document out of
        retrieval (``"draft"``, ``"pending"``) without deleting it."""
        if status not in DOCUMENT_STATUSES:
            raise InvalidArgument(f"status must be one of {DOCUMENT_STATUSES}, not {status!r}")
        self.store.set_status(document_id, status)
        return self.store.get_document(document_id)

    def approve(self, document_id: str) -> Document:
        """Approve a user-submitted (``pending``) or draft document: it becomes searchable."""
        return self.set_status(document_id, "active")

    def set_tags(self, document_id: str, tags: Tags | dict[str, Any]) -> Document:
        """Replace a document's tags (validated against the policy), content unchanged."""
        document = self.store.get_document(document_id)
        checked = validate_tags(document_id, tags, self.settings.policy)
        self.store.set_tags_and_status(document_id, checked, document.status)
        return self.store.get_document(document_id)

    def retrieval_log(
        self,
        limit: int = 50,
        outcome: str | None = None,
        *,
        workspace_ids: Sequence[str] | None = None,
        retrieval_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        global_askers: Sequence[str] | None = None,
    ) -> list[AuditEntry]:
        """The newest audit rows: retrieval id, time, sanitized query, scope, filters, the
        retrieved chunk and document ids, how the context numbered its citations (ids
        only), and the outcome (``grounded``, ``ungrounded``, ``skipped``, ``blocked`` or
        ``error``) with its reason. ``workspace_ids`` keeps the
        rows whose scope is in those workspaces (a session's scope is in its workspace);
        ``retrieval_id`` one retrieval's row; ``since`` and ``until`` (datetimes, naive
        ones read as UTC, or ISO-8601 strings) the rows written in ``[since, until)``;
        ``global_askers`` (API key ids) also keeps the global library's rows those keys
        asked (each row's ``asked_by``)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"limit must be a positive integer, not {limit!r}")
        for workspace_id in workspace_ids or ():
            check_identifier("workspace id", workspace_id)
        if retrieval_id is not None:
            check_identifier("retrieval id", retrieval_id)
        return self.store.retrieval_log(
            limit,
            outcome,
            workspace_ids=None if workspace_ids is None else list(workspace_ids),
            retrieval_id=retrieval_id,
            since=_audit_time("since", since),
            until=_audit_time("until", until),
            global_askers=None if global_askers is None else list(global_askers),
        )

    @property
    def keys(self) -> KeyRing:
        """The API keys of ``tether serve`` and ``tether mcp`` (:class:`KeyRing`)."""
        return KeyRing(self.store)

    def cleanup(self, retention: str | timedelta = "7d", *, dry_run: bool = False) -> CleanupReport:
        """Delete documents that have been stale for longer than ``retention`` (``"7d"``,
        ``"12h"``, ``"30m"``, ``"2w"`` or a timedelta), with their chunks, embeddings, FTS
        rows and attachments. ``dry_run`` lists them and deletes nothing."""
        cutoff = iso_utc(datetime.now(UTC) - parse_retention(retention))
        documents = self.store.stale_documents(cutoff)
        for document in documents if not dry_run else ():
            try:
                self.store.delete_document(document.id)
            except DocumentNotFound:
                continue  # deleted meanwhile
        if documents and not dry_run:
            logger.info("cleanup deleted %d stale document(s)", len(documents))
        return CleanupReport(documents=tuple(documents), deleted=not dry_run, cutoff=cutoff)

    def compact(self) -> CompactReport:
        """Rewrite the full-text index compactly (one segment, deleted chunks' entries
        gone). Writes wait while it runs; reads do not. After writes, tether does this by
        itself for indexes up to about 16 MB; a larger one that churn has fragmented
        says so in a warning, and this is the cure. Nothing to do on PostgreSQL."""
        started = time.perf_counter()
        before, after = self.store.compact()
        return CompactReport(
            segments_before=before[0] if before else None,
            pages_before=before[1] if before else None,
            segments_after=after[0] if after else None,
            pages_after=after[1] if after else None,
            seconds=round(time.perf_counter() - started, 3),
        )

    # -- workspaces and sessions --------------------------------------------------------

    def create_workspace(self, workspace_id: str, name: str | None = None) -> Workspace:
        _require_id(workspace_id, "workspace_id")
        return self.store.ensure_workspace(workspace_id, name)

    def workspaces(self) -> list[Workspace]:
        return self.store.list_workspaces()

    def create_session(self, session_id: str, *, workspace_id: str) -> Session:
        _require_id(session_id, "session_id")
        _require_id(workspace_id, "workspace_id")
        self.store.ensure_workspace(workspace_id)
        return self.store.ensure_session(session_id, workspace_id)

    def sessions(self, *, workspace_id: str | None = None) -> list[Session]:
        return self.store.list_sessions(workspace_id)

    def close_session(self, session_id: str) -> Session:
        """Close a session. Its ChatPDF documents (imported with :meth:`on_pdf_imported`)
        that no other open session uses are marked stale (``stale_at``), for
        :meth:`cleanup` to delete once the retention window has passed."""
        session, stale = self.store.close_session(session_id)
        if stale:
            logger.info("session %s closed: %d document(s) marked stale", session_id, len(stale))
        return session

    def attach(self, document_id: str, session_id: str) -> bool:
        """Attach a document to a session; False if it already was."""
        return self.store.attach_document_to_session(document_id, session_id)

    def detach(self, document_id: str, session_id: str) -> bool:
        """Detach a document from a session (the document stays); False if it was not."""
        return self.store.detach_document_from_session(document_id, session_id)


def _require_id(value: object, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{name} must be a non-empty string, not {value!r}")
    check_identifier(name, value)


def _audit_time(name: str, value: datetime | str | None) -> str | None:
    """An audit bound in the stored form (ISO-8601 UTC, which sorts as text)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidArgument(f"{name} must be an ISO-8601 time, not {value!r}") from None
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{name} must be a datetime or an ISO-8601 string, not {value!r}")
    return iso_utc(value)
