"""The hot statements' query plans, on a real store with and without ANALYZE statistics.

tether never runs ANALYZE, so SQLite's planner guesses; each statement below must read
through its indexes either way (a wrong guess read every vector of a model on each add).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from tether import Tether, TextSource
from tether.models import Scope
from tether.store.sql import (
    candidate_rows_sql,
    hits_sql,
    lexical_search_sql,
    scope_chunk_count_sql,
    vectors_for_hashes_sql,
)


def plan(conn: sqlite3.Connection, statement: tuple[str, Any]) -> list[str]:
    sql, params = statement
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def full_scans(steps: list[str]) -> list[str]:
    """Steps that read a whole table (FTS5's own scan of its match is not one)."""
    return [s for s in steps if s.startswith("SCAN") and "VIRTUAL TABLE" not in s]


@pytest.fixture(params=["no statistics", "analyzed"])
def conn(request: pytest.FixtureRequest, tether: Tether) -> sqlite3.Connection:
    """A store of 60 documents in two workspaces (one attached to a session), each with
    vectors under two models; ANALYZE'd or not."""
    tether.create_session("chat", workspace_id="small")
    for ws, count in (("big", 50), ("small", 10)):
        tether.add(
            [TextSource(f"valve seat {i} of pump {ws}", f"{ws}{i}") for i in range(count)],
            workspace_id=ws,
            session_id="chat" if ws == "small" else None,
        )
    with tether.store.db.write() as db:
        rows = db.execute("SELECT id FROM rag_chunks").fetchall()
        for model in ("model-a", "model-b"):
            db.executemany(
                "INSERT INTO rag_embeddings (chunk_id, model, dims, vector) VALUES (?, ?, 1, ?)",
                [(chunk_id, model, b"\0\0\0\0") for (chunk_id,) in rows],
            )
        if request.param == "analyzed":
            db.execute("ANALYZE")
    with tether.store.db.read() as connection:
        yield connection


def test_vectors_for_hashes_looks_up_each_hash_then_its_vector(conn: sqlite3.Connection) -> None:
    hashes = [h for (h,) in conn.execute("SELECT content_hash FROM rag_chunks LIMIT 3")]
    steps = plan(conn, vectors_for_hashes_sql("model-a", hashes))
    assert full_scans(steps) == []
    assert steps[0].startswith("SEARCH c USING COVERING INDEX rag_chunks_hash"), steps
    assert "(model=? AND chunk_id=?)" in steps[1], steps


@pytest.mark.parametrize(
    "statement",
    [
        lambda: hits_sql([1, 2, 3]),
        lambda: candidate_rows_sql([1, 2, 3], "chat"),
        lambda: candidate_rows_sql([1, 2, 3], None),
    ],
    ids=["hits", "candidate rows in a session", "candidate rows"],
)
def test_reads_by_chunk_id_use_the_keys(
    conn: sqlite3.Connection, statement: Callable[[], tuple[str, Any]]
) -> None:
    steps = plan(conn, statement())
    assert full_scans(steps) == [], steps
    assert any("INTEGER PRIMARY KEY" in s for s in steps), steps


@pytest.mark.parametrize("scope", [Scope.workspace("big"), Scope.session("chat")], ids=str)
@pytest.mark.parametrize("depth", [None, 20], ids=["scope first", "rank first"])
def test_lexical_plans_join_only_what_they_rank(
    conn: sqlite3.Connection, scope: Scope, depth: int | None
) -> None:
    """Both plans rank inside FTS5 first (one materialized list) and join chunks and
    documents by key for that list alone; the scope's own set is read through indexes."""
    steps = plan(conn, lexical_search_sql(scope, '"valve"', 5, depth=depth))
    assert steps[:2] == ["MATERIALIZE ranked", "SCAN rag_chunks_fts VIRTUAL TABLE INDEX 0:M2"]
    assert full_scans(steps) == ["SCAN ranked"], steps
    assert "SEARCH c USING INTEGER PRIMARY KEY (rowid=?)" in steps


def test_the_scope_share_counts_through_indexes(conn: sqlite3.Connection) -> None:
    steps = plan(conn, scope_chunk_count_sql(Scope.workspace("big")))
    assert any("rag_documents_workspace" in s for s in steps), steps
    # The store's total: a scan of the narrowest index, never of the chunk texts.
    assert [s for s in full_scans(steps) if s != "SCAN CONSTANT ROW"] == [
        "SCAN rag_chunks USING COVERING INDEX rag_chunks_hash"
    ], steps
