"""Scoped search (lexical candidates, a scope's document set) and reads by chunk id.

Every scoped read runs a statement of :mod:`tether.store.sql` that holds the scope, the
tag filters and the exclusions: nothing is filtered here after ranking.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from typing import Any

from tether.models import Exclusions, Filters, Hit, Scope
from tether.store import _rows
from tether.store._common import StorePart
from tether.store.records import CandidateRow, TermStatistics
from tether.store.sql import (
    candidate_rows_sql,
    document_chunks_sql,
    fts_phrase,
    hits_sql,
    indexed_match,
    indexed_term,
    lexical_search_sql,
    match_terms,
    scope_chunk_count_sql,
    scope_documents_sql,
    term_count_upto_sql,
    term_frequency_sql,
    term_in_scope_sql,
)

#: The rank-first plan is chosen for a scope holding at least this share of the store's
#: chunks; below it, testing each match against the scope's set costs less than scoring
#: every match (measured on SciFact: 9,300 chunks, claims matching 40% of them).
RANK_FIRST_SHARE = 0.5
#: How much deeper than ``k`` the rank-first plan reads, beyond ``k / share``: a margin
#: for a scope whose chunks rank worse than its share (else the scope-first plan runs too).
RANK_FIRST_MARGIN = 1.5
#: The rank-first plan reads the rare terms first (:meth:`SearchMixin._rare_first`) in a
#: store of at least this many chunks; in a smaller one FTS5 scores every match within a
#: few ms, and the plan stays exact.
RARE_FIRST_MIN_CHUNKS = 5_000
#: ... for a query of at least this many terms. In a shorter one the common terms can
#: carry a chunk's rank (synthetic 5-6 word queries at 10k chunks: the top 10 changed
#: and counting the terms cost more than it saved), and it matches fewer chunks anyway.
RARE_FIRST_MIN_TERMS = 7
#: A query term held by at most this share of the store's chunks is rare.
RARE_SHARE = 0.03


class SearchMixin(StorePart):
    def search_lexical(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[Hit]:
        rows = self._lexical_rows(scope, match, k, False, filters, exclusions)
        # bm25 is lower-is-better; a Hit's score is higher-is-better.
        return [_rows.hit(row, -row[_rows.HIT_WIDTH]) for row in rows]

    def search_lexical_scores(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[tuple[int, float]]:
        rows = self._lexical_rows(scope, match, k, True, filters, exclusions)
        return [(chunk_id, -bm25) for chunk_id, bm25 in rows]

    def _lexical_rows(
        self,
        scope: Scope,
        match: str,
        k: int,
        ids_only: bool,
        filters: Filters | None,
        exclusions: Exclusions | None,
    ) -> list[Any]:
        """The top ``k`` in scope by the plan that fits the scope's share of the store
        (:func:`~tether.store.sql.lexical_search_sql`); the same rows either way."""
        match = indexed_match(match, self.language)
        with self.db.read() as conn:  # one snapshot for the plan and the search
            share, total = self._scope_size(conn, scope, filters, exclusions)
            depth = _depth(share, k)
            if depth is not None:
                found = self._rare_first(
                    conn, scope, match, k, depth, total, ids_only, filters, exclusions
                )
                if found is not None:
                    return found
                sql, params = lexical_search_sql(
                    scope,
                    match,
                    k,
                    ids_only=ids_only,
                    filters=filters,
                    exclusions=exclusions,
                    depth=depth,
                )
                rows = conn.execute(sql, params).fetchall()
                if len(rows) >= k:
                    return rows
            sql, params = lexical_search_sql(
                scope, match, k, ids_only=ids_only, filters=filters, exclusions=exclusions
            )
            return conn.execute(sql, params).fetchall()

    def _rank_first_depth(
        self,
        conn: sqlite3.Connection,
        scope: Scope,
        k: int,
        filters: Filters | None,
        exclusions: Exclusions | None,
    ) -> int | None:
        """How deep the rank-first plan reads for this scope, or None for scope first."""
        return _depth(self._scope_share(conn, scope, filters, exclusions), k)

    def _rare_first(
        self,
        conn: sqlite3.Connection,
        scope: Scope,
        match: str,
        k: int,
        depth: int,
        total: int,
        ids_only: bool,
        filters: Filters | None,
        exclusions: Exclusions | None,
    ) -> list[Any] | None:
        """The ``k`` best in scope among the chunks that hold a rare query term, each
        with its exact bm25 for the whole query; None where the plan does not apply (a
        small store, a short query, no mix of rare and common terms) or finds fewer than
        ``k`` in scope (the plans after it run then).

        Where FTS5's time goes for a long OR query is bm25: every chunk that holds any
        term is scored (on SciFact a claim's terms match 40% of the store), and most of
        those hold only common terms. So this plan scores only the chunks that hold a
        rare term (at most :data:`RARE_SHARE` of the store each), in two statements that
        split them: ``(rare) AND (common)`` and ``(rare) NOT (common)``. FTS5's bm25 sums
        over every phrase of the expression, whatever the operators, and each expression
        holds each of the query's phrases once: so each chunk is scored once, with its
        exact bm25 for the query. What is left out are the chunks that hold only common
        terms, which rank low in a long query."""
        if total < RARE_FIRST_MIN_CHUNKS:
            return None
        terms = match_terms(match)
        if len(terms) < RARE_FIRST_MIN_TERMS:
            return None
        is_rare = [self._is_rare(conn, t, total) for t in terms]
        if all(is_rare) or not any(is_rare):
            return None
        rare = " OR ".join(fts_phrase(t) for t, r in zip(terms, is_rare, strict=True) if r)
        common = " OR ".join(fts_phrase(t) for t, r in zip(terms, is_rare, strict=True) if not r)
        found: list[Any] = []
        for part in (f"({rare}) AND ({common})", f"({rare}) NOT ({common})"):
            found += _best_ids(conn, scope, part, k, depth, filters, exclusions)
        if len(found) < k:
            return None
        best = sorted(found, key=_by_rank)[:k]
        if ids_only:
            return best
        rows = {row[0]: row for row in self._select_in_batches([c for c, _ in best], hits_sql)}
        return [(*rows[cid], bm25) for cid, bm25 in best]

    def _is_rare(self, conn: sqlite3.Connection, term: str, total: int) -> bool:
        """Whether at most :data:`RARE_SHARE` of the store's chunks hold ``term``. It only
        picks the rare-first plan's terms, never a score: the count stops past that share,
        and is kept until the store's size moves by a tenth."""
        cap = int(RARE_SHARE * total) + 1
        cached = self._term_counts.get(term)
        if cached is None or abs(cached[0] - total) > total / 10:
            (held,) = conn.execute(*term_count_upto_sql(term, cap)).fetchone()
            if len(self._term_counts) > 16_384:
                self._term_counts.clear()
            self._term_counts[term] = cached = (total, held)
        return cached[1] < cap

    def _scope_share(
        self,
        conn: Any,
        scope: Scope,
        filters: Filters | None,
        exclusions: Exclusions | None,
    ) -> float:
        return self._scope_size(conn, scope, filters, exclusions)[0]

    def _scope_size(
        self,
        conn: Any,
        scope: Scope,
        filters: Filters | None,
        exclusions: Exclusions | None,
    ) -> tuple[float, int]:
        """The share of the store's chunks ``scope`` may see, which picks a plan, and the
        store's chunks. They are counted once per change of the store's documents (a
        stale count only costs speed: every plan gives the same rows)."""
        (version,) = conn.execute("SELECT value FROM rag_state WHERE key = 'documents'").fetchone()
        key = (scope, filters, exclusions)
        cached = self._scope_shares.get(key)
        if cached is None or cached[0] != version:
            in_scope, total = conn.execute(
                *scope_chunk_count_sql(scope, filters, exclusions, dialect=self.db.dialect)
            ).fetchone()
            cached = (version, in_scope / total if total else 0.0, total)
            if len(self._scope_shares) > 1024:
                self._scope_shares.clear()
            self._scope_shares[key] = cached
        return cached[1], cached[2]

    def term_statistics(
        self,
        terms: Sequence[str],
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> TermStatistics:
        store: dict[str, int] = {}
        in_scope: dict[str, bool] = {}
        with self.db.read() as conn:  # one snapshot for the counts and the scope
            (chunks,) = conn.execute("SELECT count(*) FROM rag_chunks").fetchone()
            for term in dict.fromkeys(terms):
                indexed = indexed_term(term, self.language)
                (store[term],) = conn.execute(*term_frequency_sql(indexed)).fetchone()
                if not store[term]:
                    in_scope[term] = False
                    continue
                sql, params = term_in_scope_sql(
                    scope,
                    indexed,
                    filters=filters,
                    exclusions=exclusions,
                    dialect=self.db.dialect,
                    option=term,
                )
                in_scope[term] = bool(conn.execute(sql, params).fetchone()[0])
        return TermStatistics(chunks=chunks, store=store, in_scope=in_scope)

    def scope_document_ids(
        self,
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
        among: Sequence[str] | None = None,
    ) -> list[str]:
        sql, params = scope_documents_sql(scope, filters, exclusions, among)
        return [row[0] for row in self._select(sql, params)]

    def document_chunk_ids(
        self,
        scope: Scope,
        *,
        page: int | None = None,
        first: int | None = None,
        limit: int = 50,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[int]:
        sql, params = document_chunks_sql(
            scope,
            page=page,
            first=first,
            limit=limit,
            filters=filters,
            exclusions=exclusions,
            dialect=self.db.dialect,
        )
        return [row[0] for row in self._select(sql, params)]

    def hits_for_chunks(
        self, chunk_ids: Sequence[int], scores: Sequence[float] | None = None
    ) -> dict[int, Hit]:
        rows = self._select_in_batches(chunk_ids, hits_sql)
        if scores is None:
            return {row[0]: _rows.hit(row, 0.0) for row in rows}
        score = dict(zip(chunk_ids, scores, strict=True))
        return {row[0]: _rows.hit(row, score[row[0]]) for row in rows}

    def candidate_rows(
        self, chunk_ids: Sequence[int], session_id: str | None = None
    ) -> dict[int, CandidateRow]:
        rows = self._select_in_batches(
            chunk_ids, lambda batch: candidate_rows_sql(batch, session_id)
        )
        return {row[0]: _rows.candidate_row(row) for row in rows}


def _best_ids(
    conn: Any,
    scope: Scope,
    match: str,
    k: int,
    depth: int,
    filters: Filters | None,
    exclusions: Exclusions | None,
) -> list[tuple[int, float]]:
    """``(chunk id, bm25)`` of the ``k`` best in scope for ``match``: ranked first to
    ``depth``, then scope first when the scope may hold more past ``depth``."""
    sql, params = lexical_search_sql(
        scope,
        match,
        k,
        ids_only=True,
        filters=filters,
        exclusions=exclusions,
        depth=depth,
        count_ranked=True,
    )
    rows = conn.execute(sql, params).fetchall()
    if len(rows) >= k or (rows and rows[0][-1] < depth):
        return [row[:2] for row in rows]
    sql, params = lexical_search_sql(
        scope, match, k, ids_only=True, filters=filters, exclusions=exclusions
    )
    return conn.execute(sql, params).fetchall()


def _depth(share: float, k: int) -> int | None:
    """How deep the rank-first plan reads for a scope holding ``share`` of the store's
    chunks, or None for scope first."""
    if share < RANK_FIRST_SHARE:
        return None
    return k if share >= 1.0 else math.ceil(k * RANK_FIRST_MARGIN / share)


def _by_rank(row: tuple[int, float]) -> tuple[float, int]:
    """bm25 (lower is better), then chunk id: the order of every lexical statement."""
    return row[1], row[0]
