"""Conformance tests of a store's vectors and change counters, library registry, audit
log and row counts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from tether.errors import NotFound
from tether.models import GLOBAL_WORKSPACE, Scope, Tags
from tether.store import (
    ApiKey,
    AuditEntry,
    RegistryEntry,
    Store,
    VectorSnapshot,
)
from tether.testing.store._kit import audit, put, sha, vectors


class EmbeddingsContract:
    """:class:`~tether.store.Embeddings`: vectors by content hash, and the change
    counters an in-memory index follows."""

    def test_vectors_by_content_hash_and_missing_embeddings(self, store: Store) -> None:
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

    def test_load_vectors_lays_them_out_by_workspace_then_document(self, store: Store) -> None:
        z = put(store, "z-doc", "one", "two", workspace_id="A-team", vectors=vectors("m", 2))
        a = put(store, "a-doc", "three", vectors=vectors("m", 1))
        put(store, "other-model", "four", vectors=vectors("n", 1))
        snapshot = store.load_vectors("m")
        assert [row[0] for row in snapshot.rows] == sorted(z + a)
        assert all(dims == 2 and len(blob) == 8 for _, dims, blob in snapshot.rows)
        assert snapshot.layout == [(z[0], "z-doc"), (z[1], "z-doc"), (a[0], "a-doc")]

    def test_vector_delta_names_the_documents_changed_since_a_snapshot(self, store: Store) -> None:
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

    def test_document_changes_name_every_change_a_scope_can_see(self, store: Store) -> None:
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

    def test_change_counters_grow_with_every_change(self, store: Store) -> None:
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


class LibraryRegistryContract:
    """:class:`~tether.store.LibraryRegistry`."""

    def test_registry_upsert_rename_delete(self, store: Store) -> None:
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


class AuditLogContract:
    """:class:`~tether.store.AuditLog`: ids and the sanitized query, never content."""

    def test_audit_log_appends_and_reads_newest_first(self, store: Store) -> None:
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

    def test_audit_log_shows_global_rows_to_their_askers_only(self, store: Store) -> None:
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

    def test_audit_log_reads_a_time_window(self, store: Store) -> None:
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

    def test_an_audit_entry_cannot_hold_text_vectors_or_scores(self) -> None:
        names = {f.name for f in dataclasses.fields(AuditEntry)}
        assert names == {
            "retrieval_id", "created_at", "query", "scope", "filters", "chunk_ids",
            "document_ids", "outcome", "reason", "citations", "asked_by",
        }  # fmt: skip
        with pytest.raises(TypeError):
            AuditEntry(**{**audit("r").to_dict(), "text": "chunk text"})


class MaintenanceContract:
    """:class:`~tether.store.Maintenance`."""

    def test_counts_rows_of_every_table(self, store: Store) -> None:
        put(store, "d1", "one", "two", workspace_id="ws")
        counts = store.counts()
        assert counts["workspaces"] == 2
        assert counts["rag_documents"] == 1
        assert counts["rag_chunks"] == 2
        assert (
            counts["sessions"] == counts["rag_document_sessions"] == counts["rag_embeddings"] == 0
        )


class ApiKeysContract:
    """:class:`~tether.store.ApiKeys`: kept by the hash of their secret, bound to
    workspaces, revoked once."""

    def test_keys_are_found_by_hash_listed_oldest_first_and_revoked_once(
        self, store: Store
    ) -> None:
        first = ApiKey("k1", "desk", ("lumen",), False, False, False, "2024-01-01T00:00:00Z")
        second = ApiKey("k2", None, (), True, True, True, "2024-01-02T00:00:00Z")
        store.insert_api_key(first, sha("secret one"))
        store.insert_api_key(second, sha("secret two"))
        assert store.api_key_by_hash(sha("secret one")) == first
        assert store.api_key_by_hash(sha("nobody's secret")) is None
        assert [k.id for k in store.api_keys()] == ["k1", "k2"]
        assert store.touch_api_key("k1", "2024-01-03T00:00:00Z")
        assert store.api_key_by_hash(sha("secret one")).last_used_at == "2024-01-03T00:00:00Z"
        revoked = store.revoke_api_key("k2")
        assert revoked.revoked_at is not None and not revoked.active
        assert store.revoke_api_key("k2").revoked_at == revoked.revoked_at  # once
        assert store.api_key_by_hash(sha("secret two")) == revoked  # still found, revoked
        with pytest.raises(NotFound):
            store.revoke_api_key("k3")
