"""The SQLite store: schema and migrations, connections, and the repository (all the SQL)."""

from tether.store.database import Database, migrate
from tether.store.migrations import LATEST_VERSION, MIGRATIONS
from tether.store.repository import ChunkVectors, NewChunk, NewDocument, Repository, StoredChunk

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "ChunkVectors",
    "Database",
    "NewChunk",
    "NewDocument",
    "Repository",
    "StoredChunk",
    "migrate",
]
