"""Workspaces, sessions, their documents' attachments, and closing sessions."""

from __future__ import annotations

from collections.abc import Sequence

from tether.errors import DocumentNotFound, ScopeError, SessionNotFound, WorkspaceNotFound
from tether.models import GLOBAL_WORKSPACE, Document, Scope, Session, Workspace
from tether.store import _rows
from tether.store._common import _BATCH, StorePart
from tether.store.dialect import Dialect
from tether.store.records import utcnow
from tether.store.sql import list_sessions_sql


def _mark_stale_sql(dialect: Dialect) -> str:
    """Mark the ChatPDF documents of a closed session that nothing else uses any more."""
    return (
        "UPDATE rag_documents SET stale_at = ? WHERE stale_at IS NULL"
        f" AND {dialect.json_text('metadata', 'origin')} = 'chatpdf'"
        # A file of a watched library folder is the library's, not the chat's.
        " AND NOT EXISTS (SELECT 1 FROM rag_index_registry r"
        "   WHERE r.document_id = rag_documents.id)"
        " AND id IN (SELECT document_id FROM rag_document_sessions WHERE session_id = ?)"
        " AND NOT EXISTS (SELECT 1 FROM rag_document_sessions ds"
        "   JOIN sessions s ON s.id = ds.session_id"
        "   WHERE ds.document_id = rag_documents.id AND s.closed_at IS NULL)"
        " RETURNING id"
    )


_INSERT_ATTACHMENT = (
    "INSERT INTO rag_document_sessions (document_id, session_id, created_at)"
    " VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
)


def _check_attachable(document_id: str, workspace_id: str, session: Session) -> None:
    """A session attaches documents of its own workspace or of the global library."""
    if workspace_id not in (session.workspace_id, GLOBAL_WORKSPACE):
        raise ScopeError(
            f"document {document_id!r} is in workspace {workspace_id!r};"
            f" session {session.id!r} is in {session.workspace_id!r}. A session can"
            " only attach documents of its own workspace or of the global library."
        )


class SessionsMixin(StorePart):
    # -- workspaces ----------------------------------------------------------------------

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
        row = self._select_one(
            "SELECT id, name, created_at FROM workspaces WHERE id = ?", (workspace_id,)
        )
        if row is None:
            raise WorkspaceNotFound(workspace_id)
        return Workspace(*row)

    def list_workspaces(self) -> list[Workspace]:
        rows = self._select("SELECT id, name, created_at FROM workspaces ORDER BY id")
        return [Workspace(*row) for row in rows]

    # -- sessions ------------------------------------------------------------------------

    def ensure_session(self, session_id: str, workspace_id: str) -> Session:
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
        row = self._select_one(
            "SELECT id, workspace_id, created_at, closed_at FROM sessions WHERE id = ?",
            (session_id,),
        )
        if row is None:
            raise SessionNotFound(session_id)
        return Session(*row)

    def find_session(self, session_id: str) -> Session | None:
        try:
            return self.get_session(session_id)
        except SessionNotFound:
            return None

    def scope_exists(self, scope: Scope) -> bool:
        table = {"session": "sessions", "workspace": "workspaces"}.get(scope.kind)
        if table is None:
            return True
        return self._select_one(f"SELECT 1 FROM {table} WHERE id = ?", (scope.id,)) is not None

    def list_sessions(self, workspace_id: str | None = None) -> list[Session]:
        return [Session(*row) for row in self._select(*list_sessions_sql(workspace_id))]

    def close_session(self, session_id: str) -> tuple[Session, list[str]]:
        now = utcnow()
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET closed_at = coalesce(closed_at, ?) WHERE id = ?",
                (now, session_id),
            )
            if cur.rowcount == 0:
                raise SessionNotFound(session_id)
            rows = conn.execute(_mark_stale_sql(self.db.dialect), (now, session_id)).fetchall()
        return self.get_session(session_id), sorted(r[0] for r in rows)

    def stale_documents(self, cutoff: str) -> list[Document]:
        rows = self._select(
            f"SELECT {_rows.document_columns(self.db.dialect)} FROM rag_documents d"
            " WHERE d.stale_at IS NOT NULL AND d.stale_at <= ? ORDER BY d.stale_at, d.id",
            (cutoff,),
        )
        return [_rows.document(row) for row in rows]

    # -- attachments ---------------------------------------------------------------------

    def attach_document_to_session(self, document_id: str, session_id: str) -> bool:
        with self.db.write() as conn:
            document = self.get_document(document_id)
            session = self.get_session(session_id)
            _check_attachable(document_id, document.workspace_id, session)
            cur = conn.execute(_INSERT_ATTACHMENT, (document_id, session_id, utcnow()))
            if session.closed_at is None:  # in use again: no longer stale
                conn.execute(
                    "UPDATE rag_documents SET stale_at = NULL WHERE id = ?", (document_id,)
                )
            return cur.rowcount > 0

    def attach_documents_to_session(self, document_ids: Sequence[str], session_id: str) -> int:
        ids = list(dict.fromkeys(document_ids))
        if not ids:
            return 0
        with self.db.write() as conn:
            session = self.get_session(session_id)
            places: dict[str, str] = {}
            attached: set[str] = set()
            for start in range(0, len(ids), _BATCH):
                batch = ids[start : start + _BATCH]
                marks = ", ".join("?" * len(batch))
                sql = f"SELECT id, workspace_id FROM rag_documents WHERE id IN ({marks})"
                places.update(conn.execute(sql, batch).fetchall())
                sql = (
                    "SELECT document_id FROM rag_document_sessions"
                    f" WHERE session_id = ? AND document_id IN ({marks})"
                )
                attached.update(r[0] for r in conn.execute(sql, [session_id, *batch]))
            for document_id in ids:
                if document_id not in places:
                    raise DocumentNotFound(document_id)
                _check_attachable(document_id, places[document_id], session)
            now = utcnow()
            new = [(d, session_id, now) for d in ids if d not in attached]
            self._insert_rows(conn, _INSERT_ATTACHMENT, new)
            if session.closed_at is None:  # in use again: no longer stale
                for start in range(0, len(ids), _BATCH):
                    batch = ids[start : start + _BATCH]
                    marks = ", ".join("?" * len(batch))
                    conn.execute(
                        "UPDATE rag_documents SET stale_at = NULL"
                        f" WHERE stale_at IS NOT NULL AND id IN ({marks})",
                        batch,
                    )
            return len(new)

    def detach_document_from_session(self, document_id: str, session_id: str) -> bool:
        with self.db.write() as conn:
            self.get_document(document_id)
            self.get_session(session_id)
            cur = conn.execute(
                "DELETE FROM rag_document_sessions WHERE document_id = ? AND session_id = ?",
                (document_id, session_id),
            )
            return cur.rowcount > 0
