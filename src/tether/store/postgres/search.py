"""Scoped search on PostgreSQL: BM25 over each chunk's ``tsvector``, and pgvector.

**Lexical.** The query is the compiled FTS5 expression every backend is given
(``"term" OR "term"``, :func:`tether.retrieve.fts.compile_match`). Its terms are folded
and stemmed as the chunks were (:mod:`tether.store.postgres.terms`, the ``tether``
configuration), the chunks in scope that hold any of them are found through the GIN
index, and each is scored with FTS5's own BM25 (k1 = 1.2, b = 0.75,
idf = ln((N - df + 0.5) / (df + 0.5)), at least 1e-6; N, the average length and df over
the whole store, as FTS5 counts them), so a lexical score means the same on both
backends. A phrase of the expression (``"6 4"``, a compound of the query) is scored as
FTS5 scores one: its hits are where its lexemes stand in order in the ``tsvector``.

**Vectors.** pgvector's HNSW index (cosine) answers scopes that hold most of the store,
with ``hnsw.ef_search`` raised for the share the scope holds and the scope in the same
statement; a smaller scope, or an HNSW answer short of ``k`` rows, is an exact scan of
the scope's own vectors. The scope is never applied after the ``k`` are chosen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tether.models import Exclusions, Filters, Hit, Scope
from tether.store import _rows
from tether.store._search import SearchMixin
from tether.store.dialect import POSTGRES
from tether.store.postgres.database import PgConnection
from tether.store.postgres.schema import quote_literal
from tether.store.postgres.terms import fold
from tether.store.records import TermStatistics
from tether.store.sql import match_terms, option_condition, scope_sql

K1, B = 1.2, 0.75
#: A scope holding at least this share of the store's vectors is searched through HNSW.
HNSW_SHARE = 0.5
#: pgvector's largest ``hnsw.ef_search``.
MAX_EF_SEARCH = 1000


def _tsquery(lexemes: Sequence[str]) -> str:
    return " | ".join("'" + lx.replace("\\", "\\\\").replace("'", "''") + "'" for lx in lexemes)


class PgSearch(SearchMixin):
    """The lexical side and term statistics of
    :class:`~tether.store.postgres.PostgresStore`."""

    _lexeme_cache: dict[str, tuple[str, ...]]

    def _lexemes(self, conn: PgConnection, terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Each term's lexemes, as the ``tether`` configuration stems it (cached)."""
        missing = [t for t in dict.fromkeys(terms) if t not in self._lexeme_cache]
        if missing:
            found: dict[str, list[str]] = {t: [] for t in missing}
            rows = conn.execute(
                "SELECT t.term, l FROM unnest(:terms ::text[]) AS t(term),"
                " unnest(tsvector_to_array(to_tsvector('tether', t.term))) AS l",
                {"terms": [fold(t) for t in missing]},
            ).fetchall()
            by_folded: dict[str, list[str]] = {}
            for folded, lexeme in rows:
                by_folded.setdefault(folded, []).append(lexeme)
            for t in missing:
                found[t] = by_folded.get(fold(t), [])
            if len(self._lexeme_cache) > 50_000:
                self._lexeme_cache.clear()
            self._lexeme_cache.update((t, tuple(v)) for t, v in found.items())
        return {t: self._lexeme_cache[t] for t in terms}

    def search_lexical(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[Hit]:
        rows = self._bm25(scope, match, k, False, filters, exclusions)
        return [_rows.hit(row, row[_rows.HIT_WIDTH]) for row in rows]

    def search_lexical_scores(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]:
        rows = self._bm25(scope, match, k, True, filters, exclusions)
        return [(chunk_id, float(score)) for chunk_id, score in rows]

    def _bm25(
        self,
        scope: Scope,
        match: str,
        k: int,
        ids_only: bool,
        filters: Filters | None,
        exclusions: Exclusions | None,
    ) -> list[Any]:
        terms = match_terms(match)
        words = [t for t in terms if " " not in t]
        with self.db.read() as conn:
            lexemes = sorted({lx for lxs in self._lexemes(conn, words).values() for lx in lxs})
            phrased = self._phrase_scores(conn, [t for t in terms if " " in t])
            if not lexemes and not phrased:
                return []
            where, params = scope_sql(scope, filters, exclusions, dialect=POSTGRES)
            columns = "c.id" if ids_only else _rows.HIT_COLUMNS
            sql = f"""
                WITH stats AS (
                    SELECT (SELECT value FROM rag_state WHERE key = 'chunks')::float8 AS n,
                           (SELECT value FROM rag_state WHERE key = 'terms')::float8
                           / greatest((SELECT value FROM rag_state WHERE key = 'chunks'), 1)
                           AS avgdl),
                q AS MATERIALIZED (
                    SELECT l.lexeme,
                           greatest(ln((s.n - l.df + 0.5) / (l.df + 0.5)), 1e-6) AS idf
                    FROM rag_lexemes l CROSS JOIN stats s
                    WHERE l.lexeme = ANY(:lexemes) AND l.df > 0),
                parts AS (
                    SELECT p.chunk_id AS id, q.idf * (p.tf * {K1 + 1!r})
                        / (p.tf + {K1!r} * ({1 - B!r} + {B!r} * c.terms
                                            / greatest(s.avgdl, 1e-9))) AS score
                    FROM q JOIN rag_postings p ON p.lexeme = q.lexeme
                    JOIN rag_chunks c ON c.id = p.chunk_id
                    CROSS JOIN stats s
                    UNION ALL
                    SELECT unnest(:phrase_ids ::bigint[]), unnest(:phrase_scores ::float8[])),
                scored AS (
                    SELECT parts.id, sum(parts.score) AS score
                    FROM parts JOIN rag_chunks c ON c.id = parts.id
                    JOIN rag_documents d ON d.id = c.document_id
                    WHERE {where}
                    GROUP BY parts.id
                    ORDER BY score DESC, parts.id
                    LIMIT :k)
                SELECT {columns}, scored.score
                FROM scored JOIN rag_chunks c ON c.id = scored.id
                JOIN rag_documents d ON d.id = c.document_id
                ORDER BY scored.score DESC, c.id
            """
            params.update(
                lexemes=lexemes,
                k=int(k),
                phrase_ids=list(phrased),
                phrase_scores=list(phrased.values()),
            )
            return conn.execute(sql, params).fetchall()

    def _phrase_scores(self, conn: PgConnection, phrases: Sequence[str]) -> dict[int, float]:
        """Each chunk's BM25 over ``phrases`` (terms of a compiled expression that are
        phrases, such as ``"6 4"``), as FTS5 scores a phrase: its hits in the chunk are
        the places where its lexemes stand one after the other (read from the
        ``tsvector``'s positions), its document frequency the chunks of the whole store
        with a hit."""
        scores: dict[int, float] = {}
        if not phrases:
            return scores
        n, avgdl = conn.execute(
            "SELECT (SELECT value FROM rag_state WHERE key = 'chunks')::float8,"
            " (SELECT value FROM rag_state WHERE key = 'terms')::float8"
            " / greatest((SELECT value FROM rag_state WHERE key = 'chunks'), 1)"
        ).fetchone()
        for phrase in phrases:
            hits = self._phrase_hits(conn, phrase)
            idf = max(math.log((n - len(hits) + 0.5) / (len(hits) + 0.5)), 1e-6)
            for chunk_id, (tf, terms) in hits.items():
                norm = K1 * (1 - B + B * terms / max(avgdl, 1e-9))
                scores[chunk_id] = scores.get(chunk_id, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        return scores

    def _phrase_hits(self, conn: PgConnection, phrase: str) -> dict[int, tuple[int, int]]:
        """``{chunk id: (hits, terms)}`` for the chunks of the store that hold ``phrase``."""
        lexemes = conn.execute(
            "SELECT u.lexeme, u.positions FROM unnest(to_tsvector('tether', :text)) u",
            {"text": fold(phrase)},
        ).fetchall()
        offsets = sorted((int(at) - 1, lexeme) for lexeme, positions in lexemes for at in positions)
        if len(offsets) < 2 or offsets[-1][0] != len(offsets) - 1:  # a word without a stem
            return {}
        query = " <-> ".join(_tsquery([lexeme]) for _, lexeme in offsets)
        rows = conn.execute(
            "SELECT c.id, c.terms, u.lexeme, u.positions FROM rag_chunks c, unnest(c.tsv) u"
            " WHERE c.tsv @@ (:q)::tsquery AND u.lexeme = ANY(:lexemes)",
            {"q": query, "lexemes": [lexeme for _, lexeme in offsets]},
        ).fetchall()
        places: dict[int, dict[str, set[int]]] = {}
        lengths: dict[int, int] = {}
        for chunk_id, terms, lexeme, positions in rows:
            places.setdefault(chunk_id, {})[lexeme] = {int(at) for at in positions}
            lengths[chunk_id] = int(terms)
        hits = {}
        for chunk_id, at in places.items():
            first, rest = offsets[0][1], offsets[1:]
            tf = sum(1 for p in at.get(first, ()) if all(p + i in at.get(lx, ()) for i, lx in rest))
            if tf:
                hits[chunk_id] = (tf, lengths[chunk_id])
        return hits

    def term_statistics(
        self,
        terms: Sequence[str],
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> TermStatistics:
        store: dict[str, int] = {}
        in_scope: dict[str, bool] = {}
        with self.db.read() as conn:
            (chunks,) = conn.execute("SELECT value FROM rag_state WHERE key = 'chunks'").fetchone()
            lexemes = self._lexemes(conn, list(dict.fromkeys(terms)))
            where, params = scope_sql(scope, filters, exclusions, dialect=POSTGRES)
            for term, lxs in lexemes.items():
                if not lxs:
                    store[term], in_scope[term] = 0, False
                    continue
                # A term is its lexemes together (one, unless the stemmer splits it).
                query = " & ".join(_tsquery([lx]) for lx in lxs)
                if len(lxs) == 1:  # its document frequency, kept by the chunk triggers
                    row = conn.execute(
                        "SELECT df FROM rag_lexemes WHERE lexeme = ?", (lxs[0],)
                    ).fetchone()
                    store[term] = int(row[0]) if row else 0
                else:
                    (store[term],) = conn.execute(
                        "SELECT count(*) FROM rag_chunks c WHERE c.tsv @@ (:q)::tsquery",
                        {"q": query},
                    ).fetchone()
                if not store[term]:
                    in_scope[term] = False
                    continue
                named, option_params = option_condition(term, POSTGRES)
                (in_scope[term],) = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM rag_chunks c"
                    " JOIN rag_documents d ON d.id = c.document_id"
                    f" WHERE c.tsv @@ (:q)::tsquery AND {where} AND {named})",
                    {**params, **option_params, "q": query},
                ).fetchone()
        return TermStatistics(chunks=int(chunks), store=store, in_scope=in_scope)


class PgVectors:
    """The vector side of retrieval answered by pgvector, in the database (the
    in-memory :class:`~tether.retrieve.vector.VectorIndex` is not needed)."""

    def __init__(self, store: PgSearch, model: str) -> None:
        self.store = store
        self.model = model
        self.stats: dict[str, int] = {"hnsw": 0, "exact": 0, "hnsw_short": 0}

    def __len__(self) -> int:
        return self.load()

    @property
    def loaded(self) -> bool:
        """Always: the vectors stay in the database, nothing waits to be read."""
        return True

    def load(self) -> int:
        """How many vectors the model has (nothing is loaded: they stay in the database)."""
        row = self.store._select_one(
            "SELECT count(*) FROM rag_embeddings WHERE model = ?", (self.model,)
        )
        return int(row[0]) if row else 0

    def search(
        self,
        scope: Scope,
        query: np.ndarray,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]:
        """``(chunk_id, cosine)`` of the ``k`` nearest in-scope vectors, best first."""
        query = np.asarray(query, dtype=np.float32)
        with self.store.db.read() as conn:
            stored = conn.execute(
                "SELECT dims FROM rag_embeddings WHERE model = ? LIMIT 1", (self.model,)
            ).fetchone()
            if stored is None:
                return []
            dims = int(stored[0])
            if query.shape != (dims,):
                raise ValueError(
                    f"query has {query.shape} dims; stored {self.model!r} vectors have {dims}"
                )
            where, params = scope_sql(scope, filters, exclusions, dialect=POSTGRES)
            params.update(query=query, k=int(k))
            share = self.store._scope_share(conn, scope, filters, exclusions)
            if share >= HNSW_SHARE:
                ef = min(MAX_EF_SEARCH, max(40, math.ceil(k * 1.5 / share)))
                conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                cast = f"::vector({dims})"
                rows = conn.execute(
                    f"SELECT e.chunk_id, e.embedding{cast} <=> (:query){cast} AS distance"
                    " FROM rag_embeddings e JOIN rag_chunks c ON c.id = e.chunk_id"
                    " JOIN rag_documents d ON d.id = c.document_id"
                    f" WHERE e.model = {quote_literal(self.model)} AND e.dims = {dims}"
                    f" AND {where} ORDER BY distance LIMIT :k",
                    params,
                ).fetchall()
                if len(rows) >= k:
                    self.stats["hnsw"] += 1
                    return _ranked(rows)
                self.stats["hnsw_short"] += 1
            self.stats["exact"] += 1
            # The scope's chunks first, then their vectors by key: no index on distance.
            rows = conn.execute(
                "WITH scoped AS MATERIALIZED (SELECT c.id FROM rag_chunks c"
                f" JOIN rag_documents d ON d.id = c.document_id WHERE {where})"
                " SELECT e.chunk_id, e.embedding <=> :query AS distance"
                " FROM scoped JOIN rag_embeddings e"
                " ON e.model = :model AND e.chunk_id = scoped.id"
                " ORDER BY distance, e.chunk_id LIMIT :k",
                {**params, "model": self.model},
            ).fetchall()
        return _ranked(rows)

    def cosines(self, query: np.ndarray, chunk_ids: list[int]) -> dict[int, float]:
        """Cosine of ``query`` with each of ``chunk_ids`` that has a vector of this model."""
        if not chunk_ids:
            return {}
        rows = self.store._select(
            "SELECT chunk_id, 1 - (embedding <=> :query) FROM rag_embeddings"
            " WHERE model = :model AND chunk_id = ANY(:ids)",
            {
                "query": np.asarray(query, dtype=np.float32),
                "model": self.model,
                "ids": [int(c) for c in chunk_ids],
            },
        )
        return {int(c): float(v) for c, v in rows}


def _ranked(rows: list[Any]) -> list[tuple[int, float]]:
    """Rows of ``(chunk_id, cosine distance)`` as ``(chunk_id, cosine)``, best first
    (ties by chunk id, as the in-memory index orders them)."""
    out = [(int(chunk_id), 1.0 - float(distance)) for chunk_id, distance in rows]
    out.sort(key=lambda r: (-r[1], r[0]))
    return out
