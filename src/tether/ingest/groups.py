"""The unit indexing writes in: the results of one ``Indexer.index`` call, and the group
of prepared documents embedded in one call and stored in one transaction (up to
``GROUP_CHUNKS`` chunks: what makes many small files fast, with few commits)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from tether.errors import DocumentNotFound, TetherError
from tether.ingest.loaders import LoadedDocument
from tether.ingest.lookups import Found, Placement, existing_many, refers
from tether.models import Document, IndexResult, Tags
from tether.store import ChunkVectors, NewChunk, NewDocument, Store, StoredChunk

logger = logging.getLogger(__name__)

#: Chunks of prepared documents gathered before they are embedded and stored together.
GROUP_CHUNKS = 512
#: The same without an embedder: a group is then a second or so of work, not minutes, and
#: each commit's share of the full-text index costs less in fewer, larger groups (SciFact's
#: lexical add: 3.1 s in groups of 512 chunks, 2.8 s in groups of 4,096).
LEXICAL_GROUP_CHUNKS = 4096


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
    #: The status the source asked for (None: the stored document's, else "active").
    status: str | None = None


class Indexes(Protocol):
    """What a group asks of the indexer (:class:`tether.ingest.indexer.Indexer`)."""

    store: Store

    def store_group(self, group: list[Prepared], placement: Placement) -> list[IndexResult]:
        """Embed ``group`` in one call and store it in one transaction: a result per
        document, in order."""
        ...

    def existing(self, lookup: dict[str, Any], placement: Placement) -> Document | None:
        """The stored document a source updates (checked: it may)."""
        ...

    @property
    def chunking(self) -> str:
        """How documents are chunked (stored with each)."""
        ...

    def write(
        self,
        prepared: Prepared,
        placement: Placement,
        vectors: ChunkVectors | None,
        warning: str | None,
    ) -> IndexResult:
        """Store one prepared document on its own (a savepoint of the transaction)."""
        ...

    def attach(self, document_id: str, placement: Placement) -> None:
        """Attach a stored document to the placement's session, if it has one."""
        ...

    def attach_all(self, document_ids: list[str], placement: Placement) -> None:
        """Attach stored documents to the placement's session, if it has one."""
        ...


#: A prepared document with its vectors (None: none, or embedding failed) and the
#: warning that says why it has none.
Embedded = tuple[Prepared, ChunkVectors | None, str | None]


def new_record(
    prepared: Prepared, placement: Placement, existing: Document | None, chunking: str
) -> NewDocument:
    """The row a prepared document is stored as (new content keeps the document's
    tags, metadata and id unless new ones are given)."""
    tags = prepared.tags or (existing.tags if existing else None) or Tags()
    document_id = prepared.lookup["document_id"]
    return NewDocument(
        id=existing.id if existing else (document_id or uuid.uuid4().hex[:16]),
        workspace_id=placement.workspace_id,
        title=prepared.loaded.title,
        source_path=prepared.lookup["source_path"],
        source_type=tags.source_type,
        mime=prepared.loaded.mime,
        content_hash=prepared.digest,
        file_size=prepared.loaded.file_size,
        metadata={**(existing.metadata if existing else {}), **prepared.metadata},
        project_id=tags.project_id,
        domain=tags.domain,
        version=tags.version,
        last_verified=tags.last_verified,
        status=prepared.status or (existing.status if existing else "active"),
        chunking=chunking,
    )


def write_group(
    indexer: Indexes, embedded: list[Embedded], placement: Placement
) -> list[IndexResult]:
    """Store a group inside the caller's write transaction: a result per document, in
    order.

    New documents are stored in runs, a run in a few statements
    (:meth:`~tether.store.Store.insert_documents`), not a savepoint and a statement per
    row each. A document that replaces or repeats a stored one is written on its own, as
    is a document that names the same id, source or content as one earlier in the run
    (after the run, so the later one wins). A run the store refuses is written again one
    document at a time, so that a document that cannot be stored fails alone.
    """
    results: list[IndexResult | None] = [None] * len(embedded)
    run: list[tuple[int, NewDocument]] = []
    keys: set[tuple[str, str]] = set()
    seen: set[tuple[str, str]] = set()  # (every key of the group so far)
    written: set[str] = set()  # (the stored documents written so far)
    ahead = _looked_up(indexer, embedded, placement)

    def flush() -> None:
        if run:
            _write_run(indexer, embedded, placement, run, results)
            run.clear()
            keys.clear()

    for i, (prepared, vectors, warning) in enumerate(embedded):
        mine = _keys(prepared)
        if keys & mine:
            flush()
        # Looked up with the group, unless an earlier document of it has the same key or
        # rewrote the document the answer rests on.
        existing = ahead[i] if ahead is not None else None
        if ahead is None or seen & mine or refers(existing) & written:
            try:
                existing = indexer.existing(prepared.lookup, placement)
            except TetherError as exc:
                existing = exc
        seen |= mine
        if isinstance(existing, TetherError):
            logger.error("%s: not indexed: %s", prepared.label, existing)
            results[i] = IndexResult(prepared.label, "failed", error=existing)
            continue
        if existing is not None:
            flush()
            results[i] = indexer.write(prepared, placement, vectors, warning)
            written.add(existing.id)
            continue
        record = new_record(prepared, placement, None, indexer.chunking)
        run.append((i, record))
        keys |= mine | {("id", record.id)}
        seen.add(("id", record.id))
    flush()
    return [r for r in results if r is not None]


