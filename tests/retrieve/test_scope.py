"""Scope isolation: a search sees exactly the documents of its scope, and top-k is exact
inside the scope because the scope is part of the SQL, not a filter applied afterwards."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tether import Settings, Tether
from tether.errors import InvalidArgument, ScopeError
from tether.models import GLOBAL_WORKSPACE, Hit, Scope
from tether.retrieve import query_terms
from tether.retrieve.fts import STOPWORDS, compile_match
from tether.store import lexical_search_sql, scope_sql

# Plain lowercase nouns whose porter stems are all different, so a document matches a
# query exactly when they share a word.
VOCAB = ("apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "robot")
HOSTILE = (
    '"',
    "*",
    "NEAR(",
    "col:term",
    "AND OR NOT",
    "(unbalanced",
    "'; DROP TABLE rag_chunks; --",
    "\x00",
    "🚀",
    "مرحبا",
    "apple*",
    '"river',
    "stone:cloud",
    "NEAR(tiger lemon, 2)",
    "-piano +robot",
    "the apple",
)


def test_vocabulary_words_are_their_own_terms() -> None:
    for word in VOCAB:
        assert query_terms(word) == [word]
        assert word not in STOPWORDS


# -- the layout model ---------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    id: str
    workspace_id: str
    sessions: tuple[str, ...]
    words: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.words) + "."


@dataclass(frozen=True)
class Layout:
    workspaces: tuple[str, ...]  # GLOBAL included
    sessions: dict[str, str]  # session -> workspace
    docs: tuple[Doc, ...]

    def in_scope(self, scope: Scope) -> set[str]:
        if scope.kind == "session":
            return {d.id for d in self.docs if scope.id in d.sessions}
        return {d.id for d in self.docs if d.workspace_id == scope.id}

    def scopes(self) -> list[Scope]:
        return (
            [Scope.session(s) for s in self.sessions]
            + [Scope.workspace(w) for w in self.workspaces]
            + [Scope.global_()]
        )


def without_fts_syntax(query: str) -> str:
    """``query`` less what the compiler documents as syntax, not words: a column filter's
    name (``col:term``, no space after the colon), a NEAR group's keyword and distance."""
    query = re.sub(r"\bNEAR\s*\(([^()]*?)(?:,\s*\d+\s*)?\)", r" \1 ", query)
    return re.sub(r"(?:(?<=\s)|^)-?(?:\{[^{}]*\}|[^\W\d_]\w*)\s*:(?=[^\s:/])", " ", query)


def matching(query: str, docs: tuple[Doc, ...]) -> set[str]:
    """Documents sharing a search word with ``query``, computed without FTS5."""
    words = re.findall(r"[a-z0-9]+", without_fts_syntax(query).lower())
    content = {w for w in words if w not in STOPWORDS} or set(words)
    return {d.id for d in docs if content & set(d.words)}


def draw_workspaces_and_sessions(
    draw: st.DrawFn,
) -> tuple[tuple[str, ...], dict[str, str]]:
    """2-3 workspaces plus the global one, and 2-4 sessions, each in one of them."""
    n_ws = draw(st.integers(2, 3))
    workspaces = (*(f"ws{i}" for i in range(n_ws)), GLOBAL_WORKSPACE)
    n_sessions = draw(st.integers(2, 4))
    return workspaces, {f"s{i}": draw(st.sampled_from(workspaces)) for i in range(n_sessions)}


def sessions_that_may_attach(sessions: dict[str, str], workspace: str) -> list[str]:
    """The sessions a document of ``workspace`` may be attached to."""
    return sorted(s for s, sw in sessions.items() if workspace in (sw, GLOBAL_WORKSPACE))


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    workspaces, sessions = draw_workspaces_and_sessions(draw)
    docs = []
    for i in range(draw(st.integers(0, 16))):
        ws = draw(st.sampled_from(workspaces))
        eligible = sessions_that_may_attach(sessions, ws)
        attached = (
            draw(st.lists(st.sampled_from(eligible), max_size=2, unique=True)) if eligible else []
        )
        words = draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4))
        docs.append(Doc(f"doc{i}", ws, tuple(attached), tuple(words)))
    return Layout(workspaces, sessions, tuple(docs))


