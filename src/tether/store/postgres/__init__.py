"""The PostgreSQL backend: ``Tether(db="postgresql://...")``. Needs the ``postgres`` extra
(psycopg 3 and pgvector's adapters) and a server with the pgvector extension."""

from tether.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
