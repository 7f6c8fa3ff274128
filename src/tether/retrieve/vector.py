"""Exact cosine top-k over the vectors of one scope, from an in-memory matrix.

The matrix holds every vector of one model, unit length, in segments: the first is laid
out by workspace and then by document, so a document is one contiguous block of rows and
a workspace (usually) one run of blocks; later segments hold the documents that changed
since it was loaded. A search asks SQL which documents the scope may see (the same
predicate as lexical search), turns them into row ranges, and scores only those rows:
nothing outside the scope is scanned.

A write never makes the next search reload everything. Triggers bump counters on every
change of embeddings or of document scopes and record which documents changed
(``rag_document_changes``, in order); when a counter moves, the index reads the documents
whose vectors changed since the change it last saw (in this process or any other) and
their vectors now: their old rows are dropped (marked dead) and their new ones become a
small segment. Each scope's memo of its documents' rows asks SQL about the changed
documents only (by id) and patches itself. Small segments are merged once there are
many, and dead rows are compacted away once they outnumber the live ones; only a delta
of more than a quarter of the documents is read as a full reload.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace

import numpy as np

from tether.errors import StoredVectorsInvalid
from tether.models import Exclusions, Filters, Scope
from tether.retrieve.signbits import edge_needed, hamming, nearest, separated, sign_codes
from tether.store import Store

# Above this many disjoint row ranges one gather (a copy) beats many small products.
_MAX_SLICES = 256
# Scopes whose row ranges are remembered between writes (one entry per session/workspace).
_MAX_MEMO = 1024
# Segments beyond the first before the later ones are merged into one.
_MAX_SEGMENTS = 8
# A delta of more than this share of the documents (and more than _MIN_DELTA) is read as a
# full reload instead.
_DELTA_SHARE = 0.25
_MIN_DELTA = 256
# Dead rows are compacted away once they outnumber the live ones and this many.
_MIN_DEAD = 1024
# A scope of at least this many rows is searched in two passes: the Hamming distance of
# each row's sign bits to the query's picks the candidates (48 bytes a row at 384 dims,
# not 1,536), then their float32 cosines rank them exactly. Smaller scopes are one
# exact pass.
QUANTIZED_MIN_ROWS = 200_000
# How many candidates the first pass keeps for ``k``: enough for recall@10 >= 0.99 at 1M
# (bench/vector_scale.py measures it).
QUANTIZED_DEPTH = 4_000
QUANTIZED_PER_K = 40
# A pool that does not separate (see ``_score_quantized``) is widened this many times once,
# then the scope is scanned exactly.
QUANTIZED_WIDEN = 4

# (segment, start rows, end rows) of the scope's documents, one entry per segment used.
_Spans = list[tuple[int, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class _Segment:
    vectors: np.ndarray  # (n, dims) float32, unit rows
    chunk_ids: np.ndarray  # (n,) int64
    #: What the sign bits are taken around: the mean vector of the load (embeddings are
    #: rarely centred at zero; a model whose values are all positive would have one code).
    center: np.ndarray | None = None

    @functools.cached_property
    def codes(self) -> np.ndarray:
        """Each row's sign bits around ``center``, packed, word-major: (words, n) uint64,
        so that a run of rows is one contiguous slice per word (made on first use)."""
        return np.ascontiguousarray(sign_codes(self.vectors, self.center).T)

    @functools.cached_property
    def id_order(self) -> np.ndarray:
        """Row numbers sorted by chunk id (for lookups by id)."""
        return np.argsort(self.chunk_ids, kind="stable")


@dataclass(frozen=True)
class _Matrix:
    version: tuple[int, int]  # the (embeddings, documents) counters it is current for
    seq: int  # the last document change it includes
    layout: int  # which layout of rows (a new one after a load, a merge or a compaction)
    dims: int
    segments: tuple[_Segment, ...]
    dead: tuple[np.ndarray, ...]  # per segment: rows no document points at any more
    ranges: dict[str, tuple[int, int, int]]  # document id -> (segment, start, end)
    live: int  # rows some document points at
    #: For a layout made by a merge or a compaction: (the layout it was made from, the
    #: first segment whose rows moved); rows of earlier segments did not move.
    moved: tuple[int, int] | None = None

    @property
    def rows(self) -> int:
        return sum(len(s.chunk_ids) for s in self.segments)


_EMPTY = (np.zeros((0, 0), np.float32), np.zeros(0, np.int64))


class _ScopeRows:
    """The rows of one scope's documents: each document's range (in arrays, so that a
    few changed documents are patched in place of asking SQL for all of them again)
    and the merged slices a search scans."""

    def __init__(self, matrix: _Matrix, documents: list[str]) -> None:
        self.seq = matrix.seq
        self.layout = matrix.layout
        self.position: dict[str, int] = {}
        self.documents: list[str] = []  # by position
        self.segments = np.zeros(0, np.int64)
        self.starts = np.zeros(0, np.int64)
        self.ends = np.zeros(0, np.int64)
        self.alive = np.zeros(0, bool)
        self.spans: _Spans = []
        self._add(matrix, documents)
        self._slice()

    def patch(self, matrix: _Matrix, changed: list[str], inside: list[str]) -> None:
        """The ``changed`` documents left the scope, then those ``inside`` it came back
        with their ranges now."""
        for document_id in changed:
            at = self.position.pop(document_id, None)
            if at is not None:
                self.alive[at] = False
        self._add(matrix, inside)
        dead = len(self.alive) - len(self.position)
        if dead > max(len(self.position), 64):  # drop the dead entries
            keep = np.flatnonzero(self.alive)
            self.documents = [self.documents[at] for at in keep.tolist()]
            self.position = {d: i for i, d in enumerate(self.documents)}
            self.segments, self.starts = self.segments[keep], self.starts[keep]
            self.ends, self.alive = self.ends[keep], self.alive[keep]
        self.seq = matrix.seq
        self._slice()

    def relayout(self, matrix: _Matrix, first: int) -> None:
        """The matrix merged or compacted its segments from ``first`` on: the documents
        there moved (found again by id), the others did not."""
        moved = np.flatnonzero(self.alive & (self.segments >= first))
        ranges = matrix.ranges
        for at in moved.tolist():
            span = ranges.get(self.documents[at])
            if span is None:  # its vectors went in the delta that came with the merge
                self.alive[at] = False
                del self.position[self.documents[at]]
            else:
                self.segments[at], self.starts[at], self.ends[at] = span
        self.layout = matrix.layout

    def _add(self, matrix: _Matrix, documents: list[str]) -> None:
        ranges = matrix.ranges
        found = [(d, ranges[d]) for d in documents if d in ranges]
        if not found:
            return
        first = len(self.alive)
        self.position.update((d, first + i) for i, (d, _) in enumerate(found))
        self.documents += [d for d, _ in found]
        spans = np.array([span for _, span in found], np.int64).reshape(-1, 3)
        self.segments = np.concatenate([self.segments, spans[:, 0]])
        self.starts = np.concatenate([self.starts, spans[:, 1]])
        self.ends = np.concatenate([self.ends, spans[:, 2]])
        self.alive = np.concatenate([self.alive, np.ones(len(found), bool)])

    def _slice(self) -> None:
        """The live ranges in row order, neighbours merged, grouped by segment."""
        keep = np.flatnonzero(self.alive)
        segments, starts, ends = self.segments[keep], self.starts[keep], self.ends[keep]
        order = np.lexsort((starts, segments))
        segments, starts, ends = segments[order], starts[order], ends[order]
        if len(starts) == 0:
            self.spans = []
            return
        # A slice begins where the segment changes or a range does not follow the last.
        begins = np.ones(len(starts), bool)
        begins[1:] = (segments[1:] != segments[:-1]) | (starts[1:] != ends[:-1])
        first = np.flatnonzero(begins)
        last = np.append(first[1:] - 1, len(starts) - 1)
        slice_segments, slice_starts, slice_ends = segments[first], starts[first], ends[last]
        spans: _Spans = []
        for segment in np.unique(slice_segments).tolist():
            mine = slice_segments == segment
            spans.append((segment, slice_starts[mine], slice_ends[mine]))
        self.spans = spans


class VectorIndex:
    """In-memory vectors of ``model`` over one store; safe to share between threads."""

    def __init__(self, store: Store, model: str) -> None:
        self.store = store
        self.model = model
        self._matrix: _Matrix | None = None
        self._scope_memo: dict[tuple[Scope, Filters | None, Exclusions | None], _ScopeRows] = {}
        self._lock = threading.Lock()
        self._memo_lock = threading.Lock()
        self._layouts = 0
        #: How the index caught up with writes: full loads, deltas, merges, compactions.
        self.stats = {
            "loads": 0,
            "deltas": 0,
            "merges": 0,
            "compactions": 0,
            "scope_loads": 0,
            "scope_patches": 0,
            "quantized": 0,
            "quantized_exact": 0,
        }

    def __len__(self) -> int:
        return 0 if self._matrix is None else self._matrix.live

    @property
    def loaded(self) -> bool:
        """Whether the vectors have been read into memory (they may be behind the store)."""
        return self._matrix is not None

    def load(self) -> int:
        """Read the vectors into memory now (a search would on first use); how many."""
        return self._current(self.store.change_counters()).live

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
        matrix = self._current(self.store.change_counters())
        if matrix.live == 0:
            return []
        _check_dims(query, matrix, self.model)
        spans = self._scope_rows((scope, filters, exclusions), matrix)
        if not spans:
            return []
        query = query.astype(np.float32)
        in_scope = sum(int((ends - starts).sum()) for _, starts, ends in spans)
        found: tuple[np.ndarray, np.ndarray] | None = None
        if in_scope >= QUANTIZED_MIN_ROWS:
            depth = max(QUANTIZED_DEPTH, QUANTIZED_PER_K * k)
            found = _score_quantized(matrix, spans, query, depth, k)
            self.stats["quantized" if found is not None else "quantized_exact"] += 1
        if found is None:
            found = _score(matrix, spans, query)
        chunk_ids, scores = found
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((chunk_ids[top], -scores[top]))]
        # (Python ints and floats, converted by numpy in one pass each.)
        ids, cosines = chunk_ids[top].tolist(), scores[top].astype(np.float64).tolist()
        return list(zip(ids, cosines, strict=True))

    def cosines(self, query: np.ndarray, chunk_ids: list[int]) -> dict[int, float]:
        """Cosine of ``query`` with each of ``chunk_ids`` that has a vector of this model.

        For chunks found by another method (lexical, another query), so that every
        candidate can be judged against the same question."""
        matrix = self._current(self.store.change_counters())
        if matrix.live == 0 or not chunk_ids:
            return {}
        _check_dims(query, matrix, self.model)
        query = query.astype(np.float32)
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        out: dict[int, float] = {}
        # Newest segment first: a chunk's live row is in the newest segment holding it.
        for segment, dead in zip(matrix.segments[::-1], matrix.dead[::-1], strict=True):
            if len(wanted) == 0:
                break
            order = segment.id_order
            if len(order) == 0:
                continue
            pos = np.minimum(
                np.searchsorted(segment.chunk_ids, wanted, sorter=order), len(order) - 1
            )
            rows = order[pos]
            found = (segment.chunk_ids[rows] == wanted) & ~dead[rows]
            scores = segment.vectors[rows[found]] @ query
            out.update((int(c), float(v)) for c, v in zip(wanted[found], scores, strict=True))
            wanted = wanted[~found]
        return out

    # -- keeping up with writes --

    def _current(self, counters: dict[str, int]) -> _Matrix:
        version = (counters["embeddings"], counters["documents"])
        matrix = self._matrix
        if matrix is not None and matrix.version == version:
            return matrix
        with self._lock:
            matrix = self._matrix
            if matrix is None or matrix.version != version:
                updated = self._apply_delta(matrix, version) if matrix is not None else None
                if updated is None:
                    updated = self._load(version)
                    self.stats["loads"] += 1
                self._matrix = updated
            return self._matrix

    def _next_layout(self) -> int:
        self._layouts += 1
        return self._layouts

    def _load(self, version: tuple[int, int]) -> _Matrix:
        snapshot = self.store.load_vectors(self.model)
        rows = snapshot.rows
        if not rows:
            return _Matrix(version, snapshot.seq, self._next_layout(), 0, (), (), {}, 0)
        dims = _dims_of(rows, self.model)
        # Fill the matrix a slice at a time (no second full copy of the raw bytes), then
        # lay the rows out by workspace and document with one gather.
        raw = _vectors(rows, dims)
        by_id = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        del rows
        layout = snapshot.layout
        chunk_ids = np.fromiter((c for c, _ in layout), dtype=np.int64, count=len(layout))
        vectors = raw[np.searchsorted(by_id, chunk_ids)]
        del raw
        ranges = {d: (0, s, e) for d, (s, e) in _runs(layout).items()}
        segment = _Segment(vectors, chunk_ids, vectors.mean(axis=0))
        if len(chunk_ids) >= QUANTIZED_MIN_ROWS:
            segment.codes  # noqa: B018 - made now, with the load, not by the first search
        dead = np.zeros(len(chunk_ids), bool)
        return _Matrix(
            version,
            snapshot.seq,
            self._next_layout(),
            dims,
            (segment,),
            (dead,),
            ranges,
            len(chunk_ids),
        )

    def _apply_delta(self, matrix: _Matrix, version: tuple[int, int]) -> _Matrix | None:
        """``matrix`` with the documents changed since it was read replaced by their
        vectors now; None when a full reload is due (a large delta, or other dims)."""
        limit = max(_MIN_DELTA, int(_DELTA_SHARE * len(matrix.ranges)))
        delta = self.store.vector_delta(self.model, matrix.seq, limit)
        if delta is None:
            return None
        if not delta.documents:  # no vector changed: only which scopes see what
            return replace(matrix, version=version, seq=delta.seq)
        dims = matrix.dims
        if delta.rows:
            dims = dims or delta.rows[0][1]
            if any(r[1] != dims or len(r[2]) != 4 * dims for r in delta.rows):
                return None  # the full load says what is wrong, or lays out new dims
        self.stats["deltas"] += 1
        ranges = dict(matrix.ranges)
        dead = list(matrix.dead)
        copied: set[int] = set()  # dead masks already copied (copy on write: readers)
        live = matrix.live
        for document_id in delta.documents:
            old = ranges.pop(document_id, None)
            if old is None:
                continue
            segment, start, end = old
            if segment not in copied:
                dead[segment] = dead[segment].copy()
                copied.add(segment)
            dead[segment][start:end] = True
            live -= end - start
        segments = list(matrix.segments)
        if delta.rows:
            chunk_ids = np.fromiter((c for c, _ in delta.layout), np.int64, len(delta.layout))
            segments.append(_Segment(_vectors(delta.rows, dims), chunk_ids, _center(matrix)))
            dead.append(np.zeros(len(chunk_ids), bool))
            at = len(segments) - 1
            ranges.update((d, (at, s, e)) for d, (s, e) in _runs(delta.layout).items())
            live += len(chunk_ids)
        updated = _Matrix(
            version, delta.seq, matrix.layout, dims, tuple(segments), tuple(dead), ranges, live
        )
        if updated.rows - live > max(live, _MIN_DEAD):
            self.stats["compactions"] += 1
            return _compact(updated, 0, self._next_layout())
        if len(segments) > 1 + _MAX_SEGMENTS:
            self.stats["merges"] += 1
            return _compact(updated, 1, self._next_layout())
        return updated

    def _scope_rows(
        self, key: tuple[Scope, Filters | None, Exclusions | None], matrix: _Matrix
    ) -> _Spans:
        """The slices of ``matrix`` the scope ``key`` may read. Remembered per scope; after
        a write only the documents changed since are asked about (in SQL, by id)."""
        with self._memo_lock:
            rows = self._scope_memo.get(key)
            if rows is not None and (rows.seq, rows.layout) == (matrix.seq, matrix.layout):
                return rows.spans
            if rows is not None and matrix.moved is not None and rows.seq <= matrix.seq:
                previous, first = matrix.moved
                if rows.layout == previous:  # moved rows: find them again, not ask SQL
                    rows.relayout(matrix, first)
            if rows is not None and rows.layout == matrix.layout and rows.seq <= matrix.seq:
                limit = max(_MIN_DELTA, int(_DELTA_SHARE * len(rows.position)))
                changes = self.store.document_changes(rows.seq, limit)
                if changes is not None:
                    changed = changes[1]
                    inside = self.store.scope_document_ids(*key, among=changed) if changed else []
                    rows.patch(matrix, changed, inside)
                    self.stats["scope_patches"] += 1
                    return rows.spans
            fresh = _ScopeRows(matrix, self.store.scope_document_ids(*key))
            self.stats["scope_loads"] += 1
            if rows is not None and rows.seq > matrix.seq:
                # A search still on an older matrix (another thread moved on meanwhile):
                # answer it, and keep the newer memo.
                return fresh.spans
            rows = fresh
            if len(self._scope_memo) >= _MAX_MEMO:
                self._scope_memo.clear()
            self._scope_memo[key] = rows
            return rows.spans


def _check_dims(query: np.ndarray, matrix: _Matrix, model: str) -> None:
    if query.shape != (matrix.dims,):
        raise ValueError(
            f"query has {query.shape} dims; stored {model!r} vectors have {matrix.dims}"
        )


def _dims_of(rows: list[tuple[int, int, bytes]], model: str) -> int:
    dims = rows[0][1]
    bad = next((r for r in rows if r[1] != dims or len(r[2]) != 4 * dims), None)
    if bad is not None:
        raise StoredVectorsInvalid(
            f"stored {model!r} vector of chunk {bad[0]} has {len(bad[2])} bytes and"
            f" dims {bad[1]}, expected {4 * dims} bytes and dims {dims}"
        )
    return dims


def _vectors(rows: list[tuple[int, int, bytes]], dims: int) -> np.ndarray:
    """The rows' vectors as one float32 matrix, filled a slice at a time."""
    out = np.empty((len(rows), dims), dtype=np.float32)
    for start in range(0, len(rows), 20_000):
        part = rows[start : start + 20_000]
        out[start : start + len(part)] = np.frombuffer(
            b"".join(r[2] for r in part), dtype="<f4"
        ).reshape(-1, dims)
    return out


