"""Embeddings: storage, reuse by content hash, model switches, what readers see, hybrid search."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import EXAMPLES, make_settings
from tether import (
    ConfigurationError,
    EmbeddingError,
    EmbeddingsUnavailable,
    InvalidArgument,
    LocalEmbedder,
    Scope,
    Settings,
    Tether,
    TextSource,
)
from tether.embed import embedder_from_settings, from_blob, resolve_model_path
from tether.testing import HashEmbedder

PARAGRAPHS = [
    "The pump moves coolant through the primary loop of the reactor.",
    "Valves isolate the secondary loop during maintenance windows.",
    "Operators log every pressure reading in the shift report.",
    "Turbines convert steam into rotation that drives the generator.",
]


def open_store(path: Path, embedder: HashEmbedder, **rag: object) -> Tether:
    settings = make_settings(chunk_size=200, chunk_overlap=0, **rag)
    return Tether(db=path, settings=settings, embedder=embedder)


def stored_vectors(t: Tether, document_id: str, model: str) -> list[np.ndarray]:
    conn = t.store.db.connection()
    rows = conn.execute(
        "SELECT e.dims, e.vector FROM rag_embeddings e JOIN rag_chunks c ON c.id = e.chunk_id"
        " WHERE c.document_id = ? AND e.model = ? ORDER BY c.ordinal",
        (document_id, model),
    ).fetchall()
    return [from_blob(blob, dims) for dims, blob in rows]


def test_one_unit_vector_per_chunk_and_model(db_path: Path) -> None:
    embedder = HashEmbedder()
    with open_store(db_path, embedder) as t:
        (r,) = t.add(text="\n\n".join(PARAGRAPHS), title="Plant", document_id="plant")
        vectors = stored_vectors(t, "plant", "hash-64")
        assert len(vectors) == r.chunk_count == len(t.chunks("plant")) > 1
        for v in vectors:
            assert v.dtype == np.float32 and v.shape == (64,)
            assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
        dims = (
            t.store.db.connection().execute("SELECT DISTINCT dims FROM rag_embeddings").fetchall()
        )
        assert dims == [(64,)]


def test_blob_length_is_checked_on_read() -> None:
    with pytest.raises(EmbeddingError, match="expected 16"):
        from_blob(b"\x00" * 12, 4)
    assert from_blob(b"\x00" * 16, 4).shape == (4,)


def test_same_content_is_embedded_once_across_documents_and_reindexes(db_path: Path) -> None:
    embedder = HashEmbedder()
    with open_store(db_path, embedder) as t:
        text = "\n\n".join(PARAGRAPHS)
        t.add(text=text, title="A", document_id="a")
        first = len(embedder.embedded_texts)
        assert first == len(t.chunks("a"))

        t.add(text=text, title="A", document_id="b")  # same content, another document
        assert len(embedder.embedded_texts) == first
        assert len(stored_vectors(t, "b", "hash-64")) == len(t.chunks("b"))

        changed = text.replace("shift report", "night shift report")
        assert t.add(text=changed, title="A", document_id="a")[0].status == "replaced"
        new_texts = embedder.embedded_texts[first:]
        assert len(new_texts) == 1 and "night shift report" in new_texts[0]
        assert len(stored_vectors(t, "a", "hash-64")) == len(t.chunks("a"))

        assert t.add(text=changed, title="A", document_id="a")[0].status == "skipped"
        assert len(embedder.embedded_texts) == first + 1


def test_chunks_are_embedded_under_their_context_header(db_path: Path) -> None:
    """A chunk is embedded with its section path (or document title) above it, so the same
    paragraph under another title is another text; a chunk that starts with its header is
    embedded as it is."""
    embedder = HashEmbedder()
    with open_store(db_path, embedder) as t:
        text = "Plant\n\n" + "\n\n".join(PARAGRAPHS)
        t.add(text=text, title="Plant", document_id="a")
        chunks = t.chunks("a")
        assert embedder.embedded_texts[0] == chunks[0].content  # starts with "Plant"
        assert embedder.embedded_texts[1] == f"Plant\n\n{chunks[1].content}"
        before = len(embedder.embedded_texts)
        t.add(text=text.replace("Plant", "Station", 1), title="Station", document_id="b")
        assert len(embedder.embedded_texts) == before + len(t.chunks("b"))
        md = "# Guide\n\nIntro.\n\n## Pumps\n\nThe pump moves coolant."
        t.add(text=md, title="Guide", mime="text/markdown", document_id="md")
        assert "Guide > Pumps\n\n## Pumps\n\nThe pump moves coolant." in embedder.embedded_texts


def test_embedding_is_batched_across_sources(db_path: Path) -> None:
    embedder = HashEmbedder()
    with open_store(db_path, embedder) as t:
        sources = [TextSource(f"Note {i} about item {i}.", f"n{i}") for i in range(40)]
        t.add(sources)
    assert len(embedder.embedded_texts) == 40
    assert [len(call) for call in embedder.calls] == [16, 16, 8]  # batch_size 16, one group


def test_switching_models_and_reembed(db_path: Path) -> None:
    with open_store(db_path, HashEmbedder(64, "hash-64")) as t:
        t.add(text="\n\n".join(PARAGRAPHS), title="Plant", document_id="plant")
        t.add(text="Coolant chemistry is sampled weekly.", title="Lab", document_id="lab")
    other = HashEmbedder(32, "hash-32")
    with open_store(db_path, other) as t:
        # The new model has no vectors yet: vector search finds nothing, hybrid is lexical.
        assert list(t.search("coolant", mode="vector")) == []
        assert {h.document_id for h in t.search("coolant", mode="hybrid")} == {"plant", "lab"}
        report = t.reembed()
        assert (report.model, report.documents) == ("hash-32", 2)
        assert report.chunks_embedded == len(t.chunks("plant")) + 1
        assert t.store.embedding_counts() == {"hash-64": report.chunks_embedded,
                                             "hash-32": report.chunks_embedded}  # fmt: skip
        hits = t.search("coolant chemistry sampled", mode="vector", k=1)
        assert hits[0].document_id == "lab"  # 32-dim query over 32-dim vectors only
        assert t.reembed().documents == 0


def test_reembed_embeds_many_small_documents_in_few_calls(db_path: Path) -> None:
    """Switching models on a store of small documents: one embedding call per group of
    documents, not one (of a text or two) per document; each document still counted."""
    with open_store(db_path, HashEmbedder(64, "hash-64")) as t:
        t.add(
            [
                TextSource(f"Note {i} about pump {i}.", f"Note {i}", document_id=f"n{i}")
                for i in range(40)
            ]
        )
    other = HashEmbedder(32, "hash-32")
    with open_store(db_path, other) as t:
        seen: list[tuple[int, int]] = []
        report = t.reembed(progress=lambda done, total: seen.append((done, total)))
        assert (report.documents, report.chunks_embedded) == (40, 40)
        assert [len(call) for call in other.calls] == [16, 16, 8]  # batch_size 16, one group
        assert seen == [(i, 40) for i in range(1, 41)]
        assert t.store.embedding_counts() == {"hash-64": 40, "hash-32": 40}
        hit = t.search("note about pump 7", mode="vector", k=1)[0]
        assert hit.document_id == "n7"


def test_embedding_failure_stores_lexical_only_then_reembed_fills_in(db_path: Path) -> None:
    class Flaky(HashEmbedder):
        retries = 1
        backoff = 0.0
        failing = True

        def embed_batch(self, texts: list[str]) -> np.ndarray:
            if self.failing:
                raise EmbeddingError("provider down", retryable=True)
            return super().embed_batch(texts)

    embedder = Flaky()
    with open_store(db_path, embedder) as t:
        (r,) = t.add(text="\n\n".join(PARAGRAPHS), title="Plant", document_id="plant")
        assert r.status == "indexed" and "provider down" in r.warnings[0]
        assert stored_vectors(t, "plant", "hash-64") == []
        hits = t.search("turbines steam", mode="hybrid")
        assert hits and hits.debug["method"] == "lexical"
        assert any("provider down" in d for d in hits.debug["degradations"])
        with pytest.raises(EmbeddingError):
            t.reembed()
        embedder.failing = False
        assert t.reembed().documents == 1
        assert len(stored_vectors(t, "plant", "hash-64")) == len(t.chunks("plant"))
        assert t.search("turbines steam", mode="hybrid").debug["method"] == "hybrid"


def test_reader_never_sees_a_partly_embedded_document(db_path: Path) -> None:
    """Embedding runs in batches outside the write transaction; readers see a document
    with all of its vectors, or not at all."""

    class Slow(HashEmbedder):
        batch_size = 4

        def embed_batch(self, texts: list[str]) -> np.ndarray:
            time.sleep(0.02)
            return super().embed_batch(texts)

    text = "\n\n".join(f"Section {i}: {PARAGRAPHS[i % 4]}" for i in range(60))
    seen: set[tuple[int, int]] = set()
    stop = threading.Event()

    def watch() -> None:
        with Tether(db=db_path, settings=make_settings()) as reader:
            conn = reader.store.db.connection()
            while not stop.is_set():
                with reader.store.db.read():
                    chunks = conn.execute(
                        "SELECT count(*) FROM rag_chunks WHERE document_id = 'big'"
                    ).fetchone()[0]
                    vectors = conn.execute(
                        "SELECT count(*) FROM rag_embeddings e JOIN rag_chunks c"
                        " ON c.id = e.chunk_id WHERE c.document_id = 'big'"
                    ).fetchone()[0]
                seen.add((chunks, vectors))

    with open_store(db_path, Slow()) as writer:
        thread = threading.Thread(target=watch)
        thread.start()
        # The reader samples before the write and after it, however slow the machine.
        deadline = time.monotonic() + 30
        try:
            while not seen and time.monotonic() < deadline:
                time.sleep(0.01)
            writer.add(text=text, title="Big", document_id="big")
            total = len(writer.chunks("big"))
            while (total, total) not in seen and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join(timeout=10)
    assert total > 8
    assert seen <= {(0, 0), (total, total)}, seen
    assert (0, 0) in seen and (total, total) in seen


def test_vector_search_is_scoped_and_follows_writes(db_path: Path) -> None:
    with open_store(db_path, HashEmbedder()) as t:
        t.create_session("s1", workspace_id="ws")
        t.add(text="alpha reactor coolant pump", title="ws-doc", workspace_id="ws",
              document_id="ws-doc")  # fmt: skip
        t.add(text="alpha reactor coolant pump", title="global", document_id="g-doc")
        t.add(text="alpha reactor coolant pump", title="other", workspace_id="other",
              document_id="other-doc")  # fmt: skip

        def docs(scope: Scope) -> set[str]:
            return {h.document_id for h in t.search("coolant pump", scope=scope, mode="vector")}

        assert docs(Scope.workspace("ws")) == {"ws-doc"}
        assert docs(Scope.global_()) == {"g-doc"}
        assert docs(Scope.session("s1")) == set()
        t.attach("g-doc", "s1")
        assert docs(Scope.session("s1")) == {"g-doc"}
        t.add(text="coolant pump seals", title="new", session_id="s1", document_id="new")
        assert docs(Scope.session("s1")) == {"g-doc", "new"}
        t.delete_document("g-doc")
        assert docs(Scope.session("s1")) == {"new"}
        assert docs(Scope.global_()) == set()


def test_vector_top_k_is_exact_within_scope(db_path: Path) -> None:
    embedder = HashEmbedder()
    with open_store(db_path, embedder) as t:
        for i in range(30):
            t.add(text=f"coolant pump {i}", title=f"out {i}", workspace_id="big",
                  document_id=f"out{i}")  # fmt: skip
        for i in range(3):
            t.add(text=f"unrelated words {i}", title=f"in {i}", workspace_id="small",
                  document_id=f"in{i}")  # fmt: skip
        hits = t.search("coolant pump", scope=Scope.workspace("small"), k=3, mode="vector")
        assert {h.document_id for h in hits} == {"in0", "in1", "in2"}
        query = embedder.embed_query("coolant pump")
        expected = sorted(
            (float(np.dot(query, embedder.embed([f"in {i}\n\nunrelated words {i}"])[0])), f"in{i}")
            for i in range(3)
        )
        assert [h.score for h in hits] == pytest.approx(sorted((s for s, _ in expected),
                                                              reverse=True))  # fmt: skip


def test_hybrid_fuses_both_lists_with_rrf_by_default(db_path: Path) -> None:
    assert make_settings().rag.fusion == "rrf" and make_settings().rag.rrf_k == 60
    with open_store(db_path, HashEmbedder()) as t:
        for i, p in enumerate(PARAGRAPHS):
            t.add(text=p, title=f"p{i}", document_id=f"p{i}")
        results = t.search("coolant loop reactor", k=4)
        debug = results.debug
        assert debug["method"] == "hybrid" and debug["degradations"] == []
        assert debug["fusion"]["method"] == "rrf" and debug["fusion"]["rrf_k"] == 60
        assert debug["candidates"]["lexical"] >= 1 and debug["candidates"]["vector"] == 4
        for hit in results:
            ranks = debug["ranks"][hit.chunk_id]
            expected = sum(1 / (60 + ranks[key]) for key in ("lexical_rank", "vector_rank")
                           if key in ranks)  # fmt: skip
            assert hit.score == pytest.approx(expected)
        assert results[0].document_id == "p0"


def test_zscore_fusion_fuses_standardized_scores(db_path: Path) -> None:
    """fusion = "zscore": each list standardized by its own mean and std; absent, z=-3."""
    with open_store(db_path, HashEmbedder(), vector_weight=0.5, fusion="zscore") as t:
        for i, p in enumerate(PARAGRAPHS):
            t.add(text=p, title=f"p{i}", document_id=f"p{i}")
        results = t.search("coolant loop reactor", k=4)
        fusion = results.debug["fusion"]
        assert fusion["method"] == "zscore" and fusion["weights"] == [1.0, 0.5]
        assert results.debug["candidates"]["vector"] == 4
        for hit in results:
            ranks = results.debug["ranks"][hit.chunk_id]
            expected = 0.0
            for key, side, weight in (("bm25", "lexical", 1.0), ("cosine", "vector", 0.5)):
                moments = fusion[side]
                z = (
                    (ranks[key] - moments["mean"]) / moments["std"] + moments["lift"]
                    if key in ranks
                    else -3.0
                )
                expected += weight * z
            assert hit.score == pytest.approx(expected, abs=1e-4)
        assert [h.score for h in results] == sorted((h.score for h in results), reverse=True)
        assert results[0].document_id == "p0"


def test_disabled_embeddings_mean_lexical_only_with_one_log_line(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    with caplog.at_level("INFO", logger="tether"):
        t = Tether(db=db_path, settings=settings)
        t.add(text="\n\n".join(PARAGRAPHS), title="Plant")
        assert t.store.counts()["rag_embeddings"] == 0
        results = t.search("turbines", mode="hybrid")
        t.search("turbines", mode="hybrid")
    # Said once, when the embedder was first asked for (not per search).
    lines = [r for r in caplog.records if "lexical-only" in r.getMessage()]
    assert len(lines) == 1
    assert results and results.debug["method"] == "lexical"
    assert "disabled" in results.debug["degradations"][0]
    assert len([r for r in caplog.records if "lexical-only" in r.getMessage()]) == 1
    t.close()


def test_remote_provider_without_key_is_lexical_only(db_path: Path) -> None:
    settings = Settings.load(rag={"embeddings": {"enabled": True, "provider": "openai"}})
    with Tether(db=db_path, settings=settings) as t:
        assert t.embedder is None
        assert "TETHER_LLM__API_KEY" in (t.embeddings_unavailable or "")
        t.add(text="lexical still works", title="x")
        assert t.search("lexical").debug["method"] == "lexical"


def test_local_model_resolution(tmp_path: Path) -> None:
    packaged = resolve_model_path()
    assert (Path(packaged) / "config.json").is_file()
    assert resolve_model_path(model_path=packaged) == packaged
    with pytest.raises(EmbeddingsUnavailable, match="not a sentence-transformers model"):
        resolve_model_path(model_path=str(tmp_path))
    with pytest.raises(EmbeddingsUnavailable, match="pip install"):
        resolve_model_path("no-such-org/no-such-model")


@pytest.mark.slow
def test_local_embedder_finds_meaning_without_shared_words(
    db_path: Path, local_embedder: LocalEmbedder
) -> None:
    """The real all-MiniLM-L6-v2: a paraphrase with no word in common is found by vectors
    (and hybrid), not by FTS5."""
    settings = Settings.load(rag={"embeddings": {"enabled": True}})
    with Tether(db=db_path, settings=settings, embedder=local_embedder) as t:
        t.add(sorted(EXAMPLES.iterdir()), workspace_id="lumen")
        query = "my gadget dies every night"
        vector = t.search(query, scope="workspace", workspace_id="lumen", k=3, mode="vector")
        assert any("Battery" in (h.section_title or "") or "battery" in h.text.lower()
                   for h in vector)  # fmt: skip
        assert t.search("gadget", scope="workspace", workspace_id="lumen", mode="lexical") == []
        hybrid = t.search(query, scope="workspace", workspace_id="lumen", k=5)
        assert hybrid.debug["method"] == "hybrid"
        chunk = t.chunks(vector[0].document_id)[0]
        assert chunk.token_count == local_embedder.count_tokens(chunk.content) > 0
        model = t.store.db.connection().execute("SELECT DISTINCT model, dims FROM rag_embeddings")
        assert model.fetchall() == [("all-MiniLM-L6-v2", 384)]


def test_inconsistent_stored_vectors_are_reported_not_misread(db_path: Path) -> None:
    with open_store(db_path, HashEmbedder()) as t:
        t.add(text="\n\n".join(PARAGRAPHS), title="Plant", document_id="plant")
        chunk_id = t.chunks("plant")[0].id
        with t.store.db.write() as conn:
            conn.execute(
                "UPDATE rag_embeddings SET dims = 32, vector = ? WHERE chunk_id = ?",
                (b"\x00" * 128, chunk_id),
            )
        results = t.search("coolant", mode="hybrid")
        assert results.debug["method"] == "lexical"
        assert any("expected" in d and "bytes" in d for d in results.debug["degradations"])
        # The pipeline goes through the same candidate path: it degrades the same way,
        # and says the stored vectors (not the query) are the problem.
        result = t.retrieve("coolant pumps", scope="global")
        assert result.grounded and result.debug["method"] == "lexical"
        [problem] = [d for d in result.debug["degradations"] if "expected" in d]
        assert problem.startswith("stored vectors unusable, lexical only")
        assert "re-embed" in problem


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_finds_nothing_and_says_what_ran(db_path: Path, query: str) -> None:
    with open_store(db_path, HashEmbedder()) as t:
        t.add(text="\n\n".join(PARAGRAPHS), title="Plant")
        results = t.search(query, mode="hybrid")
        assert list(results) == [] and results.debug["method"] == "hybrid"
        assert results.debug["degradations"] == []
    settings = make_settings(embeddings={"enabled": False})
    with Tether(db=db_path, settings=settings) as t:
        results = t.search(query, mode="hybrid")
        assert list(results) == [] and results.debug["method"] == "lexical"
        assert "disabled" in results.debug["degradations"][0]


def test_a_search_inside_the_callers_transaction_runs_in_it() -> None:
    """A plain search runs both sides in the caller's thread: inside a read or write
    transaction on a shared in-memory store it neither deadlocks nor misses the
    transaction's own writes."""
    outcome: list[object] = []

    def run() -> None:
        with Tether(db=":memory:", settings=make_settings(), embedder=HashEmbedder()) as t:
            t.add(text="\n\n".join(PARAGRAPHS), title="Plant", document_id="plant")
            t.add(text="Spare coolant pumps are kept in room B.", title="Stores")
            with t.store.db.read():
                outcome.append([h.title for h in t.search("coolant pumps", mode="hybrid")])
            with t.store.db.write():
                t.set_status("plant", "draft")  # not committed yet: this transaction's own
                outcome.append([h.title for h in t.search("coolant pumps", mode="hybrid")])

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "search deadlocked inside the caller's transaction"
    assert outcome == [["Stores", "Plant"], ["Stores"]]


