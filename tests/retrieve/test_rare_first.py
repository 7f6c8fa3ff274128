"""The rare-first lexical plan (``SearchMixin._rare_first``): in a large store, a long
query's lexical search scores only the chunks that hold one of its rare terms, and the
scores it returns are still each chunk's exact bm25 for the whole query."""

from __future__ import annotations

import random

import pytest

from tether import Tether
from tether.models import Scope
from tether.retrieve.fts import compile_match
from tether.store import _search

# Every document holds "common"; half hold "usual"; "scarce" and "unique" are rare.
DOCS = 200


@pytest.fixture
def store_with_rare_terms(tether: Tether, monkeypatch: pytest.MonkeyPatch) -> Tether:
    rng = random.Random(7)
    for i in range(DOCS):
        words = ["common"] * rng.randint(1, 4) + ["filler"] * rng.randint(0, 30)
        if i % 2:
            words += ["usual"] * rng.randint(1, 3)
        if i % 40 == 3:  # 5 documents: 2.5% of the store
            words += ["scarce"] * rng.randint(1, 3)
        if i in (10, 11, 150):
            words += ["unique"]
        rng.shuffle(words)
        workspace = "big" if i < 180 else "other"
        tether.add(text=" ".join(words), workspace_id=workspace, document_id=f"d{i}")
    # The plan runs in stores of 5,000 chunks or more; this one has 200.
    monkeypatch.setattr(_search, "RARE_FIRST_MIN_CHUNKS", 0)
    return tether


def exact(t: Tether, match: str, scope: Scope) -> list[tuple[int, float]]:
    """Every in-scope match's -bm25 for the whole query, best first (then chunk id)."""
    with t.store.db.read() as conn:
        rows = conn.execute(
            "SELECT c.id, bm25(rag_chunks_fts, 1.0, 1.0) AS r FROM rag_chunks_fts"
            " JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid"
            " JOIN rag_documents d ON d.id = c.document_id"
            " WHERE rag_chunks_fts MATCH :m AND d.workspace_id = :w ORDER BY r, c.id",
            {"m": match, "w": scope.id},
        ).fetchall()
    return [(cid, -r) for cid, r in rows]


def holding(t: Tether, word: str) -> set[int]:
    with t.store.db.read() as conn:
        rows = conn.execute(
            "SELECT rowid FROM rag_chunks_fts WHERE rag_chunks_fts MATCH ?", (f'"{word}"',)
        )
        return {cid for (cid,) in rows}