def _runs(layout: list[tuple[int, str]]) -> dict[str, tuple[int, int]]:
    """Document id -> its [start, end) rows in ``layout`` (each document one run)."""
    ranges: dict[str, tuple[int, int]] = {}
    start = 0
    for i in range(1, len(layout) + 1):
        if i == len(layout) or layout[i][1] != layout[start][1]:
            ranges[layout[start][1]] = (start, i)
            start = i
    return ranges


def _compact(matrix: _Matrix, first: int, layout: int) -> _Matrix:
    """``matrix`` with the live rows of segments ``first`` onwards gathered into one new
    segment, in their present order (their dead rows dropped)."""
    moved = sorted((span, d) for d, span in matrix.ranges.items() if span[0] >= first)
    parts = [matrix.segments[s].vectors[a:b] for (s, a, b), _ in moved]
    ids = [matrix.segments[s].chunk_ids[a:b] for (s, a, b), _ in moved]
    vectors = np.concatenate(parts) if parts else _EMPTY[0].reshape(0, matrix.dims)
    chunk_ids = np.concatenate(ids) if ids else _EMPTY[1]
    ranges = {d: span for d, span in matrix.ranges.items() if span[0] < first}
    at = 0
    for (_, a, b), document_id in moved:
        ranges[document_id] = (first, at, at + b - a)
        at += b - a
    segments = (*matrix.segments[:first], _Segment(vectors, chunk_ids, _center(matrix)))
    dead = (*matrix.dead[:first], np.zeros(len(chunk_ids), bool))
    return _Matrix(
        matrix.version,
        matrix.seq,
        layout,
        matrix.dims,
        segments,
        dead,
        ranges,
        matrix.live,
        moved=(matrix.layout, first),
    )