QUERIES = st.one_of(
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3).map(" ".join),
    st.sampled_from(HOSTILE),
    st.tuples(st.sampled_from(HOSTILE), st.sampled_from(VOCAB)).map(" ".join),
)


def build(t: Tether, layout: Layout) -> None:
    for session, ws in layout.sessions.items():
        t.create_session(session, workspace_id=ws)
    for doc in layout.docs:
        add_and_attach(t, doc)


def add_and_attach(t: Tether, doc: Any) -> None:
    """Add a layout's document into its workspace through its first session, and attach it
    to the others (``doc`` has ``id``, ``text``, ``workspace_id`` and ``sessions``)."""
    first, *rest = doc.sessions or (None,)
    [result] = t.add(
        text=doc.text,
        title=doc.id,
        workspace_id=doc.workspace_id,
        session_id=first,
        document_id=doc.id,
    )
    assert result.status == "indexed"
    for session in rest:
        assert t.attach(doc.id, session) is True


@pytest.mark.slow
@given(layout=layouts(), queries=st.lists(QUERIES, min_size=1, max_size=3), data=st.data())
@hsettings(max_examples=50, deadline=None)
def test_search_sees_exactly_its_scope_and_fills_top_k(
    layout: Layout, queries: list[str], data: st.DataObject
) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        Tether(db=Path(tmp) / "scope.db", settings=Settings.load()) as t,
    ):
        build(t, layout)
        for query in queries:
            matches = matching(query, layout.docs)
            for scope in layout.scopes():
                k = data.draw(st.integers(1, 10), label=f"k for {scope}")
                hits = t.search(query, scope=scope, k=k)
                in_scope = layout.in_scope(scope)
                found = [h.document_id for h in hits]
                assert set(found) <= in_scope, (scope, query)
                assert set(found) <= matches, (scope, query)
                # one chunk per document here, so documents count chunks
                assert len(found) == len(set(found))
                assert len(hits) == min(k, len(in_scope & matches)), (scope, query, k)
                scores = [h.score for h in hits]
                assert scores == sorted(scores, reverse=True)


# -- plain tests --------------------------------------------------------------------------


def _ids(hits: list[Hit]) -> set[str]:
    return {h.document_id for h in hits}


@pytest.fixture
def two_workspaces(tether: Tether) -> Tether:
    """Workspaces a and b, each with a session; one global document; all mention 'report'."""
    tether.create_session("sa", workspace_id="a")
    tether.create_session("sb", workspace_id="b")
    tether.add(
        text="report from workspace a, attached",
        workspace_id="a",
        session_id="sa",
        document_id="a1",
    )
    tether.add(text="report from workspace a, unattached", workspace_id="a", document_id="a2")
    tether.add(text="report from workspace b", workspace_id="b", session_id="sb", document_id="b1")
    tether.add(text="report in the global library", document_id="g1")
    return tether


def test_session_sees_only_attached_documents(two_workspaces: Tether) -> None:
    t = two_workspaces
    assert _ids(t.search("report", scope="session", session_id="sa")) == {"a1"}
    assert _ids(t.search("report", scope="session", session_id="sb")) == {"b1"}


def test_detach_removes_from_session_but_not_from_workspace(two_workspaces: Tether) -> None:
    t = two_workspaces
    assert t.detach("a1", "sa") is True
    assert t.search("report", scope="session", session_id="sa") == []
    assert _ids(t.search("report", scope="workspace", workspace_id="a")) == {"a1", "a2"}
    assert t.detach("a1", "sa") is False
    assert t.attach("a1", "sa") is True
    assert _ids(t.search("report", scope="session", session_id="sa")) == {"a1"}


def test_workspace_sees_only_its_own_documents(two_workspaces: Tether) -> None:
    t = two_workspaces
    assert _ids(t.search("report", scope="workspace", workspace_id="a")) == {"a1", "a2"}
    assert _ids(t.search("report", scope="workspace", workspace_id="b")) == {"b1"}
    assert t.search("report", scope="workspace", workspace_id="nowhere") == []


def test_global_scope_sees_only_global_documents(two_workspaces: Tether) -> None:
    t = two_workspaces
    assert _ids(t.search("report", scope="global")) == {"g1"}
    assert _ids(t.search("report", scope=Scope.global_())) == {"g1"}
    assert _ids(t.search("report", scope="workspace", workspace_id=GLOBAL_WORKSPACE)) == {"g1"}


