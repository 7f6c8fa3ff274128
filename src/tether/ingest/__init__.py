"""Ingestion: loaders, chunking and the indexer."""

from tether.ingest.chunking import (
    Section,
    chunk_sections,
    embedding_text,
    markdown_sections,
    split_span,
)
from tether.ingest.formats import load_path, supported_extensions
from tether.ingest.indexer import Indexer, Placement
from tether.ingest.loaders import LoadedDocument, load_text
from tether.text import content_hash, normalize_text

__all__ = [
    "Indexer",
    "LoadedDocument",
    "Placement",
    "Section",
    "chunk_sections",
    "content_hash",
    "embedding_text",
    "load_path",
    "load_text",
    "markdown_sections",
    "normalize_text",
    "split_span",
    "supported_extensions",
]
