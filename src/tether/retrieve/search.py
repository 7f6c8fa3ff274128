"""One query's candidates inside a scope, and hybrid search on top of them.

:meth:`Searcher.candidates` is the one place a query becomes ranked chunk ids: FTS5
top-``lexical_depth`` ∥ vector top-``vector_depth`` (both scoped in SQL), fused by
``rag.fusion``. :meth:`Searcher.search` (``Tether.search``) and the retrieval pipeline
(once per query) both call it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import statistics
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np

from tether.embed import Embedder
from tether.errors import EmbeddingError, StoredVectorsInvalid
from tether.models import Exclusions, Filters, Hit, Scope
from tether.retrieve.fts import compile_match
from tether.retrieve.fusion import reciprocal_rank_fusion, zscore_fusion, zscore_lifts
from tether.retrieve.vector import VectorIndex
from tether.settings import PolicySettings, RagSettings
from tether.store import Store

logger = logging.getLogger("tether.retrieve")

SearchMode = Literal["hybrid", "lexical", "vector"]
Ranked = list[tuple[int, float]]


class SearchResults(list[Hit]):
    """The hits, best first (a plain list), plus the ``query``, ``scope`` (as resolved)
    and ``k`` they answer, and ``debug``: what ran, counts, timings in milliseconds,
    per-chunk ranks of each method, and every degradation. ``candidates`` are the ranked
    lists the hits were taken from; ``evidence``, when the hits were judged
    (``Tether.search(judge=True)``), each hit's evidence (0..1) by chunk id."""

    def __init__(
        self,
        hits: list[Hit],
        debug: dict[str, Any],
        *,
        query: str,
        scope: Scope,
        k: int,
        candidates: Candidates | None = None,
    ) -> None:
        super().__init__(hits)
        self.debug = debug
        self.query = query
        self.scope = scope
        self.k = k
        self.candidates = candidates
        self.evidence: dict[int, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of a search (``tether search --json``, ``POST /v1/search``): the
        query, scope and k it answered, its hits (each with its ``evidence`` when the
        hits were judged), and its debug without the per-chunk ranks (one entry per
        candidate: too long to print)."""
        debug = {key: value for key, value in self.debug.items() if key != "ranks"}
        hits = [hit.to_dict() for hit in self]
        if self.evidence is not None:
            for hit in hits:
                hit["evidence"] = round(self.evidence.get(hit["chunk_id"], 0.0), 4)
        return {
            "query": self.query,
            "scope": self.scope.to_dict(),
            "k": self.k,
            "hits": hits,
            "debug": debug,
        }


@dataclasses.dataclass
class _LexicalSide:
    """What the lexical side of one query found."""

    ranked: Ranked
    hits: dict[int, Hit] | None
    timings_ms: dict[str, float]


@dataclasses.dataclass
class _VectorSide:
    """What the vector side of one query found; ``ran`` False: it could not run, and
    ``degradations`` says why."""

    ranked: Ranked
    ran: bool
    query_vector: np.ndarray | None = None
    timings_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    degradations: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Candidates:
    """One query's ranked chunk ids: each side's list and the fused one (best first).

    ``method`` is what actually ran (``hybrid``, ``lexical`` or ``vector``: vectors that
    were asked for but could not run leave ``lexical``, with the reason among the
    ``degradations``); ``query_vector`` is the query's embedding when vectors ran."""

    lexical: Ranked
    vector: Ranked
    fused: Ranked
    method: str
    query_vector: np.ndarray | None = None
    fusion: dict[str, Any] | None = None
    #: Whether the vector side ran (``False``: lexical only, for the reason recorded).
    vectors_ran: bool = False
    #: The lexical side's hits by chunk id, read with their ranks in one query (when
    #: asked for with ``with_text``: chunk ids are not stable across a replace).
    lexical_hits: dict[int, Hit] | None = None
    timings_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    degradations: list[str] = dataclasses.field(default_factory=list)


class Searcher:
    """Scoped candidate search over one store. ``embedder`` may be a callable that makes
    it on first use (``(embedder or None, why not)``), so that lexical work never loads a
    model."""

    def __init__(
        self,
        store: Store,
        rag: RagSettings,
        embedder: Embedder | Callable[[], tuple[Embedder | None, str | None]] | None,
        *,
        embeddings_unavailable: str | None = None,
        policy: PolicySettings | None = None,
    ) -> None:
        self.store = store
        self.rag = rag
        self.policy = policy or PolicySettings()
        if embedder is None or isinstance(embedder, Embedder):
            fixed = (embedder, embeddings_unavailable)
            self._make_embedder: Callable[[], tuple[Embedder | None, str | None]] = lambda: fixed
        else:
            self._make_embedder = embedder
        self._vectors: tuple[Embedder | None, VectorIndex | None, str | None] | None = None
        self._lock = threading.Lock()
        self._warm_lock = threading.Lock()
        self._warmed = False
        self._side_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    # -- the embedder and its vectors, made on first use ----------------------------------

    def _vector_side(self) -> tuple[Embedder | None, VectorIndex | None, str | None]:
        with self._lock:
            if self._vectors is None:
                embedder, unavailable = self._make_embedder()
                index = None
                if embedder is not None:  # the backend's own vector search, else in memory
                    index = self.store.native_vectors(embedder.model)
                    if index is None:
                        index = VectorIndex(self.store, embedder.model)
                self._vectors = (embedder, index, unavailable)
            return self._vectors

    @property
    def embedder(self) -> Embedder | None:
        return self._vector_side()[0]

    @property
    def warm(self) -> bool:
        """Whether :meth:`warm_up` has run (the model and the vectors are in memory)."""
        return self._warmed

    def warm_up(self) -> dict[str, float]:
        """Load the embedding model (running it once) and the stored vectors now, so that
        no search pays for them; milliseconds each took (nothing: 0). Safe to call from
        several threads: one loads, the others wait for it."""
        with self._warm_lock:
            if self._warmed:
                return {}
            timings: dict[str, float] = {}
            t0 = time.perf_counter()
            embedder, index, _ = self._vector_side()
            # The vectors load on a helper thread while the model loads here.
            loading = (
                self._pool().submit(index.load)
                if index is not None and embedder is not None and self._can_run_sides_apart()
                else None
            )
            if embedder is not None:
                try:
                    embedder.warm()
                except Exception as exc:
                    logger.warning("warming the embedder failed: %s", exc)
                timings["model_ms"] = ms_since(t0)
            if index is not None:
                t0 = time.perf_counter()
                try:
                    loading.result() if loading is not None else index.load()
                except StoredVectorsInvalid as exc:  # each search degrades, and says why
                    logger.warning("loading the stored vectors failed: %s", exc)
                timings["vectors_ms"] = ms_since(t0)
            self._warmed = True
            return timings

    @property
    def vectors(self) -> VectorIndex | None:
        return self._vector_side()[1]

    @property
    def embeddings_unavailable(self) -> str | None:
        return self._vector_side()[2]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._side_pool = self._side_pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def exclusions(self) -> Exclusions:
        """The policy's exclusions as of now (the log cutoff moves with the clock; it is
        cut to the minute so that caches keyed by it live that long)."""
        policy = self.policy
        cutoff = datetime.now(UTC) - timedelta(days=policy.log_retention_days)
        return Exclusions(
            log_cutoff=cutoff.strftime("%Y-%m-%dT%H:%M:00"),
            unverified_urls=policy.exclude_unverified_urls,
        )

    # -- one query's candidates ------------------------------------------------------------

    def candidates(
        self,
        query: str,
        scope: Scope,
        *,
        mode: SearchMode = "hybrid",
        lexical_depth: int,
        vector_depth: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
        with_text: bool = False,
        parallel: bool = False,
    ) -> Candidates:
        """The ranked candidates of ``query`` in ``scope``, fused by ``rag.fusion``.

        Vectors that cannot run (no embedder, a failed query embedding, unusable stored
        vectors) degrade to lexical, recorded in ``degradations``. ``with_text`` reads
        the lexical side's hits with its ranking, in one query. ``parallel`` runs the
        lexical side on a helper thread while the vector side runs here (the pipeline
        does; a plain search stays in the caller's thread, and so in its transaction)."""
        exclusions = exclusions if exclusions is not None else self.exclusions()
        wants_lexical = mode != "vector"
        side = lexical = None
        vector = _VectorSide([], ran=False)
        if mode in ("hybrid", "vector"):
            if parallel and wants_lexical and self._can_run_sides_apart():
                side = self._pool().submit(
                    self._lexical, query, scope, lexical_depth, filters, exclusions, with_text
                )
            vector = self._vector(query, scope, vector_depth, filters, exclusions)
        if side is not None:
            lexical = side.result()
        elif wants_lexical or not vector.ran:
            # (Vector mode without vectors falls back to the lexical side.)
            lexical = self._lexical(query, scope, lexical_depth, filters, exclusions, with_text)
        found = Candidates(
            lexical=lexical.ranked if lexical else [],
            vector=vector.ranked,
            fused=[],
            method="lexical",
            query_vector=vector.query_vector,
            vectors_ran=vector.ran,
            lexical_hits=lexical.hits if lexical else None,
            timings_ms={**(lexical.timings_ms if lexical else {}), **vector.timings_ms},
            degradations=list(vector.degradations),
        )
        self._fuse_sides(mode, found)
        return found

    def _can_run_sides_apart(self) -> bool:
        return self.vectors is not None and self.store.cross_thread and not self._closed

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._side_pool is None:
                self._side_pool = concurrent.futures.ThreadPoolExecutor(
                    4, thread_name_prefix="tether-lexical"
                )
            return self._side_pool

    def _lexical(
        self,
        query: str,
        scope: Scope,
        depth: int,
        filters: Filters | None,
        exclusions: Exclusions,
        with_text: bool = False,
    ) -> _LexicalSide:
        """The lexical side's ranking (and, ``with_text``, its hits, read in one query)."""
        started = time.perf_counter()
        match = compile_match(query, self.rag.language)
        ranked: Ranked = []
        hits = None
        if match and with_text:
            found = self.store.search_lexical(scope, match, depth, filters, exclusions)
            ranked = [(h.chunk_id, h.score) for h in found]
            hits = {h.chunk_id: h for h in found}
        elif match:
            ranked = self.store.search_lexical_scores(scope, match, depth, filters, exclusions)
        return _LexicalSide(ranked, hits, {"lexical": ms_since(started)})

    def _vector(
        self,
        query: str,
        scope: Scope,
        depth: int,
        filters: Filters | None,
        exclusions: Exclusions,
    ) -> _VectorSide:
        """The vector side's ranking; one that cannot run says why (``ran`` False)."""
        embedder, vectors, unavailable = self._vector_side()
        if embedder is None or vectors is None:
            reason = f"lexical only: {unavailable or 'no embedder configured'}"
            return _VectorSide([], ran=False, degradations=[reason])
        if not query.strip():
            return _VectorSide([], ran=True)  # nothing to embed: no vector candidates
        timings: dict[str, float] = {}
        if not vectors.loaded and self._can_run_sides_apart():
            # A cold start: the stored vectors load on a helper thread while the model
            # loads and embeds here (both mostly outside the GIL); the search below
            # waits for them, and catches up with anything this thread's transaction wrote.
            self._pool().submit(vectors.load)
        try:
            started = time.perf_counter()
            query_vector = embedder.embed_query(query)
            timings["embed_query"] = ms_since(started)
            started = time.perf_counter()
            ranked = vectors.search(scope, query_vector, depth, filters, exclusions)
            timings["vector"] = ms_since(started)
        except StoredVectorsInvalid as exc:
            logger.error("stored vectors unusable, lexical only: %s", exc)
            reason = f"stored vectors unusable, lexical only: {exc}"
            return _VectorSide([], ran=False, timings_ms=timings, degradations=[reason])
        except EmbeddingError as exc:
            logger.warning("query embedding failed, lexical only: %s", exc)
            reason = f"query embedding failed, lexical only: {exc}"
            return _VectorSide([], ran=False, timings_ms=timings, degradations=[reason])
        return _VectorSide(ranked, ran=True, query_vector=query_vector, timings_ms=timings)

    def _fuse_sides(self, mode: SearchMode, found: Candidates) -> None:
        started = time.perf_counter()
        if not found.vectors_ran:
            found.method, found.fused = "lexical", found.lexical
        elif mode == "vector":
            found.method, found.fused = "vector", found.vector
        else:
            found.method = "hybrid"
            found.fused, found.fusion = self.fuse(found.lexical, found.vector)
        found.timings_ms["fuse"] = ms_since(started)

    def fuse(self, lexical: Ranked, vector: Ranked) -> tuple[Ranked, dict[str, Any]]:
        """One query's lexical and vector lists fused by ``rag.fusion``, and its debug."""
        weights = [self.rag.lexical_weight, self.rag.vector_weight]
        if self.rag.fusion == "rrf":
            fused = reciprocal_rank_fusion(
                [[cid for cid, _ in lexical], [cid for cid, _ in vector]],
                k=self.rag.rrf_k,
                weights=weights,
                scores=[[score for _, score in lexical], [score for _, score in vector]],
            )
            return fused, {"method": "rrf", "rrf_k": self.rag.rrf_k, "weights": weights}
        fused = zscore_fusion([lexical, vector], weights=weights)
        lifts = zscore_lifts([lexical, vector], weights=weights)
        debug: dict[str, Any] = {"method": "zscore", "weights": weights}
        # A hit's score: the sum of weight * max((s - mean) / std + lift, -3), std 0 counting
        # as z 0, and weight * -3 for a side that lacks it.
        sides = zip(("lexical", "vector"), (lexical, vector), lifts, strict=True)
        for side, ranked, lift in sides:
            moments = _moments([s for _, s in ranked])
            debug[side] = None if moments is None else {**moments, "lift": round(lift, 6)}
        return fused, debug

    # -- search: the top k of one query, as hits ---------------------------------------------

    def search(
        self,
        query: str,
        scope: Scope,
        k: int,
        mode: SearchMode,
        filters: Filters | None = None,
    ) -> SearchResults:
        """The ``k`` best hits: in hybrid mode from ``rag.depths(k)`` lexical and vector
        candidates (each side's setting, and at least ``k``); one side alone gives its top
        ``k``."""
        hybrid = mode == "hybrid" and self.vectors is not None
        exclusions = self.exclusions()
        found = self.candidates(
            query,
            scope,
            mode=mode,
            lexical_depth=self.rag.depths(k)[0] if hybrid else k,
            vector_depth=self.rag.depths(k)[1] if hybrid else k,
            filters=filters,
            exclusions=exclusions,
            with_text=not hybrid,
            # Both sides at once, unless the caller's transaction must see them both.
            parallel=not self.store.in_transaction,
        )
        if found.method == "lexical" and found.lexical_hits is None:
            # Vectors failed after the lexical side read its deep list of ids: the top k
            # instead, with their text, in one query (ids can be reused by a replace).
            side = self._lexical(query, scope, k, filters, exclusions, with_text=True)
            found.lexical, found.lexical_hits = side.ranked, side.hits
            found.fused = found.lexical
            found.timings_ms.update(side.timings_ms)
        started = time.perf_counter()
        if found.lexical_hits is not None and found.method == "lexical":
            hits = [found.lexical_hits[cid] for cid, _ in found.fused[:k]]
        else:
            hits = self.hits(found.fused[:k])
        # (Reading the winners' text counts as part of fusion, as it always has.)
        found.timings_ms["fuse"] = round(found.timings_ms["fuse"] + ms_since(started), 3)
        debug: dict[str, Any] = {"mode": mode, "scope": scope.to_dict(), "k": k}
        if filters is not None:
            debug["filters"] = filters.to_dict()
        debug.update(
            method=found.method,
            candidates={"lexical": len(found.lexical), "vector": len(found.vector)},
            returned=len(hits),
            fusion=found.fusion,
            timings_ms=found.timings_ms,
            degradations=found.degradations,
            ranks=_ranks(hits, found.lexical, found.vector),
        )
        return SearchResults(hits, debug, query=query, scope=scope, k=k, candidates=found)

    def hits(self, scored: Ranked) -> list[Hit]:
        """Hits for ``(chunk_id, score)`` pairs, in order, with those scores."""
        found = self.store.hits_for_chunks(
            [cid for cid, _ in scored], [score for _, score in scored]
        )
        # A chunk deleted between the queries is simply dropped.
        return [found[cid] for cid, _ in scored if cid in found]


def _moments(scores: list[float]) -> dict[str, float] | None:
    """Mean and standard deviation of one list's raw scores (what z-score fusion used)."""
    if not scores:
        return None
    mean = statistics.fmean(scores)
    return {"mean": round(mean, 6), "std": round(statistics.pstdev(scores, mean), 6)}


def _ranks(hits: list[Hit], lexical: Ranked, vector: Ranked) -> dict[int, dict[str, float]]:
    """For each returned chunk: its rank and raw score in each list it was in."""
    returned = {h.chunk_id for h in hits}
    ranks: dict[int, dict[str, float]] = {cid: {} for cid in returned}
    for rank, (chunk_id, bm25) in enumerate(lexical, start=1):
        if chunk_id in returned:
            ranks[chunk_id].update(lexical_rank=rank, bm25=bm25)
    for rank, (chunk_id, cosine) in enumerate(vector, start=1):
        if chunk_id in returned:
            ranks[chunk_id].update(vector_rank=rank, cosine=cosine)
    return ranks


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()``), to the microsecond."""
    return round((time.perf_counter() - started) * 1000, 3)
