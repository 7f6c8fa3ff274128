"""Hybrid search inside a scope: FTS5 top-k_lexical and vector top-k_vector, fused."""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from tether.embed import Embedder
from tether.errors import EmbeddingError
from tether.models import Exclusions, Filters, Hit, Scope
from tether.retrieve.fts import compile_match
from tether.retrieve.fusion import reciprocal_rank_fusion, zscore_fusion
from tether.retrieve.vector import VectorIndex
from tether.settings import PolicySettings, RagSettings
from tether.store import Repository

logger = logging.getLogger("tether.retrieve")

SearchMode = Literal["hybrid", "lexical", "vector"]


class SearchResults(list[Hit]):
    """The hits, best first (a plain list), plus ``debug``: what ran, counts, timings in
    milliseconds, per-chunk ranks of each method, and every degradation."""

    def __init__(self, hits: list[Hit], debug: dict[str, Any]) -> None:
        super().__init__(hits)
        self.debug = debug


class Searcher:
    def __init__(
        self,
        repo: Repository,
        rag: RagSettings,
        embedder: Embedder | None,
        *,
        embeddings_unavailable: str | None = None,
        policy: PolicySettings | None = None,
    ) -> None:
        self.repo = repo
        self.rag = rag
        self.policy = policy or PolicySettings()
        self.embedder = embedder
        self.embeddings_unavailable = embeddings_unavailable
        self.vectors = VectorIndex(repo, embedder.model) if embedder is not None else None

    def exclusions(self) -> Exclusions:
        """The policy's exclusions as of now (the log cutoff moves with the clock; it is
        cut to the minute so that caches keyed by it live that long)."""
        policy = self.policy
        cutoff = datetime.now(UTC) - timedelta(days=policy.log_retention_days)
        return Exclusions(
            log_cutoff=cutoff.strftime("%Y-%m-%dT%H:%M:00"),
            unverified_urls=policy.exclude_unverified_urls,
        )

    def search(
        self,
        query: str,
        scope: Scope,
        k: int,
        mode: SearchMode,
        filters: Filters | None = None,
    ) -> SearchResults:
        exclusions = self.exclusions()
        timings: dict[str, float] = {}
        degradations: list[str] = []
        debug: dict[str, Any] = {"mode": mode, "scope": scope.to_dict(), "k": k}
        if filters is not None:
            debug["filters"] = filters.to_dict()

        vector_hits: list[tuple[int, float]] = []
        use_vectors = mode in ("hybrid", "vector")
        if use_vectors and (self.embedder is None or self.vectors is None):
            degradations.append(self.embeddings_unavailable or "no embedder configured")
            use_vectors = False
        if use_vectors:
            assert self.embedder is not None and self.vectors is not None
            try:
                started = time.perf_counter()
                query_vector = self.embedder.embed_query(query) if query.strip() else None
                timings["embed_query"] = _ms(started)
                started = time.perf_counter()
                depth = max(k, self.rag.k_vector) if mode == "hybrid" else k
                if query_vector is not None:
                    vector_hits = self.vectors.search(
                        scope, query_vector, depth, filters, exclusions
                    )
                timings["vector"] = _ms(started)
            except EmbeddingError as exc:
                degradations.append(f"query embedding failed, lexical only: {exc}")
                logger.warning("query embedding failed, lexical only: %s", exc)
                use_vectors = False

        # Lexical-only (asked for, or vectors unavailable): the top k hits, directly.
        # Hybrid: a deep list of (chunk id, bm25) for fusion; text is read for the winners.
        lexical_hits: list[Hit] = []
        lexical_scores: list[tuple[int, float]] = []
        if mode != "vector" or not use_vectors:
            started = time.perf_counter()
            match = compile_match(query)
            if match and use_vectors:
                depth = max(k, self.rag.k_lexical)
                lexical_scores = self.repo.search_lexical_scores(
                    scope, match, depth, filters, exclusions
                )
            elif match:
                lexical_hits = self.repo.search_lexical(scope, match, k, filters, exclusions)
                lexical_scores = [(h.chunk_id, h.score) for h in lexical_hits]
            timings["lexical"] = _ms(started)

        started = time.perf_counter()
        fusion: dict[str, Any] | None = None
        if not use_vectors:
            hits = lexical_hits
        elif mode == "vector":
            hits = self.hits(vector_hits[:k])
        else:
            fused, fusion = self.fuse(lexical_scores, vector_hits)
            hits = self.hits(fused[:k])
        timings["fuse"] = _ms(started)

        debug.update(
            method="hybrid"
            if use_vectors and mode == "hybrid"
            else ("vector" if use_vectors else "lexical"),
            candidates={"lexical": len(lexical_scores), "vector": len(vector_hits)},
            returned=len(hits),
            fusion=fusion,
            timings_ms=timings,
            degradations=degradations,
            ranks=_ranks(hits, lexical_scores, vector_hits),
        )
        return SearchResults(hits, debug)

    def lexical_candidates(
        self,
        query: str,
        scope: Scope,
        depth: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, bm25)`` of the ``depth`` best FTS5 matches in ``scope``."""
        match = compile_match(query)
        if not match:
            return []
        return self.repo.search_lexical_scores(scope, match, depth, filters, exclusions)

    def fuse(
        self, lexical: list[tuple[int, float]], vector: list[tuple[int, float]]
    ) -> tuple[list[tuple[int, float]], dict[str, Any]]:
        """One query's lexical and vector lists fused by ``rag.fusion``, and its debug."""
        weights = [self.rag.lexical_weight, self.rag.vector_weight]
        if self.rag.fusion == "rrf":
            fused = reciprocal_rank_fusion(
                [[cid for cid, _ in lexical], [cid for cid, _ in vector]],
                k=self.rag.rrf_k,
                weights=weights,
            )
            return fused, {"method": "rrf", "rrf_k": self.rag.rrf_k, "weights": weights}
        fused = zscore_fusion([lexical, vector], weights=weights)
        return fused, {
            "method": "zscore",
            "weights": weights,
            "lexical": _moments([s for _, s in lexical]),
            "vector": _moments([s for _, s in vector]),
        }

    def hits(self, scored: list[tuple[int, float]]) -> list[Hit]:
        """Hits for ``(chunk_id, score)`` pairs, in order, with those scores."""
        found = self.repo.hits_for_chunks([cid for cid, _ in scored])
        # A chunk deleted between the queries is simply dropped.
        return [
            dataclasses.replace(found[cid], score=score) for cid, score in scored if cid in found
        ]


def _moments(scores: list[float]) -> dict[str, float] | None:
    """Mean and standard deviation of one list's raw scores (what z-score fusion used)."""
    if not scores:
        return None
    mean = statistics.fmean(scores)
    return {"mean": round(mean, 6), "std": round(statistics.pstdev(scores, mean), 6)}


def _ranks(
    hits: list[Hit], lexical: list[tuple[int, float]], vector: list[tuple[int, float]]
) -> dict[int, dict[str, float]]:
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


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
