"""The indexer: load, hash, skip if unchanged, chunk, store atomically, attach to the session."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, TypeVar

from tether.embed import Embedder, to_blob
from tether.errors import (
    EmbeddingError,
    EmbeddingsUnavailable,
    IndexingCancelled,
    IndexingFailed,
    InvalidArgument,
    InvalidTag,
    ScopeError,
    StoreError,
    TetherError,
    UnreadableFile,
)
from tether.ingest.chunking import chunk_sections, embedding_text
from tether.ingest.groups import (
    GROUP_CHUNKS,
    LEXICAL_GROUP_CHUNKS,
    Group,
    Prepared,
    new_record,
    reembed_groups,
    write_group,
)
from tether.ingest.loaders import (
    LoadedDocument,
    load_text,
)
from tether.ingest.lookups import Lookahead, Placement, existing, unchanged
from tether.ingest.sources import PathSource, Source, attachment_sources, smallest_first
from tether.ingest.workers import (
    FileBudget,
    FileLoader,
    InlineExecutor,
    LoaderPool,
    load_path_source,
    loads_in_worker,
    timed_out,
)
from tether.models import GLOBAL_WORKSPACE, Document, IndexResult, Tags
from tether.settings import PolicySettings, RagSettings
from tether.store import ChunkVectors, NewChunk, Store, StoredChunk
from tether.tags import DOCUMENT_STATUSES, validate_tags
from tether.text import check_identifier, content_hash, valid_text

TokenCounter = Callable[[str], int | None]
ProgressCallback = Callable[[int, int, IndexResult], None]
T = TypeVar("T")
#: Runs a write (a function of no arguments) and returns what it returned; see
#: :meth:`tether.Tether.set_writer`.
Writer = Callable[[Callable[[], T]], T]
logger = logging.getLogger("tether.ingest")


@dataclass(frozen=True)
class ReembedReport:
    model: str
    documents: int
    chunks_embedded: int


class Indexer:
    def __init__(
        self,
        store: Store,
        rag: RagSettings,
        *,
        embedder: Embedder | None = None,
        count_tokens: TokenCounter | None = None,
        policy: PolicySettings | None = None,
        sizer: Embedder | None = None,
    ) -> None:
        self.store = store
        #: What chunks are sized for (its window): the embedder, or without one the
        #: configured model, so that turning embeddings off does not re-chunk a store.
        self.sizer = sizer if sizer is not None else embedder
        self.rag = rag
        self.policy = policy or PolicySettings()
        self.embedder = embedder
        self.count_tokens = count_tokens
        #: Where write transactions run (None: on the indexing thread itself).
        self.writer: Writer[Any] | None = None

    def committed(self, fn: Callable[[], T]) -> T:
        """``fn`` (a write) run by :attr:`writer`, or here when there is none."""
        writer = self.writer
        return fn() if writer is None else writer(fn)

    @cached_property
    def _chunk_tokens(self) -> int | None:
        """The most tokens a chunk may have as embedded, when chunks are sized in tokens:
        ``rag.chunk_by`` says so, the embedder (or the configured model, when embeddings
        are off) knows its window and the counter counts (asked on first use: a local
        model's window is read from its folder)."""
        rag, counter = self.rag, self.count_tokens
        if rag.chunk_by != "tokens" or self.sizer is None or counter is None:
            return None
        window = self.sizer.max_tokens
        if window is None or counter("window") is None:
            return None
        return min(window, rag.chunk_tokens)

    @cached_property
    def chunking(self) -> str:
        """How documents are chunked, stored with each: a document chunked otherwise is
        chunked again when it is next added."""
        tokens = self._chunk_tokens
        if tokens is None:
            return f"{self.rag.chunk_size}/{self.rag.chunk_overlap}"
        overlap = self.rag.chunk_overlap_tokens
        return f"{tokens}/{'auto' if overlap is None else overlap} tokens"

    def place(self, workspace_id: str | None, session_id: str | None) -> Placement:
        """Resolve (and create on first use) the workspace and session for new documents.

        With only a session, documents go to the session's workspace. A new session is
        created in ``workspace_id`` (default: the global workspace).
        """
        for what, value in (("workspace_id", workspace_id), ("session_id", session_id)):
            if value is not None:
                check_identifier(what, value)
        return self.committed(lambda: self._place(workspace_id, session_id))

    def _place(self, workspace_id: str | None, session_id: str | None) -> Placement:
        if session_id is not None:
            session = self.store.find_session(session_id)
            if session is None:
                session = self.store.ensure_session(session_id, workspace_id or GLOBAL_WORKSPACE)
            if workspace_id not in (None, session.workspace_id, GLOBAL_WORKSPACE):
                raise ScopeError(
                    f"session {session_id!r} belongs to workspace {session.workspace_id!r};"
                    f" cannot add documents of workspace {workspace_id!r} to it"
                )
            return Placement(workspace_id or session.workspace_id, session_id)
        workspace_id = workspace_id or GLOBAL_WORKSPACE
        self.store.ensure_workspace(workspace_id)
        return Placement(workspace_id, None)

    def add(
        self,
        items: list[Source],
        placement: Placement,
        *,
        on_error: str = "raise",
        progress: ProgressCallback | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[IndexResult]:
        """Index ``items`` smallest first (the first results come sooner) and return one
        result per item, in the caller's order. ``progress(done, total, result)`` after
        each one; with ``on_error="raise"``, :class:`IndexingFailed` at the end when any
        failed (it carries every result)."""
        if on_error not in ("raise", "collect"):
            raise InvalidArgument(f"on_error must be 'raise' or 'collect', not {on_error!r}")
        done = 0

        def report(result: IndexResult) -> None:
            nonlocal done
            done += 1
            if progress:  # (a message's attachments count once they are found)
                progress(done, max(done, len(items)), result)

        order = smallest_first(items)
        ranked = self.index(
            [items[i] for i in order], placement, progress=report, cancelled=cancelled
        )
        results: list[IndexResult] = list(ranked)
        for position, i in enumerate(order):
            results[i] = ranked[position]
        if on_error == "raise":
            _raise_failures(results)
        return results

    def index(
        self,
        sources: Iterable[Source],
        placement: Placement,
        *,
        progress: Callable[[IndexResult], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[IndexResult]:
        """Index many sources, returning one result per source, in order.

        ``cancelled`` is asked before each source: once it says yes, the documents
        already prepared are finished (a document is never stored half-way) and every
        source not yet started fails with :class:`IndexingCancelled`.

        Loading and chunking are per source. Embedding is batched across the sources of
        a group (up to ``GROUP_CHUNKS`` chunks), which is what makes many small files
        fast, and the group's documents are then written in one transaction: every
        document appears whole, with all its vectors, and commits are few.

        Files inside a file that are documents of their own (a message's attachments)
        are indexed after every source, their results after the sources'.
        """
        items = list(sources)
        limit = GROUP_CHUNKS if self.embedder is not None else LEXICAL_GROUP_CHUNKS
        # (a write in the caller's transaction, or through its writer, stays in place)
        store = self.store
        background = store.cross_thread and not store.in_transaction and self.writer is None
        inside: list[Source] = []
        with Group(self, placement, len(items), progress, limit, background=background) as batch:
            for slot, outcome in self._loaded(items, placement, cancelled):
                if isinstance(outcome, IndexResult):
                    batch.report(slot, outcome)
                else:
                    batch.add(slot, outcome)
                    inside += attachment_sources(items[slot], outcome.loaded.attachments)
            batch.flush()
        results = batch.finished()
        if inside:
            results += self.index(inside, placement, progress=progress, cancelled=cancelled)
        return results

    def _loaded(
        self, items: list[Source], placement: Placement, cancelled: Callable[[], bool] | None
    ) -> Iterator[tuple[int, Prepared | IndexResult]]:
        """Each item, in order, prepared (or already answered: skipped, failed,
        cancelled). Loading and chunking run a few files at a time (``rag.convert_workers``),
        ahead of the writer. PDFs and large files load in worker processes
        (:mod:`tether.ingest.workers`), killed at ``rag.file_timeout`` or
        ``rag.loader_memory_mb``; small text files load in the helper threads. Each file
        gets ``rag.file_timeout`` seconds once its turn comes (and ``rag.ocr_page_timeout``
        more for each page read by OCR), and a file stuck in its loader fails then, never
        waited for. Text given in memory is prepared in the calling thread, as its turn
        comes near."""
        timeout = self.rag.file_timeout
        workers = max(1, min(self.rag.convert_workers, len(items)))
        pool: Any = (
            concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="tether-load")
            if self.store.cross_thread
            else InlineExecutor()  # a caller's single-thread connection: no helpers
        )
        # Text given in memory is prepared here: normalizing and chunking it is Python's
        # own work, which helper threads only slow down (one interpreter lock for all).
        inline = InlineExecutor()
        loaders = self._loader_pool(items, workers)
        ahead = 2 * self.rag.convert_workers
        lookahead = Lookahead(self.store, items, placement)
        futures: dict[int, tuple[Future[Prepared | IndexResult], FileBudget]] = {}
        try:
            for i, source in enumerate(items):
                label = source.label
                if cancelled is not None and cancelled():
                    yield (
                        i,
                        IndexResult(label, "failed", error=IndexingCancelled(label, "cancelled")),
                    )
                    continue
                for j in range(i, min(len(items), i + ahead)):
                    if j not in futures:
                        budget = FileBudget(timeout)
                        work = (items[j], placement, loaders.budgeted(budget))
                        runner = pool if isinstance(items[j], PathSource) else inline
                        known = functools.partial(lookahead.lookup, j)
                        futures[j] = (runner.submit(self._prepare, *work, known), budget)
                future, budget = futures.pop(i)
                try:
                    outcome = budget.waited(future)
                except concurrent.futures.TimeoutError:
                    error = timed_out(label, timeout, "skipped", budget)
                    logger.error("%s", error)
                    outcome = IndexResult(label, "failed", error=error)
                yield i, outcome
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            loaders.close()

    def _loader_pool(self, items: list[Source], workers: int) -> LoaderPool:
        """The worker processes for the items that load in one, started."""
        rag = self.rag
        loaders = LoaderPool(
            timeout=rag.file_timeout,
            memory_mb=rag.loader_memory_mb,
            ocr=rag.ocr,
            ocr_page_timeout=rag.ocr_page_timeout,
            language=rag.language,
            ocr_engine=rag.ocr_engine,
        )
        maximum = rag.max_file_bytes
        loaders.start(min(workers, sum(1 for item in items if loads_in_worker(item, maximum))))
        return loaders

    def _prepare(
        self,
        source: Source,
        placement: Placement,
        loaders: FileLoader,
        known: Callable[[dict[str, Any]], Document | None] | None = None,
    ) -> Prepared | IndexResult:
        """Load, hash, and chunk; an unchanged source is answered here ("skipped").

        Anything wrong with this one source is its failed result, never the batch's end."""
        label = (
            str(source.path)
            if isinstance(source, PathSource)
            else (source.source or source.document_id or source.title)
        )
        try:
            return self._prepare_source(source, label, placement, loaders, known)
        except TetherError as exc:
            return IndexResult(source=label, status="failed", error=exc)
        except OSError as exc:  # a name too long, a permission, a vanished folder...
            problem = f"cannot read it: {exc.strerror or exc}"
            return IndexResult(label, "failed", error=UnreadableFile(label, problem))

    def _prepare_source(
        self,
        source: Source,
        label: str,
        placement: Placement,
        loaders: FileLoader,
        known: Callable[[dict[str, Any]], Document | None] | None = None,
    ) -> Prepared | IndexResult:
        loaded, source_path, document_id = self._load(source, loaders)
        metadata = {**loaded.metadata, **(source.metadata or {})}
        tags = validate_tags(label, source.tags, self.policy)
        if source.status is not None and source.status not in DOCUMENT_STATUSES:
            raise InvalidTag(
                label,
                "status",
                f"must be one of {', '.join(DOCUMENT_STATUSES)}, not {source.status!r}",
            )
        # A message whose attachments changed is changed (they are indexed with it).
        digest = content_hash(loaded.text + "".join(f.sha256 for f in loaded.attachments))
        lookup = {
            "workspace_id": placement.workspace_id,
            "document_id": document_id,
            "source_path": source_path,
            "content_hash": digest,
        }
        existing = known(lookup) if known is not None else self.existing(lookup, placement)
        if existing is not None and unchanged(existing, digest, loaded, self.chunking):
            return self.kept(existing, label, loaded.title, tags, source.status, placement)
        return Prepared(
            label,
            loaded,
            digest,
            lookup,
            metadata,
            self._chunks(loaded),
            tags,
            source.status,
        )

    def _load(
        self, source: Source, loaders: FileLoader
    ) -> tuple[LoadedDocument, str | None, str | None]:
        """A source's text, and the source key and document id it is stored under."""
        if isinstance(source, PathSource):
            if source.source is not None:
                check_identifier("source", source.source)
            resolved, loaded = load_path_source(source, loaders, self.rag.max_file_bytes)
            return loaded, source.source or str(resolved), None
        for what, value in (("document_id", source.document_id), ("source", source.source)):
            if value is not None:
                check_identifier(what, value)
        loaded = load_text(source.text, title=valid_text(source.title), mime=source.mime)
        return loaded, source.source, source.document_id

    def _chunks(self, loaded: LoadedDocument) -> list[NewChunk]:
        chunks = chunk_sections(
            loaded.text,
            list(loaded.sections),
            size=self.rag.chunk_size,
            overlap=self.rag.chunk_overlap,
            title=loaded.title,
            count_tokens=self.count_tokens,
            max_tokens=self._chunk_tokens,
            overlap_tokens=self.rag.chunk_overlap_tokens,
        )
        if not loaded.page_labels:
            return chunks
        return [
            replace(c, page_label=loaded.page_labels.get(c.page)) if c.page else c for c in chunks
        ]

    def store_group(self, group: list[Prepared], placement: Placement) -> list[IndexResult]:
        """Embed ``group`` in one call, then store it in one transaction, each document a
        savepoint of it (one that cannot be stored fails alone, the others commit): a
        result per document, in order. A transaction that fails whole (a full disk) fails
        every document of the group."""
        embedded = self._embed_group(group)

        def store() -> list[IndexResult]:
            with self.store.write():
                return write_group(self, embedded, placement)

        try:
            return self.committed(store)
        except StoreError as exc:
            return [IndexResult(p.label, "failed", error=exc) for p in group]

    def _embed_group(
        self, group: list[Prepared]
    ) -> list[tuple[Prepared, ChunkVectors | None, str | None]]:
        """Vectors for every document of the group, from one batched embedding call.

        Embedding is slow, so it runs before any write transaction; each document's
        vectors are then stored in the same transaction as its chunks. A reader sees a
        document with all of its vectors or (when embedding failed) none, never some.
        """
        if self.embedder is None or not group:
            return [(p, None, None) for p in group]
        all_chunks = [(p.loaded.title, c) for p in group for c in p.chunks]
        known, _, warning = self._known_vectors(all_chunks)
        out = []
        for prepared in group:
            if warning is not None:
                out.append((prepared, None, warning))
                continue
            vectors, problem = self._chunk_vectors(prepared.chunks, known)
            out.append((prepared, vectors, problem))
        return out

    def write(
        self,
        prepared: Prepared,
        placement: Placement,
        vectors: ChunkVectors | None,
        warning: str | None,
    ) -> IndexResult:
        """Store one prepared document, inside the group's transaction when there is one
        (as a savepoint of it: a failure here rolls back this document only)."""
        try:
            with self.store.write():
                # Look again inside the transaction: another writer may have got here first.
                existing = self.existing(prepared.lookup, placement)
                if existing is not None and unchanged(
                    existing, prepared.digest, prepared.loaded, self.chunking
                ):
                    title, tags, status = prepared.loaded.title, prepared.tags, prepared.status
                    return self.kept(existing, prepared.label, title, tags, status, placement)
                record = new_record(prepared, placement, existing, self.chunking)
                if existing is None:
                    self.store.insert_document(record, prepared.chunks, vectors)
                else:
                    self.store.replace_document(record, prepared.chunks, vectors)
                self.attach(record.id, placement)
            status = "indexed" if existing is None else "replaced"
            warnings = (warning,) if warning else ()
            return IndexResult(
                prepared.label, status, record.id, len(prepared.chunks), warnings=warnings
            )
        except TetherError as exc:
            logger.error("%s: not indexed: %s", prepared.label, exc)
            return IndexResult(prepared.label, "failed", error=exc)

    def kept(
        self,
        existing: Document,
        label: str,
        title: str,
        tags: Tags | None,
        status: str | None,
        placement: Placement,
    ) -> IndexResult:
        """A source whose text is stored unchanged as ``existing``: attached to the
        placement's session, and its new title, tags or status set (no re-chunking, no
        re-embedding): "updated", else "skipped"."""
        self.attach(existing.id, placement)
        status = status or existing.status
        if (
            title != existing.title
            or (tags is not None and tags != existing.tags)
            or status != existing.status
        ):
            self.store.set_tags_and_status(existing.id, tags or existing.tags, status, title=title)
            return IndexResult(label, "updated", existing.id, existing.chunk_count)
        return IndexResult(label, "skipped", existing.id, existing.chunk_count)

    def existing(self, lookup: dict[str, Any], placement: Placement) -> Document | None:
        """The stored document a source updates (:func:`tether.ingest.lookups.existing`)."""
        return existing(self.store, lookup, placement)

    def reembed(self, progress: Callable[[int, int], None] | None = None) -> ReembedReport:
        """Give every chunk without a vector for the configured model one. Documents are
        embedded in groups of about :data:`GROUP_CHUNKS` chunks, one embedding call per
        group (a store of small documents would otherwise pay a call, and a batch of two,
        per document); each document's vectors land in one transaction of their own."""
        if self.embedder is None:
            raise EmbeddingsUnavailable("no embedder is configured; nothing to re-embed with")
        model = self.embedder.model
        documents = self.store.documents_missing_embeddings(model)
        done = embedded = 0
        for group in reembed_groups(self.store, documents):
            known, fresh, warning = self._known_vectors(
                [(title, c) for _, title, chunks in group for c in chunks]
            )
            if warning is not None:
                raise EmbeddingError(warning)
            for document_id, _, chunks in group:
                vectors, problem = self._chunk_vectors(chunks, known)
                if vectors is None:
                    raise EmbeddingError(problem or f"could not embed document {document_id!r}")
                rows = [
                    (c.id, vectors.dims, blob)
                    for c, blob in zip(chunks, vectors.blobs, strict=True)
                ]
                self.committed(
                    functools.partial(self._store_vectors, model, document_id, chunks, rows)
                )
                done += 1
                if progress:
                    progress(done, len(documents))
            embedded += fresh
        return ReembedReport(model=model, documents=done, chunks_embedded=embedded)

    def _store_vectors(
        self,
        model: str,
        document_id: str,
        chunks: Sequence[StoredChunk],
        rows: list[tuple[int, int, bytes]],
    ) -> None:
        with self.store.write():
            # The document may have been re-indexed meanwhile (it then got its vectors).
            if [c.id for c in self.store.chunks_of(document_id)] == [c.id for c in chunks]:
                self.store.insert_embeddings(model, rows)

    def _known_vectors(
        self, chunks: Sequence[tuple[str, NewChunk | StoredChunk]]
    ) -> tuple[dict[str, tuple[int, bytes]], int, str | None]:
        """(dims, vector) by content hash for ``(document title, chunk)`` pairs: reused
        when any stored chunk with the same hash has one for this model (across documents
        and re-indexes), embedded otherwise, each distinct text once; with how many texts
        were embedded, and the warning when embedding failed."""
        assert self.embedder is not None
        model = self.embedder.model
        known = self.store.vectors_for_hashes(model, (c.content_hash for _, c in chunks))
        todo = {
            c.content_hash: embedding_text(title, c.section_title, c.content)
            for title, c in chunks
            if c.content_hash not in known
        }
        if todo:
            try:
                fresh = self.embedder.embed(list(todo.values()))
            except EmbeddingError as exc:
                logger.warning("stored without vectors (lexical only until re-embedded): %s", exc)
                return known, 0, f"embedding failed, stored for lexical search only: {exc}"
            dims = fresh.shape[1]
            known.update((h, (dims, to_blob(v))) for h, v in zip(todo, fresh, strict=True))
        return known, len(todo), None

    def _chunk_vectors(
        self, chunks: Sequence[NewChunk | StoredChunk], known: dict[str, tuple[int, bytes]]
    ) -> tuple[ChunkVectors | None, str | None]:
        assert self.embedder is not None
        if not chunks:
            return None, None
        dims = {known[c.content_hash][0] for c in chunks}
        if len(dims) != 1:
            return (
                None,
                f"stored vectors of {self.embedder.model!r} disagree on dims {sorted(dims)}",
            )
        blobs = [known[c.content_hash][1] for c in chunks]
        return ChunkVectors(self.embedder.model, dims.pop(), blobs), None

    def attach(self, document_id: str, placement: Placement) -> None:
        if placement.session_id is not None:
            self.store.attach_document_to_session(document_id, placement.session_id)

    def attach_all(self, document_ids: list[str], placement: Placement) -> None:
        if placement.session_id is not None:
            self.store.attach_documents_to_session(document_ids, placement.session_id)


def _raise_failures(results: list[IndexResult]) -> None:
    """:class:`IndexingFailed` when any source failed; but the store's own failure (a
    full disk, a read-only store) as itself: it is no source's fault, and every source
    after it would fail the same way."""
    failures = [r.error for r in results if r.error is not None]
    for error in failures:
        if isinstance(error, StoreError):
            raise error
    if failures:
        raise IndexingFailed(results)
