"""Exact cosine top-k over the vectors of one scope, from an in-memory matrix.

The matrix holds every vector of one model, unit length, grouped by workspace and then
by document, so a document is one contiguous block of rows and a workspace (usually) one
run of blocks. A search asks SQL which documents the scope may see (the same predicate as
lexical search), turns them into row ranges, and scores only those rows: nothing outside
the scope is scanned. Triggers bump a counter on every change of embeddings or of
document scopes; the matrix is reloaded, and the scope memo dropped, when it moves.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np

from tether.errors import StoredVectorsInvalid
from tether.models import Exclusions, Filters, Scope
from tether.store import Store

# Above this many disjoint row ranges one gather (a copy) beats many small products.
_MAX_SLICES = 256
# Scopes whose row ranges are remembered between writes (one entry per session/workspace).
_MAX_MEMO = 1024


@dataclass(frozen=True)
class _Matrix:
    version: int
    vectors: np.ndarray  # (n, dims) float32, unit rows
    chunk_ids: np.ndarray  # (n,) int64
    ranges: dict[str, tuple[int, int]]  # document id -> [start, end) rows

    @functools.cached_property
    def id_order(self) -> np.ndarray:
        """Row numbers sorted by chunk id (for lookups by id)."""
        return np.argsort(self.chunk_ids, kind="stable")


class VectorIndex:
    """In-memory vectors of ``model`` over one store; safe to share between threads."""

    def __init__(self, store: Store, model: str) -> None:
        self.store = store
        self.model = model
        self._matrix: _Matrix | None = None
        self._scope_memo: dict[
            tuple[Scope, Filters | None, Exclusions | None],
            tuple[int, int, np.ndarray, np.ndarray],
        ] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return 0 if self._matrix is None else len(self._matrix.chunk_ids)

    def load(self) -> int:
        """Read the vectors into memory now (a search would on first use); how many."""
        return len(self._current(self.store.change_counters()["embeddings"]).chunk_ids)

    def search(
        self,
        scope: Scope,
        query: np.ndarray,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, cosine)`` of the ``k`` nearest in-scope vectors, best first; the
        scope's documents (with its tag filters and exclusions) come from SQL."""
        counters = self.store.change_counters()
        matrix = self._current(counters["embeddings"])
        if matrix.vectors.shape[0] == 0:
            return []
        if query.shape != (matrix.vectors.shape[1],):
            raise ValueError(
                f"query has {query.shape} dims; stored {self.model!r} vectors have"
                f" {matrix.vectors.shape[1]}"
            )
        starts, ends = self._scope_rows((scope, filters, exclusions), matrix, counters["documents"])
        if len(starts) == 0:
            return []
        rows, scores = _score(matrix.vectors, starts, ends, query.astype(np.float32))
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((matrix.chunk_ids[rows[top]], -scores[top]))]
        return [(int(matrix.chunk_ids[rows[i]]), float(scores[i])) for i in top]

    def cosines(self, query: np.ndarray, chunk_ids: list[int]) -> dict[int, float]:
        """Cosine of ``query`` with each of ``chunk_ids`` that has a vector of this model.

        For chunks found by another method (lexical, another query), so that every
        candidate can be judged against the same question."""
        matrix = self._current(self.store.change_counters()["embeddings"])
        if matrix.vectors.shape[0] == 0 or not chunk_ids:
            return {}
        if query.shape != (matrix.vectors.shape[1],):
            raise ValueError(
                f"query has {query.shape} dims; stored {self.model!r} vectors have"
                f" {matrix.vectors.shape[1]}"
            )
        ids = np.asarray(chunk_ids, dtype=np.int64)
        order = matrix.id_order
        pos = np.minimum(np.searchsorted(matrix.chunk_ids, ids, sorter=order), len(order) - 1)
        rows = order[pos]
        found = matrix.chunk_ids[rows] == ids
        scores = matrix.vectors[rows[found]] @ query.astype(np.float32)
        return {int(c): float(v) for c, v in zip(ids[found], scores, strict=True)}

    def _current(self, version: int) -> _Matrix:
        matrix = self._matrix
        if matrix is not None and matrix.version == version:
            return matrix
        with self._lock:
            if self._matrix is None or self._matrix.version != version:
                self._matrix = self._load(version)
                self._scope_memo.clear()
            return self._matrix

    def _load(self, version: int) -> _Matrix:
        snapshot = self.store.load_vectors(self.model)
        rows = snapshot.rows
        if not rows:
            return _Matrix(version, np.zeros((0, 0), np.float32), np.zeros(0, np.int64), {})
        dims = rows[0][1]
        bad = next((r for r in rows if r[1] != dims or len(r[2]) != 4 * dims), None)
        if bad is not None:
            raise StoredVectorsInvalid(
                f"stored {self.model!r} vector of chunk {bad[0]} has {len(bad[2])} bytes and"
                f" dims {bad[1]}, expected {4 * dims} bytes and dims {dims}"
            )
        # Fill the matrix a slice at a time (no second full copy of the raw bytes), then
        # lay the rows out by workspace and document with one gather.
        raw = np.empty((len(rows), dims), dtype=np.float32)
        for start in range(0, len(rows), 20_000):
            part = rows[start : start + 20_000]
            raw[start : start + len(part)] = np.frombuffer(
                b"".join(r[2] for r in part), dtype="<f4"
            ).reshape(-1, dims)
        by_id = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        del rows
        layout = snapshot.layout
        chunk_ids = np.fromiter((c for c, _ in layout), dtype=np.int64, count=len(layout))
        vectors = raw[np.searchsorted(by_id, chunk_ids)]
        del raw
        ranges: dict[str, tuple[int, int]] = {}
        start = 0
        for i in range(1, len(layout) + 1):
            if i == len(layout) or layout[i][1] != layout[start][1]:
                ranges[layout[start][1]] = (start, i)
                start = i
        return _Matrix(version, vectors, chunk_ids, ranges)

    def _scope_rows(
        self,
        key: tuple[Scope, Filters | None, Exclusions | None],
        matrix: _Matrix,
        documents_version: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        memo = self._scope_memo.get(key)
        if memo is not None and memo[:2] == (matrix.version, documents_version):
            return memo[2], memo[3]
        spans = sorted(
            matrix.ranges[d] for d in self.store.scope_document_ids(*key) if d in matrix.ranges
        )
        starts: list[int] = []
        ends: list[int] = []
        for start, end in spans:
            if ends and ends[-1] == start:
                ends[-1] = end  # neighbouring documents: one slice
            else:
                starts.append(start)
                ends.append(end)
        result = (np.array(starts, np.int64), np.array(ends, np.int64))
        if len(self._scope_memo) >= _MAX_MEMO:
            self._scope_memo.clear()
        self._scope_memo[key] = (matrix.version, documents_version, *result)
        return result


def _score(
    vectors: np.ndarray, starts: np.ndarray, ends: np.ndarray, query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers and cosine scores of the rows in ``[starts[i], ends[i])``."""
    if len(starts) <= _MAX_SLICES:
        rows = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
        scores = np.concatenate([vectors[s:e] @ query for s, e in zip(starts, ends, strict=True)])
        return rows, scores
    rows = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
    return rows, vectors[rows] @ query
