"""What a chunk's ``tsvector`` is made of on PostgreSQL: its context header and text,
folded as FTS5's ``unicode61`` tokenizer folds them (the ``tether`` text search
configuration then stems the terms)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

_TERM = re.compile(r"[^\W_]+")


def fold(text: str) -> str:
    """``text`` as the index keeps it: without diacritics, lower case, its terms (runs of
    letters and digits, FTS5's unicode61 cut) separated by single spaces."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(_TERM.findall(plain.lower()))


def index_text(content: str, header: str | None) -> tuple[int, str]:
    """``(terms, text)``: the folded text a chunk's ``tsvector`` is made of (its context
    header and content, as FTS5 indexes both columns: the header is the chunk's section
    title, else its document's title) and its length in terms."""
    text = fold(f"{header or ''} {content}")
    return (text.count(" ") + 1 if text else 0), text


#: Chunks re-indexed in one statement.
_REINDEX_BATCH = 1000


def index_under_titles(conn: Any, where: str, params: Sequence[Any] = ()) -> int:
    """Index again, under their document's current title, the chunks without a section
    title that match ``where`` (on ``rag_chunks c``, with psycopg's ``%s`` placeholders
    for ``params``; ``conn`` is a psycopg connection); how many. They are read and written
    :data:`_REINDEX_BATCH` at a time, so a large store's text is never held at once. The
    statement trigger on ``rag_chunks`` moves the postings and counts from the old
    ``tsvector`` to the new."""
    done, after = 0, -1
    while True:
        rows = conn.execute(
            "SELECT c.id, c.content, d.title FROM rag_chunks c"
            " JOIN rag_documents d ON d.id = c.document_id"
            f" WHERE c.section_title IS NULL AND ({where}) AND c.id > %s"
            " ORDER BY c.id LIMIT %s",
            (*params, after, _REINDEX_BATCH),
        ).fetchall()
        if not rows:
            return done
        batch = [(i, *index_text(content, title)) for i, content, title in rows]
        conn.execute(
            "UPDATE rag_chunks c SET terms = v.terms, tsv = to_tsvector('tether', v.text)"
            " FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS v(id, terms, text)"
            " WHERE c.id = v.id",
            ([b[0] for b in batch], [b[1] for b in batch], [b[2] for b in batch]),
        )
        done, after = done + len(rows), rows[-1][0]
