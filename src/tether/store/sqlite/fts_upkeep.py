"""Keeping the FTS5 index compact while a store is written.

FTS5 writes each transaction's changes as a new segment and merges segments of one level
once there are four (``automerge``). A delete does not remove a chunk's terms from the
index: it adds a tombstone to a newer segment, and tombstones leave only when their
segment is merged into the oldest one. A store whose documents are replaced and deleted
often (a watched folder, re-imports) keeps its live text constant while its index grows:
after 7,000 replacements on SciFact the index held 22 segments and 42 MB where a compact
one is 1 segment and 3 MB, and lexical search ran 2.2x slower.

``FtsUpkeep`` reads the index's shape from its structure record (one row, tens of
microseconds) after each write that changed rows. When the index is fragmented (its
segments hold more than ``BLOAT`` times the pages of the largest one: 40% of an index of
new segments and tombstones since it was last compact, or there are more than
``MAX_SEGMENTS``) and is at most ``AUTO_PAGES`` leaf pages, it runs FTS5's ``optimize``
(one segment, tombstones gone) in its own transaction. An optimize rewrites the index
once per 0.4 of an index written, so the cost is amortized: about 2.5 pages rewritten for
each page written. (A SciFact store whose index had 19 segments and 1.5x the pages
searched 2x slower, 15.9 against 7.7 ms p50 lexical, than after ``optimize``.) A larger
index is left to ``compact()`` (``tether compact``), run when its writer can wait, with
a warning once per process.

FTS5's incremental ``merge`` command would bound each step's work, but on SQLite 3.40
(this Python's) a churn of deletes and inserts with ``merge`` steps between them
corrupts the index ("database disk image is malformed") within a few thousand writes,
with a positive or a negative page count; ``optimize`` under the same churn stays whole.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass

log = logging.getLogger(__name__)

TABLE = "rag_chunks_fts"
# An optimize runs when all segments hold more than this many times the largest's pages,
BLOAT = 1.4
# or when there are more segments than this (each query term is read from every one).
# Automerge alone keeps about 15 under a churn of replacements, each adding three.
MAX_SEGMENTS = 24
# Indexes smaller than this many leaf pages are left alone (nothing to gain).
MIN_PAGES = 64
# Indexes larger than this are not optimized after a write (about a second's work on 2
# cores; the rewrite's time grows with the index): ``compact()`` does it when asked.
AUTO_PAGES = 4_000


@dataclass(frozen=True)
class FtsShape:
    """Segments and leaf pages of an FTS5 index, read from its structure record."""

    segments: int
    pages: int  # leaf pages in all segments
    largest: int  # leaf pages of the largest segment

    @property
    def fragmented(self) -> bool:
        if self.segments <= 1 or self.pages < MIN_PAGES:
            return False
        return self.segments > MAX_SEGMENTS or self.pages > BLOAT * self.largest


def fts_shape(conn: sqlite3.Connection, table: str = TABLE) -> FtsShape | None:
    """The shape of ``table``'s index; None for an empty index or a record this code
    does not know how to read (a future FTS5 format), so nothing is rewritten on a guess."""
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 10").fetchone()
    if row is None or not row[0]:
        return None
    try:
        return _parse(bytes(row[0]))
    except (IndexError, ValueError):
        return None


def _parse(record: bytes) -> FtsShape:
    """Format (fts5_index.c): a 4-byte cookie, then (in version 2, after 0xFFFFFFFF) the
    level count, segment count and write counter, then per level its merge count,
    segment count and each segment's id, first and last leaf page (version 2 adds five
    fields a segment)."""
    at, v2 = 4, record[4:8] == b"\xff\xff\xff\xff"
    if v2:
        at = 8
    levels, at = _varint(record, at)
    segments, at = _varint(record, at)
    _, at = _varint(record, at)  # write counter
    pages, largest, seen = 0, 0, 0
    for _level in range(levels):
        _, at = _varint(record, at)  # segments in an ongoing merge
        count, at = _varint(record, at)
        for _segment in range(count):
            _, at = _varint(record, at)  # segment id
            first, at = _varint(record, at)
            last, at = _varint(record, at)
            if v2:
                for _field in range(5):  # origins, tombstone pages and entries, entries
                    _, at = _varint(record, at)
            size = max(0, last - first + 1)
            pages, largest, seen = pages + size, max(largest, size), seen + 1
    if seen != segments:
        raise ValueError(f"structure record names {segments} segments, holds {seen}")
    return FtsShape(segments, pages, largest)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint: 7 bits a byte, big end first, the ninth byte whole."""
    value = 0
    for i in range(9):
        byte = data[at]
        at += 1
        if i == 8:
            return (value << 8) | byte, at
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at
    raise ValueError("unterminated varint")  # pragma: no cover - the loop returns


def index_queued(conn: sqlite3.Connection) -> None:
    """Index the chunks written in this transaction, in one statement: called right
    before it commits. Chunks wait in ``rag_fts_pending`` (a trigger queues each one) and
    are read from ``rag_fts_source``, as the store's language has FTS5 see them; a chunk
    deleted or changed while queued is handled by the other triggers (migration 13)."""
    if conn.execute("SELECT EXISTS (SELECT 1 FROM rag_fts_pending)").fetchone()[0]:
        conn.execute(
            f"INSERT INTO {TABLE} (rowid, content, section_title)"
            " SELECT id, content, section_title FROM rag_fts_source"
            " WHERE id IN (SELECT id FROM rag_fts_pending) ORDER BY id"
        )
        conn.execute("DELETE FROM rag_fts_pending")


def optimize(conn: sqlite3.Connection, table: str = TABLE) -> None:
    """Rewrite ``table``'s index as one segment, in one ``BEGIN IMMEDIATE`` transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class FtsUpkeep:
    """After each write that changed rows, optimizes the index if it is fragmented and
    small enough. One per ``Database``; called by its writer thread with the write lock
    held, right after a commit."""

    def __init__(self) -> None:
        #: Off: no look and no optimize (a test, a benchmark's baseline).
        self.enabled = True
        self._warned = False
        #: Looks at the index's shape, optimizes run, ones left for ``compact()`` (too
        #: large), and ones that failed.
        self.stats = {"checks": 0, "optimized": 0, "too_large": 0, "failed": 0}

    def after_write(self, conn: sqlite3.Connection, changed: int) -> None:
        if not self.enabled or changed == 0:
            return
        self.stats["checks"] += 1
        try:
            shape = fts_shape(conn)
            if shape is None or not shape.fragmented:
                return
            if shape.pages > AUTO_PAGES:
                self.stats["too_large"] += 1
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "the full-text index is fragmented (%d segments, %d pages where its"
                        " largest segment holds %d); run `tether compact` (Tether.compact())"
                        " when writes can wait",
                        shape.segments,
                        shape.pages,
                        shape.largest,
                    )
                return
            optimize(conn)
            self.stats["optimized"] += 1
        except sqlite3.Error as exc:  # upkeep never fails the write that came before it
            self.stats["failed"] += 1
            log.warning("FTS5 optimize after a write skipped: %s", exc)
