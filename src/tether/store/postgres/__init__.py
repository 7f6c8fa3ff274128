"""The PostgreSQL backend (the ``postgres`` extra: psycopg, pgvector): the same tables and
the same scope predicate as SQLite's, BM25 computed in SQL over ``tsvector`` postings, and
vectors searched inside the database (pgvector HNSW, or an exact scan of a small scope).

:mod:`~tether.store.postgres.store` (:class:`PostgresStore`),
:mod:`~tether.store.postgres.database` (connections, transactions, the dialect, storage
failures as typed errors), :mod:`~tether.store.postgres.schema` (its migrations),
:mod:`~tether.store.postgres.search` (BM25 and vectors in SQL) and
:mod:`~tether.store.postgres.local` (a throwaway server from the ``pgserver`` wheel, for
tests and benchmarks). Importing this package imports psycopg.
"""

from tether.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
