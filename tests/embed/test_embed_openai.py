"""OpenAIEmbedder against a loopback fake of the OpenAI API, through the real ``openai`` SDK.

The fake (tests/openai_fake.py) speaks the HTTP wire protocol; the embedder's client code
path (SDK, httpx, JSON parsing, error classes) is the real one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest

from openai_fake import FakeOpenAI, Fault, fake_vector
from tether import Settings, Tether, TextSource
from tether.embed import OpenAIEmbedder, embedder_from_settings
from tether.errors import EmbeddingError, EmbeddingsUnavailable
from tether.ingest.chunking import embedding_text

MODEL = "fake-embed"


class FastOpenAIEmbedder(OpenAIEmbedder):
    """The real embedder with a backoff short enough for tests."""

    backoff = 0.001


class TwoRetriesEmbedder(FastOpenAIEmbedder):
    retries = 2


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def make_embedder(
    fake: FakeOpenAI, cls: type[OpenAIEmbedder] = FastOpenAIEmbedder, **kwargs: object
) -> OpenAIEmbedder:
    kwargs.setdefault("timeout", 2.0)
    return cls(MODEL, api_key=fake.api_key, base_url=fake.base_url, **kwargs)  # type: ignore[arg-type]


def expected(texts: list[str], dims: int = 32) -> np.ndarray:
    """What the embedder should return for ``texts``: the fake's vectors, unit length."""
    raw = np.array([fake_vector(t, dims) for t in texts], dtype=np.float64)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def inputs_of(fake: FakeOpenAI) -> list[list[str]]:
    return [r.body["input"] for r in fake.embedding_requests]


TEXTS = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "a red apple pie recipe",
    "red apple tart with cinnamon",
    "quantum flux capacitor",
    "sensor calibration steps",
    "reset the sensor with the pin",
    "one",
    "two words",
    "three words here",
]


# -- vectors ---------------------------------------------------------------------------------


def test_vectors_are_unit_length_float32_in_input_order(fake: FakeOpenAI) -> None:
    vectors = make_embedder(fake).embed(TEXTS)

    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), fake.dims)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(vectors, expected(TEXTS), rtol=1e-5, atol=1e-6)
    # The fake's raw vectors are not unit length: the embedder normalized them.
    assert not np.isclose(np.linalg.norm(fake_vector(TEXTS[0], fake.dims)), 1.0)


def test_texts_sharing_words_are_closer(fake: FakeOpenAI) -> None:
    pie, tart, flux = make_embedder(fake).embed(
        ["red apple pie", "red apple tart", "quantum flux capacitor"]
    )
    assert float(pie @ tart) > 0.5 > float(pie @ flux)


def test_shuffled_index_order_is_put_back_in_input_order(fake: FakeOpenAI) -> None:
    fake.inject(Fault.shuffle(seed=3))
    vectors = make_embedder(fake).embed(TEXTS)

    assert fake.pending_faults == []  # the shuffled answer was the one used
    np.testing.assert_allclose(vectors, expected(TEXTS), rtol=1e-5, atol=1e-6)


def test_request_carries_model_key_and_float_encoding_and_no_dimensions(fake: FakeOpenAI) -> None:
    make_embedder(fake).embed(["alpha", "beta"])

    (request,) = fake.embedding_requests
    assert request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {fake.api_key}"
    assert request.body["model"] == MODEL
    assert request.body["input"] == ["alpha", "beta"]
    assert request.body["encoding_format"] == "float"
    assert "dimensions" not in request.body


def test_dimensions_are_sent_when_configured(fake: FakeOpenAI) -> None:
    vectors = make_embedder(fake, dimensions=8).embed(["alpha beta", "gamma"])

    (request,) = fake.embedding_requests
    assert request.body["dimensions"] == 8
    assert vectors.shape == (2, 8)
    np.testing.assert_allclose(vectors, expected(["alpha beta", "gamma"], 8), rtol=1e-5)


