"""The onnx-int8 runtime: the installed model exported once, checked against the float
model, cached, reused; its vectors stored apart from the float model's."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import EXAMPLES
from tether import (
    ConfigurationError,
    EmbeddingsUnavailable,
    InvalidArgument,
    LocalEmbedder,
    OnnxEmbedder,
    Settings,
    Tether,
)
from tether.embed import embedder_from_settings, local_runtime, resolve_model_path
from tether.embed.onnx import MIN_PROBE_COSINE
from tether.testing import HashEmbedder

TEXTS = [
    "Spare coolant pumps are kept in room B.",
    "The reactor's primary loop is inspected every six months.",
    "Aspirin lowers the risk of a second heart attack.",
    "Hold the power button for ten seconds to reset the router.",
]


@pytest.fixture(scope="module")
def export_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export for the module (about 15 s on two cores), made by the real code path."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    first = OnnxEmbedder(cache_dir=cache)
    first.prepare()
    assert first.exported
    return cache


def test_the_export_is_checked_recorded_and_reused(export_cache: Path) -> None:
    again = OnnxEmbedder(cache_dir=export_cache)
    path = again.prepare()
    assert not again.exported  # found in the cache, not exported a second time
    assert path.is_file() and path.parent.parent == export_cache
    meta = json.loads((path.parent / "meta.json").read_text("utf-8"))
    assert meta["recipe"] >= 1 and meta["probe_cosine"] >= MIN_PROBE_COSINE
    assert meta["model_path"] == resolve_model_path()
    # The weight matrices are int8; the word embeddings (47 MB of the float model's 90)
    # are a lookup table and stay float.
    assert path.stat().st_size < 65_000_000
    assert sorted(p.name for p in export_cache.iterdir()) == [path.parent.name]  # no leftovers
    np.testing.assert_array_equal(
        again.embed(TEXTS), OnnxEmbedder(cache_dir=export_cache).embed(TEXTS)
    )


def test_every_weight_matrix_is_int8_but_the_first_feed_forward_output(
    export_cache: Path,
) -> None:
    """The first layer's feed-forward output stays float (its input's few huge values
    round the rest away at one int8 scale); the other 35 weight matrices are int8."""
    import onnx

    [model_file] = export_cache.glob("*/model.int8.onnx")
    graph = onnx.load(str(model_file)).graph
    weights = {init.name for init in graph.initializer}
    float_weights = [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and any(i in weights for i in node.input)
    ]
    assert float_weights == ["/inner/encoder/layer.0/output/dense/MatMul"]
    int8 = [
        node for node in graph.node if node.op_type in ("MatMulInteger", "DynamicQuantizeMatMul")
    ]
    assert len(int8) == 6 * 6 - 1


@pytest.mark.slow
def test_int8_vectors_stay_close_to_the_float_models(
    export_cache: Path, local_embedder: LocalEmbedder
) -> None:
    int8 = OnnxEmbedder(cache_dir=export_cache)
    long_text = " ".join(f"sentence {i} about valves, pumps and pressure." for i in range(300))
    texts = [*TEXTS, long_text, "x"]
    ours = int8.embed(texts)
    reference = local_embedder.embed(texts)
    assert ours.dtype == np.float32 and ours.shape == reference.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(ours * reference, axis=1)
    # The long text is truncated at the model's window exactly as sentence-transformers does.
    assert cosines[:-1].min() > MIN_PROBE_COSINE, cosines
    # One character is the hardest case for int8 (about 0.976 here): still the same vector.
    assert cosines[-1] > 0.95, cosines
    assert (np.argmax(ours @ reference.T, axis=1) == np.arange(len(texts))).all()
    # A text's vector depends on the text alone, not on what it was embedded with nor on
    # what ran beside it: one text at a time, or three at once, give the same bits.
    alone = np.concatenate([int8.embed([text]) for text in texts])
    np.testing.assert_array_equal(alone, ours)
    for threads in (1, 3):
        side_by_side = OnnxEmbedder(cache_dir=export_cache, threads=threads)
        assert side_by_side.threads == threads
        np.testing.assert_array_equal(side_by_side.embed(texts), ours)
    assert int8.count_tokens("pumps and valves") == local_embedder.count_tokens("pumps and valves")
    assert int8.max_tokens == local_embedder.max_tokens == 256


@pytest.mark.slow
def test_a_torn_cache_is_exported_again(export_cache: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(export_cache, cache)
    embedder = OnnxEmbedder(cache_dir=cache)
    embedder.cached_model.write_bytes(embedder.cached_model.read_bytes()[:100_000])
    vectors = embedder.embed(TEXTS)
    assert embedder.exported
    reference = OnnxEmbedder(cache_dir=export_cache).embed(TEXTS)
    np.testing.assert_allclose(vectors, reference, atol=1e-5)


def int8_settings(cache: Path) -> Settings:
    return Settings.load(
        rag={"embeddings": {"enabled": True, "runtime": "onnx-int8", "cache_dir": str(cache)}}
    )


@pytest.mark.slow
def test_a_store_keeps_int8_vectors_apart_and_searches_them(
    export_cache: Path, db_path: Path
) -> None:
    settings = int8_settings(export_cache)
    with Tether(db=db_path, settings=settings) as t:
        assert isinstance(t.embedder, OnnxEmbedder)
        t.add(sorted(EXAMPLES.iterdir()), workspace_id="lumen")
        query = "my gadget dies every night"
        hits = t.search(query, scope="workspace", workspace_id="lumen", k=3, mode="vector")
        assert any("battery" in h.text.lower() for h in hits)
        models = t.store.db.connection().execute("SELECT DISTINCT model FROM rag_embeddings")
        assert models.fetchall() == [("all-MiniLM-L6-v2@onnx-int8",)]
    # The float model finds no vectors of its own until it re-embeds.
    torch_settings = Settings.load(rag={"embeddings": {"enabled": True, "runtime": "torch"}})
    with Tether(db=db_path, settings=torch_settings) as t:
        assert t.embedder.model == "all-MiniLM-L6-v2"
        report = t.reembed()
        assert report.documents > 0
        counts = t.store.embedding_counts()
        assert counts["all-MiniLM-L6-v2"] == counts["all-MiniLM-L6-v2@onnx-int8"] > 0


AUTO = Settings.load(rag={"embeddings": {"enabled": True}})
FLOAT, INT8 = "all-MiniLM-L6-v2", "all-MiniLM-L6-v2@onnx-int8"


@pytest.mark.parametrize(
    ("stored", "runtime"),
    [
        ({}, "onnx-int8"),  # a new store: the fast runtime
        ({"hash-64": 10}, "onnx-int8"),  # another model's vectors say nothing
        ({FLOAT: 10}, "torch"),  # an existing store keeps its vectors
        ({FLOAT: 10, INT8: 3}, "torch"),  # half re-embedded: still the float model's
        ({FLOAT: 10, INT8: 10}, "onnx-int8"),  # re-embedded: the int8 vectors
        ({INT8: 10}, "onnx-int8"),
    ],
)
def test_auto_runs_what_the_store_holds_and_int8_for_a_new_store(
    stored: dict[str, int], runtime: str
) -> None:
    assert local_runtime(AUTO, stored) == runtime


def test_auto_is_torch_where_int8_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = Settings.load(rag={"embeddings": {"device": "cuda"}})
    assert local_runtime(gpu, {}) == "torch"
    half = Settings.load(rag={"embeddings": {"precision": "bfloat16"}})
    assert local_runtime(half, {}) == "torch"
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # not installed
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert local_runtime(AUTO, {}) == "torch"
    assert local_runtime(Settings.load(rag={"embeddings": {"runtime": "onnx-int8"}}), {}) == (
        "onnx-int8"  # asked for by name: its own error says what to install
    )


def test_an_existing_store_keeps_its_float_vectors_under_auto(db_path: Path) -> None:
    with Tether(db=db_path, embedder=HashEmbedder(dims=384, model=FLOAT)) as t:
        t.add(text="The sensor resets after ten seconds.", title="reset", workspace_id="w")
    with Tether(db=db_path, settings=AUTO) as t:
        assert isinstance(t.embedder, LocalEmbedder) and t.embedder.model == FLOAT
    with Tether(db=":memory:", settings=AUTO) as t:
        assert isinstance(t.embedder, OnnxEmbedder) and t.embedder.model == INT8


def test_settings_pick_the_runtime_and_refuse_what_cannot_work(tmp_path: Path) -> None:
    assert Settings.load().rag.embeddings.runtime == "auto"
    settings = int8_settings(tmp_path)
    embedder, reason = embedder_from_settings(settings)
    assert reason is None and isinstance(embedder, OnnxEmbedder)
    assert embedder.model == "all-MiniLM-L6-v2@onnx-int8" and embedder.cache_dir == tmp_path
    assert not any(tmp_path.iterdir())  # nothing is exported before the first use
    with pytest.raises(ConfigurationError, match="runs on the CPU"):
        Settings.load(rag={"embeddings": {"runtime": "onnx-int8", "device": "cuda"}})
    with pytest.raises(ConfigurationError, match="provider"):
        Settings.load(rag={"embeddings": {"runtime": "onnx-int8", "provider": "openai"}})
    with pytest.raises(ConfigurationError, match="precision"):
        Settings.load(rag={"embeddings": {"runtime": "onnx-int8", "precision": "bfloat16"}})
    with pytest.raises(ConfigurationError, match="runtime"):
        Settings.load(rag={"embeddings": {"runtime": "openvino"}})
    with pytest.raises(InvalidArgument, match="threads"):
        OnnxEmbedder(threads=0)


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert OnnxEmbedder().cache_dir == tmp_path / "tether"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert OnnxEmbedder().cache_dir == Path.home() / ".cache" / "tether"


def test_a_pooling_it_cannot_do_is_refused_before_any_export(tmp_path: Path) -> None:
    packaged = Path(resolve_model_path())
    model = tmp_path / "max-pooled"
    shutil.copytree(packaged, model)
    (model / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 384, "pooling_mode_max_tokens": True}), "utf-8"
    )
    with pytest.raises(EmbeddingsUnavailable, match="mean or CLS"):
        OnnxEmbedder(model_path=str(model), cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_an_unwritable_cache_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", "utf-8")
    embedder = OnnxEmbedder(cache_dir=blocker / "cache")
    with pytest.raises(EmbeddingsUnavailable, match="cache_dir to a writable folder"):
        embedder.embed(TEXTS)
    assert blocker.read_text("utf-8") == "not a folder"


def test_without_onnxruntime_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime fails
    embedder = OnnxEmbedder(cache_dir=tmp_path)
    with pytest.raises(EmbeddingsUnavailable, match=r"tether\[onnx\]"):
        embedder.embed(TEXTS)
    # A Tether so configured indexes and searches lexical-only, and does not crash.
    with Tether(db=tmp_path / "t.db", settings=int8_settings(tmp_path)) as t:
        t.add(text="pumps and valves", title="plant")
        assert t.search("pumps").debug["method"] == "lexical"