def test_cross_workspace_attach_is_refused_and_changes_nothing(two_workspaces: Tether) -> None:
    t = two_workspaces
    before = t.store.counts()
    with pytest.raises(ScopeError):
        t.attach("a2", "sb")
    with pytest.raises(ScopeError):
        t.attach("b1", "sa")
    assert t.store.counts() == before
    assert _ids(t.search("report", scope="session", session_id="sb")) == {"b1"}
    assert t.get_document("a2").session_ids == ()
    assert t.get_document("b1").session_ids == ("sb",)


def test_adding_to_a_session_of_another_workspace_is_refused(two_workspaces: Tether) -> None:
    t = two_workspaces
    before = t.store.counts()
    with pytest.raises(ScopeError):
        t.add(text="report sneaking across", workspace_id="a", session_id="sb")
    assert t.store.counts() == before
    assert _ids(t.search("report", scope="session", session_id="sb")) == {"b1"}


@pytest.mark.parametrize("session", ["sa", "sb"])
def test_global_document_can_join_any_session(two_workspaces: Tether, session: str) -> None:
    t = two_workspaces
    assert t.attach("g1", session) is True
    assert "g1" in _ids(t.search("report", scope="session", session_id=session))
    # still only in the global library, not in the session's workspace
    workspace = t.store.get_session(session).workspace_id
    assert "g1" not in _ids(t.search("report", scope="workspace", workspace_id=workspace))
    other = {"sa": "sb", "sb": "sa"}[session]
    assert "g1" not in _ids(t.search("report", scope="session", session_id=other))


@pytest.mark.parametrize(
    ("scope", "kwargs"),
    [
        ("session", {}),
        ("session", {"session_id": ""}),
        ("session", {"workspace_id": "a"}),
        ("workspace", {}),
        ("workspace", {"session_id": "sa"}),
        ("sessions", {"session_id": "sa"}),
        ("local", {}),
        ("", {}),
        ("GLOBAL", {}),
    ],
)
def test_incomplete_or_unknown_scope_is_a_scope_error(
    two_workspaces: Tether, scope: str, kwargs: dict[str, str]
) -> None:
    with pytest.raises(ScopeError) as info:
        two_workspaces.search("report", scope=scope, **kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, InvalidArgument)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Scope("bogus", "x"),  # type: ignore[arg-type]
        lambda: Scope.session(""),
        lambda: Scope.workspace("  "),
        lambda: Scope("global", "a"),
    ],
)
def test_invalid_scope_objects(make: object) -> None:
    with pytest.raises(ScopeError):
        make()  # type: ignore[operator]


def test_a_session_that_does_not_exist_has_no_documents(two_workspaces: Tether) -> None:
    assert two_workspaces.search("report", scope="session", session_id="ghost") == []
    assert two_workspaces.search("report", scope=Scope.session("ghost")) == []


# -- the scope is in the SQL --------------------------------------------------------------


def test_lexical_search_sql_holds_the_scope_and_the_limit() -> None:
    sql, params = lexical_search_sql(Scope.session("s"), '"x"', 5)
    where, scope_params = scope_sql(Scope.session("s"))
    assert where in sql
    assert "rag_document_sessions" in sql
    assert re.search(r"\bLIMIT\s+:k\b", sql)
    assert params["k"] == 5
    assert params["match"] == '"x"'
    assert scope_params.items() <= params.items()
    assert "s" in scope_params.values()

    ws_sql, ws_params = lexical_search_sql(Scope.workspace("w"), '"x"', 7)
    assert scope_sql(Scope.workspace("w"))[0] in ws_sql
    assert "w" in ws_params.values()
    assert ws_params["k"] == 7


def test_lexical_search_sql_runs_scoped_on_a_real_store(two_workspaces: Tether) -> None:
    sql, params = lexical_search_sql(Scope.session("sb"), '"report"', 10)
    with two_workspaces.store.db.read() as conn:
        rows = conn.execute(sql, params).fetchall()
    assert {row[1] for row in rows} == {"b1"}
    sql, params = lexical_search_sql(Scope.workspace("a"), '"report"', 1)
    with two_workspaces.store.db.read() as conn:
        rows = conn.execute(sql, params).fetchall()
    assert len(rows) == 1
    assert rows[0][1] in {"a1", "a2"}


