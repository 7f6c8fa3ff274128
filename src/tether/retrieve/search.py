"""Hybrid search: FTS5 top-k_lexical and vector top-k_vector, fused by RRF, inside a scope."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Literal

from tether.embed import Embedder
from tether.errors import EmbeddingError
from tether.models import Hit, Scope
from tether.retrieve.fts import compile_match
from tether.retrieve.fusion import reciprocal_rank_fusion
from tether.retrieve.vector import VectorIndex
from tether.settings import RagSettings
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
    ) -> None:
        self.repo = repo
        self.rag = rag
        self.embedder = embedder
        self.embeddings_unavailable = embeddings_unavailable
        self.vectors = VectorIndex(repo, embedder.model) if embedder is not None else None

    def search(self, query: str, scope: Scope, k: int, mode: SearchMode) -> SearchResults:
        timings: dict[str, float] = {}
        degradations: list[str] = []
        debug: dict[str, Any] = {"mode": mode, "scope": scope.to_dict(), "k": k}

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
                    vector_hits = self.vectors.search(scope, query_vector, depth)
                timings["vector"] = _ms(started)
            except EmbeddingError as exc:
                degradations.append(f"query embedding failed, lexical only: {exc}")
                logger.warning("query embedding failed, lexical only: %s", exc)
                use_vectors = False

        lexical_hits: list[Hit] = []
        if mode == "lexical" or mode == "hybrid" or not use_vectors:
            started = time.perf_counter()
            match = compile_match(query)
            depth = max(k, self.rag.k_lexical) if mode == "hybrid" else k
            lexical_hits = self.repo.search_lexical(scope, match, depth) if match else []
            timings["lexical"] = _ms(started)

        started = time.perf_counter()
        if use_vectors and (mode == "vector" or lexical_hits or vector_hits):
            hits = self._fuse(lexical_hits, vector_hits, k, fuse=mode == "hybrid")
        else:
            hits = lexical_hits[:k]
        timings["fuse"] = _ms(started)

        debug.update(
            method="hybrid"
            if use_vectors and mode == "hybrid"
            else ("vector" if use_vectors else "lexical"),
            candidates={"lexical": len(lexical_hits), "vector": len(vector_hits)},
            returned=len(hits),
            rrf_k=self.rag.rrf_k,
            timings_ms=timings,
            degradations=degradations,
            ranks=_ranks(lexical_hits, vector_hits),
        )
        return SearchResults(hits, debug)

    def _fuse(
        self, lexical: list[Hit], vector: list[tuple[int, float]], k: int, *, fuse: bool
    ) -> list[Hit]:
        by_id: dict[int, Hit] = {h.chunk_id: h for h in lexical}
        if fuse:
            fused = reciprocal_rank_fusion(
                [[h.chunk_id for h in lexical], [cid for cid, _ in vector]],
                k=self.rag.rrf_k,
                weights=[self.rag.lexical_weight, self.rag.vector_weight],
            )[:k]
        else:
            fused = vector[:k]
        missing = [cid for cid, _ in fused if cid not in by_id]
        by_id.update(self.repo.hits_for_chunks(missing))
        # A chunk deleted between the two queries is simply dropped.
        return [
            dataclasses.replace(by_id[cid], score=score) for cid, score in fused if cid in by_id
        ]


def _ranks(lexical: list[Hit], vector: list[tuple[int, float]]) -> dict[int, dict[str, float]]:
    ranks: dict[int, dict[str, float]] = {}
    for rank, hit in enumerate(lexical, start=1):
        ranks.setdefault(hit.chunk_id, {}).update(lexical_rank=rank, bm25=hit.score)
    for rank, (chunk_id, cosine) in enumerate(vector, start=1):
        ranks.setdefault(chunk_id, {}).update(vector_rank=rank, cosine=cosine)
    return ranks


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
