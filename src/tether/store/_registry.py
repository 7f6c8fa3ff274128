"""The library registry: what the watcher and scans know about the files of a folder."""

from __future__ import annotations

from typing import Any

from tether.store import _rows
from tether.store._common import StorePart
from tether.store._paths import stored_path
from tether.store.records import RegistryEntry
from tether.store.sql import registry_sql, upsert_registry_sql

_DELETE = "DELETE FROM rag_index_registry WHERE source_path = ?"


class RegistryMixin(StorePart):
    def registry(self, under: str | None = None) -> list[RegistryEntry]:
        return [_rows.registry_entry(row) for row in self._select(*registry_sql(under))]

    def upsert_registry(self, source_path: str, **fields: Any) -> None:
        sql, params = upsert_registry_sql(source_path, fields)
        with self.db.write() as conn:
            conn.execute(sql, params)

    def delete_registry(self, source_path: str) -> None:
        with self.db.write() as conn:
            conn.execute(_DELETE, (stored_path(source_path),))

    def rename_source(self, old_path: str, new_path: str, document_id: str | None) -> None:
        old_path, new_path = stored_path(old_path) or "", stored_path(new_path) or ""
        with self.db.write() as conn:
            if document_id is not None:
                conn.execute(
                    "UPDATE rag_documents SET source_path = ? WHERE id = ?", (new_path, document_id)
                )
            conn.execute(_DELETE, (new_path,))
            conn.execute(
                "UPDATE rag_index_registry SET source_path = ? WHERE source_path = ?",
                (new_path, old_path),
            )