def test_the_local_model_runs_on_the_gpu_when_torch_sees_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``rag.embeddings.device = "auto"`` (the default) picks a CUDA GPU, else Apple's
    MPS, else the CPU, when the model loads; a device can also be named."""
    import torch

    from tether.embed.local import pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device() == "cpu"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device() == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == "cuda"
    assert Settings.load().rag.embeddings.device == "auto"
    settings = Settings.load(rag={"embeddings": {"enabled": True, "device": "cuda:1"}})
    embedder, _ = embedder_from_settings(settings)
    assert isinstance(embedder, LocalEmbedder) and embedder.device == "cuda:1"
    with pytest.raises(ConfigurationError, match="device"):
        Settings.load(rag={"embeddings": {"device": "gpu please"}})


def test_auto_is_decided_when_the_model_loads(local_embedder: LocalEmbedder) -> None:
    from tether.embed.local import pick_device, pick_precision

    fresh = LocalEmbedder()
    assert (fresh.device, fresh.precision) == ("auto", "auto")  # nothing decided before use
    assert local_embedder.device == pick_device()  # the loaded model: this machine's pick
    assert local_embedder.precision == pick_precision(local_embedder.device)


def test_precision_is_half_on_a_cuda_gpu_and_float32_elsewhere() -> None:
    from tether.embed.local import pick_precision

    assert pick_precision("cuda") == pick_precision("cuda:1") == "float16"
    assert pick_precision("cpu") == pick_precision("mps") == "float32"
    assert Settings.load().rag.embeddings.precision == "auto"
    settings = Settings.load(
        rag={"embeddings": {"enabled": True, "precision": "bfloat16", "device": "cpu"}}
    )
    embedder, _ = embedder_from_settings(settings)
    assert isinstance(embedder, LocalEmbedder) and embedder.precision == "bfloat16"
    with pytest.raises(ConfigurationError, match="precision"):
        Settings.load(rag={"embeddings": {"precision": "int4"}})
    with pytest.raises(InvalidArgument, match="precision"):
        LocalEmbedder(precision="half")
    with pytest.raises(InvalidArgument, match="encode_batch_size"):
        LocalEmbedder(encode_batch_size=0)
    # A GPU makes one forward pass of each 256-text call; a CPU keeps passes of 64.
    assert LocalEmbedder(device="cpu").encode_batch_size == 64
    assert LocalEmbedder(device="cuda").encode_batch_size == 256
    assert LocalEmbedder(device="cuda", encode_batch_size=32).encode_batch_size == 32


def test_half_precision_weights_give_float32_unit_vectors_close_to_float32s(
    local_embedder: LocalEmbedder,
) -> None:
    """bfloat16 runs on this CPU (float16, the GPU's default, is the same code path with
    another type): vectors come back float32 and unit length, near the float32 model's."""
    texts = [
        "Spare coolant pumps are kept in room B.",
        "The reactor's primary loop is inspected every six months.",
        "Aspirin lowers the risk of a second heart attack.",
    ]
    half = LocalEmbedder(device="cpu", precision="bfloat16")
    ours = half.embed(texts)
    reference = local_embedder.embed(texts)
    assert half.precision == "bfloat16"
    assert ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(ours * reference, axis=1)
    assert cosines.min() > 0.98, cosines
    # ... and closer to its own text's float32 vector than to any other text's.
    assert (np.argmax(ours @ reference.T, axis=1) == np.arange(len(texts))).all()
