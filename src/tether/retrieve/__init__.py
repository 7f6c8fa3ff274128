"""Retrieval: the FTS5 query compiler and search over the store."""

from tether.retrieve.fts import compile_match, query_terms

__all__ = ["compile_match", "query_terms"]
