"""Chat turns: requests about a document itself, follow-ups made standalone (by rule,
or by a chat model), and what retrieve does with both on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import make_pdf, make_settings
from tether import Filters, InvalidArgument, LLMError, Tether
from tether.retrieve.turns import (
    DocumentRequest,
    document_request,
    is_follow_up,
    standalone_question,
)
from tether.testing import ScriptedChat

HISTORY = [
    {"role": "user", "content": "How do I reset the pressure sensor?"},
    {"role": "assistant", "content": "Hold the reset pin for five seconds [1]."},
]


@pytest.mark.parametrize(
    ("message", "open_document", "expected"),
    [
        ("summarize this", True, DocumentRequest("overview")),
        ("can you summarize this?", True, DocumentRequest("overview")),
        ("summarize this", False, None),  # no open document: reformat the last answer
        ("Summarize this document", False, DocumentRequest("overview")),
        ("what is this PDF about?", False, DocumentRequest("overview")),
        ("give me an overview of the manual", False, DocumentRequest("overview")),
        ("what does page 12 say?", False, DocumentRequest("page", 12)),
        ("and page 12?", False, DocumentRequest("page", 12)),
        ("What does page 3 of this manual say?", False, DocumentRequest("page", 3)),
        ("show me page 3", False, DocumentRequest("page", 3)),
        ("summarize the warranty terms", True, None),
        ("how long is the warranty?", True, None),
        ("on page 12 the pump is rated for 3 bar, is that right?", True, None),
    ],
)
def test_document_requests(message: str, open_document: bool, expected: object) -> None:
    assert document_request(message, open_document=open_document) == expected


@pytest.mark.parametrize(
    ("question", "follow_up"),
    [
        ("and page 12?", True),
        ("what about the battery?", True),
        ("does it need a pin?", True),
        ("How long is the battery warranty for the pressure sensor?", False),
        ("Which torque does the pump housing need?", False),
    ],
)
def test_follow_ups_are_recognised(question: str, follow_up: bool) -> None:
    assert is_follow_up(question) is follow_up
    standalone = standalone_question(question, HISTORY)
    if follow_up:
        assert standalone.startswith(question) and "pressure sensor" in standalone
        assert "assistant" not in standalone and "five" not in standalone  # user turns only
    else:
        assert standalone == question
    assert standalone_question(question, []) == question


def store(tmp_path: Path, **kwargs: object) -> Tether:
    return Tether(db=tmp_path / "t.db", settings=make_settings(), **kwargs)  # type: ignore[arg-type]


def manual(tmp_path: Path) -> Path:
    return make_pdf(
        tmp_path / "manual.pdf",
        [
            "Pressure sensor manual. This guide covers installation and care.",
            "Installation: mount the sensor on the inlet flange with two bolts.",
            "Reset: hold the reset pin for five seconds until the light blinks.",
            "Battery: the coin cell lasts two years and is covered by the warranty.",
        ],
        title="Sensor manual",
    )


def test_a_page_request_reads_that_page_inside_the_scope(tmp_path: Path) -> None:
    with store(tmp_path) as t:
        (doc,) = t.add(manual(tmp_path), session_id="chat", workspace_id="w")
        t.add(text="Page three of another story: dragons.", title="Other", workspace_id="w")
        result = t.retrieve("what does page 3 say?", scope="session", session_id="chat")
        assert result.grounded and result.debug["decision"]["category"] == "document"
        assert {c.page for c in result.citations} == {3}
        assert "reset pin" in result.context
        assert result.debug["document_request"]["kind"] == "page"
        missing = t.retrieve("what does page 40 say?", scope="session", session_id="chat")
        assert not missing.grounded and missing.suggested_scope == "workspace"
        [row] = [r for r in t.retrieval_log() if r.retrieval_id == missing.retrieval_id]
        assert row.outcome == "ungrounded"
        assert doc.document_id in result.debug["document_request"]["documents"]


def test_summarize_this_reads_the_opening_of_the_open_document(tmp_path: Path) -> None:
    with store(tmp_path) as t:
        (doc,) = t.add(manual(tmp_path), session_id="chat", workspace_id="w")
        t.add(text="An unrelated note about dragons.", title="Dragons", session_id="chat")
        only_pdf = Filters(document_ids=(doc.document_id,))
        result = t.retrieve("summarize this", scope="session", session_id="chat",
                            filters=only_pdf)  # fmt: skip
        assert result.grounded
        assert {c.document_id for c in result.citations} == {doc.document_id}
        assert "Pressure sensor manual" in result.context
        # Outside a chat (no open document), "summarize this" reformats the last answer.
        assert not t.retrieve("summarize this", scope="workspace", workspace_id="w").retrieved


def test_a_follow_up_is_searched_with_the_history(tmp_path: Path) -> None:
    with store(tmp_path) as t:
        t.add(manual(tmp_path), workspace_id="w")
        alone = t.retrieve("and the battery?", scope="workspace", workspace_id="w")
        followed = t.retrieve("does it need a pin?", scope="workspace", workspace_id="w",
                              history=HISTORY)  # fmt: skip
        assert followed.debug["standalone"]["by"] == "rules"
        assert followed.debug["standalone"]["changed"] is True
        assert followed.queries[0] != "does it need a pin?"
        assert followed.grounded and any(3 in c.pages for c in followed.citations)
        assert "standalone" not in alone.debug  # no history: the question as asked
        with pytest.raises(InvalidArgument, match="history"):
            t.retrieve("and?", scope="workspace", workspace_id="w", history="not turns")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="role"):
            t.retrieve("and?", scope="workspace", workspace_id="w",
                       history=[{"role": "robot", "content": "x"}])  # fmt: skip


def test_a_chat_model_condenses_and_a_failing_one_falls_back(tmp_path: Path) -> None:
    condensed = json.dumps({"question": "How long does the sensor battery last?"})
    chat = ScriptedChat([condensed])
    with store(tmp_path, chat=chat) as t:
        t.add(manual(tmp_path), workspace_id="w")
        result = t.retrieve("and its battery?", scope="workspace", workspace_id="w",
                            history=HISTORY)  # fmt: skip
        assert result.debug["standalone"] == {
            "question": "How long does the sensor battery last?", "by": "llm", "changed": True
        }  # fmt: skip
        assert result.queries[0] == "How long does the sensor battery last?"
        assert any(4 in c.pages for c in result.citations)
        assert "How do I reset the pressure sensor?" in chat.calls[0][1]["content"]
    failing = ScriptedChat(fail_with=LLMError("timed out", timeout=True))
    with store(tmp_path, chat=failing) as t:
        result = t.retrieve("and its battery?", scope="workspace", workspace_id="w",
                            history=HISTORY)  # fmt: skip
        assert result.debug["standalone"]["by"] == "rules"
        assert any("condensing failed" in d for d in result.debug["degradations"])
