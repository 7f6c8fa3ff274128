"""Conformance tests of a store's transactions, workspaces, sessions and documents."""

from __future__ import annotations

import dataclasses
import struct
import threading

import pytest

from tether.errors import DocumentNotFound, ScopeError, SessionNotFound, WorkspaceNotFound
from tether.models import GLOBAL_WORKSPACE, Scope, Tags
from tether.store import (
    ChunkVectors,
    Store,
)
from tether.testing.store._kit import BEACON, chunk, new_document, put, sha, vectors


class LifetimeContract:
    """Transactions, where the store lives, and readers beside a writer."""

    def test_a_store_says_where_it_lives_and_if_threads_may_share_it(self, store: Store) -> None:
        assert isinstance(store.location, str) and store.location
        assert isinstance(store.cross_thread, bool)

    def test_a_store_says_whether_this_thread_is_inside_one_of_its_transactions(
        self,
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

    def test_writes_grouped_in_write_commit_together_or_not_at_all(self, store: Store) -> None:
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

    def test_readers_on_other_threads_see_a_replace_whole_or_not_at_all(self, store: Store) -> None:
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


class WorkspacesContract:
    """:class:`~tether.store.Workspaces`."""

    def test_workspaces(self, store: Store) -> None:
        assert [w.id for w in store.list_workspaces()] == [GLOBAL_WORKSPACE]
        created = store.ensure_workspace("lab")
        assert (created.id, created.name) == ("lab", "lab")
        assert store.ensure_workspace("lab", name="The lab").name == "The lab"
        assert store.ensure_workspace("lab").name == "The lab"
        assert store.get_workspace("lab").created_at == created.created_at
        assert [w.id for w in store.list_workspaces()] == [GLOBAL_WORKSPACE, "lab"]
        with pytest.raises(WorkspaceNotFound):
            store.get_workspace("nope")


class SessionsContract:
    """:class:`~tether.store.Sessions`: sessions, scopes and attachments."""

    def test_sessions(self, store: Store) -> None:
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
    def test_scope_exists(self, store: Store, scope: Scope, exists: bool) -> None:
        store.ensure_session("chat", "ws")
        assert store.scope_exists(scope) is exists

    def test_closing_a_session_marks_its_own_chat_documents_stale(self, store: Store) -> None:
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
        store.close_session("s2")
        assert store.get_document("only-s1").stale_at is not None
        store.attach_documents_to_session(["only-s1"], "s1")  # a closed one: still stale
        assert store.get_document("only-s1").stale_at is not None
        store.ensure_session("s3", "ws")
        store.attach_documents_to_session(["only-s1", "shared"], "s3")
        assert store.get_document("only-s1").stale_at is None
        with pytest.raises(SessionNotFound):
            store.close_session("nope")

    def test_attach_and_detach(self, store: Store) -> None:
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

    def test_attach_many_documents_at_once(self, store: Store) -> None:
        """All or none: one document the session may not hold, or that does not exist,
        attaches none of them; the count is of those not attached before."""
        store.ensure_session("chat", "ws")
        for i in range(700):
            put(store, f"mine-{i}", workspace_id="ws")
        put(store, "library")
        put(store, "theirs", workspace_id="other")
        assert store.attach_document_to_session("mine-0", "chat") is True
        for wrong, error in (("theirs", ScopeError), ("nope", DocumentNotFound)):
            with pytest.raises(error):
                store.attach_documents_to_session(["mine-1", wrong], "chat")
            assert store.get_document("mine-1").session_ids == ()
        with pytest.raises(SessionNotFound):
            store.attach_documents_to_session(["mine-1"], "nope")
        ids = [f"mine-{i}" for i in range(700)]
        assert store.attach_documents_to_session([*ids, "library", "mine-5"], "chat") == 700
        assert store.attach_documents_to_session(ids, "chat") == 0
        assert store.attach_documents_to_session([], "chat") == 0
        assert len(store.list_documents(session_id="chat")) == 701
        assert store.get_document("mine-699").session_ids == ("chat",)


class DocumentsContract:
    """:class:`~tether.store.Documents`: written whole, read back as written."""

    def test_insert_and_read_a_document(self, store: Store) -> None:
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

    def test_insert_documents_stores_each_whole_and_all_or_none(self, store: Store) -> None:
        """Several new documents at once, each as :meth:`insert_document` stores it (chunks,
        index rows, one vector per chunk); a batch the store refuses stores nothing."""
        put(store, "old", "an old beacon")
        one, two = (struct.pack("<2f", 1.0, 0.0), struct.pack("<2f", 0.0, 1.0))
        store.insert_documents(
            [
                (new_document("d1"), [chunk(0, "first beacon"), chunk(1, "second")],
                 ChunkVectors("m", 2, [one, two])),
                (new_document("d2", title="Two"), [chunk(0, "third beacon")], None),
            ]
        )  # fmt: skip
        assert [c.content for c in store.chunks_of("d1")] == ["first beacon", "second"]
        assert store.get_document("d2").title == "Two"
        hits = store.search_lexical(Scope.global_(), BEACON, 10)
        assert sorted(h.text for h in hits) == ["an old beacon", "first beacon", "third beacon"]
        held = store.vectors_for_hashes("m", [sha("first beacon"), sha("second"), sha("x")])
        assert held == {sha("first beacon"): (2, one), sha("second"): (2, two)}
        with pytest.raises(Exception):  # noqa: B017 (each backend's own constraint error)
            store.insert_documents(
                [(new_document("d3"), [chunk(0, "lost beacon")], None),
                 (new_document("d1"), [chunk(0, "a second d1")], None)]
            )  # fmt: skip
        with pytest.raises(ValueError):
            store.insert_documents([(new_document("d4"), [chunk(0, "x")], vectors("m", 2))])
        assert sorted(d.id for d in store.list_documents()) == ["d1", "d2", "old"]
        assert store.counts()["rag_chunks"] == 4

    def test_find_document_by_id_then_path_then_content(self, store: Store) -> None:
        put(store, "by-path", workspace_id="ws", source_path="/a.md")
        put(store, "by-text", workspace_id="ws", content_hash="same")
        find = store.find_document
        assert find(workspace_id="ws", document_id="by-path").id == "by-path"  # type: ignore[union-attr]
        assert find(workspace_id="ws", source_path="/a.md").id == "by-path"  # type: ignore[union-attr]
        assert find(workspace_id="ws", content_hash="same").id == "by-text"  # type: ignore[union-attr]
        assert find(workspace_id="other", content_hash="same") is None
        assert find(workspace_id="ws", source_path="/b.md") is None
        assert find(workspace_id="ws") is None

    def test_find_documents_answers_as_find_document_does_for_each(self, store: Store) -> None:
        """Many lookups at once (ids, sources, contents, in several workspaces, some with
        no document, one without a key) answer in order what one lookup each would."""
        put(store, "by-path", workspace_id="ws", source_path="/a.md")
        put(store, "by-text", workspace_id="ws", content_hash="same")
        put(store, "later", workspace_id="ws", content_hash="same")
        put(store, "far", workspace_id="far", source_path="/a.md", content_hash="same")
        put(store, "odd", workspace_id="ws", source_path="/\udcff.md")
        lookups = [
            {"workspace_id": "ws", "document_id": "by-path", "source_path": "/x.md"},
            {"workspace_id": "ws", "source_path": "/a.md", "content_hash": "same"},
            {"workspace_id": "far", "source_path": "/a.md"},
            {"workspace_id": "ws", "content_hash": "same"},
            {"workspace_id": "far", "content_hash": "same"},
            {"workspace_id": "ws", "document_id": "nope"},
            {"workspace_id": "ws", "source_path": "/b.md"},
            {"workspace_id": "ws", "source_path": "/\udcff.md"},
            {"workspace_id": "ws"},
            *({"workspace_id": "ws", "document_id": f"many-{i}"} for i in range(1200)),
        ]
        one_each = [store.find_document(**lookup) for lookup in lookups]
        found = store.find_documents(lookups)
        assert [d.id if d else None for d in found] == [d.id if d else None for d in one_each]
        assert [d.id if d else None for d in found[:9]] == [
            "by-path", "by-path", "far", "by-text", None, None, None, "odd", None
        ]  # fmt: skip
        assert store.find_documents([]) == []

    def test_list_documents(self, store: Store) -> None:
        put(store, "b", workspace_id="ws", title="Beta")
        put(store, "a", workspace_id="ws", title="Alpha", status="draft")
        put(store, "g", title="Gamma")
        assert [d.id for d in store.list_documents(workspace_id="ws")] == ["a", "b"]
        assert [d.id for d in store.list_documents()] == ["g", "a", "b"]

    def test_replace_swaps_chunks_index_rows_and_vectors_together(self, store: Store) -> None:
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

    def test_a_failed_write_keeps_what_was_stored(self, store: Store) -> None:
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

    def test_delete_takes_chunks_index_rows_embeddings_and_attachments(self, store: Store) -> None:
        store.ensure_session("chat", GLOBAL_WORKSPACE)
        put(store, "gone", "beacon one", "beacon two", vectors=vectors("m", 2))
        put(store, "kept", "beacon three")
        store.attach_document_to_session("gone", "chat")
        store.delete_document("gone")
        counts = store.counts()
        assert (counts["rag_documents"], counts["rag_chunks"]) == (1, 1)
        assert counts["rag_embeddings"] == counts["rag_document_sessions"] == 0
        assert [h.document_id for h in store.search_lexical(Scope.global_(), BEACON, 10)] == [
            "kept"
        ]
        with pytest.raises(DocumentNotFound):
            store.delete_document("gone")

    def test_tags_status_and_title_change_in_place(self, store: Store) -> None:
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

    def test_a_chunk_keeps_its_printed_page_label(self, store: Store) -> None:
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

    def test_a_str_that_cannot_be_stored_is_a_typed_error_not_an_encoding_crash(
        self,
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
