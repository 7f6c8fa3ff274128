"""The audit trail of retrievals: ids, the sanitized query, scope and outcome; never
chunk text, vectors or scores (an :class:`AuditEntry` has no field for them)."""

from __future__ import annotations

from tether.store import _rows
from tether.store._common import SQLiteMixin
from tether.store.records import AuditEntry
from tether.store.sql import retrieval_log_sql

_INSERT = (
    f"INSERT INTO rag_retrieval_log ({_rows.AUDIT_COLUMNS})"
    f" VALUES ({', '.join('?' * len(AuditEntry.__dataclass_fields__))})"
)


class AuditMixin(SQLiteMixin):
    def log_retrieval(self, entry: AuditEntry) -> None:
        with self.db.write() as conn:
            conn.execute(_INSERT, _rows.audit_params(entry))

    def retrieval_log(self, limit: int = 50, outcome: str | None = None) -> list[AuditEntry]:
        return [_rows.audit_entry(row) for row in self._select(*retrieval_log_sql(limit, outcome))]