def _expand(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The rows of the ranges ``[starts[i], ends[i])``, in order (no loop per range)."""
    lengths = ends - starts
    before = np.cumsum(lengths) - lengths  # rows of the earlier ranges
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - before, lengths)


def _score(matrix: _Matrix, spans: _Spans, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ids and cosine scores of the rows of ``spans``."""
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    for index, starts, ends in spans:
        segment = matrix.segments[index]
        rows = _expand(starts, ends)
        if len(starts) <= _MAX_SLICES:
            vectors = segment.vectors
            scores.append(
                np.concatenate([vectors[s:e] @ query for s, e in zip(starts, ends, strict=True)])
            )
        else:
            scores.append(segment.vectors[rows] @ query)
        ids.append(segment.chunk_ids[rows])
    if len(ids) == 1:
        return ids[0], scores[0]
    return np.concatenate(ids), np.concatenate(scores)


def _center(matrix: _Matrix) -> np.ndarray | None:
    return matrix.segments[0].center if matrix.segments else None


def _score_quantized(
    matrix: _Matrix, spans: _Spans, query: np.ndarray, depth: int, k: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Chunk ids and exact cosine scores of the rows of ``spans`` whose sign bits are
    nearest the query's: the ``depth`` nearest (and any tied with the last), or
    ``QUANTIZED_WIDEN`` times as many when the first pool does not separate; None when
    neither does, and only an exact scan can be trusted.

    A pool *separates* when the Hamming distances of its exact top ``k`` stay clear of the
    pool's edge (``separated``). Real embeddings have near neighbours whose sign bits
    agree far more than the bulk's, and they land deep inside the pool; vectors with no
    structure (random ones) have none, their top ``k`` lie at the edge, and rows just
    past it would do as well."""
    segments: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    distances: list[np.ndarray] = []
    for index, starts, ends in spans:
        segment_ = matrix.segments[index]
        codes, code = segment_.codes, sign_codes(query[None, :], segment_.center)[0]
        picked = _expand(starts, ends)
        if len(starts) <= _MAX_SLICES:
            found = [hamming(codes[:, s:e], code) for s, e in zip(starts, ends, strict=True)]
            distances.append(np.concatenate(found))
        else:
            distances.append(hamming(codes[:, picked], code))
        rows.append(picked)
        segments.append(np.full(len(picked), index, np.int64))
    distance, row, segment = (np.concatenate(x) for x in (distances, rows, segments))
    keep = nearest(distance, depth)
    ids, scores, kept = _rescore(matrix, row[keep], segment[keep], distance[keep], query)
    if len(keep) == len(distance) or separated(scores, kept, k, matrix.dims):
        return ids, scores
    wider = nearest(distance, depth * QUANTIZED_WIDEN)
    # Not worth reading: even a k-th best as near as this pool's best would need an edge
    # past the wider pool's (no structure to find; scan exactly at once).
    if int(distance[wider].max()) < edge_needed(float(scores.max()), matrix.dims):
        return None
    ids, scores, kept = _rescore(matrix, row[wider], segment[wider], distance[wider], query)
    if len(wider) == len(distance) or separated(scores, kept, k, matrix.dims):
        return ids, scores
    return None


def _rescore(
    matrix: _Matrix, row: np.ndarray, segment: np.ndarray, distance: np.ndarray, query: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chunk ids, exact cosines and Hamming distances of the picked rows."""
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    distances: list[np.ndarray] = []
    for index in np.unique(segment).tolist():
        mine = segment == index
        order = np.argsort(row[mine], kind="stable")  # in row order: a forward gather
        picked = row[mine][order]
        ids.append(matrix.segments[index].chunk_ids[picked])
        scores.append(matrix.segments[index].vectors[picked] @ query)
        distances.append(distance[mine][order])
    return np.concatenate(ids), np.concatenate(scores), np.concatenate(distances)
