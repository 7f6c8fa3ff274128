"""Warm-up: the model loads once, outside every retrieval's time budget, in a span of its
own; ``rag.embeddings.warm_at_open`` loads it in the background when a Tether opens."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether import Settings, Tether
from tether.policy import require_grounding
from tether.testing import HashEmbedder

LOAD_SECONDS = 1.0


class SlowLoadingEmbedder(HashEmbedder):
    """A model that takes LOAD_SECONDS to load on first use, as a local model does (for
    seconds), then embeds at once."""

    def __init__(self) -> None:
        super().__init__()
        self.is_loaded = False
        self.loads = 0

    @property
    def loaded(self) -> bool:
        return self.is_loaded

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not self.is_loaded:
            time.sleep(LOAD_SECONDS)
            self.is_loaded, self.loads = True, self.loads + 1
        return super().embed_batch(texts)


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    db = tmp_path / "w.db"
    with Tether(db=db, embedder=HashEmbedder()) as t:
        t.add(text="Coolant pump maintenance: replace the impeller seal every spring.",
              title="Pump manual", document_id="pump")  # fmt: skip
    return db


def test_a_guarded_retrieval_in_a_fresh_process_is_not_blocked_by_the_model_load(
    stored: Path, span_exporter: InMemorySpanExporter
) -> None:
    exporter = span_exporter
    exporter.clear()
    embedder = SlowLoadingEmbedder()
    settings = Settings.load(policy={"timeout": LOAD_SECONDS / 2, "min_relevance": 0.0})
    with Tether(db=stored, settings=settings, embedder=embedder) as t:
        started = time.perf_counter()
        grounding = require_grounding(t, scope="global").run("coolant pump seal")
        took = time.perf_counter() - started
        assert grounding.document_ids == ("pump",)  # not blocked as a timeout
        assert took >= LOAD_SECONDS  # the load happened, before the budget started
        assert embedder.loads == 1
        assert t.warmup() == {}  # already warm: nothing more to do
        (row,) = t.retrieval_log()
    assert row.outcome == "grounded"
    names = [s.name for s in exporter.get_finished_spans()]
    assert "tether.warm_up" in names and "rag.retrieve" in names
    assert names.index("tether.warm_up") < names.index("rag.retrieve")
    (warm,) = [s for s in exporter.get_finished_spans() if s.name == "tether.warm_up"]
    assert warm.attributes is not None
    assert warm.attributes["tether.warm_up.model_ms"] >= LOAD_SECONDS * 1000


def test_warmup_loads_the_model_and_the_vectors_once(stored: Path) -> None:
    embedder = SlowLoadingEmbedder()
    with Tether(db=stored, embedder=embedder) as t:
        timings = t.warmup()
        assert set(timings) == {"model_ms", "vectors_ms"}
        assert timings["model_ms"] >= LOAD_SECONDS * 1000
        assert t.warmup() == {}
        started = time.perf_counter()
        assert t.search("coolant pump", scope="global")[0].document_id == "pump"
        assert time.perf_counter() - started < LOAD_SECONDS  # the first search is fast
    assert embedder.loads == 1


def test_warmup_without_embeddings_does_nothing(stored: Path) -> None:
    with Tether(db=stored) as t:  # the suite turns embeddings off
        assert t.warmup() == {}


def test_warm_at_open_loads_in_the_background(stored: Path) -> None:
    embedder = SlowLoadingEmbedder()
    settings = Settings.load(rag={"embeddings": {"enabled": True, "warm_at_open": True}})
    started = time.perf_counter()
    with Tether(db=stored, settings=settings, embedder=embedder) as t:
        assert time.perf_counter() - started < LOAD_SECONDS  # opening does not wait
        assert t._warming is not None
        t._warming.join(timeout=30)
        assert embedder.loaded and embedder.loads == 1
        assert t.warmup() == {}


class CountingLoadsEmbedder(SlowLoadingEmbedder):
    """Records whether the stored vectors were in memory when the model finished loading."""

    def __init__(self, tether_box: list[Tether]) -> None:
        super().__init__()
        self.box = tether_box
        self.vectors_loaded_meanwhile: bool | None = None

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        first = not self.loaded
        out = super().embed_batch(texts)
        if first:
            vectors = self.box[0]._searcher.vectors
            self.vectors_loaded_meanwhile = vectors is not None and vectors.loaded
        return out


def test_a_cold_search_reads_the_vectors_while_the_model_loads(stored: Path) -> None:
    box: list[Tether] = []
    embedder = CountingLoadsEmbedder(box)
    with Tether(db=stored, embedder=embedder) as t:
        box.append(t)
        hits = t.search("coolant pump seal", scope="global", mode="hybrid")
        assert [h.document_id for h in hits] == ["pump"]
        assert embedder.vectors_loaded_meanwhile  # read on a helper thread, not after
        assert t._searcher.vectors.stats["loads"] == 1  # and only once
    with Tether(db=stored, embedder=HashEmbedder()) as warm:
        warm.warmup()
        assert [h.chunk_id for h in warm.search("coolant pump seal", scope="global")] == [
            h.chunk_id for h in hits
        ]
