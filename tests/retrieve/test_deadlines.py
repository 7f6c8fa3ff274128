"""One deadline for the model steps of a retrieval, and failures that show in traces.

The model steps of one retrieval (decide, condense, rewrite, rerank, judge) share one
budget: ``[llm] retrieval_budget`` (default: one ``[llm] timeout``), retries included,
and never past what the retrieval's own ``timeout`` leaves after a reserve for the local
stages. A hung endpoint must cost one retrieval about one budget, not one timeout per
step and per retry; a slow model must be skipped rather than make the retrieval raise
``RetrievalTimeout``; the degradations must say how long the model really took.

Every model call is real HTTP through the ``openai`` SDK to the loopback fake in
tests/openai_fake.py (a delay fault that outlasts the test is a hung endpoint; the fake
wakes it when it closes). Wall-clock bounds are generous: these machines are noisy.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from helpers import SlowQueryEmbedder
from openai_fake import FakeOpenAI, Fault
from tether import RetrievalTimeout, Settings, Tether
from tether.errors import LLMError
from tether.llm import OpenAIChat
from tether.models import RetrievalResult

CHAT = "/v1/chat/completions"
MODEL = "gpt-test"
QUESTION = "how do I reset the sensor"
HUNG = Fault.delay(60.0)  # longer than any test: the endpoint never answers
DOCS = {
    "guide": ("Sensor guide", "Reset the sensor by holding the pin for ten seconds."),
    "faq": ("Sensor FAQ", "The sensor light blinks amber when the battery runs low."),
    "router": ("Router manual", "To reset the router, unplug it and wait a minute."),
}
#: Every model step on: the worst case for a hung endpoint.
ALL_STEPS = {
    "decide": "llm",
    "enable_query_rewrite": True,
    "enable_llm_rerank": True,
    "enable_llm_judge": True,
}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


MakeTether = Callable[..., Tether]


@pytest.fixture
def make_tether(db_path: Path, fake: FakeOpenAI) -> Iterator[MakeTether]:
    """``make_tether(llm={...}, **rag)``: a Tether over DOCS whose ``[llm]`` points at the
    fake (``timeout`` 1 s and ``max_retries`` 1 unless ``llm`` says otherwise), warmed up
    so that no test times the first model load."""
    opened: list[Tether] = []

    def make(*, llm: dict[str, Any] | None = None, base_url: str | None = None,
             **rag: Any) -> Tether:  # fmt: skip
        options = {"base_url": base_url or fake.base_url, "api_key": fake.api_key,
                   "model": MODEL, "timeout": 1.0, "max_retries": 1, **(llm or {})}  # fmt: skip
        t = Tether(db=db_path, settings=Settings.load(llm=options, rag=rag))
        opened.append(t)
        if not t.documents():
            for doc_id, (title, text) in DOCS.items():
                t.add(text=text, title=title, document_id=doc_id)
        t.warmup()
        assert t.chat is not None  # made (and the openai SDK imported) before any timing
        return t

    yield make
    for t in opened:
        t.close()


def retrieve(t: Tether, how: str, question: str = QUESTION, **options: Any) -> RetrievalResult:
    if how == "sync":
        return t.retrieve(question, **options)
    return asyncio.run(t.aretrieve(question, **options))


def timed(call: Callable[[], RetrievalResult]) -> tuple[RetrievalResult, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def model_degradations(result: RetrievalResult) -> list[str]:
    """The degradations of the model steps (embeddings are off in these tests)."""
    return [d for d in result.debug["degradations"] if not d.startswith("lexical only")]


def waited(degradation: str) -> float:
    """The seconds a degradation says the model was waited for."""
    found = re.search(r"(?:no answer in|gave up after) (\d+\.\d\d) s", degradation)
    assert found is not None, degradation
    return float(found.group(1))


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# == one budget for all the model steps ========================================================


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_hung_endpoint_costs_one_budget_not_one_timeout_per_step_and_retry(
    fake: FakeOpenAI, make_tether: MakeTether, how: str
) -> None:
    # Before: decide, rewrite, rerank and judge each waited 1 s twice (the retry): ~8 s.
    t = make_tether(**ALL_STEPS)
    fake.outage = HUNG

    result, elapsed = timed(lambda: retrieve(t, how))

    assert elapsed < 2.0  # about one budget (1 s), with room for a noisy machine
    assert result.grounded and result.citations[0].document_id == "guide"
    assert result.debug["decision"]["by"] == "local"
    assert result.debug["rerank"]["method"] == "heuristic"
    decide, rewrite, rerank, judge = model_degradations(result)
    assert decide.startswith("LLM decision failed, local decision used: ")
    assert f"chat model {MODEL!r}: no answer in" in decide
    assert "when the retrieval's 1 s model budget ran out" in decide
    assert 0.9 <= waited(decide) <= elapsed + 0.01  # what it really waited, not a setting
    for skipped, lead in [
        (rewrite, "query rewrite skipped, original query only: "),
        (rerank, "LLM rerank skipped, heuristic order kept: "),
        (judge, "LLM judge skipped, local judgment used: "),
    ]:
        assert skipped.startswith(lead)
        assert re.search(r"\d\.\d\d s left of the retrieval's 1 s model budget$", skipped)
    assert len(fake.requests_to(CHAT)) == 1  # no retry, and no step after the budget
    budget = result.debug["model_budget"]
    assert (budget["seconds"], budget["timeout"]) == (1.0, None)
    assert budget["steps"]["decide"] >= 0.9
    assert {budget["steps"][s] for s in ("rewrite", "rerank", "judge")} == {"skipped"}


def test_the_steps_share_the_budget_and_the_degradation_says_how_long_the_model_took(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    # One attempt may take 5 s, but all the steps together only 2 s.
    t = make_tether(llm={"timeout": 5.0, "retrieval_budget": 2.0}, decide="llm",
                    enable_query_rewrite=True, enable_llm_rerank=True)  # fmt: skip
    fake.inject(Fault.delay(0.6), HUNG)  # the decision is slow, the rewrite never comes
    fake.script_chat(json.dumps({"retrieve": True, "reason": "a how-to"}))

    result, elapsed = timed(lambda: t.retrieve(QUESTION))

    assert elapsed < 3.0
    assert result.debug["decision"]["by"] == "llm"  # answered within the budget
    rewrite, rerank = model_degradations(result)
    assert rewrite.startswith("query rewrite failed, original query only: ")
    assert "no answer within 5s" not in rewrite  # the per-attempt timeout never came
    assert "when the retrieval's 2 s model budget ran out" in rewrite
    steps = result.debug["model_budget"]["steps"]
    assert 0.55 <= steps["decide"] < 1.5 and steps["rerank"] == "skipped"
    # The rewrite waited what the decision left of the budget (give or take a timer's
    # wake-up on a loaded machine), not its own 5 s.
    assert abs(waited(rewrite) - (2.0 - steps["decide"])) <= 0.15
    assert rerank.startswith("LLM rerank skipped, heuristic order kept: ")
    assert result.debug["model_budget"]["spent"] <= 2.2
    assert result.queries == (QUESTION,) and result.grounded


def test_retries_do_not_multiply_the_wait_beyond_the_budget(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    # Four attempts of 0.5 s and their backoff would hold the rewrite for over 3 s.
    t = make_tether(llm={"timeout": 0.5, "max_retries": 3, "retrieval_budget": 2.0},
                    enable_query_rewrite=True)  # fmt: skip
    fake.outage = HUNG

    result, elapsed = timed(lambda: t.retrieve(QUESTION))

    assert elapsed < 3.2
    (rewrite,) = model_degradations(result)
    assert "when the retrieval's 2 s model budget ran out" in rewrite
    assert 1.9 <= waited(rewrite) <= elapsed + 0.01
    assert 2 <= len(fake.requests_to(CHAT)) <= 3  # a retry ran, within the budget


def test_models_that_answer_in_time_are_not_cut_short(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(decide="llm", enable_query_rewrite=True, enable_llm_rerank=True)
    fake.inject(Fault.delay(0.2), Fault.delay(0.2), Fault.delay(0.2))
    fake.script_chat(
        json.dumps({"retrieve": True, "reason": "a how-to"}),
        json.dumps({"queries": ["sensor pin reset"]}),
        json.dumps({"scores": [{"id": 1, "score": 9}]}),
    )

    result = t.retrieve(QUESTION)

    assert model_degradations(result) == []
    assert result.queries == (QUESTION, "sensor pin reset")
    assert result.debug["rerank"]["method"] == "llm"
    budget = result.debug["model_budget"]
    assert set(budget["steps"]) == {"decide", "rewrite", "rerank"}
    assert 0.6 <= budget["spent"] < 3.0  # three 0.2 s answers, far inside the budget


# == the retrieval's own timeout ===============================================================


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_slow_model_is_skipped_within_the_retrieval_timeout_not_raised(
    fake: FakeOpenAI, make_tether: MakeTether, how: str
) -> None:
    # The model budget (10 s) is more than the retrieval's whole timeout (1 s).
    t = make_tether(llm={"timeout": 10.0}, enable_query_rewrite=True, enable_llm_rerank=True,
                    enable_llm_judge=True)  # fmt: skip
    fake.outage = HUNG

    result, elapsed = timed(lambda: retrieve(t, how, timeout=1.0))  # before: RetrievalTimeout

    assert elapsed < 1.0 + 0.5  # asyncio.run adds its own shutdown in the async form
    assert result.grounded and result.context
    rewrite, rerank, judge = model_degradations(result)
    # The model gets the timeout less the local stages' reserve (0.25 s).
    assert "when the 0.75 s of the retrieval's 1 s timeout kept for the model ran out" in rewrite
    assert 0.6 <= waited(rewrite) <= 1.0  # about the 0.75 s kept for it, not its 10 s
    assert rerank.startswith("LLM rerank skipped, heuristic order kept: ")
    assert judge.startswith("LLM judge skipped, local judgment used: ")
    budget = result.debug["model_budget"]
    assert (budget["seconds"], budget["timeout"], budget["allowed"]) == (10.0, 1.0, 0.75)
    (entry,) = t.retrieval_log(limit=1)
    assert entry.outcome == "grounded"


def test_a_timeout_too_short_for_any_model_step_skips_them_all(
    fake: FakeOpenAI, make_tether: MakeTether
) -> None:
    t = make_tether(**ALL_STEPS)

    result = t.retrieve(QUESTION, timeout=0.2)

    assert fake.requests_to(CHAT) == []
    assert result.grounded
    assert len(model_degradations(result)) == 4
    assert all(" skipped, " in d and "0.00 s left" in d for d in model_degradations(result))


def test_a_decision_alone_is_bounded_by_the_budget(
    fake: FakeOpenAI, make_tether: MakeTether, caplog: pytest.LogCaptureFixture
) -> None:
    t = make_tether(decide="llm", llm={"max_retries": 3})
    fake.outage = HUNG

    started = time.perf_counter()
    decision = t.decide(QUESTION)

    assert time.perf_counter() - started < 2.0
    assert decision.by == "local" and decision.needed
    (problem,) = [r.getMessage() for r in caplog.records if r.name == "tether.retrieve"]
    assert problem.startswith("LLM decision failed, local decision used: ")
    assert "when the retrieval's 1 s model budget ran out" in problem


# == the chat model's own timeout says how long it waited =====================================


def test_a_timeout_after_retries_says_how_long_the_call_really_took(fake: FakeOpenAI) -> None:
    chat = OpenAIChat(model=MODEL, api_key=fake.api_key, base_url=fake.base_url,
                      timeout=0.3, max_retries=1)  # fmt: skip
    fake.outage = HUNG

    started = time.perf_counter()
    with pytest.raises(LLMError) as info:
        asyncio.run(chat.acomplete([{"role": "user", "content": "ping"}]))
    elapsed = time.perf_counter() - started

    message = str(info.value)
    assert info.value.timeout is True
    assert "no answer within 0.3s per attempt" in message
    assert 0.6 <= waited(message) <= elapsed + 0.01  # two attempts and a backoff, not 0.3 s
    assert len(fake.requests_to(CHAT)) == 2


# == traces ====================================================================================


@pytest.fixture
def spans(span_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    """The finished spans of the test (one exporter serves the process: conftest)."""
    span_exporter.clear()
    yield span_exporter
    span_exporter.clear()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def exception_events(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == "exception"]


def degradation_events(span: ReadableSpan) -> list[str]:
    return [
        str((e.attributes or {})["rag.degradation"]) for e in span.events if e.name == "degradation"
    ]


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_timed_out_step_is_an_error_on_its_span_and_each_degradation_an_event(
    fake: FakeOpenAI, make_tether: MakeTether, spans: InMemorySpanExporter, how: str
) -> None:
    t = make_tether(**ALL_STEPS)
    fake.outage = HUNG
    spans.clear()

    result = retrieve(t, how)

    (decide,) = named(spans, "decide_retrieval")
    assert decide.status.status_code is StatusCode.ERROR
    assert "model budget ran out" in (decide.status.description or "")
    (event,) = exception_events(decide)
    assert str(event["exception.type"]).endswith(".LLMError")
    assert "no answer in" in str(event["exception.message"])
    # The skipped steps did not fail: no error on their spans, only the skip.
    for name in ("generate_sub_queries", "rerank_chunks", "judge_answerability"):
        (span,) = named(spans, name)
        assert span.status.status_code is StatusCode.UNSET, name
        assert exception_events(span) == [], name
        assert span.attributes is not None and span.attributes["rag.llm.skipped"] is True
    (root,) = named(spans, "rag.retrieve")
    assert degradation_events(root) == result.debug["degradations"]
    assert root.status.status_code is StatusCode.UNSET  # the retrieval itself succeeded


@pytest.mark.parametrize(
    ("step", "span_name", "rag"),
    [
        ("decide", "decide_retrieval", {"decide": "llm"}),
        ("rewrite", "generate_sub_queries", {"enable_query_rewrite": True}),
        ("rerank", "rerank_chunks", {"enable_llm_rerank": True}),
        ("judge", "judge_answerability", {"enable_llm_judge": True}),
    ],
)
def test_a_connection_error_is_an_error_on_the_span_of_its_step(
    make_tether: MakeTether,
    spans: InMemorySpanExporter,
    step: str,
    span_name: str,
    rag: dict[str, Any],
) -> None:
    t = make_tether(base_url=f"http://127.0.0.1:{closed_port()}/v1",
                    llm={"max_retries": 0}, **rag)  # fmt: skip
    spans.clear()

    result = t.retrieve(QUESTION)

    (problem,) = model_degradations(result)
    assert "Connection error" in problem
    (span,) = named(spans, span_name)
    assert span.status.status_code is StatusCode.ERROR
    assert "Connection error" in (span.status.description or "")
    (event,) = exception_events(span)
    assert str(event["exception.type"]).endswith(".LLMError")
    assert isinstance(result.debug["model_budget"]["steps"][step], float)
    (root,) = named(spans, "rag.retrieve")
    assert problem in degradation_events(root)
    assert root.status.status_code is StatusCode.UNSET


def test_a_failed_condensing_is_an_error_on_its_span(
    fake: FakeOpenAI, make_tether: MakeTether, spans: InMemorySpanExporter
) -> None:
    t = make_tether(llm={"max_retries": 0})
    fake.inject(Fault.status(500, "the engine is on fire"))
    history = [{"role": "user", "content": "how do I reset the sensor?"},
               {"role": "assistant", "content": "Hold the pin."}]  # fmt: skip
    spans.clear()

    result = t.retrieve("and the router?", history=history)

    assert result.debug["standalone"]["by"] == "rules"
    (span,) = named(spans, "condense_question")
    assert span.status.status_code is StatusCode.ERROR
    assert "HTTP 500" in (span.status.description or "")
    (root,) = named(spans, "rag.retrieve")
    assert degradation_events(root) == result.debug["degradations"]
    condensing = result.debug["degradations"][0]
    assert condensing.startswith("LLM condensing failed, rule-based follow-up used: ")


def test_a_retrieval_timeout_is_an_error_on_the_retrieve_span(
    db_path: Path, spans: InMemorySpanExporter
) -> None:
    embedder = SlowQueryEmbedder(delay=0.5)
    with Tether(db=db_path, embedder=embedder) as t:
        t.add(text=DOCS["guide"][1], title=DOCS["guide"][0])
        t.warmup()
        embedder.slow = True  # the local search itself is too slow now
        spans.clear()
        with pytest.raises(RetrievalTimeout):
            t.retrieve(QUESTION, timeout=0.2)

    (root,) = named(spans, "rag.retrieve")
    assert root.status.status_code is StatusCode.ERROR
    (event,) = exception_events(root)
    assert str(event["exception.type"]).endswith(".RetrievalTimeout")
    assert "0.2s budget" in str(event["exception.message"])
