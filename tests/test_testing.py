"""The shipped test doubles: deterministic, recorded, and good enough to drive a real store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import make_settings
from tether import Tether
from tether.errors import LLMError
from tether.llm import Message
from tether.testing import HashEmbedder, ScriptedChat

PARAGRAPHS = {
    "pump": "The pump moves coolant through the primary loop of the reactor.",
    "valves": "Valves isolate the secondary loop during maintenance windows.",
    "turbines": "Turbines convert steam into rotation that drives the generator.",
}


def ask(text: str) -> list[Message]:
    return [{"role": "user", "content": text}]


def test_hash_embedder_gives_the_same_vectors_on_every_run() -> None:
    texts = list(PARAGRAPHS.values())
    first, second = HashEmbedder().embed(texts), HashEmbedder().embed(texts)
    assert first.shape == (3, 64) and first.dtype == np.float32
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-6)


def test_texts_sharing_words_are_closer_than_texts_that_share_none() -> None:
    query, near, far = HashEmbedder().embed(
        ["coolant pump loop", PARAGRAPHS["pump"], "Turbines convert steam into rotation."]
    )
    assert float(query @ near) > float(query @ far)


def test_hash_embedder_records_its_batches() -> None:
    embedder = HashEmbedder(dims=8, model="hash-8")
    texts = [f"text number {i}" for i in range(20)]
    assert embedder.embed(texts).shape == (20, 8)
    assert [len(call) for call in embedder.calls] == [16, 4]  # batch_size = 16
    assert sorted(embedder.embedded_texts) == sorted(texts)
    assert embedder.model == "hash-8"


def test_scripted_replies_come_in_order_then_run_out() -> None:
    chat = ScriptedChat(["first", "second"])
    assert chat.complete(ask("a")) == "first"
    assert chat.complete(ask("b"), max_tokens=5) == "second"
    with pytest.raises(LLMError, match="no reply left: all 2 scripted replies were used"):
        chat.complete(ask("c"))
    assert chat.calls == [ask("a"), ask("b"), ask("c")]


def test_calls_are_copies_of_the_messages() -> None:
    chat = ScriptedChat(["ok"])
    messages = ask("original")
    chat.complete(messages)
    messages[0]["content"] = "changed later"
    assert chat.calls == [ask("original")]


def test_a_reply_function_answers_every_call() -> None:
    chat = ScriptedChat(lambda messages: messages[-1]["content"].upper())
    assert [chat.complete(ask(t)) for t in ("one", "two", "three")] == ["ONE", "TWO", "THREE"]
    assert len(chat.calls) == 3


@pytest.mark.parametrize(
    "failure", [LLMError("boom"), LLMError("too slow", timeout=True), RuntimeError("bug")]
)
def test_fail_with_is_raised_by_every_call_and_the_call_is_recorded(
    failure: Exception,
) -> None:
    chat = ScriptedChat(["never sent"], fail_with=failure)
    for _ in range(2):
        with pytest.raises(type(failure)) as raised:
            chat.complete(ask("hello"))
        assert raised.value is failure
    assert chat.calls == [ask("hello"), ask("hello")]


def test_acomplete_answers_from_the_same_script() -> None:
    chat = ScriptedChat(["async reply"])
    assert asyncio.run(chat.acomplete(ask("hi"))) == "async reply"
    assert chat.calls == [ask("hi")]


def open_store(tmp_path: Path, chat: ScriptedChat, **rag: object) -> Tether:
    t = Tether(
        db=tmp_path / "t.db", settings=make_settings(**rag), embedder=HashEmbedder(), chat=chat
    )
    for name, text in PARAGRAPHS.items():
        t.add(text=text, title=name.title(), document_id=name)
    return t


def test_the_doubles_drive_a_real_hybrid_search(tmp_path: Path) -> None:
    chat = ScriptedChat([])
    with open_store(tmp_path, chat) as t:
        results = t.search("coolant pump", scope="global", mode="hybrid")
        vector_only = t.search("steam rotation generator", scope="global", mode="vector")
    assert results[0].document_id == "pump"
    assert results.debug["method"] == "hybrid" and results.debug["degradations"] == []
    assert vector_only[0].document_id == "turbines"
    assert chat.calls == []  # search asks no chat model


def test_a_scripted_rewrite_reaches_retrieval(tmp_path: Path) -> None:
    chat = ScriptedChat([json.dumps({"queries": ["steam turbines generator"]})])
    with open_store(tmp_path, chat, enable_query_rewrite=True, min_relevance=0.0) as t:
        result = t.retrieve("How is electricity made?", scope="global")
    assert len(chat.calls) == 1
    assert "How is electricity made?" in chat.calls[0][-1]["content"]
    assert result.debug["rewrite"]["got"] == 1
    assert "turbines" in {c.document_id for c in result.citations}
