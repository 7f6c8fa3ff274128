"""What every part of the SQLite store shares: its :class:`Database` and the plumbing of
its reads (one snapshot per call; long id lists in batches)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tether.store.base import Store
from tether.store.database import Database

T = TypeVar("T")

# Well under SQLite's default limit of 999 bound variables per statement.
_BATCH = 500


class SQLiteMixin(Store):
    """The base of the SQLite store's parts (mixins of :class:`SQLiteStore`): each is
    written over ``self.db`` and may call the others through the :class:`Store` methods."""

    db: Database
    _scope_shares: dict[tuple[Any, ...], tuple[int, float]]

    def _select(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Every row of one SELECT."""
        with self.db.read() as conn:
            return conn.execute(sql, params).fetchall()

    def _select_one(self, sql: str, params: Sequence[Any] = ()) -> Any | None:
        """The first row of one SELECT, or None."""
        with self.db.read() as conn:
            return conn.execute(sql, params).fetchone()

    def _select_in_batches(
        self, keys: Sequence[T], build: Callable[[Sequence[T]], tuple[str, list[Any]]]
    ) -> list[Any]:
        """The rows of ``build(batch)`` for every batch of ``keys``, read in one snapshot."""
        rows: list[Any] = []
        with self.db.read() as conn:
            for i in range(0, len(keys), _BATCH):
                sql, params = build(keys[i : i + _BATCH])
                rows += conn.execute(sql, params).fetchall()
        return rows