def test_it_ranks_the_chunks_holding_a_rare_term_by_their_exact_scores(
    store_with_rare_terms: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = store_with_rare_terms
    calls: list[object] = []
    rare_first = _search.SearchMixin._rare_first

    def spy(self: _search.SearchMixin, *args: object) -> object:
        found = rare_first(self, *args)
        calls.append(found)
        return found

    monkeypatch.setattr(_search.SearchMixin, "_rare_first", spy)
    match = compile_match("common usual filler scarce unique often seldom")
    assert match is not None
    scope = Scope.workspace("big")
    reference = dict(exact(t, match, scope))
    found = t.store.search_lexical_scores(scope, match, 5)
    assert calls and calls[-1] is not None, "the rare-first plan ran"
    assert len(found) == 5
    rare = holding(t, "scarce") | holding(t, "unique")
    # Only chunks holding a rare term, each with its exact bm25, best first ...
    assert {cid for cid, _ in found} <= rare
    for cid, score in found:
        assert score == pytest.approx(reference[cid], abs=1e-9)
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    # ... which here are the exact top 5 (chunks holding only common terms rank lower).
    assert [cid for cid, _ in found] == [cid for cid, _ in exact(t, match, scope)[:5]]
    # Each chunk holding a rare term was scored once: bm25 reads a chunk's length from
    # FTS5's docsize table, one statement per scored chunk.
    lookups: list[str] = []
    with t.store.db.read() as conn:
        conn.set_trace_callback(lambda sql: lookups.append(sql) if "_docsize" in sql else None)
        try:
            rows = t.store._rare_first(conn, scope, match, 5, 5, DOCS, True, None, None)
        finally:
            conn.set_trace_callback(None)
    assert rows == [(cid, -score) for cid, score in found]
    assert len(lookups) == len(holding(t, "scarce") | holding(t, "unique"))
    # The hits path returns the same chunks and scores, with their text.
    hits = t.store.search_lexical(scope, match, 5)
    assert [h.chunk_id for h in hits] == [cid for cid, _ in found]
    assert [h.score for h in hits] == pytest.approx([s for _, s in found])
    assert all("scarce" in h.text or "unique" in h.text for h in hits)


def test_fewer_rare_matches_than_asked_for_falls_back_to_the_exact_plan(
    store_with_rare_terms: Tether,
) -> None:
    """The scope holds 8 chunks with a rare term; asking for 40 gets the exact top 40,
    chunks with only common terms included."""
    t = store_with_rare_terms
    match = compile_match("common usual filler scarce unique often seldom")
    assert match is not None
    scope = Scope.workspace("big")
    found = t.store.search_lexical_scores(scope, match, 40)
    reference = exact(t, match, scope)[:40]
    assert [cid for cid, _ in found] == [cid for cid, _ in reference]
    assert [s for _, s in found] == pytest.approx([s for _, s in reference])


@pytest.mark.parametrize(
    "query",
    ["common usual filler", "scarce unique", "common usual filler scarce unique", "scarce"],
    ids=["only-common", "only-rare", "five-terms", "one-rare"],
)
def test_queries_without_both_kinds_of_terms_run_the_exact_plan(
    store_with_rare_terms: Tether, query: str
) -> None:
    """Without both kinds, or with fewer than seven terms (in a short query the common
    terms can carry a chunk's rank)."""
    t = store_with_rare_terms
    match = compile_match(query)
    assert match is not None
    scope = Scope.workspace("big")
    with t.store.db.read() as conn:
        assert t.store._rare_first(conn, scope, match, 3, 3, DOCS, True, None, None) is None
    found = t.store.search_lexical_scores(scope, match, 3)
    reference = exact(t, match, scope)[:3]
    assert [cid for cid, _ in found] == [cid for cid, _ in reference]


def test_a_small_store_keeps_the_exact_plan(tether: Tether) -> None:
    for i in range(30):
        tether.add(text=f"common usual {'scarce' if i == 3 else 'filler'}", document_id=f"d{i}")
    match = compile_match("common usual filler scarce unique often seldom")
    assert match is not None
    with tether.store.db.read() as conn:
        found = tether.store._rare_first(conn, Scope.global_(), match, 1, 1, 30, True, None, None)
    assert found is None


def test_a_part_cut_short_by_the_scope_is_read_to_the_end(
    tether: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rank-first window of ``(rare) NOT (common)`` (k=3 in a scope holding 91% of
    the store: the best 5 of the whole index) holds the other workspace's four best
    rare-only chunks and only one of this scope's two: the part is read again inside the
    scope, and both are found, with their exact scores."""
    rng = random.Random(11)
    for i in range(200):
        workspace = "other" if i >= 185 else "big"
        words = ["common"] * rng.randint(1, 3) + ["filler"] * rng.randint(5, 30)
        if i % 2:
            words += ["usual"]
        if i in (20, 21):  # a rare term among common ones
            words += ["unique"]
        rng.shuffle(words)
        tether.add(text=" ".join(words), workspace_id=workspace, document_id=f"d{i}")
    # Rare-only chunks: the other workspace's are shorter, so they rank first.
    for i, (workspace, text) in enumerate(
        [("other", "scarce scarce scarce zebra")] * 4
        + [("big", "scarce scarce scarce yak yak"), ("big", "scarce scarce yak yak yak yak")]
    ):
        tether.add(text=text, workspace_id=workspace, document_id=f"rare{i}")
    monkeypatch.setattr(_search, "RARE_FIRST_MIN_CHUNKS", 0)
    match = compile_match("common usual filler scarce unique often seldom")
    assert match is not None
    scope = Scope.workspace("big")
    with tether.store.db.read() as conn:
        total = conn.execute("SELECT count(*) FROM rag_chunks").fetchone()[0]
        share, _ = tether.store._scope_size(conn, scope, None, None)
        depth = _search._depth(share, 3)
        assert depth == 5
        found = tether.store._rare_first(conn, scope, match, 3, depth, total, True, None, None)
    assert found is not None, "the rare-first plan ran"
    reference = exact(tether, match, scope)[:3]
    yak = holding(tether, "yak")
    assert len(yak & {cid for cid, _ in reference}) == 2, "both rare-only chunks rank"
    assert [cid for cid, _ in found] == [cid for cid, _ in reference]
    assert [-bm25 for _, bm25 in found] == pytest.approx([s for _, s in reference], abs=1e-9)
