"""Where SQLite and PostgreSQL spell the same thing differently.

The shared statements are built for one :class:`Dialect`, passed to the builders of
:mod:`tether.store.sql` and read by each part of a store from its database
(``self.db.dialect``). Everything else the two backends read alike; the one difference
left to the connection is the placeholder style (``?`` and ``:name`` here, ``%s`` for
psycopg), which is the driver's, not the SQL's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """One database's spellings of what the shared statements need."""

    name: str
    #: ``a IS NOT b`` with NULL a value like any other (SQLite's ``IS NOT``; standard SQL's
    #: ``IS DISTINCT FROM``, which SQLite reads only from 3.39).
    distinct_from: str
    #: An aggregate that joins a column's values with the unit separator (chr 31).
    _joined: str
    #: A top-level key of a JSON text column, as text.
    _json_text: str
    #: Where a text first holds another (1-based; 0 when it does not).
    _position: str

    def joined(self, column: str) -> str:
        """The aggregate of ``column``'s values joined with chr(31)."""
        return self._joined.format(column=column)

    def json_text(self, column: str, key: str) -> str:
        """``column``'s JSON value at ``key`` (a plain name), as text."""
        if not key.isidentifier():
            raise ValueError(f"not a plain JSON key: {key!r}")
        return self._json_text.format(column=column, key=key)

    def position(self, text: str, needle: str) -> str:
        """Where ``needle`` first occurs in ``text`` (SQL expressions), 0 for nowhere."""
        return self._position.format(text=text, needle=needle)


SQLITE = Dialect(
    name="sqlite",
    distinct_from="IS NOT",
    _joined="group_concat({column}, char(31))",
    _json_text="json_extract({column}, '$.{key}')",
    _position="instr({text}, {needle})",
)
POSTGRES = Dialect(
    name="postgresql",
    distinct_from="IS DISTINCT FROM",
    _joined="string_agg({column}, chr(31))",
    _json_text="({column}::jsonb ->> '{key}')",
    _position="strpos({text}, {needle})",
)
