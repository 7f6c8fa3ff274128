"""The audit trail of retrievals: ids, the sanitized query, scope and outcome; never
chunk text, vectors or scores (an :class:`AuditEntry` has no field for them)."""

from __future__ import annotations

from collections.abc import Sequence

from tether.store import _rows
from tether.store._common import StorePart
from tether.store.records import AuditEntry
from tether.store.sql import retrieval_log_sql

# The row's workspace is the scope's: a session's workspace is looked up as it is written.
_INSERT = (
    f"INSERT INTO rag_retrieval_log ({_rows.AUDIT_COLUMNS}, workspace_id)"
    f" VALUES ({', '.join('?' * len(AuditEntry.__dataclass_fields__))},"
    " CASE WHEN ? = 'session' THEN (SELECT workspace_id FROM sessions WHERE id = ?) ELSE ? END)"
)


class AuditMixin(StorePart):
    def log_retrieval(self, entry: AuditEntry) -> None:
        with self.db.write() as conn:
            kind, scope_id = entry.scope.get("kind"), entry.scope.get("id")
            conn.execute(_INSERT, [*_rows.audit_params(entry), kind, scope_id, scope_id])

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
        sql, params = retrieval_log_sql(
            limit,
            outcome,
            workspace_ids=workspace_ids,
            retrieval_id=retrieval_id,
            since=since,
            until=until,
            global_askers=global_askers,
        )
        return [_rows.audit_entry(row) for row in self._select(sql, params)]