@pytest.fixture
def buried(tether: Tether) -> Tether:
    """50 documents elsewhere that match 'beacon' strongly; 5 in scope that match weakly."""
    tether.create_session("target-session", workspace_id="target")
    for i in range(50):
        tether.add(text=f"beacon beacon beacon {i}", workspace_id="noise", document_id=f"n{i}")
    for i in range(25):
        tether.add(text=f"beacon beacon noise {i}", document_id=f"g{i}")
    filler = " ".join(f"filler{j}" for j in range(60))
    for i in range(5):
        tether.add(
            text=f"one beacon among many words {filler} {i}",
            workspace_id="target",
            session_id="target-session",
            document_id=f"t{i}",
        )
    tether.add(text=f"beacon {filler} unattached", workspace_id="target", document_id="t-extra")
    return tether


def test_in_scope_matches_ranked_below_everything_else_are_the_top_k(buried: Tether) -> None:
    t = buried
    targets = {f"t{i}" for i in range(5)}
    # Unscoped, the in-scope documents rank below all 75 strong matches ...
    with t.store.db.read() as conn:
        ranked = [
            row[0]
            for row in conn.execute(
                "SELECT c.document_id FROM rag_chunks_fts JOIN rag_chunks c"
                " ON c.id = rag_chunks_fts.rowid WHERE rag_chunks_fts MATCH 'beacon'"
                " ORDER BY bm25(rag_chunks_fts)"
            )
        ]
    assert len(ranked) == 81
    assert set(ranked[:75]) == {f"n{i}" for i in range(50)} | {f"g{i}" for i in range(25)}
    # ... yet a scoped top-5 holds all of them.
    session_hits = t.search("beacon", scope="session", session_id="target-session", k=5)
    assert _ids(session_hits) == targets
    assert len(session_hits) == 5
    workspace_hits = t.search("beacon", scope="workspace", workspace_id="target", k=5)
    assert len(workspace_hits) == 5
    assert _ids(workspace_hits) <= targets | {"t-extra"}
    assert _ids(t.search("beacon", scope="workspace", workspace_id="target", k=6)) == targets | {
        "t-extra"
    }
    global_hits = t.search("beacon", scope="global", k=5)
    assert len(global_hits) == 5
    assert _ids(global_hits) <= {f"g{i}" for i in range(25)}


# -- both lexical plans are exact ----------------------------------------------------------


@st.composite
def lopsided_layouts(draw: st.DrawFn) -> Layout:
    """Layouts where one workspace holds most documents (its scope takes the rank-first
    plan) and the others few (scope first), with words from a small vocabulary so that
    queries match many documents and ties in bm25 are common."""
    workspaces, sessions = draw_workspaces_and_sessions(draw)
    big = workspaces[0]
    docs = []
    for i in range(draw(st.integers(4, 40))):
        ws = big if draw(st.integers(0, 9)) < 7 else draw(st.sampled_from(workspaces))
        eligible = sessions_that_may_attach(sessions, ws)
        attached = (
            draw(st.lists(st.sampled_from(eligible), max_size=2, unique=True)) if eligible else []
        )
        words = draw(st.lists(st.sampled_from(VOCAB[:6]), min_size=1, max_size=6))
        docs.append(Doc(f"doc{i}", ws, tuple(attached), tuple(words)))
    return Layout(workspaces, sessions, tuple(docs))


