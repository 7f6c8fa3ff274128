"""The in-memory vector index keeps up with writes by deltas: after an add, a replace or a
delete (in this process or another one on the same file) the next search reads only the
documents that changed, never every vector again, and answers exactly as an index loaded
from scratch would. Small segments merge and dead rows are compacted away without
changing an answer."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import make_settings
from tether import Scope, Tether
from tether.retrieve import vector
from tether.retrieve.vector import VectorIndex
from tether.testing import HashEmbedder

WORDS = "pump valve seal gasket torque drain filter motor sensor relay fuse cable".split()
SCOPES = [Scope.workspace("acme"), Scope.workspace("rival"), Scope.global_(),
          Scope.session("chat")]  # fmt: skip


def text(rng: random.Random, n: int = 40) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Tether]:
    settings_ = make_settings(chunk_size=100, chunk_overlap=0)
    with Tether(db=tmp_path / "t.db", settings=settings_, embedder=HashEmbedder()) as t:
        t.create_session("chat", workspace_id="acme")
        yield t


def index_of(t: Tether) -> VectorIndex:
    index = t._searcher.vectors
    assert index is not None
    return index


def same_ranking(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    """The same chunks with the same scores (to float32 rounding), in an order that
    differs from ``want``'s only among scores that close. (Rounding both to a number of
    decimals and comparing is not that: two sums of one product in another order can
    fall on either side of a rounding boundary.)"""
    theirs = dict(want)
    if len(got) != len(want) or set(theirs) != {c for c, _ in got}:
        return False
    if not np.allclose([s for _, s in got], [theirs[c] for c, _ in got], atol=1e-6):
        return False
    return all(theirs[a] >= theirs[b] - 1e-6 for (a, _), (b, _) in itertools.pairwise(got))


def same_answers(t: Tether, queries: list[str]) -> None:
    """The live index answers every scope and query as a freshly loaded one does."""
    live, fresh = index_of(t), VectorIndex(t.store, t.embedder.model)
    for question in queries:
        query = t.embedder.embed([question])[0]
        for scope in SCOPES:  # every row of the scope (no cut among equal scores)
            got, want = live.search(scope, query, 1000), fresh.search(scope, query, 1000)
            assert same_ranking(got, want), (question, scope)
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
        ids = [c for c, _ in fresh.search(Scope.global_(), query, 50)] + [10**9]
        for scope in SCOPES:
            ids += [c for c, _ in fresh.search(scope, query, 50)]
        assert live.cosines(query, ids) == pytest.approx(fresh.cosines(query, ids))
    assert len(live) == len(fresh)


def test_a_write_is_read_as_a_delta_not_a_reload(store: Tether) -> None:
    rng = random.Random(1)
    for i in range(20):
        store.add(text=text(rng), title=f"doc {i}", document_id=f"d{i}", workspace_id="acme")
    index = index_of(store)
    assert index.load() > 0 and index.stats["loads"] == 1
    store.add(text="the flux capacitor hums", title="new", document_id="new",
              workspace_id="acme", session_id="chat")  # fmt: skip
    hits = store.search("flux capacitor", scope=Scope.session("chat"), mode="vector")
    assert hits and hits[0].document_id == "new"
    store.add(text="the flux capacitor sings", title="new", document_id="new",
              workspace_id="acme")  # a replace  # fmt: skip
    store.delete_document("d3")
    same_answers(store, ["flux capacitor", "pump seal", "drain valve torque"])
    assert index.stats["loads"] == 1 and index.stats["deltas"] == 2  # add; replace + delete


def test_another_process_writes_arrive_as_a_delta(store: Tether, tmp_path: Path) -> None:
    rng = random.Random(2)
    for i in range(10):
        store.add(text=text(rng), title=f"doc {i}", document_id=f"d{i}", workspace_id="rival")
    index = index_of(store)
    index.load()
    with Tether(db=tmp_path / "t.db", settings=store.settings, embedder=HashEmbedder()) as other:
        other.add(text="a quantum gasket", title="q", document_id="q", workspace_id="rival")
        other.delete_document("d0")
    hits = store.search("quantum gasket", scope=Scope.workspace("rival"), mode="vector")
    assert hits[0].document_id == "q"
    assert "d0" not in {h.document_id for h in store.search("pump", k=50, mode="vector")}
    same_answers(store, ["quantum gasket", "relay fuse"])
    assert (index.stats["loads"], index.stats["deltas"]) == (1, 1)


def test_a_scope_is_patched_after_a_write_not_asked_for_again(store: Tether) -> None:
    """Each scope's documents are asked of SQL once; after a write (a new document, a
    move to another workspace, a draft, an attachment) only the changed ones are."""
    rng = random.Random(5)
    for i in range(8):
        store.add(text=text(rng), title=f"doc {i}", document_id=f"d{i}", workspace_id="acme")
    index = index_of(store)
    query = store.embedder.embed(["pump valve"])[0]

    def seen(scope: Scope) -> set[int]:
        return {chunk_id for chunk_id, _ in index.search(scope, query, 1000)}

    for scope in SCOPES:
        seen(scope)
    loads = index.stats["scope_loads"]
    store.add(text="a new pump", title="new", document_id="new", workspace_id="acme")
    store.set_status("d1", "draft")
    store.attach("d2", "chat")
    store.store.ensure_workspace("rival")
    store.store.db.connection().execute(
        "UPDATE rag_documents SET workspace_id = 'rival' WHERE id = 'd3'"
    )  # another process moved it (the counters and the change log see it all the same)
    same_answers(store, ["pump valve", "fuse relay"])
    assert index.stats["scope_loads"] == loads and index.stats["scope_patches"] >= len(SCOPES)
    d1 = {c.id for c in store.chunks("d1")}
    d3 = {c.id for c in store.chunks("d3")}
    assert not d1 & seen(Scope.workspace("acme")) and d3 <= seen(Scope.workspace("rival"))
    assert {c.id for c in store.chunks("d2")} <= seen(Scope.session("chat"))


def test_a_large_delta_is_read_as_a_full_load(store: Tether) -> None:
    rng = random.Random(3)
    store.add(text=text(rng), title="first", document_id="first", workspace_id="acme")
    index = index_of(store)
    index.load()
    for i in range(vector._MIN_DELTA + 1):
        store.add(text=text(rng, 5), title=f"{i}", document_id=f"bulk{i}", workspace_id="acme")
    same_answers(store, ["pump"])
    assert index.stats["loads"] == 2 and index.stats["deltas"] == 0


def test_segments_merge_and_dead_rows_are_compacted(
    store: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector, "_MIN_DEAD", 8)
    monkeypatch.setattr(vector, "_MAX_SEGMENTS", 2)
    rng = random.Random(4)
    for i in range(6):
        store.add(text=text(rng), title=f"doc {i}", document_id=f"d{i}", workspace_id="acme")
    index = index_of(store)
    index.load()
    for i in range(12):  # replaced again and again: segments to merge
        store.add(text=text(rng), title="churn", document_id=f"d{i % 6}", workspace_id="acme")
        store.search("pump", mode="vector")
    for i in range(4):  # deleted: the first segment is mostly dead rows now
        store.delete_document(f"d{i}")
        store.search("pump", mode="vector")
    # The one scope searched was asked of SQL once: its rows were moved, not asked for.
    assert index.stats["scope_loads"] == 1
    same_answers(store, ["pump seal", "fuse"])
    assert index.stats["merges"] >= 1 and index.stats["compactions"] >= 1
    assert index.stats["loads"] == 1
    matrix = index._matrix
    assert matrix is not None and len(matrix.segments) <= 1 + vector._MAX_SEGMENTS
    assert matrix.rows - matrix.live <= max(matrix.live, 8)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["add", "replace", "delete", "attach"]),
            st.integers(0, 11),
            st.sampled_from(["acme", "rival", "GLOBAL"]),
            st.integers(1, 6),
        ),
        min_size=4,
        max_size=30,
    ),
    seed=st.integers(0, 1000),
)
def test_any_sequence_of_writes_answers_as_a_fresh_load(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[tuple[str, int, str, int]],
    seed: int,
) -> None:
    """Adds, replaces, deletes and attachments in any order, with merges and compactions
    made frequent: after every write the live index answers as a fresh one does."""
    monkeypatch.setattr(vector, "_MAX_SEGMENTS", 2)
    monkeypatch.setattr(vector, "_MIN_DEAD", 0)
    rng = random.Random(seed)
    db = tmp_path_factory.mktemp("vectors") / "t.db"
    settings_ = make_settings(chunk_size=100, chunk_overlap=0)
    with Tether(db=db, settings=settings_, embedder=HashEmbedder()) as t:
        t.create_session("chat", workspace_id="acme")
        t.add(text=text(rng), title="seed", document_id="seed", workspace_id="acme")
        index_of(t).load()
        where: dict[str, str] = {"seed": "acme"}
        for action, n, workspace, size in steps:
            document_id = f"d{n}"
            if action == "delete":
                if document_id in where:
                    t.delete_document(document_id)
                    del where[document_id]
                continue
            if action == "attach" and document_id in where and where[document_id] == "acme":
                t.attach(document_id, "chat")
                continue
            workspace = where.get(document_id, workspace)
            t.add(text=text(rng, 10 * size), title=document_id, document_id=document_id,
                  workspace_id=workspace)  # fmt: skip
            where[document_id] = workspace
            same_answers(t, [text(rng, 3)])
        same_answers(t, ["pump valve", "relay cable fuse"])
        assert index_of(t).stats["loads"] == 1


def test_concurrent_searches_and_writes_answer_as_a_fresh_load(store: Tether) -> None:
    """Searches in four threads while documents are added, replaced and deleted: no
    error, and once the writes stop every scope answers as a freshly loaded index."""
    import threading

    rng = random.Random(6)
    for i in range(10):
        store.add(text=text(rng), title=f"doc {i}", document_id=f"d{i}", workspace_id="acme")
    index = index_of(store)
    query = store.embedder.embed(["pump valve"])[0]
    stop = threading.Event()
    errors: list[BaseException] = []

    def search() -> None:
        while not stop.is_set():
            try:
                for scope in SCOPES:
                    index.search(scope, query, 10)
            except BaseException as exc:  # reported below
                errors.append(exc)
                return

    threads = [threading.Thread(target=search) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for i in range(30):
            store.add(text=text(rng), title="w", document_id=f"d{i % 12}", workspace_id="acme")
            if i % 5 == 4:
                store.delete_document(f"d{i % 12}")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    same_answers(store, ["pump valve", "relay fuse"])


# -- the quantized scan of large scopes --------------------------------------------------


def test_large_scopes_are_scanned_by_sign_bits_then_ranked_by_exact_cosines(
    store: Tether, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``QUANTIZED_MIN_ROWS`` a scope's rows are first ranked by the Hamming distance
    of their sign bits; the chosen rows' scores are their exact cosines, only in-scope
    rows are ever candidates, and with a depth covering the scope the answer is exactly
    the exact scan's."""
    rng = random.Random(3)
    for i in range(40):
        store.add(text=text(rng), title=f"doc {i}", document_id=f"a{i}", workspace_id="acme")
        store.add(text=text(rng), title=f"doc {i}", document_id=f"r{i}", workspace_id="rival")
    index = VectorIndex(store.store, store.embedder.model)
    acme = {c.id for d in store.store.list_documents(workspace_id="acme")
            for c in store.store.chunks_of(d.id)}  # fmt: skip

    def search(k: int, *, quantized: bool, depth: int = 10**6) -> list[tuple[int, float]]:
        with monkeypatch.context() as patch:
            patch.setattr(vector, "QUANTIZED_MIN_ROWS", 10 if quantized else 10**9)
            patch.setattr(vector, "QUANTIZED_DEPTH", depth)
            patch.setattr(vector, "QUANTIZED_PER_K", 1)
            return index.search(Scope.workspace("acme"), query, k)

    recalls = []
    for question in ["pump valve seal", "drain filter motor", "relay fuse cable torque"]:
        query = store.embedder.embed([question])[0]
        assert same_ranking(search(1000, quantized=True), search(1000, quantized=False))
        got = search(5, quantized=True, depth=20)
        assert {c for c, _ in got} <= acme
        cosines = index.cosines(query, [c for c, _ in got])
        assert all(abs(cosines[c] - s) < 1e-6 for c, s in got)  # exact scores
        truth = {c for c, _ in search(5, quantized=False)}
        recalls.append(len(truth & {c for c, _ in got}) / 5)
    # A pool of 20 may not separate (see the next test); then the scope is scanned exactly.
    assert index.stats["quantized"] + index.stats["quantized_exact"] == 6
    chance = 20 / len(acme)  # the recall of 20 rows picked at random
    assert np.mean(recalls) >= 2 * chance, (recalls, chance)


