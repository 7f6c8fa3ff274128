"""Keeping the FTS5 index compact while a store is written.

FTS5 writes each transaction's changes as a new segment and merges segments of one level
once there are four (``automerge``). A delete does not remove a chunk's terms from the
index: it adds a tombstone to a newer segment, and tombstones leave only when their
segment is merged into the oldest one. A store whose documents are replaced and deleted
often (a watched folder, re-imports) keeps its live text constant while its index grows:
after 7,000 replacements on SciFact the index held 22 segments and 42 MB where a compact
one is 1 segment and 3 MB, and lexical search ran 2.2x slower.

``FtsUpkeep`` reads the index's shape from its structure record (one row) after writes,
every ``CHECK_EVERY`` changed rows, and when the segments hold more than ``BLOAT`` times
the pages of the largest one it runs one bounded FTS5 ``merge`` step (about
``STEP_PAGES`` pages written, tens of milliseconds) in its own transaction. Steps are
paid by the writes that caused them, a step per ``CHECK_EVERY`` changes, so a store
under churn converges on one segment and a store that is only read pays nothing.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass

log = logging.getLogger(__name__)

TABLE = "rag_chunks_fts"
# Rows changed by this process's writes between two looks at the index's shape.
CHECK_EVERY = 2_000
# A merge step runs when all segments hold more than this many times the largest's pages.
BLOAT = 1.5
# Indexes smaller than this many leaf pages are left alone (a merge gains nothing there).
MIN_PAGES = 64
# The work of one merge step: roughly this many pages written.
STEP_PAGES = 256


@dataclass(frozen=True)
class FtsShape:
    """Segments and leaf pages of an FTS5 index, read from its structure record."""

    segments: int
    pages: int  # leaf pages in all segments
    largest: int  # leaf pages of the largest segment

    @property
    def fragmented(self) -> bool:
        return self.segments > 1 and self.pages >= MIN_PAGES and self.pages > BLOAT * self.largest


def fts_shape(conn: sqlite3.Connection, table: str = TABLE) -> FtsShape | None:
    """The shape of ``table``'s index; None for an empty index or a record this code
    does not know how to read (a future FTS5 format), so nothing is merged on a guess."""
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


class FtsUpkeep:
    """Counts the rows a process's writes change and, every ``CHECK_EVERY`` of them, runs
    one merge step if the index is fragmented. One per ``Database``; called by its writer
    thread with the write lock held, right after a commit."""

    def __init__(self, check_every: int = CHECK_EVERY) -> None:
        #: Changed rows between looks at the index's shape (a huge number turns upkeep off).
        self.check_every = check_every
        self.changed = 0
        #: Looks at the index's shape, merge steps run, and steps that failed.
        self.stats = {"checks": 0, "steps": 0, "failed": 0}

    def after_write(self, conn: sqlite3.Connection, changed: int) -> None:
        self.changed += changed
        if self.changed < self.check_every:
            return
        self.changed = 0
        self.stats["checks"] += 1
        try:
            shape = fts_shape(conn)
            if shape is None or not shape.fragmented:
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    f"INSERT INTO {TABLE} ({TABLE}, rank) VALUES ('merge', ?)", (-STEP_PAGES,)
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            self.stats["steps"] += 1
        except sqlite3.Error as exc:  # upkeep never fails the write that came before it
            self.stats["failed"] += 1
            log.warning("FTS5 merge step skipped: %s", exc)