def test_batches_of_batch_size(fake: FakeOpenAI) -> None:
    texts = [f"text number {i} about topic {i % 7}" for i in range(300)]
    embedder = make_embedder(fake)
    assert embedder.batch_size == 128

    vectors = embedder.embed(texts)

    assert [len(batch) for batch in inputs_of(fake)] == [128, 128, 44]
    sent = [t for batch in inputs_of(fake) for t in batch]
    assert sorted(sent) == sorted(texts)  # each text once
    assert [len(t) for t in sent] == sorted((len(t) for t in texts), reverse=True)
    assert vectors.shape == (300, fake.dims)  # and back in the caller's order:
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-5, atol=1e-6)


def test_no_texts_no_request(fake: FakeOpenAI) -> None:
    assert make_embedder(fake).embed([]).shape[0] == 0
    assert fake.requests == []


def test_query_embeddings_are_cached(fake: FakeOpenAI) -> None:
    embedder = make_embedder(fake)
    first = embedder.embed_query("where is the reset pin")
    second = embedder.embed_query("where is the reset pin")

    assert len(fake.embedding_requests) == 1
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, expected(["where is the reset pin"])[0], rtol=1e-5)


# -- retries ---------------------------------------------------------------------------------


def test_server_errors_are_retried_with_backoff(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.inject(Fault.status(500), Fault.status(503))
    with caplog.at_level(logging.WARNING, logger="tether.embed"):
        vectors = make_embedder(fake).embed(["alpha", "beta"])

    assert len(fake.embedding_requests) == 3
    assert all(r.body["input"] == ["alpha", "beta"] for r in fake.embedding_requests)
    np.testing.assert_allclose(vectors, expected(["alpha", "beta"]), rtol=1e-5)
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 2
    assert "retry 1 of 3" in retries[0] and "500" in retries[0]
    assert "retry 2 of 3" in retries[1] and "503" in retries[1]


def test_backoff_doubles_between_attempts(fake: FakeOpenAI) -> None:
    class SlowerBackoff(OpenAIEmbedder):
        backoff = 0.05

    fake.inject(Fault.status(503), Fault.status(503))
    make_embedder(fake, SlowerBackoff).embed(["alpha"])

    first, second, third = (r.at for r in fake.embedding_requests)
    assert second - first >= 0.05
    assert third - second >= 0.1


def test_rate_limit_is_retried(fake: FakeOpenAI) -> None:
    fake.inject(Fault.status(429, "Rate limit reached for requests"))
    vectors = make_embedder(fake).embed(["alpha"])

    assert len(fake.embedding_requests) == 2
    np.testing.assert_allclose(vectors, expected(["alpha"]), rtol=1e-5)


def test_persistent_server_errors_give_up_after_the_retries(fake: FakeOpenAI) -> None:
    fake.outage = Fault.status(500, "the engine is overloaded")
    embedder = make_embedder(fake, TwoRetriesEmbedder)

    with pytest.raises(EmbeddingError) as info:
        embedder.embed(["alpha"])

    # One attempt plus ``retries`` retries; the SDK's own retries are off.
    assert len(fake.embedding_requests) == TwoRetriesEmbedder.retries + 1
    assert info.value.retryable is True
    assert not isinstance(info.value, EmbeddingsUnavailable)
    assert "500" in str(info.value) and "the engine is overloaded" in str(info.value)


def test_a_slow_answer_times_out_and_is_retried(fake: FakeOpenAI) -> None:
    # The retry must answer within the timeout too: 0.5 s leaves a loaded machine room.
    fake.inject(Fault.delay(3.0))
    started = time.perf_counter()
    vectors = make_embedder(fake, timeout=0.5).embed(["alpha"])

    assert time.perf_counter() - started < 2.5  # the client did not wait for the slow answer
    assert len(fake.embedding_requests) == 2
    np.testing.assert_allclose(vectors, expected(["alpha"]), rtol=1e-5)


def test_a_delay_within_the_timeout_is_fine(fake: FakeOpenAI) -> None:
    fake.inject(Fault.delay(0.05))
    make_embedder(fake, timeout=2.0).embed(["alpha"])
    assert len(fake.embedding_requests) == 1


def test_timeouts_give_up_after_the_retries_as_retryable(fake: FakeOpenAI) -> None:
    fake.outage = Fault.delay(2.0)
    embedder = make_embedder(fake, TwoRetriesEmbedder, timeout=0.15)

    started = time.perf_counter()
    with pytest.raises(EmbeddingError) as info:
        embedder.embed(["alpha"])

    assert time.perf_counter() - started < 1.5
    assert len(fake.embedding_requests) == TwoRetriesEmbedder.retries + 1
    assert info.value.retryable is True
    assert "timed out" in str(info.value).lower()


def test_bad_request_is_not_retried(fake: FakeOpenAI) -> None:
    fake.inject(Fault.status(400, "This model's maximum context length is 8192 tokens"))
    with pytest.raises(EmbeddingError) as info:
        make_embedder(fake).embed(["alpha"])

    assert len(fake.embedding_requests) == 1
    assert info.value.retryable is False
    assert not isinstance(info.value, EmbeddingsUnavailable)
    assert "400" in str(info.value) and "maximum context length" in str(info.value)


def test_a_refused_key_is_unavailable_and_not_retried(fake: FakeOpenAI) -> None:
    embedder = FastOpenAIEmbedder(MODEL, api_key="sk-wrong", base_url=fake.base_url, timeout=2.0)
    with pytest.raises(EmbeddingsUnavailable) as info:
        embedder.embed(["alpha"])

    (request,) = fake.embedding_requests
    assert request.headers["authorization"] == "Bearer sk-wrong"
    assert isinstance(info.value, EmbeddingError)
    assert info.value.retryable is False
    assert "API key" in str(info.value)
    assert "TETHER_LLM__API_KEY" in str(info.value)


def test_a_401_answer_is_unavailable(fake: FakeOpenAI) -> None:
    fake.inject(Fault.status(401, "Your API key has been revoked"))
    with pytest.raises(EmbeddingsUnavailable, match="API key"):
        make_embedder(fake).embed(["alpha"])
    assert len(fake.embedding_requests) == 1


@pytest.mark.parametrize(
    "fault",
    [
        Fault.malformed_json(),
        Fault.missing_data(),
        Fault.wrong_count(-1),
        Fault.wrong_count(+1),
        Fault.null_values(),
    ],
    ids=lambda f: f"{f.kind}{f.delta or ''}",
)
def test_malformed_answers_are_embedding_errors(fake: FakeOpenAI, fault: Fault) -> None:
    fake.inject(fault)
    with pytest.raises(EmbeddingError) as info:
        make_embedder(fake).embed(["alpha beta", "gamma delta", "epsilon"])

    assert fake.pending_faults == []
    assert type(info.value) is EmbeddingError
    assert info.value.retryable is False
    assert len(fake.embedding_requests) == 1
    # The next request (a healthy answer) works: nothing was left in a bad state.
    make_embedder(fake).embed(["alpha"])


def test_no_api_key_fails_at_construction(fake: FakeOpenAI) -> None:
    for key in (None, ""):
        with pytest.raises(EmbeddingsUnavailable, match="TETHER_LLM__API_KEY"):
            OpenAIEmbedder(MODEL, api_key=key, base_url=fake.base_url)
    assert fake.requests == []


# -- settings --------------------------------------------------------------------------------


def openai_settings(fake: FakeOpenAI | None = None, **embeddings: object) -> Settings:
    config: dict[str, object] = {"enabled": True, "provider": "openai", "model": MODEL}
    if fake is not None:
        config.update(base_url=fake.base_url, api_key=fake.api_key)
    config.update(embeddings)
    return Settings.load(rag={"embeddings": config})


def test_embedder_from_settings_points_at_the_configured_endpoint(fake: FakeOpenAI) -> None:
    embedder, reason = embedder_from_settings(openai_settings(fake, timeout=3.5))

    assert reason is None
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.model == MODEL
    assert embedder.base_url == fake.base_url
    assert embedder.timeout == 3.5
    embedder.embed(["alpha"])
    (request,) = fake.embedding_requests
    assert request.headers["authorization"] == f"Bearer {fake.api_key}"
    assert request.body["model"] == MODEL


def test_embedder_from_settings_takes_key_and_url_from_llm_section(fake: FakeOpenAI) -> None:
    settings = Settings.load(
        rag={"embeddings": {"enabled": True, "provider": "openai", "model": MODEL}},
        llm={"base_url": fake.base_url, "api_key": fake.api_key},
    )
    embedder, reason = embedder_from_settings(settings)

    assert reason is None and isinstance(embedder, OpenAIEmbedder)
    assert embedder.base_url == fake.base_url
    embedder.embed(["alpha"])
    assert fake.embedding_requests[0].headers["authorization"] == f"Bearer {fake.api_key}"


def test_embedder_from_settings_reads_the_key_from_the_environment(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_RAG__EMBEDDINGS__ENABLED", "true")
    monkeypatch.setenv("TETHER_RAG__EMBEDDINGS__PROVIDER", "openai")
    monkeypatch.setenv("TETHER_LLM__API_KEY", fake.api_key)
    monkeypatch.setenv("TETHER_LLM__BASE_URL", fake.base_url)
    embedder, reason = embedder_from_settings(Settings.load())

    assert reason is None and isinstance(embedder, OpenAIEmbedder)
    assert embedder.model == "text-embedding-3-small"
    embedder.embed(["alpha"])
    assert fake.embedding_requests[0].body["model"] == "text-embedding-3-small"


def test_embedder_from_settings_without_a_key_is_lexical_only(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with caplog.at_level(logging.DEBUG, logger="tether"):
        embedder, reason = embedder_from_settings(openai_settings(base_url="http://127.0.0.1:9/v1"))

    assert embedder is None
    assert reason is not None and "lexical-only" in reason and "TETHER_LLM__API_KEY" in reason
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "lexical-only" in warnings[0].getMessage()
    assert "\n" not in warnings[0].getMessage()


def test_embedder_from_settings_disabled(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="tether"):
        embedder, reason = embedder_from_settings(openai_settings(fake, enabled=False))

    assert embedder is None
    assert reason is not None and "disabled" in reason
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert fake.requests == []


# -- end to end through the facade -----------------------------------------------------------

DOCS = {
    "Sensors": (
        "Reset the humidity sensor by holding the recessed pin for ten seconds. "
        "The sensor blinks green when the calibration is restored. "
        "Calibration drifts after firmware upgrades, so repeat it after every upgrade."
    ),
    "Baking": (
        "Apple pie needs tart apples, cinnamon, butter and a cold flaky crust. "
        "Bake the pie at a high temperature first, then lower it until the filling bubbles."
    ),
    "Astronomy": (
        "Jupiter has dozens of moons; the four largest were discovered by Galileo. "
        "Its great red spot is a storm larger than the whole earth."
    ),
}


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The facade builds a plain OpenAIEmbedder: shorten its backoff for these tests."""
    monkeypatch.setattr(OpenAIEmbedder, "backoff", 0.001)


def open_tether(db_path: Path, fake: FakeOpenAI) -> Tether:
    settings = Settings.load(
        rag={
            "chunk_size": 120,
            "chunk_overlap": 20,
            "embeddings": {
                "enabled": True,
                "provider": "openai",
                "model": MODEL,
                "base_url": fake.base_url,
                "api_key": fake.api_key,
                "timeout": 2.0,
            },
        }
    )
    return Tether(db=db_path, settings=settings)


def embedded_chunk_count(tether: Tether, document_id: str) -> int:
    """Chunks of the document that have their own stored vector of MODEL."""
    with tether.store.db.read() as conn:
        return conn.execute(
            "SELECT count(*) FROM rag_embeddings e JOIN rag_chunks c ON c.id = e.chunk_id"
            " WHERE c.document_id = ? AND e.model = ?",
            (document_id, MODEL),
        ).fetchone()[0]


@pytest.mark.usefixtures("fast_backoff")
def test_facade_end_to_end_with_outage_and_reembed(db_path: Path, fake: FakeOpenAI) -> None:
    with open_tether(db_path, fake) as tether:
        assert tether.embeddings_unavailable is None
        assert isinstance(tether.embedder, OpenAIEmbedder)
        results = tether.add([TextSource(text, title) for title, text in DOCS.items()])
        assert [r.status for r in results] == ["indexed"] * 3
        assert all(r.warnings == () for r in results)
        counts = tether.store.counts()
        assert counts["rag_chunks"] > len(DOCS)  # chunk_size 120: several chunks each
        assert counts["rag_embeddings"] == counts["rag_chunks"]
        assert fake.embedding_requests, "the facade embedded through the fake"

        vector = tether.search("apple pie with cinnamon", mode="vector", k=3)
        assert vector.debug["method"] == "vector"
        assert vector.debug["degradations"] == []
        assert vector.debug["candidates"]["vector"] > 0
        assert vector[0].title == "Baking"

        hybrid = tether.search("humidity sensor calibration", mode="hybrid", k=3)
        assert hybrid.debug["method"] == "hybrid"
        assert hybrid.debug["degradations"] == []
        assert hybrid.debug["candidates"]["vector"] > 0
        assert hybrid.debug["candidates"]["lexical"] > 0
        assert hybrid[0].title == "Sensors"

        # The server starts failing: searches degrade to lexical, adds store no vectors.
        fake.outage = Fault.status(500, "upstream is down")
        before = len(fake.embedding_requests)
        degraded = tether.search("Galileo discovered moons", mode="hybrid", k=3)
        assert degraded.debug["method"] == "lexical"
        assert len(degraded.debug["degradations"]) == 1
        assert "500" in degraded.debug["degradations"][0]
        assert "lexical" in degraded.debug["degradations"][0]
        assert degraded[0].title == "Astronomy"
        assert len(fake.embedding_requests) == before + OpenAIEmbedder.retries + 1

        (stored,) = tether.add(
            text="The lighthouse keeper logs every passing trawler in a leather ledger.",
            title="Lighthouse",
        )
        assert stored.status == "indexed"
        assert stored.warnings and "500" in stored.warnings[0]
        assert stored.document_id is not None
        assert stored.chunk_count >= 1
        assert embedded_chunk_count(tether, stored.document_id) == 0
        counts = tether.store.counts()
        assert counts["rag_embeddings"] == counts["rag_chunks"] - stored.chunk_count
        lexical = tether.search("lighthouse trawler ledger", mode="lexical")
        assert [h.document_id for h in lexical] == [stored.document_id]

        # Healthy again: reembed fills the gap, and vector search finds the new document.
        fake.outage = None
        report = tether.reembed()
        assert report.model == MODEL
        assert report.documents == 1
        assert report.chunks_embedded == stored.chunk_count
        assert embedded_chunk_count(tether, stored.document_id) == stored.chunk_count
        counts = tether.store.counts()
        assert counts["rag_embeddings"] == counts["rag_chunks"]
        assert tether.store.documents_missing_embeddings(MODEL) == []
        found = tether.search("lighthouse keeper trawler", mode="vector", k=1)
        assert found.debug["method"] == "vector"
        assert found[0].document_id == stored.document_id


@pytest.mark.usefixtures("fast_backoff")
def test_facade_survives_malformed_answers(db_path: Path, fake: FakeOpenAI) -> None:
    with open_tether(db_path, fake) as tether:
        fake.inject(Fault.malformed_json())
        (result,) = tether.add(text=DOCS["Sensors"], title="Sensors")
        assert result.status == "indexed" and result.warnings
        assert tether.store.counts()["rag_embeddings"] == 0

        fake.inject(Fault.null_values())
        results = tether.search("recessed pin", mode="hybrid")
        assert results.debug["method"] == "lexical"
        assert "NaN" in results.debug["degradations"][0]
        assert results[0].document_id == result.document_id


@pytest.mark.usefixtures("fast_backoff")
def test_same_content_in_two_documents_is_embedded_once(db_path: Path, fake: FakeOpenAI) -> None:
    text = DOCS["Sensors"]
    with open_tether(db_path, fake) as tether:
        (first,) = tether.add(text=text, title="Sensors", document_id="first")
        sent = list(fake.embedded_inputs)
        assert first.chunk_count >= 2
        assert len(sent) == len(set(sent)) == first.chunk_count

        (second,) = tether.add(text=text, title="Sensors", document_id="second")
        assert second.status == "indexed" and second.document_id == "second"
        assert fake.embedded_inputs == sent  # nothing new was sent
        assert embedded_chunk_count(tether, "second") == second.chunk_count
        counts = tether.store.counts()
        assert counts["rag_embeddings"] == counts["rag_chunks"] == 2 * first.chunk_count

        # In one batch: two new documents with the same new content, each chunk sent once.
        fake.clear_requests()
        other = DOCS["Baking"]
        results = tether.add(
            [
                TextSource(other, "Baking", document_id="b1"),
                TextSource(other, "Baking", document_id="b2"),
            ]
        )
        assert [r.status for r in results] == ["indexed", "indexed"]
        contents = [
            embedding_text("Baking", c.section_title, c.content) for c in tether.chunks("b1")
        ]
        assert sorted(fake.embedded_inputs) == sorted(set(contents))
        assert embedded_chunk_count(tether, "b2") == len(contents)


# -- the fake itself, through the SDK --------------------------------------------------------


def test_fake_chat_completions_scripted_then_echo(fake: FakeOpenAI) -> None:
    client = openai.OpenAI(api_key=fake.api_key, base_url=fake.base_url, max_retries=0)
    fake.script_chat("The answer is 42 [1].")
    messages = [
        {"role": "system", "content": "Answer from the context."},
        {"role": "user", "content": "What is the answer?"},
    ]
    first = client.chat.completions.create(model="fake-chat", messages=messages)  # type: ignore[arg-type]
    second = client.chat.completions.create(model="fake-chat", messages=messages)  # type: ignore[arg-type]

    assert first.object == "chat.completion"
    assert first.model == "fake-chat"
    assert first.choices[0].message.role == "assistant"
    assert first.choices[0].message.content == "The answer is 42 [1]."
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None and first.usage.total_tokens > 0
    assert second.choices[0].message.content == "What is the answer?"
    (request, _) = fake.requests_to("/v1/chat/completions")
    assert request.body["messages"] == messages


def test_fake_sdk_default_base64_encoding_matches_float(fake: FakeOpenAI) -> None:
    client = openai.OpenAI(api_key=fake.api_key, base_url=fake.base_url, max_retries=0)
    as_base64 = client.embeddings.create(model=MODEL, input=["alpha beta", "gamma"])
    as_float = client.embeddings.create(
        model=MODEL, input=["alpha beta", "gamma"], encoding_format="float"
    )

    assert fake.embedding_requests[0].body["encoding_format"] == "base64"
    np.testing.assert_allclose(
        [d.embedding for d in as_base64.data], [d.embedding for d in as_float.data], rtol=1e-6
    )
    assert as_float.usage.prompt_tokens == 3


def test_fake_rejects_a_wrong_key_with_an_openai_error_body(fake: FakeOpenAI) -> None:
    client = openai.OpenAI(api_key="sk-nope", base_url=fake.base_url, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.embeddings.create(model=MODEL, input="alpha", encoding_format="float")
    assert info.value.status_code == 401
    assert info.value.code == "invalid_api_key"
    assert info.value.type == "invalid_request_error"