def _looked_up(
    indexer: Indexes, embedded: list[Embedded], placement: Placement
) -> list[Found] | None:
    """What the store holds for each document of the group, in a few statements; None
    when it cannot say (each document is then looked up on its own, and fails alone)."""
    try:
        return existing_many(indexer.store, [p.lookup for p, _, _ in embedded], placement)
    except TetherError:
        return None


def _keys(prepared: Prepared) -> set[tuple[str, str]]:
    """What finds the stored document a prepared one updates: its id, its source, and
    (text without a source) its content."""
    lookup = prepared.lookup
    keys = set()
    if lookup["document_id"] is not None:
        keys.add(("id", lookup["document_id"]))
    if lookup["source_path"] is not None:
        keys.add(("source", lookup["source_path"]))
    else:
        keys.add(("content", prepared.digest))
    return keys


def _write_run(
    indexer: Indexes,
    embedded: list[Embedded],
    placement: Placement,
    run: list[tuple[int, NewDocument]],
    results: list[IndexResult | None],
) -> None:
    """Store a run of new documents together, else (refused) one by one."""
    store = indexer.store
    try:
        with store.write():
            store.insert_documents(
                [(record, embedded[i][0].chunks, embedded[i][1]) for i, record in run]
            )
            indexer.attach_all([record.id for _, record in run], placement)
    except TetherError:
        for i, _ in run:
            prepared, vectors, warning = embedded[i]
            results[i] = indexer.write(prepared, placement, vectors, warning)
        return
    for i, record in run:
        prepared, _, warning = embedded[i]
        warnings = (warning,) if warning else ()
        results[i] = IndexResult(
            prepared.label, "indexed", record.id, len(prepared.chunks), warnings=warnings
        )


class Group:
    """The results of one ``Indexer.index`` call, and the group of prepared documents
    that are embedded in one call and written in one transaction.

    With ``background``, a full group is embedded and written in a writer thread while
    the next one is prepared (SQLite and the embedder work outside Python's lock, so on
    two cores the two overlap); one group at a time is written, in order, and results are
    reported on the caller's thread. The last group is written in the caller's thread
    when no earlier one was: a small add starts no thread."""

    def __init__(
        self,
        indexer: Indexes,
        placement: Placement,
        size: int,
        progress: Callable[[IndexResult], None] | None,
        limit: int = GROUP_CHUNKS,
        *,
        background: bool = False,
    ) -> None:
        self.indexer = indexer
        self.limit = limit
        self.placement = placement
        self.progress = progress
        self.results: list[IndexResult | None] = [None] * size
        self.group: list[tuple[int, Prepared]] = []
        self.chunks = 0
        self.background = background
        self._writer: ThreadPoolExecutor | None = None
        self._pending: tuple[list[tuple[int, Prepared]], Future[list[IndexResult]]] | None = None

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def report(self, slot: int, result: IndexResult) -> None:
        self.results[slot] = result
        if self.progress:
            self.progress(result)

    def add(self, slot: int, prepared: Prepared) -> None:
        self.group.append((slot, prepared))
        self.chunks += len(prepared.chunks)
        self.collect(wait=False)
        if self.chunks >= self.limit:
            self.flush(last=False)

    def flush(self, *, last: bool = True) -> None:
        """Write the group: in the writer thread (started by the first group that is not
        the last), else here."""
        group, self.group, self.chunks = self.group, [], 0
        if not group:
            if last:
                self.collect(wait=True)
            return
        if self.background and not last and self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="tether-write")
        self.collect(wait=True)
        prepared = [p for _, p in group]
        if self._writer is None:
            self._reported(group, self.indexer.store_group(prepared, self.placement))
            return
        future = self._writer.submit(self.indexer.store_group, prepared, self.placement)
        self._pending = (group, future)
        if last:
            self.collect(wait=True)

    def collect(self, *, wait: bool) -> None:
        """Report the group the writer thread has written (with ``wait``, once it has)."""
        if self._pending is None:
            return
        group, future = self._pending
        if not wait and not future.done():
            return
        self._pending = None
        self._reported(group, future.result())

    def _reported(self, group: list[tuple[int, Prepared]], written: list[IndexResult]) -> None:
        for (slot, _), result in zip(group, written, strict=True):
            self.report(slot, result)

    def close(self) -> None:
        """Wait for the writer thread (a group it began is written whole) and end it."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

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
