"""The chat model and what retrieval asks of it (rewrite, rerank, decide), end to end.

Every LLM call is real HTTP through the ``openai`` SDK to the loopback fake in
tests/openai_fake.py: scripted replies, HTTP errors, delays past the timeout and broken
bodies are the server's doing, never a mocked client. Retrieval runs lexical-only
(conftest turns embeddings off), over a real SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from openai_fake import FakeOpenAI, Fault
from tether import ConfigurationError, Settings, Tether
from tether.errors import LLMError
from tether.llm import OpenAIChat, chat_from_settings, parse_json_reply
from tether.models import RetrievalResult
from tether.settings import LLMSettings

CHAT = "/v1/chat/completions"
MODEL = "gpt-test"
QUESTION = "how do I reset the sensor"  # search terms: reset, sensor
MESSAGES = [{"role": "user", "content": "ping"}]

# Four documents. The question matches the first three (the guide holds both of its
# terms); only a rewrite about gyroscopes can find the fourth.
DOCS = {
    "guide": ("Sensor guide", "Reset the sensor by holding the pin for ten seconds."),
    "faq": ("Sensor FAQ", "The sensor light blinks amber when the battery runs low."),
    "router": ("Router manual", "To reset the router, unplug it and wait a minute."),
    "gyro": ("Calibration", "The calibration wizard aligns gyroscope drift."),
}

BRIEF_TIMEOUT = 0.3  # seconds: the timeout of tests that make the fake answer late
LATE = 1.0  # seconds the fake waits in those tests (it is woken early when it closes)


def rewrites(*queries: str) -> str:
    return json.dumps({"queries": list(queries)})


def scores(*pairs: tuple[int, float]) -> str:
    return json.dumps({"scores": [{"id": i, "score": s} for i, s in pairs]})


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def llm_options(fake: FakeOpenAI, *, timeout: float = 2.0, max_retries: int = 0) -> dict[str, Any]:
    return {
        "base_url": fake.base_url,
        "api_key": fake.api_key,
        "model": MODEL,
        "timeout": timeout,
        "max_retries": max_retries,
    }


def make_chat(fake: FakeOpenAI, *, timeout: float = 2.0, max_retries: int = 0) -> OpenAIChat:
    return OpenAIChat(
        model=MODEL,
        api_key=fake.api_key,
        base_url=fake.base_url,
        timeout=timeout,
        max_retries=max_retries,
    )


MakeTether = Callable[..., Tether]


@pytest.fixture
def make_tether(db_path: Path, fake: FakeOpenAI) -> Iterator[MakeTether]:
    """``make_tether(timeout=..., llm=False, **rag)``: a Tether over the four DOCS whose
    ``[llm]`` points at the fake (or is empty with ``llm=False``)."""
    opened: list[Tether] = []

    def make(*, timeout: float = 2.0, max_retries: int = 0, llm: bool = True, **rag: Any) -> Tether:
        options = llm_options(fake, timeout=timeout, max_retries=max_retries) if llm else {}
        settings = Settings.load(llm=options, rag=rag)
        t = Tether(db=db_path, settings=settings)
        opened.append(t)
        if not t.documents():
            for doc_id, (title, text) in DOCS.items():
                t.add(text=text, title=title, document_id=doc_id)
        return t

    yield make
    for t in opened:
        t.close()


def chat_requests(fake: FakeOpenAI) -> list[Any]:
    return fake.requests_to(CHAT)


def ranked_docs(result: RetrievalResult) -> list[str]:
    return [doc for _, doc, _ in result.debug["ranked"]]


def ranked_chunks(result: RetrievalResult) -> list[int]:
    return [cid for cid, _, _ in result.debug["ranked"]]


def degradations(result: RetrievalResult) -> list[str]:
    """The degradations other than the expected one: embeddings are off in these tests."""
    return [d for d in result.debug["degradations"] if not d.startswith("lexical only")]


def run(t: Tether, how: str, question: str = QUESTION) -> RetrievalResult:
    if how == "sync":
        return t.retrieve(question)
    return asyncio.run(t.aretrieve(question))


# == OpenAIChat over HTTP ======================================================================


def test_complete_returns_the_scripted_reply_and_sends_a_deterministic_request(
    fake: FakeOpenAI,
) -> None:
    fake.script_chat("pong")
    assert make_chat(fake).complete(MESSAGES, max_tokens=77) == "pong"

    (request,) = chat_requests(fake)
    assert request.headers["authorization"] == f"Bearer {fake.api_key}"
    assert request.headers["x-stainless-async"] == "false"  # the sync client
    assert request.body["model"] == MODEL
    assert request.body["messages"] == MESSAGES
    assert request.body["temperature"] == 0
    assert request.body["max_tokens"] == 77


def test_acomplete_returns_the_scripted_reply_through_the_async_client(fake: FakeOpenAI) -> None:
    chat = make_chat(fake)
    fake.script_chat("first", "second")

    async def twice() -> list[str]:
        return [await chat.acomplete(MESSAGES), await chat.acomplete(MESSAGES)]

    assert asyncio.run(twice()) == ["first", "second"]
    # A later event loop gets a working client too.
    fake.script_chat("third")
    assert asyncio.run(chat.acomplete(MESSAGES)) == "third"

    requests = chat_requests(fake)
    assert len(requests) == 3
    assert {r.headers["x-stainless-async"] for r in requests} == {"async:asyncio"}


def _call(chat: OpenAIChat, how: str) -> str:
    if how == "sync":
        return chat.complete(MESSAGES)
    return asyncio.run(chat.acomplete(MESSAGES))


@pytest.mark.parametrize("how", ["sync", "async"])
def test_http_500_is_an_llm_error_naming_the_model_and_status(fake: FakeOpenAI, how: str) -> None:
    fake.inject(Fault.status(500, "the engine is on fire"))
    with pytest.raises(LLMError) as info:
        _call(make_chat(fake), how)

    assert info.value.timeout is False
    message = str(info.value)
    assert "HTTP 500" in message and "the engine is on fire" in message
    assert repr(MODEL) in message and fake.base_url in message
    assert len(chat_requests(fake)) == 1  # max_retries=0: no retry


def test_a_wrong_api_key_is_an_llm_error(fake: FakeOpenAI) -> None:
    chat = OpenAIChat(model=MODEL, api_key="sk-wrong", base_url=fake.base_url, max_retries=0)
    with pytest.raises(LLMError, match="HTTP 401"):
        chat.complete(MESSAGES)


@pytest.mark.parametrize("how", ["sync", "async"])
def test_no_answer_within_the_timeout_is_an_llm_error_marked_timeout(
    fake: FakeOpenAI, how: str
) -> None:
    fake.inject(Fault.delay(LATE))
    started = time.perf_counter()
    with pytest.raises(LLMError) as info:
        _call(make_chat(fake, timeout=BRIEF_TIMEOUT), how)
    elapsed = time.perf_counter() - started

    assert info.value.timeout is True
    assert f"no answer within {BRIEF_TIMEOUT:g}s" in str(info.value)
    assert BRIEF_TIMEOUT * 0.9 <= elapsed < LATE  # it gave up; it did not wait the fake out


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_body_that_is_not_json_is_an_llm_error(fake: FakeOpenAI, how: str) -> None:
    fake.inject(Fault.malformed_json())
    with pytest.raises(LLMError) as info:
        _call(make_chat(fake), how)
    assert info.value.timeout is False


@pytest.mark.parametrize("how", ["sync", "async"])
def test_server_errors_are_retried_when_max_retries_allows(fake: FakeOpenAI, how: str) -> None:
    fake.inject(Fault.status(500))
    fake.script_chat("after the retry")

    assert _call(make_chat(fake, max_retries=1), how) == "after the retry"

    first, second = chat_requests(fake)
    assert first.fault is not None and first.fault.status_code == 500
    assert second.fault is None
    assert [
        first.headers["x-stainless-retry-count"],
        second.headers["x-stainless-retry-count"],
    ] == [
        "0",
        "1",
    ]
    assert second.body == first.body


def test_retries_give_up_with_an_llm_error(fake: FakeOpenAI) -> None:
    fake.outage = Fault.status(503)
    with pytest.raises(LLMError, match="HTTP 503"):
        make_chat(fake, max_retries=1).complete(MESSAGES)
    assert len(chat_requests(fake)) == 2  # the first attempt and one retry, no more


# == chat_from_settings =========================================================================


def test_chat_from_settings_builds_a_working_client_from_llm_settings(fake: FakeOpenAI) -> None:
    llm = Settings.load(llm=llm_options(fake, timeout=1.5, max_retries=0)).llm
    chat, why = chat_from_settings(llm)

    assert why is None
    assert isinstance(chat, OpenAIChat)
    assert (chat.model, chat.base_url, chat.timeout) == (MODEL, fake.base_url, 1.5)
    fake.script_chat("configured")
    assert chat.complete(MESSAGES) == "configured"


@pytest.mark.parametrize(
    ("llm", "reason"),
    [
        ({}, "[llm] model"),
        ({"model": MODEL}, "[llm] api_key"),  # no key and no local base_url
    ],
)
def test_chat_from_settings_says_why_there_is_no_chat_model(
    llm: dict[str, Any], reason: str
) -> None:
    chat, why = chat_from_settings(LLMSettings(**llm))
    assert chat is None
    assert why is not None and reason in why


# == parse_json_reply ===========================================================================


class Reply(BaseModel):
    queries: list[str]


@pytest.mark.parametrize(
    "text",
    [
        '{"queries": ["a", "b"]}',
        '  \n{"queries": ["a", "b"]}\n',
        '```json\n{"queries": ["a", "b"]}\n```',
        '```JSON\n{"queries": ["a", "b"]}\n```',
        '```\n{"queries": ["a", "b"]}\n```',
        'Sure! Here are some phrasings:\n```json\n{"queries": ["a", "b"]}\n```\nHope it helps.',
        'Sure, here you go: {"queries": ["a", "b"]} -- let me know if you need more.',
        'Use {curly braces} for sets. {"queries": ["a", "b"]}',  # a non-JSON brace first
        'See [1]: {"queries": ["a", "b"]}',  # other JSON of the wrong shape first
        '{"note": 1}\n```json\n{"queries": ["a", "b"]}\n```',
    ],
)
def test_parse_json_reply_finds_the_json(text: str) -> None:
    assert parse_json_reply(text, Reply) == Reply(queries=["a", "b"])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("I cannot help with that.", "holds no JSON"),
        ("", "holds no JSON"),
        ('{"queries": ["a", "b"', "holds no JSON"),  # cut off
        ("```json\n{queries: [a]}\n```", "holds no JSON"),  # not JSON at all
    ],
)
def test_parse_json_reply_without_valid_json_is_an_llm_error(text: str, match: str) -> None:
    with pytest.raises(LLMError, match=match):
        parse_json_reply(text, Reply)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"answer": "a"}', "queries"),
        ('{"queries": "a"}', "queries"),
        ('{"queries": ["a", 1]}', "queries.1"),
        ('["a", "b"]', "the top level"),
    ],
)
def test_parse_json_reply_of_the_wrong_shape_is_an_llm_error_naming_the_model(
    text: str, where: str
) -> None:
    with pytest.raises(LLMError) as info:
        parse_json_reply(text, Reply)
    message = str(info.value)
    assert "does not match Reply" in message
    assert message.endswith(f"at {where}")


# == RAG-Fusion: query rewriting in Tether.retrieve ============================================


def test_rewrites_are_retrieved_besides_the_original_and_fused_by_rrf(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True)
    fake.script_chat(rewrites("gyroscope drift alignment", "sensor pin reset"))

    result = t.retrieve(QUESTION)

    assert result.queries == (QUESTION, "gyroscope drift alignment", "sensor pin reset")
    per_query = result.debug["queries"]
    assert [(q["index"], q["query"]) for q in per_query] == list(enumerate(result.queries))
    assert all(q["lexical"] >= 1 for q in per_query)
    assert result.debug["across_queries"] == {"method": "rrf", "rrf_k": 60, "lists": 3}
    assert result.debug["rewrite"] == {"asked": 3, "got": 2, "notes": []}
    assert degradations(result) == []

    (request,) = chat_requests(fake)
    system, user = request.body["messages"]
    assert user == {"role": "user", "content": QUESTION}
    assert "3 different phrasings" in system["content"] and '{"queries"' in system["content"]


def test_a_rewrite_that_alone_matches_a_document_brings_it_into_the_context(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    plain = make_tether(min_relevance=0.0).retrieve(QUESTION)
    assert "gyro" not in ranked_docs(plain)  # the question alone never finds it

    fused = make_tether(enable_query_rewrite=True, min_relevance=0.0)
    fake.script_chat(rewrites("gyroscope drift alignment"))
    result = fused.retrieve(QUESTION)

    assert result.debug["queries"][1]["lexical"] == 1
    assert "gyro" in ranked_docs(result)
    assert "gyro" in {c.document_id for c in result.citations}
    assert "gyroscope drift" in result.context
    assert result.debug["candidates"]["fused"] == len(ranked_docs(plain)) + 1


def test_rewrite_count_caps_the_rewrites_and_is_asked_for(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True, rewrite_count=2)
    fake.script_chat(rewrites("sensor pin reset", "gyroscope drift", "router reset", "faq"))

    result = t.retrieve(QUESTION)

    assert result.queries == (QUESTION, "sensor pin reset", "gyroscope drift")
    assert len(result.debug["queries"]) == 3
    assert result.debug["rewrite"]["got"] == 2
    assert result.debug["rewrite"]["notes"] == ["the model wrote 4 rewrites; kept the first 2"]
    assert "2 different phrasings" in chat_requests(fake)[0].body["messages"][0]["content"]


def test_blank_repeated_and_original_rewrites_are_dropped(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True, rewrite_count=3)
    fake.script_chat(
        rewrites(
            "   ",
            "HOW do I  reset the Sensor",  # the original, differently cased and spaced
            "sensor pin reset",
            "Sensor  PIN reset",  # a repeat
            "  gyroscope\ndrift ",
        )
    )

    result = t.retrieve(QUESTION)

    assert result.queries == (QUESTION, "sensor pin reset", "gyroscope drift")
    notes = result.debug["rewrite"]["notes"]
    assert len(notes) == 3 and all(n.startswith("dropped a blank or repeated") for n in notes)
    assert degradations(result) == []


def test_rewrites_that_are_all_unusable_leave_the_original_alone(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True)
    fake.script_chat(rewrites(QUESTION, "", QUESTION.upper()))

    result = t.retrieve(QUESTION)

    assert result.queries == (QUESTION,)
    assert result.debug["across_queries"] is None
    assert degradations(result) == [
        "query rewrite gave no usable new phrasing, original query only"
    ]
    assert result.grounded


@pytest.mark.parametrize(
    ("fault", "reply", "expected"),
    [
        (None, "Here are three phrasings: reset it, reboot it, restart it.", "holds no JSON"),
        (None, '{"queries": []}', "does not match _Rewrites"),
        (None, '{"rewrites": ["sensor pin"]}', "does not match _Rewrites"),
        (Fault.status(500), None, "HTTP 500"),
        (Fault.status(429), None, "HTTP 429"),
        (Fault.delay(LATE), None, "no answer"),  # the model's timeout or the budget's
    ],
    ids=["prose", "empty-list", "wrong-key", "http-500", "http-429", "timeout"],
)
def test_a_failed_rewrite_falls_back_to_the_original_query(
    fake: FakeOpenAI,
    make_tether: MakeTether,
    fault: Fault | None,
    reply: str | None,
    expected: str,
) -> None:
    t = make_tether(enable_query_rewrite=True, timeout=BRIEF_TIMEOUT)
    if fault is not None:
        fake.inject(fault)
    if reply is not None:
        fake.script_chat(reply)

    started = time.perf_counter()
    result = t.retrieve(QUESTION)
    elapsed = time.perf_counter() - started

    assert result.queries == (QUESTION,)
    assert len(result.debug["queries"]) == 1
    assert result.debug["across_queries"] is None
    assert result.debug["rewrite"]["got"] == 0
    (problem,) = degradations(result)
    assert "original query only" in problem and expected in problem
    assert result.grounded and result.citations[0].document_id == "guide"
    assert len(chat_requests(fake)) == 1  # max_retries=0
    assert elapsed < LATE  # a late model does not hold the turn past the timeout


def test_a_rewrite_response_body_that_is_not_json_falls_back_to_the_original_query(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True)
    fake.inject(Fault.malformed_json())

    result = t.retrieve(QUESTION)

    assert result.queries == (QUESTION,)
    assert any("query rewrite" in d for d in degradations(result))


def test_rewrite_off_sends_no_chat_request(fake: FakeOpenAI, make_tether: MakeTether) -> None:
    t = make_tether(enable_query_rewrite=False, enable_llm_rerank=False, decide="local")
    assert t.chat is not None  # a chat model is configured, only not asked

    result = t.retrieve(QUESTION)

    assert result.queries == (QUESTION,)
    assert "rewrite" not in result.debug
    assert result.grounded
    assert fake.requests == []


# -- RAG_FUSION_* environment variables ---------------------------------------------------------


def test_rag_fusion_env_vars_turn_rewriting_on_and_set_the_count(
    fake: FakeOpenAI, make_tether: MakeTether, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_FUSION_ENABLED", "true")
    monkeypatch.setenv("RAG_FUSION_QUERY_COUNT", "2")
    t = make_tether()
    assert (t.settings.rag.enable_query_rewrite, t.settings.rag.rewrite_count) == (True, 2)
    fake.script_chat(rewrites("sensor pin reset", "gyroscope drift", "router reset"))

    result = t.retrieve(QUESTION)

    assert result.queries == (QUESTION, "sensor pin reset", "gyroscope drift")
    assert "2 different phrasings" in chat_requests(fake)[0].body["messages"][0]["content"]


@pytest.mark.parametrize(
    ("value", "enabled"),
    [("1", True), ("YES", True), (" on ", True), ("false", False), ("0", False), ("off", False)],
)
def test_rag_fusion_enabled_accepts_the_usual_booleans(
    monkeypatch: pytest.MonkeyPatch, value: str, enabled: bool
) -> None:
    monkeypatch.setenv("RAG_FUSION_ENABLED", value)
    assert Settings.load().rag.enable_query_rewrite is enabled


def test_rag_fusion_enabled_false_sends_no_chat_request(
    fake: FakeOpenAI, make_tether: MakeTether, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_FUSION_ENABLED", "false")
    result = make_tether().retrieve(QUESTION)
    assert result.queries == (QUESTION,)
    assert chat_requests(fake) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RAG_FUSION_ENABLED", "maybe"),
        ("RAG_FUSION_ENABLED", "2"),
        ("RAG_FUSION_QUERY_COUNT", "4"),
        ("RAG_FUSION_QUERY_COUNT", "0"),
        ("RAG_FUSION_QUERY_COUNT", "two"),
        ("RAG_FUSION_QUERY_COUNT", "2.0"),
    ],
)
def test_invalid_rag_fusion_values_are_configuration_errors_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as info:
        Settings.load()
    assert name in str(info.value) and repr(value) in str(info.value)


def test_tether_rag_variables_win_over_rag_fusion_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_FUSION_QUERY_COUNT", "3")
    monkeypatch.setenv("RAG_FUSION_ENABLED", "true")
    monkeypatch.setenv("TETHER_RAG__REWRITE_COUNT", "1")
    monkeypatch.setenv("TETHER_RAG__ENABLE_QUERY_REWRITE", "false")

    rag = Settings.load().rag

    assert (rag.rewrite_count, rag.enable_query_rewrite) == (1, False)


def test_explicit_arguments_win_over_rag_fusion_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_FUSION_ENABLED", "true")
    monkeypatch.setenv("RAG_FUSION_QUERY_COUNT", "3")

    rag = Settings.load(rag={"enable_query_rewrite": False, "min_relevance": 0.5}).rag

    assert (rag.enable_query_rewrite, rag.rewrite_count, rag.min_relevance) == (False, 3, 0.5)


# == no chat model configured ==================================================================


def test_without_a_chat_model_rewrite_rerank_and_decide_degrade_and_results_still_come(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(llm=False, enable_query_rewrite=True, enable_llm_rerank=True, decide="llm")
    assert t.chat is None
    assert t.chat_unavailable is not None and "[llm] model" in t.chat_unavailable

    result = t.retrieve(QUESTION)

    assert result.retrieved and result.grounded
    assert result.queries == (QUESTION,)
    assert result.citations[0].document_id == "guide"
    assert result.debug["decision"]["by"] == "local"
    assert result.debug["rerank"]["method"] == "heuristic"
    problems = degradations(result)
    assert len(problems) == 3
    decide, rewrite, rerank = problems
    assert decide.startswith("LLM decision unavailable") and "[llm] model" in decide
    assert rewrite.startswith("query rewrite is on but") and "[llm] model" in rewrite
    assert rerank.startswith("LLM rerank is on but") and "[llm] model" in rerank
    assert "heuristic order kept" in rerank
    assert fake.requests == []


# == LLM rerank ================================================================================


def heuristic_order(make_tether: MakeTether) -> list[int]:
    """The ranked chunk ids with the LLM rerank off (the order it must keep on failure)."""
    order = ranked_chunks(make_tether().retrieve(QUESTION))
    assert len(order) == 3  # guide, faq, router
    return order


def test_llm_rerank_reorders_the_top_candidates_by_the_model_scores(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    before = heuristic_order(make_tether)
    t = make_tether(enable_llm_rerank=True)
    fake.script_chat(scores((2, 9), (1, 1), (3, 0)))

    result = t.retrieve(QUESTION)

    first, second, third = before
    assert ranked_chunks(result) == [second, first, third]
    assert result.selected_chunk_ids[0] == second
    assert result.context.startswith(f"[1] {DOCS[result.citations[0].document_id][0]}")
    rerank = result.debug["rerank"]
    assert rerank["method"] == "llm"
    assert (rerank["scored"], rerank["unscored"]) == (3, 0)
    assert rerank["llm_scores"] == {second: 9, first: 1, third: 0}
    assert rerank["heuristic"]["method"] == "heuristic"
    assert degradations(result) == []

    (request,) = chat_requests(fake)
    system, user = request.body["messages"]
    assert '"scores"' in system["content"]
    assert user["content"].startswith(f"Question: {QUESTION}")
    for _, text in (DOCS["guide"], DOCS["faq"], DOCS["router"]):
        assert text in user["content"]
    assert request.body["max_tokens"] == 40 + 16 * 3


def test_llm_rerank_sends_at_most_llm_candidates_and_keeps_the_rest_in_order(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    before = heuristic_order(make_tether)
    t = make_tether(enable_llm_rerank=True, rerank={"llm_candidates": 2})
    fake.script_chat(scores((2, 9), (1, 1)))

    result = t.retrieve(QUESTION)

    first, second, third = before
    assert ranked_chunks(result) == [second, first, third]
    (request,) = chat_requests(fake)
    user = request.body["messages"][1]["content"]
    assert "[1] " in user and "[2] " in user and "[3] " not in user
    passages = [text for _, text in DOCS.values() if text in user]
    assert len(passages) == 2
    assert request.body["max_tokens"] == 40 + 16 * 2
    assert result.debug["rerank"]["llm_scores"] == {second: 9, first: 1}


def test_llm_rerank_unscored_passages_go_after_the_scored_ones(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    first, second, third = heuristic_order(make_tether)
    t = make_tether(enable_llm_rerank=True)
    fake.script_chat(scores((3, 4), (3, 10), (7, 10)))  # a repeat and an unknown id

    result = t.retrieve(QUESTION)

    assert ranked_chunks(result) == [third, first, second]
    rerank = result.debug["rerank"]
    assert (rerank["scored"], rerank["unscored"]) == (1, 2)
    assert rerank["llm_scores"] == {third: 4}  # the first score given for an id counts


def test_llm_rerank_timeout_keeps_the_heuristic_order(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    before = heuristic_order(make_tether)
    t = make_tether(enable_llm_rerank=True, timeout=BRIEF_TIMEOUT)
    fake.inject(Fault.delay(LATE))

    started = time.perf_counter()
    result = t.retrieve(QUESTION)

    assert time.perf_counter() - started < LATE
    assert ranked_chunks(result) == before
    assert result.debug["rerank"]["method"] == "heuristic"
    (problem,) = degradations(result)
    assert problem.startswith("LLM rerank timed out, heuristic order kept")
    assert "no answer" in problem  # within the model's timeout, or the retrieval's budget
    assert result.grounded


@pytest.mark.parametrize(
    ("fault", "reply", "expected"),
    [
        (None, "Passage two looks best to me.", "holds no JSON"),
        (None, scores((1, 11)), "does not match _Scores"),
        (None, '{"scores": []}', "does not match _Scores"),
        (None, scores((9, 10), (0, 5)), "scored none of the passages"),
        (Fault.status(500), None, "HTTP 500"),
    ],
    ids=["prose", "score-out-of-range", "no-scores", "unknown-ids", "http-500"],
)
def test_llm_rerank_failure_keeps_the_heuristic_order(
    fake: FakeOpenAI,
    make_tether: MakeTether,
    fault: Fault | None,
    reply: str | None,
    expected: str,
) -> None:
    before = heuristic_order(make_tether)
    t = make_tether(enable_llm_rerank=True)
    if fault is not None:
        fake.inject(fault)
    if reply is not None:
        fake.script_chat(reply)

    result = t.retrieve(QUESTION)

    assert ranked_chunks(result) == before
    assert result.debug["rerank"]["method"] == "heuristic"
    (problem,) = degradations(result)
    assert problem.startswith("LLM rerank failed, heuristic order kept") and expected in problem
    assert result.grounded and result.selected_chunk_ids[0] == before[0]


# == LLM decision ==============================================================================


def test_llm_decision_can_skip_retrieval(fake: FakeOpenAI, make_tether: MakeTether) -> None:
    t = make_tether(decide="llm", enable_query_rewrite=True, enable_llm_rerank=True)
    fake.script_chat(json.dumps({"retrieve": False, "reason": "chit-chat"}))

    result = t.retrieve(QUESTION)  # the local rules would retrieve for this

    assert result.retrieved is False
    assert result.context == "" and result.citations == ()
    assert result.queries == (QUESTION,)
    assert result.debug["decision"] == {
        "needed": False,
        "category": "small_talk",
        "reason": "chit-chat",
        "by": "llm",
    }
    assert "queries" not in result.debug
    (request,) = chat_requests(fake)  # no rewrite, no rerank after a skip
    system, user = request.body["messages"]
    assert '"retrieve"' in system["content"]
    assert user == {"role": "user", "content": QUESTION}
    assert request.body["max_tokens"] == 100


def test_llm_decision_can_retrieve_where_the_local_rules_would_not(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(decide="llm")
    fake.script_chat('```json\n{"retrieve": true, "reason": "asks about the sensor"}\n```')

    result = t.retrieve("hello there")  # a greeting, skipped by the local rules

    assert result.retrieved is True
    assert result.debug["decision"]["by"] == "llm"
    assert result.debug["decision"]["reason"] == "asks about the sensor"
    assert "queries" in result.debug


def test_llm_decision_then_rewrite_then_rerank_each_ask_the_model_once_in_order(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    first, second, third = heuristic_order(make_tether)
    t = make_tether(decide="llm", enable_query_rewrite=True, enable_llm_rerank=True)
    fake.script_chat(
        json.dumps({"retrieve": True, "reason": "a how-to"}),
        rewrites("sensor pin reset"),
        scores((3, 10), (1, 2), (2, 1)),
    )

    result = t.retrieve(QUESTION)

    assert result.debug["decision"]["by"] == "llm"
    assert result.queries == (QUESTION, "sensor pin reset")
    assert result.debug["rerank"]["method"] == "llm"
    assert len(result.debug["rerank"]["llm_scores"]) == 3
    assert degradations(result) == []
    systems = [r.body["messages"][0]["content"] for r in chat_requests(fake)]
    assert len(systems) == 3
    assert '"retrieve"' in systems[0] and '"queries"' in systems[1] and '"scores"' in systems[2]
    assert {first, second, third} == set(ranked_chunks(result))


@pytest.mark.parametrize(
    ("fault", "reply", "expected"),
    [
        (Fault.status(500), None, "HTTP 500"),
        (Fault.delay(LATE), None, "no answer"),
        (None, "Sure, I'd search for that.", "holds no JSON"),
        (None, '{"retrieve": "perhaps"}', "does not match _LLMDecision"),
    ],
    ids=["http-500", "timeout", "prose", "wrong-shape"],
)
def test_llm_decision_failure_falls_back_to_the_local_decision(
    fake: FakeOpenAI,
    make_tether: MakeTether,
    fault: Fault | None,
    reply: str | None,
    expected: str,
) -> None:
    t = make_tether(decide="llm", timeout=BRIEF_TIMEOUT)

    def fail_next() -> None:
        if fault is not None:
            fake.inject(fault)
        if reply is not None:
            fake.script_chat(reply)

    fail_next()
    question = t.retrieve(QUESTION)
    fail_next()
    thanks = t.retrieve("thanks a lot!")

    assert question.retrieved and question.grounded
    assert question.debug["decision"]["by"] == "local"
    assert thanks.retrieved is False
    assert thanks.debug["decision"] == {
        "needed": False,
        "category": "thanks",
        "reason": "thanks: no retrieval needed",
        "by": "local",
    }
    for result in (question, thanks):
        (problem,) = degradations(result)
        assert (
            problem.startswith("LLM decision failed, local decision used") and expected in problem
        )
    # Both calls reached the server: a request the client gave up on is recorded when the
    # server's thread reads it, which on a loaded machine is after the client returned.
    deadline = time.monotonic() + 10
    while len(chat_requests(fake)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(chat_requests(fake)) == 2


# == aretrieve =================================================================================


def test_aretrieve_uses_the_async_client_and_matches_retrieve(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True, enable_llm_rerank=True)
    replies = (rewrites("gyroscope drift alignment", "sensor pin reset"), scores((2, 9), (1, 3)))
    fake.script_chat(*replies)
    sync = t.retrieve(QUESTION)
    fake.script_chat(*replies)

    async def main() -> RetrievalResult:
        return await t.aretrieve(QUESTION)

    async_ = asyncio.run(main())

    assert (
        async_.queries
        == sync.queries
        == (
            QUESTION,
            "gyroscope drift alignment",
            "sensor pin reset",
        )
    )
    assert ranked_chunks(async_) == ranked_chunks(sync)
    assert async_.selected_chunk_ids == sync.selected_chunk_ids
    assert async_.context == sync.context
    assert async_.debug["rerank"]["method"] == sync.debug["rerank"]["method"] == "llm"
    requests = chat_requests(fake)
    assert len(requests) == 4
    assert {r.headers["x-stainless-async"] for r in requests} == {"async:asyncio"}
    assert [r.body for r in requests[2:]] == [r.body for r in requests[:2]]


def test_aretrieve_calls_run_concurrently_on_one_loop(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True)
    fake.script_chat(rewrites("sensor pin reset"), rewrites("sensor pin reset"))

    async def main() -> list[RetrievalResult]:
        return list(await asyncio.gather(t.aretrieve(QUESTION), t.aretrieve(QUESTION)))

    results = asyncio.run(main())

    assert [r.queries for r in results] == [(QUESTION, "sensor pin reset")] * 2
    assert all(r.grounded and degradations(r) == [] for r in results)
    assert len(chat_requests(fake)) == 2


def test_aretrieve_timeout_degrades_without_blocking_the_loop(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True, timeout=BRIEF_TIMEOUT)
    fake.inject(Fault.delay(LATE))
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.02)

    async def main() -> RetrievalResult:
        task = asyncio.create_task(ticker())
        try:
            return await t.aretrieve(QUESTION)
        finally:
            task.cancel()

    result = asyncio.run(main())

    assert result.queries == (QUESTION,)
    (problem,) = degradations(result)
    assert "query rewrite failed" in problem and "no answer" in problem
    assert len(ticks) >= 5  # the loop kept running while the model was awaited


def test_retrieve_works_inside_a_running_event_loop(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(enable_query_rewrite=True)
    fake.script_chat(rewrites("sensor pin reset"))

    async def main() -> RetrievalResult:
        return t.retrieve(QUESTION)  # the sync API, called from async code

    result = asyncio.run(main())

    assert result.queries == (QUESTION, "sensor pin reset")


# == OpenTelemetry spans =======================================================================


@pytest.fixture
def spans(span_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    span_exporter.clear()
    yield span_exporter
    span_exporter.clear()


def finished(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    # The first retrieval of a Tether warms up first, in a root span of its own.
    return [s for s in exporter.get_finished_spans() if s.name != "tether.warm_up"]


def only_root(spans: list[ReadableSpan]) -> ReadableSpan:
    roots = [s for s in spans if s.name == "rag.retrieve"]
    assert len(roots) == 1
    return roots[0]


def children_of(root: ReadableSpan, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    others = [s for s in spans if s is not root]
    assert root.context is not None
    for span in others:
        assert span.parent is not None, span.name
        assert span.parent.span_id == root.context.span_id, span.name
        assert span.context is not None and span.context.trace_id == root.context.trace_id
    return others


@pytest.mark.parametrize("how", ["sync", "async"])
def test_spans_with_rewriting_on(
    fake: FakeOpenAI, make_tether: MakeTether, spans: InMemorySpanExporter, how: str
) -> None:
    t = make_tether(enable_query_rewrite=True, enable_llm_rerank=True)
    fake.script_chat(rewrites("gyroscope drift alignment", "sensor pin reset"), scores((1, 9)))
    spans.clear()  # indexing the documents is not part of the trace under test

    run(t, how)

    recorded = finished(spans)
    root = only_root(recorded)
    assert root.parent is None
    assert root.attributes is not None
    assert root.attributes["rag.queries"] == 3
    assert root.attributes["rag.grounded"] is True
    assert root.attributes["rag.scope.kind"] == "global"
    children = children_of(root, recorded)
    assert Counter(s.name for s in children) == {
        "generate_sub_queries": 1,
        "retrieve": 3,
        "rerank_chunks": 1,
        "build_context": 1,
    }
    by_name = {s.name: s for s in children}
    indexes = sorted(s.attributes["rag.query_index"] for s in children if s.name == "retrieve")
    assert indexes == [0, 1, 2]
    sub = by_name["generate_sub_queries"]
    assert (sub.attributes["rag.rewrite_count"], sub.attributes["rag.rewrites"]) == (3, 2)
    assert by_name["rerank_chunks"].attributes["rag.rerank.method"] == "llm"
    assert by_name["build_context"].attributes["rag.context.chunks"] >= 1
    # The sub-queries are generated before any retrieval starts.
    first_retrieve = min(s.start_time for s in children if s.name == "retrieve")
    assert sub.end_time <= first_retrieve


@pytest.mark.parametrize("how", ["sync", "async"])
def test_spans_with_rewriting_off(
    make_tether: MakeTether, spans: InMemorySpanExporter, how: str
) -> None:
    t = make_tether()
    spans.clear()

    run(t, how)

    recorded = finished(spans)
    root = only_root(recorded)
    assert root.parent is None
    children = children_of(root, recorded)
    assert sorted(s.name for s in children) == ["build_context", "rerank_chunks", "retrieve"]
    (retrieve,) = (s for s in children if s.name == "retrieve")
    assert retrieve.attributes["rag.query_index"] == 0
    assert root.attributes["rag.queries"] == 1


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_skipped_retrieval_has_only_the_root_span(
    make_tether: MakeTether, spans: InMemorySpanExporter, how: str
) -> None:
    t = make_tether(enable_query_rewrite=True)
    spans.clear()

    result = run(t, how, "hello!")

    assert result.retrieved is False
    (root,) = finished(spans)
    assert root.name == "rag.retrieve"
    assert root.attributes is not None
    assert root.attributes["rag.skipped"] == "greeting: no retrieval needed"
    assert "rag.queries" not in root.attributes


@pytest.mark.parametrize("how", ["sync", "async"])
def test_the_callers_span_is_the_parent_of_rag_retrieve(
    fake: FakeOpenAI, make_tether: MakeTether, spans: InMemorySpanExporter, how: str
) -> None:
    t = make_tether(enable_query_rewrite=True)
    fake.script_chat(rewrites("sensor pin reset"))
    spans.clear()
    tracer = trace.get_tracer("test-caller")

    if how == "sync":
        with tracer.start_as_current_span("chat.turn") as caller:
            t.retrieve(QUESTION)
    else:

        async def main() -> trace.Span:
            with tracer.start_as_current_span("chat.turn") as span:
                await t.aretrieve(QUESTION)
            return span

        caller = asyncio.run(main())

    recorded = finished(spans)
    root = only_root(recorded)
    caller_context = caller.get_span_context()
    assert root.parent is not None
    assert root.parent.span_id == caller_context.span_id
    assert root.context is not None and root.context.trace_id == caller_context.trace_id
    assert (
        Counter(s.name for s in children_of(root, [s for s in recorded if s.name != "chat.turn"]))[
            "retrieve"
        ]
        == 2
    )
    assert [s.name for s in recorded].count("chat.turn") == 1
