"""The stored document each source updates, looked up many at a time.

A bulk add asks, for every source, which stored document it updates: once when it is
prepared (an unchanged document is skipped before it is chunked) and once more inside
the write transaction (another writer may have got there first). One query per source
is a round trip per source; :class:`Lookahead` and :func:`existing_many` ask for many
sources in a few statements (``Store.find_documents``). With a writer thread storing
one group while the next is prepared, it also keeps the two threads from handing
Python's lock back and forth at every small query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.errors import InvalidArgument, ScopeError, TetherError
from tether.ingest.loaders import LoadedDocument
from tether.ingest.sources import Source, TextSource
from tether.models import Document
from tether.store import Store

#: Sources looked up together when they are prepared.
BLOCK = 256


@dataclass(frozen=True)
class Placement:
    """Where a document goes: its workspace, and the session to attach it to (if any)."""

    workspace_id: str
    session_id: str | None


#: What a lookup found: the document, none, or why the source may not update it.
Found = Document | None | TetherError


def existing(store: Store, lookup: dict[str, Any], placement: Placement) -> Document | None:
    """The stored document a source updates, after checking that it may: it is in the
    placement's workspace, and a ``source`` key is not another document's."""
    found = looked_up(store, lookup, placement)
    if isinstance(found, TetherError):
        raise found
    return found


def looked_up(store: Store, lookup: dict[str, Any], placement: Placement) -> Found:
    """What :func:`existing` says of one source, the error returned rather than raised."""
    held = _holder_lookup(lookup, placement)
    holder = store.find_document(**held) if held is not None else None
    return checked(store.find_document(**lookup), lookup, placement, holder)


def existing_many(
    store: Store, lookups: Sequence[dict[str, Any]], placement: Placement
) -> list[Found]:
    """:func:`looked_up` for each of ``lookups``, in a few statements."""
    documents = store.find_documents(lookups)
    held = [_holder_lookup(lookup, placement) for lookup in lookups]
    wanted = [h for h in held if h is not None]
    found = iter(store.find_documents(wanted) if wanted else [])
    holders = [next(found) if h is not None else None for h in held]
    return [
        checked(document, lookup, placement, holder)
        for document, lookup, holder in zip(documents, lookups, holders, strict=True)
    ]


def checked(
    document: Document | None,
    lookup: dict[str, Any],
    placement: Placement,
    holder: Document | None,
) -> Found:
    """``document`` when ``lookup``'s source may update it, else the error that says why
    not. ``holder``: the document that holds the lookup's source key in the workspace,
    when the lookup names both an id and a source key."""
    if document is not None and document.workspace_id != placement.workspace_id:
        return ScopeError(
            f"document {document.id!r} belongs to workspace {document.workspace_id!r},"
            f" not {placement.workspace_id!r}"
        )
    if holder is not None and holder.id != lookup["document_id"]:
        source_path = lookup["source_path"]
        held = InvalidArgument(
            f"source {source_path!r} is already document {holder.id!r}; pass"
            f" document_id={holder.id!r} to update it, or use another source key"
        )
        held.holder = holder.id  # type: ignore[attr-defined]
        return held
    return document


def refers(found: Found) -> set[str]:
    """The stored documents an answer of :func:`checked` rests on: the document found, or
    the one that holds the source key. It is out of date once one of them is written."""
    if isinstance(found, Document):
        return {found.id}
    holder = getattr(found, "holder", None)
    return {holder} if holder is not None else set()


def _holder_lookup(lookup: dict[str, Any], placement: Placement) -> dict[str, Any] | None:
    if lookup["document_id"] is None or lookup["source_path"] is None:
        return None
    return {"workspace_id": placement.workspace_id, "source_path": lookup["source_path"]}


class Lookahead:
    """The documents the sources of one add update, as each is prepared: in-memory
    sources looked up :data:`BLOCK` at a time as their turn comes (those whose key is known
    before they are read: an id or a source key), the others one at a time.

    A source that shares a key with an earlier source of the same add, or whose answer
    rests on a document an earlier in-memory source updates, is not decided when
    prepared: the earlier one may not be stored yet, and what the store says now
    (unchanged, or its source key held by another document) may be untrue by the time it
    is written. It is prepared in full, and its write, which looks again inside the
    transaction, decides."""

    def __init__(self, store: Store, items: Sequence[Source], placement: Placement) -> None:
        self.store = store
        self.items = items
        self.placement = placement
        self._found: dict[int, tuple[dict[str, Any], Found]] = {}
        self._done = 0
        self._after_same: set[int] = set()
        #: The documents the in-memory sources looked up so far update.
        self._targets: set[str] = set()
        seen: set[tuple[str, str]] = set()
        for i, item in enumerate(items):
            keys = _early_keys(item)
            if keys & seen:
                self._after_same.add(i)
            seen |= keys

    def lookup(self, i: int, lookup: dict[str, Any]) -> Found:
        """What :func:`existing` says of item ``i``'s ``lookup`` (raised when it is an
        error); None for a source that shares a key with an earlier one of the add."""
        if i in self._after_same:
            return None
        if not isinstance(self.items[i], TextSource):  # (prepared in a helper thread)
            return existing(self.store, lookup, self.placement)
        if i >= self._done:
            self._fetch(i)
        ahead = self._found.pop(i, None)
        if ahead is not None and _same_keys(ahead[0], lookup):
            found = ahead[1]
        else:
            found = looked_up(self.store, lookup, self.placement)
        if refers(found) & self._targets:
            found = None  # (an earlier source may change it before this one is written)
        self._targets |= refers(found) | ({lookup["document_id"]} - {None})
        if isinstance(found, TetherError):
            raise found
        return found

    def _fetch(self, start: int) -> None:
        end = min(len(self.items), start + BLOCK)
        self._done = end
        slots, lookups = [], []
        for j in range(start, end):
            item = self.items[j]
            if isinstance(item, TextSource) and (item.document_id or item.source) is not None:
                slots.append(j)
                lookups.append(
                    {
                        "workspace_id": self.placement.workspace_id,
                        "document_id": item.document_id,
                        "source_path": item.source,
                        "content_hash": None,
                    }
                )
        if not lookups:
            return
        try:
            found = existing_many(self.store, lookups, self.placement)
        except TetherError:
            return  # (each is looked up on its own when read, and says what is wrong)
        for j, lookup, result in zip(slots, lookups, found, strict=True):
            self._found[j] = (lookup, result)


def _early_keys(item: Source) -> set[tuple[str, str]]:
    """What finds the stored document ``item`` updates, as far as it is known before the
    item is read: its id and source key (a file's path when it has none)."""
    if isinstance(item, TextSource):
        keys = {("id", item.document_id)} if item.document_id is not None else set()
        return keys | ({("source", item.source)} if item.source is not None else set())
    if item.source is not None:
        return {("source", item.source)}
    try:
        path = Path(item.path).expanduser()  # (as load_path_source names it)
        return {("source", str(path.absolute() if item.content is not None else path.resolve()))}
    except (OSError, RuntimeError, ValueError):
        return set()


def _same_keys(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["document_id"] == b["document_id"] and a["source_path"] == b["source_path"]


def unchanged(existing: Document, digest: str, loaded: LoadedDocument, chunking: str) -> bool:
    """Nothing to re-chunk: the same normalized text, read as the same type (the same
    text as Markdown rather than plain text has other sections), chunked with the same
    settings (documents stored before tether recorded them count as the same)."""
    return (
        existing.content_hash == digest
        and existing.mime == loaded.mime
        and existing.chunking in (None, chunking)
    )
