"""Scoped search (lexical candidates, a scope's document set) and reads by chunk id.

Every scoped read runs a statement of :mod:`tether.store.sql` that holds the scope, the
tag filters and the exclusions: nothing is filtered here after ranking.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.models import Exclusions, Filters, Hit, Scope
from tether.store import _rows
from tether.store._common import SQLiteMixin
from tether.store.records import CandidateRow, TermStatistics
from tether.store.sql import (
    candidate_rows_sql,
    document_chunks_sql,
    hits_sql,
    lexical_search_sql,
    scope_documents_sql,
    term_frequency_sql,
    term_in_scope_sql,
)


class SearchMixin(SQLiteMixin):
    def search_lexical(
        self,
        scope: Scope,
        match: str,
        k: int,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[Hit]:
        rows = self._select(
            *lexical_search_sql(scope, match, k, filters=filters, exclusions=exclusions)
        )
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
        rows = self._select(
            *lexical_search_sql(
                scope, match, k, ids_only=True, filters=filters, exclusions=exclusions
            )
        )
        return [(chunk_id, -bm25) for chunk_id, bm25 in rows]

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
                (store[term],) = conn.execute(*term_frequency_sql(term)).fetchone()
                if not store[term]:
                    in_scope[term] = False
                    continue
                sql, params = term_in_scope_sql(scope, term, filters=filters, exclusions=exclusions)
                in_scope[term] = bool(conn.execute(sql, params).fetchone()[0])
        return TermStatistics(chunks=chunks, store=store, in_scope=in_scope)

    def scope_document_ids(
        self,
        scope: Scope,
        filters: Filters | None = None,
        exclusions: Exclusions | None = None,
    ) -> list[str]:
        return [row[0] for row in self._select(*scope_documents_sql(scope, filters, exclusions))]

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
            scope, page=page, first=first, limit=limit, filters=filters, exclusions=exclusions
        )
        return [row[0] for row in self._select(sql, params)]

    def hits_for_chunks(self, chunk_ids: Sequence[int]) -> dict[int, Hit]:
        rows = self._select_in_batches(chunk_ids, hits_sql)
        return {row[0]: _rows.hit(row, 0.0) for row in rows}

    def candidate_rows(
        self, chunk_ids: Sequence[int], session_id: str | None = None
    ) -> dict[int, CandidateRow]:
        rows = self._select_in_batches(
            chunk_ids, lambda batch: candidate_rows_sql(batch, session_id)
        )
        return {row[0]: _rows.candidate_row(row) for row in rows}
