"""The unit indexing writes in: the results of one ``Indexer.index`` call, and the group
of prepared documents embedded in one call and stored in one transaction (up to
``GROUP_CHUNKS`` chunks: what makes many small files fast, with few commits)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from tether.errors import DocumentNotFound
from tether.ingest.loaders import LoadedDocument
from tether.models import IndexResult, Tags
from tether.store import NewChunk, Store, StoredChunk

#: Chunks of prepared documents gathered before they are embedded and stored together.
GROUP_CHUNKS = 512


@dataclass(frozen=True)
class Placement:
    """Where a document goes: its workspace, and the session to attach it to (if any)."""

    workspace_id: str
    session_id: str | None


@dataclass(frozen=True)
class Prepared:
    """A source loaded, hashed and chunked: what is left is to embed and store it."""

    label: str
    loaded: LoadedDocument
    digest: str
    lookup: dict[str, Any]
    metadata: dict[str, Any]
    chunks: list[NewChunk]
    tags: Tags | None = None
    status: str = "active"


class Indexes(Protocol):
    """What a group asks of the indexer (:class:`tether.ingest.indexer.Indexer`)."""

    def store_group(self, group: list[Prepared], placement: Placement) -> list[IndexResult]:
        """Embed ``group`` in one call and store it in one transaction: a result per
        document, in order."""
        ...


class Group:
    """The results of one ``Indexer.index`` call, and the group of prepared documents
    that are embedded in one call and written in one transaction."""

    def __init__(
        self,
        indexer: Indexes,
        placement: Placement,
        size: int,
        progress: Callable[[IndexResult], None] | None,
    ) -> None:
        self.indexer = indexer
        self.placement = placement
        self.progress = progress
        self.results: list[IndexResult | None] = [None] * size
        self.group: list[tuple[int, Prepared]] = []
        self.chunks = 0

    def report(self, slot: int, result: IndexResult) -> None:
        self.results[slot] = result
        if self.progress:
            self.progress(result)

    def add(self, slot: int, prepared: Prepared) -> None:
        self.group.append((slot, prepared))
        self.chunks += len(prepared.chunks)
        if self.chunks >= GROUP_CHUNKS:
            self.flush()

    def flush(self) -> None:
        if not self.group:
            return
        written = self.indexer.store_group([p for _, p in self.group], self.placement)
        for (slot, _), result in zip(self.group, written, strict=True):
            self.report(slot, result)
        self.group.clear()
        self.chunks = 0

    def finished(self) -> list[IndexResult]:
        assert all(r is not None for r in self.results)
        return [r for r in self.results if r is not None]


def reembed_groups(
    store: Store, documents: list[str]
) -> Iterator[list[tuple[str, str, list[StoredChunk]]]]:
    """``(document id, title, chunks)`` in groups of at least :data:`GROUP_CHUNKS`
    chunks (the last may be smaller), read as they are needed."""
    group: list[tuple[str, str, list[StoredChunk]]] = []
    count = 0
    for document_id in documents:
        try:
            title = store.get_document(document_id).title
        except DocumentNotFound:
            continue  # deleted since the list was read
        chunks = store.chunks_of(document_id)
        if not chunks:
            continue
        group.append((document_id, title, chunks))
        count += len(chunks)
        if count >= GROUP_CHUNKS:
            yield group
            group, count = [], 0
    if group:
        yield group