def _matrix_of(vectors: np.ndarray) -> vector._Matrix:
    segment = vector._Segment(vectors, np.arange(len(vectors), dtype=np.int64))
    dead = np.zeros(len(vectors), bool)
    return vector._Matrix((0, 0), 0, 1, vectors.shape[1], (segment,), (dead,), {}, len(vectors))


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_a_pool_that_does_not_separate_is_widened_then_scanned_exactly() -> None:
    """Sign bits find near neighbours that exist. Rows clustered around the queries (as
    real embeddings are) give a first pool that holds the exact top 10; random rows have
    no near neighbours, their pool's best lie at its edge, and the scan must say so
    (None: scan exactly) rather than answer from the pool."""
    rng = np.random.default_rng(5)
    rows, dims, depth = 40_000, 384, 400
    spans = [(0, np.array([0]), np.array([rows]))]

    def exact_top(matrix: vector._Matrix, query: np.ndarray) -> set[int]:
        ids, scores = vector._score(matrix, spans, query)
        return set(ids[np.argsort(-scores)[:10]].tolist())

    centres = _unit(rng.standard_normal((400, dims)))
    clustered = _unit(
        centres[rng.integers(0, 400, rows)] + rng.standard_normal((rows, dims)) * 0.03
    )
    matrix = _matrix_of(clustered)
    trusted = 0
    for query in _unit(centres[:20] + rng.standard_normal((20, dims)) * 0.03):
        found = vector._score_quantized(matrix, spans, query, depth, 10)
        if found is not None:
            trusted += 1
            ids, scores = found
            assert set(ids[np.argsort(-scores)[:10]].tolist()) == exact_top(matrix, query)
    assert trusted >= 18, trusted

    random_rows = _matrix_of(_unit(rng.standard_normal((rows, dims))))
    queries = _unit(rng.standard_normal((20, dims)))
    assert sum(vector._score_quantized(random_rows, spans, q, depth, 10) is None
               for q in queries) >= 18  # fmt: skip


def test_sign_codes_pack_every_dimension() -> None:
    vectors = np.array([[1.0] * 70, [-1.0] * 70, [1.0, -1.0] * 35], np.float32)
    codes = vector.sign_codes(vectors)
    assert codes.shape == (3, 2) and codes.dtype == np.uint64  # 70 bits in two words
    assert vector.hamming(np.ascontiguousarray(codes.T), codes[0]).tolist() == [0, 70, 35]
