"""Conformance tests of a store's scoped reads: the scope invariant, in the query."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tether.models import GLOBAL_WORKSPACE, Exclusions, Filters, Hit, Scope
from tether.store import (
    CandidateRow,
    NewChunk,
    Store,
)
from tether.testing.store._kit import BEACON, chunk, new_document, put, sha

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


class ScopedSearchContract:
    """:class:`~tether.store.ScopedSearch`: the scope, filters, exclusions and
    status are in the query, so top-k inside a scope is exact."""

    @pytest.mark.parametrize("setup", SCOPE_CASES.values(), ids=SCOPE_CASES.keys())
    def test_scoped_top_k_is_exact_under_better_matches_outside(
        self, store: Store, setup: Callable[[Store], Case]
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

    def test_lexical_results_are_typed_and_best_first(self, store: Store) -> None:
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

    def test_hits_for_chunks_reads_long_id_lists(self, store: Store) -> None:
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

    def test_candidate_rows(self, store: Store) -> None:
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

    def test_document_chunks_are_read_by_page_or_opening_inside_the_scope(
        self, store: Store
    ) -> None:
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

    def test_term_statistics_count_the_store_and_look_only_inside_the_scope(
        self, store: Store
    ) -> None:
        put(store, "a", "the beacon blinks twice", "the beacon resets", workspace_id="w1")
        put(store, "b", "a beacon and a rotor", workspace_id="w2")
        put(store, "gone", "rotor rotor", workspace_id="w1", status="draft")

        stats = store.term_statistics(
            ["beacon", "rotor", "zebra", 'say "hi"'], Scope.workspace("w1")
        )

        assert stats.chunks == 4  # every chunk of the store: the background of IDF
        assert stats.store == {"beacon": 3, "rotor": 2, "zebra": 0, 'say "hi"': 0}
        # w1's active documents name the beacon; its rotor is in a draft, and
        # w2's rotor is outside the scope.
        assert stats.in_scope == {"beacon": True, "rotor": False, "zebra": False, 'say "hi"': False}
        session = store.ensure_session("s", "w2")
        store.attach_document_to_session("b", session.id)
        in_session = store.term_statistics(["rotor"], Scope.session("s"))
        assert in_session.in_scope == {"rotor": True}
        hidden = store.term_statistics(
            ["rotor"], Scope.workspace("w2"), Filters(document_ids=("x",))
        )
        assert hidden.in_scope == {"rotor": False}  # filters hold here as in every read
        assert hidden.store == {"rotor": 2}

    def test_a_chunk_is_indexed_under_its_section_title_else_its_documents_title(
        self, store: Store
    ) -> None:
        """The lexical side indexes each chunk with its section title, else its
        document's title, as its vector is made under them. A new title re-indexes the
        chunks that carry it; nothing of the old one is left to match or to count."""
        put(store, "plain", "the body never names its subject", title="Lighthouse keeping")
        store.insert_document(
            new_document("sectioned", title="Lighthouse manual"),
            [NewChunk(0, "another body", "Foghorns", 0, 12, None, sha("fog"), token_count=2)],
        )

        def found(term: str) -> list[str]:
            return sorted(
                h.document_id for h in store.search_lexical(Scope.global_(), f'"{term}"', 10)
            )

        assert found("lighthouse") == ["plain"]  # the sectioned chunk is under "Foghorns"
        assert found("foghorns") == ["sectioned"] and found("manual") == []
        store.set_tags_and_status("plain", None, "active", title="Harbour pilots")
        assert found("lighthouse") == [] and found("harbour") == ["plain"]
        stats = store.term_statistics(["lighthouse", "harbour"], Scope.global_())
        assert stats.store == {"lighthouse": 0, "harbour": 1}
        store.set_tags_and_status("plain", None, "active")  # no new title: the index stays
        assert found("harbour") == ["plain"]
        store.delete_document("plain")
        assert found("harbour") == [] and found("foghorns") == ["sectioned"]
        assert store.term_statistics(["harbour"], Scope.global_()).store == {"harbour": 0}

    def test_a_page_request_reads_the_page_printed_with_that_number(self, store: Store) -> None:
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