@pytest.mark.slow
@given(
    layout=lopsided_layouts(),
    query=st.lists(st.sampled_from(VOCAB[:6]), min_size=1, max_size=3).map(" ".join),
    k=st.integers(1, 12),
    depth=st.integers(1, 50),
)
@hsettings(max_examples=60, deadline=None)
def test_both_lexical_plans_give_the_exact_scoped_top_k(
    layout: Layout, query: str, k: int, depth: int
) -> None:
    """The reference is the whole index ranked by bm25 (then chunk id) and cut to the scope
    afterwards, computed here. The scope-first plan is that, exactly; the rank-first plan
    at any depth is that or a shorter prefix of it (then the store runs scope first); and
    the store's own choice is that, whichever plan it picks for the scope."""
    match = compile_match(query)
    assert match is not None
    with (
        tempfile.TemporaryDirectory() as tmp,
        Tether(db=Path(tmp) / "plans.db", settings=Settings.load()) as t,
    ):
        build(t, layout)
        with t.store.db.read() as conn:
            everything = conn.execute(
                "SELECT c.id, c.document_id, bm25(rag_chunks_fts, 1.0, 1.0) AS r"
                " FROM rag_chunks_fts JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid"
                " WHERE rag_chunks_fts MATCH :m ORDER BY r, c.id",
                {"m": match},
            ).fetchall()
            for scope in layout.scopes():
                in_scope = layout.in_scope(scope)
                reference = [(cid, r) for cid, doc, r in everything if doc in in_scope][:k]
                scope_first = conn.execute(*lexical_search_sql(scope, match, k, ids_only=True))
                assert scope_first.fetchall() == reference, scope
                rank_first = conn.execute(
                    *lexical_search_sql(scope, match, k, ids_only=True, depth=depth)
                ).fetchall()
                assert rank_first == reference[: len(rank_first)], scope
        for scope in layout.scopes():
            in_scope = layout.in_scope(scope)
            reference = [(cid, -r) for cid, doc, r in everything if doc in in_scope][:k]
            assert t.store.search_lexical_scores(scope, match, k) == reference, scope


def test_the_store_picks_rank_first_for_a_scope_holding_most_of_the_store(
    tether: Tether,
) -> None:
    """The plan follows the scope's share of the store's chunks, recounted after a write."""
    for i in range(8):
        tether.add(text=f"valve seat {i}", workspace_id="big", document_id=f"b{i}")
    tether.add(text="valve seat small", workspace_id="small", document_id="s0")
    store = tether.store
    with store.db.read() as conn:
        assert store._rank_first_depth(conn, Scope.workspace("big"), 4, None, None) == 7
        assert store._rank_first_depth(conn, Scope.workspace("small"), 4, None, None) is None
    for i in range(20):
        tether.add(text=f"valve seat small {i}", workspace_id="small", document_id=f"s{i + 1}")
    with store.db.read() as conn:
        assert store._rank_first_depth(conn, Scope.workspace("big"), 4, None, None) is None
        assert store._rank_first_depth(conn, Scope.workspace("small"), 4, None, None) == 9


def test_a_large_scope_whose_matches_rank_low_still_gets_its_exact_top_k(tether: Tether) -> None:
    """The rank-first plan reads too shallow here (the scope holds 60% of the chunks, but
    all 20 chunks elsewhere outrank its own): the store runs scope first and the top k is
    still the scope's best 10, in order."""
    filler = " ".join(f"filler{j}" for j in range(40))
    for i in range(20):
        tether.add(text=f"beacon beacon beacon {i}", workspace_id="noise", document_id=f"n{i}")
    for i in range(30):
        tether.add(text=f"beacon {filler} {'x' * (i + 1)}", workspace_id="big", document_id=f"b{i}")
    with tether.store.db.read() as conn:
        depth = tether.store._rank_first_depth(conn, Scope.workspace("big"), 10, None, None)
    assert depth is not None and depth < 30
    hits = tether.search("beacon", scope="workspace", workspace_id="big", k=10, mode="lexical")
    assert len(hits) == 10
    assert {h.document_id for h in hits} <= {f"b{i}" for i in range(30)}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_workspace_named_without_a_scope_is_the_scope(tether: Tether) -> None:
    """With the default scope (global), naming a workspace searches that workspace, not
    every one; an explicit global scope beside a workspace contradicts it."""
    tether.add(text="valve seat in acme", workspace_id="acme", document_id="a")
    tether.add(text="valve seat in other", workspace_id="other", document_id="o")
    assert tether.resolve_scope(None, workspace_id="acme") == Scope.workspace("acme")
    assert _ids(tether.search("valve seat", workspace_id="acme")) == {"a"}
    with pytest.raises(ScopeError, match="scope 'global' contradicts workspace 'acme'"):
        tether.search("valve seat", scope="global", workspace_id="acme")
    assert tether.retrieve("valve seat?", workspace_id="acme").debug["scope"] == {
        "kind": "workspace", "id": "acme"
    }  # fmt: skip
