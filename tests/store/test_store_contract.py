"""The conformance suite of the :class:`~tether.store.Store` interface.

Every backend passes it. It is written against the interface only, through the ``store``
fixture, which is parametrized over :data:`BACKENDS`: a new backend is one more entry.
Real databases in ``tmp_path``, no mocks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.errors import DocumentNotFound, ScopeError, SessionNotFound, WorkspaceNotFound
from tether.models import GLOBAL_WORKSPACE, Exclusions, Filters, Hit, Scope, Tags
from tether.store import (
    AuditEntry,
    CandidateRow,
    ChunkVectors,
    NewChunk,
    NewDocument,
    RegistryEntry,
    SQLiteDatabase,
    SQLiteStore,
    Store,
    VectorSnapshot,
)

# A compiled FTS match, as ``tether.retrieve.fts.compile_match("beacon")`` writes it.
BEACON = '"beacon"'


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return SQLiteStore(SQLiteDatabase(tmp_path / "t.db"))


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    from tether.store.postgres import PostgresStore

    return PostgresStore.connect(request.getfixturevalue("postgres_url"))


BACKENDS = [pytest.param(_sqlite, id="sqlite"), pytest.param(_postgres, id="postgres")]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend: Store = request.param(request, tmp_path)
    yield backend
    backend.close()


# -- helpers -----------------------------------------------------------------------------


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chunk(ordinal: int, text: str) -> NewChunk:
    return NewChunk(ordinal, text, None, 0, len(text), None, sha(text), token_count=len(text))


def new_document(
    document_id: str, workspace_id: str = GLOBAL_WORKSPACE, **fields: Any
) -> NewDocument:
    defaults: dict[str, Any] = {
        "title": document_id,
        "source_path": None,
        "source_type": None,
        "mime": "text/plain",
        "content_hash": sha(document_id),
        "file_size": None,
        "metadata": {},
    }
    return NewDocument(document_id, workspace_id, **{**defaults, **fields})


def put(
    store: Store,
    document_id: str,
    *texts: str,
    workspace_id: str = GLOBAL_WORKSPACE,
    vectors: ChunkVectors | None = None,
    **fields: Any,
) -> list[int]:
    """Insert a document with one chunk per text; its chunk ids."""
    store.ensure_workspace(workspace_id)
    chunks = [chunk(i, text) for i, text in enumerate(texts or ("filler words only",))]
    store.insert_document(new_document(document_id, workspace_id, **fields), chunks, vectors)
    return [c.id for c in store.chunks_of(document_id)]


def vectors(model: str, count: int, dims: int = 2, fill: int = 1) -> ChunkVectors:
    return ChunkVectors(model, dims, [bytes([fill]) * (4 * dims)] * count)


def audit(retrieval_id: str, outcome: str = "grounded", **fields: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "retrieval_id": retrieval_id,
        "created_at": "2024-01-01T00:00:00Z",
        "query": "how fast does the pump prime",
        "scope": {"kind": "global", "id": GLOBAL_WORKSPACE},
        "filters": {},
        "chunk_ids": [1, 2],
        "document_ids": ["d1"],
        "outcome": outcome,
        "reason": None,
    }
    return AuditEntry(**{**values, **fields})


# -- transactions and lifetime -------------------------------------------------------------


def test_a_store_says_where_it_lives_and_if_threads_may_share_it(store: Store) -> None:
    assert isinstance(store.location, str) and store.location
    assert isinstance(store.cross_thread, bool)


def test_a_store_says_whether_this_thread_is_inside_one_of_its_transactions(
    store: Store,
) -> None:
    """What decides whether a search may read its two sides on two threads."""
    assert store.in_transaction is False
    with store.write():
        assert store.in_transaction is True
        seen: list[bool] = []
        other = threading.Thread(target=lambda: seen.append(store.in_transaction))
        other.start()
        other.join()
        assert seen == [False]  # another thread's transaction is not this one's
    assert store.in_transaction is False


def test_writes_grouped_in_write_commit_together_or_not_at_all(store: Store) -> None:
    with store.write():
        store.ensure_workspace("a")
        store.ensure_workspace("b")
    with pytest.raises(ScopeError), store.write():
        store.ensure_workspace("lost-1")
        store.ensure_workspace("lost-2")
        raise ScopeError("the group fails")
    with store.write():
        store.ensure_workspace("outer")
        with pytest.raises(ScopeError), store.write():
            store.ensure_workspace("inner")
            raise ScopeError("only the inner block fails")
    ids = {w.id for w in store.list_workspaces()}
    assert ids == {GLOBAL_WORKSPACE, "a", "b", "outer"}


def test_counts_rows_of_every_table(store: Store) -> None:
    put(store, "d1", "one", "two", workspace_id="ws")
    counts = store.counts()
    assert counts["workspaces"] == 2
    assert counts["rag_documents"] == 1
    assert counts["rag_chunks"] == 2
    assert counts["sessions"] == counts["rag_document_sessions"] == counts["rag_embeddings"] == 0


# -- workspaces and sessions -------------------------------------------------------------


def test_workspaces(store: Store) -> None:
    assert [w.id for w in store.list_workspaces()] == [GLOBAL_WORKSPACE]
    created = store.ensure_workspace("lab")
    assert (created.id, created.name) == ("lab", "lab")
    assert store.ensure_workspace("lab", name="The lab").name == "The lab"
    assert store.ensure_workspace("lab").name == "The lab"
    assert store.get_workspace("lab").created_at == created.created_at
    assert [w.id for w in store.list_workspaces()] == [GLOBAL_WORKSPACE, "lab"]
    with pytest.raises(WorkspaceNotFound):
        store.get_workspace("nope")


def test_sessions(store: Store) -> None:
    session = store.ensure_session("chat", "ws")
    assert (session.id, session.workspace_id, session.closed_at) == ("chat", "ws", None)
    assert store.get_workspace("ws").id == "ws"  # made with the session
    assert store.ensure_session("chat", "ws") == session
    with pytest.raises(ScopeError, match="belongs to workspace 'ws'"):
        store.ensure_session("chat", "other")
    store.ensure_session("elsewhere", "other")
    assert store.get_session("chat") == store.find_session("chat") == session
    assert store.find_session("nope") is None
    with pytest.raises(SessionNotFound):
        store.get_session("nope")
    assert [s.id for s in store.list_sessions("ws")] == ["chat"]
    assert {s.id for s in store.list_sessions()} == {"chat", "elsewhere"}


@pytest.mark.parametrize(
    ("scope", "exists"),
    [
        (Scope.global_(), True),
        (Scope.workspace("ws"), True),
        (Scope.workspace("nope"), False),
        (Scope.session("chat"), True),
        (Scope.session("nope"), False),
    ],
)
def test_scope_exists(store: Store, scope: Scope, exists: bool) -> None:
    store.ensure_session("chat", "ws")
    assert store.scope_exists(scope) is exists


def test_closing_a_session_marks_its_own_chat_documents_stale(store: Store) -> None:
    chat = {"origin": "chatpdf"}
    for session in ("s1", "s2"):
        store.ensure_session(session, "ws")
    for doc in ("only-s1", "shared", "library", "not-chat"):
        put(store, doc, workspace_id="ws", metadata={} if doc == "not-chat" else chat)
        store.attach_document_to_session(doc, "s1")
    store.attach_document_to_session("shared", "s2")
    store.upsert_registry("/lib/library.pdf", document_id="library")

    closed, marked = store.close_session("s1")
    assert closed.closed_at is not None
    assert marked == ["only-s1"]
    assert store.get_document("only-s1").stale_at is not None
    assert store.close_session("s1") == (closed, [])  # the first closing time stays
    assert [d.id for d in store.stale_documents("9999")] == ["only-s1"]
    assert store.stale_documents("2000") == []
    store.attach_document_to_session("only-s1", "s2")  # in use again: not stale
    assert store.get_document("only-s1").stale_at is None
    with pytest.raises(SessionNotFound):
        store.close_session("nope")


# -- attachments ---------------------------------------------------------------------------


def test_attach_and_detach(store: Store) -> None:
    store.ensure_session("chat", "ws")
    put(store, "mine", workspace_id="ws")
    put(store, "library")
    put(store, "theirs", workspace_id="other")
    assert store.attach_document_to_session("mine", "chat") is True
    assert store.attach_document_to_session("mine", "chat") is False
    assert store.attach_document_to_session("library", "chat") is True
    with pytest.raises(ScopeError, match="own workspace or of the global library"):
        store.attach_document_to_session("theirs", "chat")
    assert store.get_document("mine").session_ids == ("chat",)
    assert {d.id for d in store.list_documents(session_id="chat")} == {"mine", "library"}
    assert store.detach_document_from_session("mine", "chat") is True
    assert store.detach_document_from_session("mine", "chat") is False
    assert store.get_document("mine").session_ids == ()
    for call in (store.attach_document_to_session, store.detach_document_from_session):
        with pytest.raises(DocumentNotFound):
            call("nope", "chat")
        with pytest.raises(SessionNotFound):
            call("mine", "nope")


# -- documents and chunks ----------------------------------------------------------------


def test_insert_and_read_a_document(store: Store) -> None:
    put(store, "d1", "first chunk", "second chunk", workspace_id="ws", source_path="/a.md",
        domain="hr", metadata={"k": "v"})  # fmt: skip
    doc = store.get_document("d1")
    assert (doc.workspace_id, doc.source_path, doc.chunk_count, doc.status) == (
        "ws", "/a.md", 2, "active"
    )  # fmt: skip
    assert doc.metadata == {"k": "v"}
    assert doc.tags == Tags(domain="hr")
    assert [(c.ordinal, c.content) for c in store.chunks_of("d1")] == [
        (0, "first chunk"), (1, "second chunk")
    ]  # fmt: skip
    assert store.chunks_of("nope") == []
    with pytest.raises(DocumentNotFound):
        store.get_document("nope")


def test_find_document_by_id_then_path_then_content(store: Store) -> None:
    put(store, "by-path", workspace_id="ws", source_path="/a.md")
    put(store, "by-text", workspace_id="ws", content_hash="same")
    find = store.find_document
    assert find(workspace_id="ws", document_id="by-path").id == "by-path"  # type: ignore[union-attr]
    assert find(workspace_id="ws", source_path="/a.md").id == "by-path"  # type: ignore[union-attr]
    assert find(workspace_id="ws", content_hash="same").id == "by-text"  # type: ignore[union-attr]
    assert find(workspace_id="other", content_hash="same") is None
    assert find(workspace_id="ws", source_path="/b.md") is None
    assert find(workspace_id="ws") is None


def test_list_documents(store: Store) -> None:
    put(store, "b", workspace_id="ws", title="Beta")
    put(store, "a", workspace_id="ws", title="Alpha", status="draft")
    put(store, "g", title="Gamma")
    assert [d.id for d in store.list_documents(workspace_id="ws")] == ["a", "b"]
    assert [d.id for d in store.list_documents()] == ["g", "a", "b"]


def test_replace_swaps_chunks_index_rows_and_vectors_together(store: Store) -> None:
    store.ensure_session("chat", GLOBAL_WORKSPACE)
    put(store, "d1", "old beacon text", vectors=vectors("m", 1))
    store.attach_document_to_session("d1", "chat")
    created = store.get_document("d1").created_at
    new = [chunk(0, "new lighthouse text"), chunk(1, "more lighthouse")]
    store.replace_document(new_document("d1", title="v2"), new, vectors("m", 2, fill=7))

    doc = store.get_document("d1")
    assert (doc.title, doc.chunk_count, doc.created_at, doc.session_ids) == (
        "v2", 2, created, ("chat",)
    )  # fmt: skip
    assert store.search_lexical(Scope.global_(), BEACON, 10) == []
    assert len(store.search_lexical(Scope.global_(), '"lighthouse"', 10)) == 2
    assert store.embedding_counts() == {"m": 2}
    assert store.vectors_for_hashes("m", [sha("old beacon text")]) == {}
    with pytest.raises(DocumentNotFound):
        store.replace_document(new_document("nope"), new)


def test_a_failed_write_keeps_what_was_stored(store: Store) -> None:
    put(store, "d1", "old beacon text")
    before = (store.get_document("d1"), store.chunks_of("d1"), store.counts())
    with pytest.raises(ValueError, match="1 vectors for 2 chunks"):
        store.replace_document(
            new_document("d1", title="v2"), [chunk(0, "a"), chunk(1, "b")], vectors("m", 1)
        )
    with pytest.raises(ValueError, match="3 vectors for 1 chunks"):
        store.insert_document(new_document("d2"), [chunk(0, "c")], vectors("m", 3))
    assert (store.get_document("d1"), store.chunks_of("d1"), store.counts()) == before
    assert len(store.search_lexical(Scope.global_(), BEACON, 10)) == 1


def test_delete_takes_chunks_index_rows_embeddings_and_attachments(store: Store) -> None:
    store.ensure_session("chat", GLOBAL_WORKSPACE)
    put(store, "gone", "beacon one", "beacon two", vectors=vectors("m", 2))
    put(store, "kept", "beacon three")
    store.attach_document_to_session("gone", "chat")
    store.delete_document("gone")
    counts = store.counts()
    assert (counts["rag_documents"], counts["rag_chunks"]) == (1, 1)
    assert counts["rag_embeddings"] == counts["rag_document_sessions"] == 0
    assert [h.document_id for h in store.search_lexical(Scope.global_(), BEACON, 10)] == ["kept"]
    with pytest.raises(DocumentNotFound):
        store.delete_document("gone")


def test_tags_status_and_title_change_in_place(store: Store) -> None:
    ids = put(store, "d1", "beacon text", domain="hr")
    store.set_tags_and_status("d1", Tags(domain="it", version="2"), "draft", title="New")
    doc = store.get_document("d1")
    assert (doc.title, doc.status, doc.tags) == ("New", "draft", Tags(domain="it", version="2"))
    store.set_tags_and_status("d1", None, "active")
    doc = store.get_document("d1")
    assert (doc.title, doc.tags) == ("New", None)
    store.set_status("d1", "archived")
    assert store.get_document("d1").status == "archived"
    assert [c.id for c in store.chunks_of("d1")] == ids
    for change in (
        lambda: store.set_status("nope", "draft"),
        lambda: store.set_tags_and_status("nope", None, "active"),
    ):
        with pytest.raises(DocumentNotFound):
            change()


# -- the scope invariant: scope, filters, exclusions and status are in the query ---------


WEAK = "beacon " + " ".join(f"filler{i}" for i in range(40))  # matches, ranks low
STRONG = "beacon beacon beacon"  # matches, ranks high


@dataclass
class Case:
    """``view`` sees the weak ``inside`` documents (and ``quiet``, which does not match);
    ``wide`` sees the strong ones, which outrank them. ``hide`` (if any) runs after the
    ranking has been checked, to take the strong ones out of ``view``."""

    view: tuple[Scope, Filters | None, Exclusions | None]
    wide: tuple[Scope, Filters | None, Exclusions | None]
    hide: Callable[[Store], None] | None = None


def _fill(store: Store, inside: dict[str, Any], outside: dict[str, Any], **common: Any) -> None:
    for i in range(5):
        put(store, f"in-{i}", WEAK, **{**common, **inside})
    put(store, "quiet", "nothing to see", **{**common, **inside})
    for i in range(30):
        put(store, f"out-{i}", STRONG, **{**common, **outside})


def _session(store: Store) -> Case:
    store.ensure_session("chat", "ws")
    store.ensure_session("other-chat", "ws")
    _fill(store, {}, {}, workspace_id="ws")
    for i in range(5):
        store.attach_document_to_session(f"in-{i}", "chat")
    store.attach_document_to_session("quiet", "chat")
    for i in range(30):
        store.attach_document_to_session(f"out-{i}", "other-chat")
    return Case((Scope.session("chat"), None, None), (Scope.session("other-chat"), None, None))


def _workspace(store: Store) -> Case:
    _fill(store, {"workspace_id": "ws"}, {"workspace_id": "other"})
    return Case((Scope.workspace("ws"), None, None), (Scope.workspace("other"), None, None))


def _global(store: Store) -> Case:
    _fill(store, {}, {"workspace_id": "ws"})
    return Case((Scope.global_(), None, None), (Scope.workspace("ws"), None, None))


def _filter(column: str, inside: Any, outside: Any) -> Callable[[Store], Case]:
    field = {"domain": "domains", "project_id": "project_ids", "source_type": "source_types"}

    def setup(store: Store) -> Case:
        _fill(store, {column: inside}, {column: outside})
        view = Filters(**{field[column]: (inside,)})
        wide = Filters(**{field[column]: (outside,)})
        return Case((Scope.global_(), view, None), (Scope.global_(), wide, None))

    return setup


def _documents(store: Store) -> Case:
    _fill(store, {}, {})
    inside = (*(f"in-{i}" for i in range(5)), "quiet")
    view = Filters(document_ids=inside)
    wide = Filters(document_ids=tuple(f"out-{i}" for i in range(30)))
    return Case((Scope.global_(), view, None), (Scope.global_(), wide, None))


def _old_logs(store: Store) -> Case:
    _fill(store, {"last_verified": "2024-06-01"}, {"last_verified": "2020-01-01"},
          source_type="log")  # fmt: skip
    cutoff = Exclusions(log_cutoff="2024-01-01", unverified_urls=False)
    return Case((Scope.global_(), None, cutoff), (Scope.global_(), None, None))


def _unverified_links(store: Store) -> Case:
    _fill(store, {"last_verified": "2024-06-01"}, {"last_verified": None}, source_type="link")
    return Case((Scope.global_(), None, Exclusions()), (Scope.global_(), None, None))


def _drafts(store: Store) -> Case:
    _fill(store, {}, {})

    def hide(store: Store) -> None:
        for i in range(30):
            store.set_status(f"out-{i}", "draft")

    view = (Scope.global_(), None, None)
    return Case(view, view, hide)


SCOPE_CASES = {
    "session": _session,
    "workspace": _workspace,
    "global": _global,
    "domain filter": _filter("domain", "hr", "it"),
    "project filter (global knowledge)": _filter("project_id", None, "p1"),
    "source type filter": _filter("source_type", "guide", "policy"),
    "document filter (a chat's active PDF)": _documents,
    "old logs excluded": _old_logs,
    "unverified links excluded": _unverified_links,
    "only active documents": _drafts,
}


@pytest.mark.parametrize("setup", SCOPE_CASES.values(), ids=SCOPE_CASES.keys())
def test_scoped_top_k_is_exact_under_better_matches_outside(
    store: Store, setup: Callable[[Store], Case]
) -> None:
    """30 chunks outside the view match far better than the 5 inside it: a search that
    ranked first and filtered after would find none of the 5 in its top 5."""
    case = setup(store)
    outside_top = store.search_lexical_scores(case.wide[0], BEACON, 30, *case.wide[1:])
    outside_hits = store.hits_for_chunks([cid for cid, _ in outside_top]).values()
    assert len(outside_top) == 30
    assert all(hit.document_id.startswith("out-") for hit in outside_hits)
    if case.hide is not None:
        case.hide(store)

    scope, filters, exclusions = case.view
    inside = {c.id for i in range(5) for c in store.chunks_of(f"in-{i}")}
    top = store.search_lexical_scores(scope, BEACON, 5, filters, exclusions)
    assert {cid for cid, _ in top} == inside  # exactly k, every one in the view
    assert min(s for _, s in outside_top) > max(s for _, s in top)  # the outside ranks higher
    assert len(store.search_lexical_scores(scope, BEACON, 3, filters, exclusions)) == 3
    deep = store.search_lexical_scores(scope, BEACON, 50, filters, exclusions)
    assert {cid for cid, _ in deep} == inside
    hits = store.search_lexical(scope, BEACON, 5, filters, exclusions)
    assert [(h.chunk_id, h.score) for h in hits] == top
    expected = {f"in-{i}" for i in range(5)} | {"quiet"}
    assert set(store.scope_document_ids(scope, filters, exclusions)) == expected


def test_lexical_results_are_typed_and_best_first(store: Store) -> None:
    put(store, "d1", "beacon", "beacon beacon", "beacon " + "x " * 30, "no match here")
    hits = store.search_lexical(Scope.global_(), BEACON, 10)
    assert all(isinstance(h, Hit) for h in hits)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[-1].text.startswith("beacon x")
    assert store.search_lexical_scores(Scope.global_(), BEACON, 10) == [
        (h.chunk_id, h.score) for h in hits
    ]
    assert store.search_lexical(Scope.workspace("empty"), BEACON, 10) == []


# -- reads by chunk id -------------------------------------------------------------------


def test_hits_for_chunks_reads_long_id_lists(store: Store) -> None:
    ids = put(store, "big", *(f"chunk number {i}" for i in range(1200)))
    found = store.hits_for_chunks([*ids, 10**9])
    assert sorted(found) == ids
    first = found[ids[0]]
    assert isinstance(first, Hit)
    assert (first.document_id, first.text, first.score, first.ordinal) == (
        "big", "chunk number 0", 0.0, 0
    )  # fmt: skip
    assert store.hits_for_chunks([]) == {}
    scored = store.hits_for_chunks([ids[5], 10**9, ids[1]], [0.5, 9.0, -2.25])
    assert {cid: hit.score for cid, hit in scored.items()} == {ids[5]: 0.5, ids[1]: -2.25}


def test_candidate_rows(store: Store) -> None:
    store.ensure_session("chat", "ws")
    store.ensure_session("other", "ws")
    ids = put(store, "d1", "first", "second", workspace_id="ws", source_type="guide",
              metadata={"priority": 2})  # fmt: skip
    store.attach_document_to_session("d1", "chat")
    rows = store.candidate_rows([*ids, 10**9], "chat")
    assert sorted(rows) == ids
    row = rows[ids[0]]
    assert isinstance(row, CandidateRow)
    assert (row.hit.text, row.hit.score, row.token_count) == ("first", 0.0, len("first"))
    assert (row.metadata, row.source_type) == ({"priority": 2}, "guide")
    assert row.recency is not None and row.recency >= store.get_document("d1").created_at
    assert store.candidate_rows(ids, "other")[ids[0]].recency is None  # not attached there
    assert store.candidate_rows(ids)[ids[0]].recency == store.get_document("d1").indexed_at


# -- embeddings and change counters -------------------------------------------------------


def test_vectors_by_content_hash_and_missing_embeddings(store: Store) -> None:
    ids = put(store, "d1", "alpha", "beta", vectors=vectors("m", 2, fill=3))
    put(store, "d2", "gamma")
    found = store.vectors_for_hashes("m", [sha("alpha"), sha("alpha"), sha("gamma")])
    assert found == {sha("alpha"): (2, bytes([3]) * 8)}
    assert store.vectors_for_hashes("other-model", [sha("alpha")]) == {}
    assert store.documents_missing_embeddings("m") == ["d2"]
    assert store.documents_missing_embeddings("other-model") == ["d1", "d2"]
    store.insert_embeddings("m", [(ids[0], 2, bytes([9]) * 8)])  # replaces
    assert store.vectors_for_hashes("m", [sha("alpha")]) == {sha("alpha"): (2, bytes([9]) * 8)}
    assert store.embedding_counts() == {"m": 2}


def test_load_vectors_lays_them_out_by_workspace_then_document(store: Store) -> None:
    z = put(store, "z-doc", "one", "two", workspace_id="A-team", vectors=vectors("m", 2))
    a = put(store, "a-doc", "three", vectors=vectors("m", 1))
    put(store, "other-model", "four", vectors=vectors("n", 1))
    snapshot = store.load_vectors("m")
    assert [row[0] for row in snapshot.rows] == sorted(z + a)
    assert all(dims == 2 and len(blob) == 8 for _, dims, blob in snapshot.rows)
    assert snapshot.layout == [(z[0], "z-doc"), (z[1], "z-doc"), (a[0], "a-doc")]


def test_vector_delta_names_the_documents_changed_since_a_snapshot(store: Store) -> None:
    """What the vector index reads after a write instead of every vector: the documents
    whose vectors changed after a snapshot's seq, with their vectors now (none for a
    deleted one), laid out as load_vectors does; None past the limit."""
    kept = put(store, "kept", "one", vectors=vectors("m", 1))
    gone = put(store, "gone", "two", vectors=vectors("m", 1))
    start = store.load_vectors("m").seq
    assert store.vector_delta("m", start, 10) == VectorSnapshot([], [], start, ())
    new = put(store, "new", "three", "four", workspace_id="A-team", vectors=vectors("m", 2))
    store.delete_document("gone")
    delta = store.vector_delta("m", start, 10)
    assert delta is not None and delta.seq > start
    assert set(delta.documents) == {"new", "gone"}
    assert delta.layout == [(new[0], "new"), (new[1], "new")]
    assert [row[0] for row in delta.rows] == new and all(r[1] == 2 for r in delta.rows)
    assert store.vector_delta("m", start, 1) is None  # two documents changed
    assert store.vector_delta("m", delta.seq, 10).documents == ()  # type: ignore[union-attr]
    store.insert_embeddings("m", [(kept[0], 2, bytes([7]) * 8)])  # a vector replaced
    again = store.vector_delta("m", delta.seq, 10)
    assert again is not None and again.documents == ("kept",)
    assert again.rows == [(kept[0], 2, bytes([7]) * 8)]
    assert store.load_vectors("m").seq == again.seq
    assert gone  # (its chunks were there to delete)


def test_document_changes_name_every_change_a_scope_can_see(store: Store) -> None:
    """A scope memo's delta: every change of a document's existence, workspace, status,
    tags, path, attachments or vectors names it; ``among`` asks the scope about those."""
    store.ensure_session("chat", GLOBAL_WORKSPACE)
    put(store, "d1", "one")
    put(store, "d2", "two")
    since = store.load_vectors("m").seq

    def changed(change: Callable[[], object]) -> set[str]:
        nonlocal since
        change()
        found = store.document_changes(since, 10)
        assert found is not None and found[0] > since
        since = found[0]
        return set(found[1])

    assert changed(lambda: store.attach_document_to_session("d1", "chat")) == {"d1"}
    assert changed(lambda: store.detach_document_from_session("d1", "chat")) == {"d1"}
    assert changed(lambda: store.set_status("d2", "draft")) == {"d2"}
    assert changed(lambda: store.set_tags_and_status("d1", Tags(domain="hr"), "active")) == {
        "d1"}  # fmt: skip
    ids = [c.id for c in store.chunks_of("d1")]
    assert changed(lambda: store.insert_embeddings("m", [(ids[0], 2, b"\x00" * 8)])) == {"d1"}
    assert changed(lambda: store.delete_document("d1")) == {"d1"}
    assert store.document_changes(since, 10) == (since, [])
    put(store, "d3", "three")
    put(store, "d4", "four")
    assert store.document_changes(since, 1) is None  # more than the limit
    scope = Scope.global_()
    assert sorted(store.scope_document_ids(scope, among=["d2", "d3", "nope"])) == ["d3"]
    assert store.scope_document_ids(scope, among=[]) == []


def test_a_reader_whose_changes_were_pruned_reloads(store: Store) -> None:
    """The change log keeps its newest 100,000 rows: a reader further behind is told to
    reload (None), never handed a partial delta."""
    put(store, "d1", "one", vectors=vectors("m", 1))
    behind = store.load_vectors("m").seq
    assert store.vector_delta("m", behind, 10) is not None
    if not isinstance(store, SQLiteStore):
        return
    with store.db.write() as conn:  # churn, as 100,000 changed chunks would leave it
        conn.executemany(
            "INSERT INTO rag_document_changes (document_id, vectors) VALUES (?, 1)",
            (("d1",) for _ in range(100_001)),
        )
    put(store, "d2", "two", vectors=vectors("m", 1))  # a new document prunes the log
    assert store.vector_delta("m", behind, 10) is None
    assert store.document_changes(behind, 10) is None
    recent = store.load_vectors("m").seq
    assert store.vector_delta("m", recent, 10) == VectorSnapshot([], [], recent, ())


def test_change_counters_grow_with_every_change(store: Store) -> None:
    store.ensure_session("chat", GLOBAL_WORKSPACE)

    def grows(key: str, change: Callable[[], object]) -> None:
        before = store.change_counters()[key]
        change()
        assert store.change_counters()[key] > before, key

    grows("documents", lambda: put(store, "d1", "text"))
    grows("documents", lambda: store.attach_document_to_session("d1", "chat"))
    grows("documents", lambda: store.detach_document_from_session("d1", "chat"))
    grows("documents", lambda: store.set_status("d1", "draft"))
    grows("documents", lambda: store.set_tags_and_status("d1", Tags(domain="hr"), "active"))
    ids = [c.id for c in store.chunks_of("d1")]
    grows("embeddings", lambda: store.insert_embeddings("m", [(ids[0], 2, b"\x00" * 8)]))
    grows("embeddings", lambda: store.insert_embeddings("m", [(ids[0], 2, b"\x01" * 8)]))
    grows("embeddings", lambda: store.delete_document("d1"))
    steady = store.change_counters()
    store.log_retrieval(audit("r1"))
    store.upsert_registry("/lib/a.md")
    assert store.change_counters() == steady


# -- the library registry ----------------------------------------------------------------


def test_registry_upsert_rename_delete(store: Store) -> None:
    store.upsert_registry("/lib/a.md", last_seen_at="t1", workspace_id="ws")
    store.upsert_registry("/lib/sub/b.md", status="indexed")
    store.upsert_registry("/library/c.md")
    store.upsert_registry("/lib/a.md", retry_count=2, error="boom")  # only these change
    (a, b) = store.registry("/lib")
    assert isinstance(a, RegistryEntry)
    assert a.to_dict() == {
        "source_path": "/lib/a.md", "workspace_id": "ws", "document_id": None,
        "content_hash": None, "status": "queued", "retry_count": 2, "last_seen_at": "t1",
        "last_indexed_at": None, "next_retry_at": None, "error": "boom",
    }  # fmt: skip
    assert (b.source_path, b.status) == ("/lib/sub/b.md", "indexed")
    assert [e.source_path for e in store.registry("/lib/")] == ["/lib/a.md", "/lib/sub/b.md"]
    assert len(store.registry()) == 3
    with pytest.raises(ValueError, match="unknown registry fields"):
        store.upsert_registry("/lib/a.md", content="no such field")

    put(store, "doc-a", workspace_id="ws", source_path="/lib/a.md")
    store.rename_source("/lib/a.md", "/lib/sub/b.md", "doc-a")  # b.md's entry is replaced
    assert [(e.source_path, e.retry_count) for e in store.registry("/lib")] == [
        ("/lib/sub/b.md", 2)
    ]
    assert store.get_document("doc-a").source_path == "/lib/sub/b.md"
    store.delete_registry("/lib/sub/b.md")
    store.delete_registry("/never/there.md")
    assert [e.source_path for e in store.registry()] == ["/library/c.md"]


# -- the audit log -----------------------------------------------------------------------


def test_audit_log_appends_and_reads_newest_first(store: Store) -> None:
    entries = [
        audit("r1", "grounded"),
        audit(
            "r2",
            "not_grounded",
            reason="nothing in scope",
            filters={"domains": ["hr"]},
            citations=[{"number": 1, "document_id": "d1", "chunk_ids": [1, 2]}],
        ),
        audit("r3", "grounded", scope={"kind": "session", "id": "chat"}, chunk_ids=[]),
    ]
    for entry in entries:
        store.log_retrieval(entry)
    assert store.retrieval_log() == entries[::-1]
    assert [e.retrieval_id for e in store.retrieval_log(outcome="grounded")] == ["r3", "r1"]
    assert store.retrieval_log(limit=1) == [entries[2]]
    assert store.retrieval_log(outcome="blocked") == []
    assert store.retrieval_log()[1].to_dict() == {
        "retrieval_id": "r2", "created_at": entries[1].created_at,
        "query": "how fast does the pump prime", "scope": {"kind": "global", "id": "GLOBAL"},
        "filters": {"domains": ["hr"]}, "chunk_ids": [1, 2], "document_ids": ["d1"],
        "outcome": "not_grounded", "reason": "nothing in scope",
        "citations": [{"number": 1, "document_id": "d1", "chunk_ids": [1, 2]}],
        "asked_by": None,
    }  # fmt: skip


def test_audit_log_shows_global_rows_to_their_askers_only(store: Store) -> None:
    """``global_askers``: the global library's rows asked by those keys, beside every row
    of ``workspace_ids`` (whoever asked)."""
    store.ensure_workspace("acme")
    store.ensure_workspace("bravo")
    workspace = {"kind": "workspace", "id": "acme"}
    for entry in (audit("g-acme", asked_by="k-acme"), audit("g-bravo", asked_by="k-bravo"),
                  audit("g-library"), audit("w-acme", scope=workspace, asked_by="k-bravo"),
                  audit("w-bravo", scope={"kind": "workspace", "id": "bravo"})):  # fmt: skip
        store.log_retrieval(entry)

    def ids(**view: Any) -> set[str]:
        return {e.retrieval_id for e in store.retrieval_log(**view)}

    assert ids(workspace_ids=["acme"], global_askers=["k-acme"]) == {"g-acme", "w-acme"}
    assert ids(workspace_ids=[], global_askers=["k-acme", "k-bravo"]) == {"g-acme", "g-bravo"}
    assert ids(workspace_ids=["acme"], global_askers=[]) == {"w-acme"}
    assert ids(workspace_ids=["acme", GLOBAL_WORKSPACE]) == {"g-acme", "g-bravo", "g-library",
                                                              "w-acme"}  # fmt: skip


def test_audit_log_reads_a_time_window(store: Store) -> None:
    """``since`` is inclusive and ``until`` exclusive, compared in the stored ISO form."""
    times = ["2024-01-01T09:00:00.000000Z", "2024-01-01T10:00:00.000000Z",
             "2024-01-02T10:00:00.000000Z"]  # fmt: skip
    for n, at in enumerate(times):
        store.log_retrieval(audit(f"r{n}", created_at=at))

    def ids(**window: str) -> list[str]:
        return [e.retrieval_id for e in store.retrieval_log(**window)]

    assert ids(since=times[1]) == ["r2", "r1"]
    assert ids(until=times[1]) == ["r0"]
    assert ids(since=times[0], until="2024-01-02T00:00:00.000000Z") == ["r1", "r0"]
    assert ids(since="2024-01-03T00:00:00.000000Z") == []


def test_an_audit_entry_cannot_hold_text_vectors_or_scores() -> None:
    names = {f.name for f in dataclasses.fields(AuditEntry)}
    assert names == {
        "retrieval_id", "created_at", "query", "scope", "filters", "chunk_ids",
        "document_ids", "outcome", "reason", "citations", "asked_by",
    }  # fmt: skip
    with pytest.raises(TypeError):
        AuditEntry(**{**audit("r").to_dict(), "text": "chunk text"})


def test_document_chunks_are_read_by_page_or_opening_inside_the_scope(store: Store) -> None:
    """What "what does page 2 say?" and "summarize this" read: scoped in the query, like
    every search (a document outside the scope, or filtered out, is never returned)."""

    def paged(document_id: str, pages: list[int], **fields: Any) -> list[int]:
        store.ensure_workspace(fields.get("workspace_id", GLOBAL_WORKSPACE))
        chunks = [
            NewChunk(i, f"{document_id} part {i}", None, 0, 9, page, sha(f"{document_id}{i}"))
            for i, page in enumerate(pages)
        ]
        store.insert_document(
            new_document(document_id, fields.pop("workspace_id", GLOBAL_WORKSPACE), **fields),
            chunks,
        )
        return [c.id for c in store.chunks_of(document_id)]

    manual = paged("manual", [1, 1, 2, 2, 3], workspace_id="ws")
    other = paged("other", [1, 2, 2], workspace_id="ws")
    hidden = paged("hidden", [2, 2, 2], workspace_id="elsewhere")
    store.ensure_session("chat", "ws")
    store.attach_document_to_session("manual", "chat")
    chat = Scope.session("chat")

    assert store.document_chunk_ids(chat, page=2) == manual[2:4]
    assert store.document_chunk_ids(chat, first=2) == manual[:2]
    assert store.document_chunk_ids(chat, page=9) == []
    workspace = Scope.workspace("ws")
    assert set(store.document_chunk_ids(workspace, page=2)) == {*manual[2:4], *other[1:]}
    only_other = Filters(document_ids=("other",))
    assert store.document_chunk_ids(workspace, page=2, filters=only_other) == other[1:]
    assert store.document_chunk_ids(workspace, page=2, limit=1) != []
    assert len(store.document_chunk_ids(workspace, first=1)) == 2
    assert not set(store.document_chunk_ids(workspace, page=2)) & set(hidden)
    store.set_status("manual", "draft")
    assert store.document_chunk_ids(chat, page=2) == []


def test_term_statistics_count_the_store_and_look_only_inside_the_scope(store: Store) -> None:
    put(store, "a", "the beacon blinks twice", "the beacon resets", workspace_id="w1")
    put(store, "b", "a beacon and a rotor", workspace_id="w2")
    put(store, "gone", "rotor rotor", workspace_id="w1", status="draft")

    stats = store.term_statistics(["beacon", "rotor", "zebra", 'say "hi"'], Scope.workspace("w1"))

    assert stats.chunks == 4  # every chunk of the store: the background of IDF
    assert stats.store == {"beacon": 3, "rotor": 2, "zebra": 0, 'say "hi"': 0}
    # w1's active documents name the beacon; its rotor is in a draft, and
    # w2's rotor is outside the scope.
    assert stats.in_scope == {"beacon": True, "rotor": False, "zebra": False, 'say "hi"': False}
    session = store.ensure_session("s", "w2")
    store.attach_document_to_session("b", session.id)
    in_session = store.term_statistics(["rotor"], Scope.session("s"))
    assert in_session.in_scope == {"rotor": True}
    hidden = store.term_statistics(["rotor"], Scope.workspace("w2"), Filters(document_ids=("x",)))
    assert hidden.in_scope == {"rotor": False}  # filters hold here as in every read
    assert hidden.store == {"rotor": 2}


def test_a_chunk_keeps_its_printed_page_label(store: Store) -> None:
    store.ensure_workspace("w")
    labelled = dataclasses.replace(chunk(0, "beacon on page nine"), page=12, page_label="9")
    store.insert_document(new_document("d", "w"), [labelled, chunk(1, "beacon unlabelled")])
    stored = store.chunks_of("d")
    assert [(c.page, c.page_label) for c in stored] == [(12, "9"), (None, None)]
    hits = store.hits_for_chunks([c.id for c in stored])
    assert hits[stored[0].id].page_label == "9"
    assert hits[stored[1].id].page_label is None
    (top,) = store.search_lexical(Scope.workspace("w"), '"nine"', 5)
    assert (top.page, top.page_label) == (12, "9")


def test_a_page_request_reads_the_page_printed_with_that_number(store: Store) -> None:
    store.ensure_workspace("w")
    pages = [(1, "i"), (2, "ii"), (3, "1"), (4, "2"), (5, None)]
    chunks = [
        dataclasses.replace(chunk(n, f"text of page {page}"), page=page, page_label=label)
        for n, (page, label) in enumerate(pages)
    ]
    store.insert_document(new_document("book", "w"), chunks)
    put(store, "plain", "no labels here", workspace_id="w")
    ids = {c.page: c.id for c in store.chunks_of("book")}
    scope = Scope.workspace("w")
    assert store.document_chunk_ids(scope, page=2) == [ids[4]]  # printed "2", not physical 2
    assert store.document_chunk_ids(scope, page=1) == [ids[3]]
    assert store.document_chunk_ids(scope, page=5) == [ids[5]]  # no label "5": physical


def test_a_str_that_cannot_be_stored_is_a_typed_error_not_an_encoding_crash(
    store: Store,
) -> None:
    from tether.errors import InvalidArgument

    put(store, "d1", "beacon text")
    for call in (
        lambda: store.get_document("d\ud800"),
        lambda: store.find_session("s\udcff"),
        lambda: store.ensure_workspace("w\ud800"),
    ):
        with pytest.raises(InvalidArgument, match="lone surrogate"):
            call()
    assert [d.id for d in store.list_documents()] == ["d1"]  # nothing else changed
    # A file path is different: any name a file system gives is stored, losslessly.
    store.upsert_registry("/lib/\udcffx.md", status="indexed")
    assert [e.source_path for e in store.registry("/lib")] == ["/lib/\udcffx.md"]


# -- concurrency -----------------------------------------------------------------------------


def test_readers_on_other_threads_see_a_replace_whole_or_not_at_all(store: Store) -> None:
    """One writer replaces a document again and again (version n: n chunks, each saying
    "version n"); readers on four threads read it meanwhile. Every read sees exactly one
    version, all of its chunks and nothing of another, and nothing fails."""
    import threading

    put(store, "d1", "version 1")
    stop = threading.Event()
    seen: list[int] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            while not stop.is_set():
                hits = store.search_lexical(Scope.global_(), '"version"', 50)
                versions = {h.text for h in hits}
                assert len(versions) == 1, versions
                (text,) = versions
                n = int(text.split()[1])
                assert len(hits) == n, (n, len(hits))
                seen.append(n)
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)
            stop.set()

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    try:
        for n in range(2, 30):
            texts = [f"version {n}"] * n
            chunks = [chunk(i, text) for i, text in enumerate(texts)]
            store.replace_document(new_document("d1"), chunks)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not failures, failures[0]
    assert len(set(seen)) > 1  # the readers did read while the writer wrote
    assert store.counts()["rag_chunks"] == 29
