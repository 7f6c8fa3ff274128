"""Embeddings (the vector cache by content hash, the snapshot for the vector index) and
the change counters that tell readers when their caches are stale."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tether.store._common import StorePart
from tether.store.records import VectorSnapshot
from tether.store.sql import vectors_for_hashes_sql


class EmbeddingsMixin(StorePart):
    def vectors_for_hashes(self, model: str, hashes: Iterable[str]) -> dict[str, tuple[int, bytes]]:
        wanted = list(dict.fromkeys(hashes))
        rows = self._select_in_batches(wanted, lambda batch: vectors_for_hashes_sql(model, batch))
        return {content_hash: (dims, blob) for content_hash, dims, blob in rows}

    def insert_embeddings(self, model: str, rows: Sequence[tuple[int, int, bytes]]) -> None:
        with self.db.write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO rag_embeddings (chunk_id, model, dims, vector)"
                " VALUES (?, ?, ?, ?)",
                [(chunk_id, model, dims, blob) for chunk_id, dims, blob in rows],
            )

    def documents_missing_embeddings(self, model: str) -> list[str]:
        rows = self._select(
            "SELECT DISTINCT c.document_id FROM rag_chunks c"
            " LEFT JOIN rag_embeddings e ON e.chunk_id = c.id AND e.model = ?"
            " WHERE e.chunk_id IS NULL ORDER BY c.document_id",
            (model,),
        )
        return [r[0] for r in rows]

    def embedding_counts(self) -> dict[str, int]:
        return dict(self._select("SELECT model, count(*) FROM rag_embeddings GROUP BY model"))

    def load_vectors(self, model: str) -> VectorSnapshot:
        # The vectors are read in key order with no join or sort (sorting 1.5 kB rows is
        # what made a naive query slow); only the narrow (chunk, document) rows are sorted.
        with self.db.read() as conn:
            count = conn.execute(
                "SELECT count(*) FROM rag_embeddings WHERE model = ?", (model,)
            ).fetchone()[0]
            cursor = conn.execute(
                "SELECT chunk_id, dims, vector FROM rag_embeddings WHERE model = ?"
                " ORDER BY chunk_id",
                (model,),
            )
            rows: list[tuple[int, int, bytes]] = []
            while batch := cursor.fetchmany(20_000):
                rows.extend(batch)
            order = conn.execute(
                "SELECT c.id, c.document_id FROM rag_chunks c"
                " JOIN rag_documents d ON d.id = c.document_id"
                " WHERE c.id IN (SELECT chunk_id FROM rag_embeddings WHERE model = ?)"
                " ORDER BY d.workspace_id, c.document_id, c.id",
                (model,),
            ).fetchall()
            seq = newest_change(conn)
        assert len(rows) == count
        return VectorSnapshot(rows=rows, layout=order, seq=seq)

    def vector_delta(self, model: str, since: int, limit: int) -> VectorSnapshot | None:
        with self.db.read() as conn:
            changes = changes_since(conn, since, limit, vectors=True)
            if changes is None:
                return None
            seq, changed = changes
            # From the changed documents to their chunks and vectors, by index: left to
            # itself the planner scans every vector of the model (50 ms at 100k chunks).
            found = conn.execute(
                "SELECT d.workspace_id, c.document_id, c.id, e.dims, e.vector"
                " FROM json_each(?) j CROSS JOIN rag_documents d ON d.id = j.value"
                " CROSS JOIN rag_chunks c ON c.document_id = d.id"
                " CROSS JOIN rag_embeddings e ON e.model = ? AND e.chunk_id = c.id",
                (json.dumps(changed), model),
            ).fetchall()
        return delta_snapshot(found, seq, changed)

    def document_changes(self, since: int, limit: int) -> tuple[int, list[str]] | None:
        with self.db.read() as conn:
            return changes_since(conn, since, limit, vectors=False)

    def change_counters(self) -> dict[str, int]:
        # Triggers bump them on every change, FK cascades included (migration 3).
        return dict(self._select("SELECT key, value FROM rag_state"))


def changes_since(
    conn: Any, since: int, limit: int, *, vectors: bool
) -> tuple[int, list[str]] | None:
    """The newest change and the documents changed after ``since`` (those whose vectors
    changed, with ``vectors``); None when more than ``limit`` did or the log no longer
    reaches back to ``since``: the caller then reads everything again."""
    seq = newest_change(conn)
    if _pruned_since(conn, since):
        return None
    only = " AND vectors = 1" if vectors else ""
    changed = [
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT document_id FROM rag_document_changes WHERE seq > ?{only} LIMIT ?",
            (since, limit + 1),
        )
    ]
    return None if len(changed) > limit else (seq, changed)


def delta_snapshot(
    found: list[Any], seq: int, changed: list[str], blob: Callable[[Any], bytes] = bytes
) -> VectorSnapshot:
    """The snapshot of the changed documents' vectors from ``(workspace id, document id,
    chunk id, dims, vector)`` rows, laid out as a full load is (``blob`` reads a vector
    as its bytes)."""
    found = sorted(found, key=lambda row: row[:3])
    return VectorSnapshot(
        rows=[(chunk_id, dims, blob(vector)) for _, _, chunk_id, dims, vector in found],
        layout=[(chunk_id, document_id) for _, document_id, chunk_id, _, _ in found],
        seq=seq,
        documents=tuple(changed),
    )


def newest_change(conn: Any) -> int:
    """The newest document change (0 before any)."""
    return conn.execute("SELECT coalesce(max(seq), 0) FROM rag_document_changes").fetchone()[0]


def _pruned_since(conn: Any, since: int) -> bool:
    """Whether changes after ``since`` were dropped (the log keeps the newest 100,000;
    committed changes are numbered without gaps, so a gap at the start is a drop)."""
    oldest = conn.execute("SELECT min(seq) FROM rag_document_changes").fetchone()[0]
    return oldest is not None and oldest > since + 1
