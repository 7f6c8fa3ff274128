"""tether.graph: the LangGraph RAG subgraph, its routing, its state and config contract,
the prompt helper and the LangChain retriever, against real SQLite stores and the real
langgraph / langchain-core."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from helpers import REPO_ROOT, make_pdf, make_settings
from tether import ScopeError, Tether
from tether.graph import (
    GROUNDED_NOTE,
    RagState,
    TetherRetriever,
    build_rag_subgraph,
    question_from_state,
    rag_prompt_block,
    route,
    with_rag_context,
)

SESSION = "chat-1"
OTHER_SESSION = "chat-2"
WORKSPACE = "lumen"
OTHER_WORKSPACE = "acme"
QUESTION = "what is the sensor policy?"
RAG_KEYS = {
    "rag_context",
    "rag_citations",
    "rag_grounded",
    "rag_used",
    "rag_scope",
    "rag_selected_chunk_ids",
    "rag_queries",
    "rag_debug",
}
INTERNAL_KEYS = {"rag_route", "rag_route_reason", "rag_decision"}
RAG_NODES = {"local_rag_node", "global_rag_node", "skip_rag"}
GLOBAL_SCOPE = {"kind": "global", "id": "GLOBAL"}


# -- the store and the parent graph ------------------------------------------------------


@dataclass
class Store:
    """A real store: every scope holds documents that match QUESTION, so a retrieval
    that looked in the wrong scope shows up as foreign chunk ids."""

    t: Tether
    docs: dict[str, list[str]] = field(default_factory=dict)  # scope name -> document ids

    def chunk_ids(self, name: str) -> set[int]:
        return {c.id for doc_id in self.docs[name] for c in self.t.chunks(doc_id)}


def _add(t: Tether, text: str, title: str, **where: Any) -> str:
    (result,) = t.add(text=text, title=title, **where)
    assert result.status == "indexed" and result.document_id
    return result.document_id


def _fill(t: Tether) -> Store:
    t.create_session(SESSION, workspace_id=WORKSPACE)
    t.create_session(OTHER_SESSION, workspace_id=OTHER_WORKSPACE)
    store = Store(t)
    in_session = {"workspace_id": WORKSPACE, "session_id": SESSION}
    store.docs["session"] = [
        _add(t, "The sensor warranty policy covers the battery for two years.", "Sensor notes",
             document_id="doc-open", **in_session),
        _add(t, "The sensor setup policy says: calibrate the dial before first use.",
             "Setup notes", **in_session),
    ]  # fmt: skip
    store.docs["workspace"] = [
        _add(t, "Workspace handbook: the sensor escalation policy sends tickets to tier two.",
             "Handbook", workspace_id=WORKSPACE),
    ]  # fmt: skip
    store.docs["global"] = [
        _add(t, "Returns policy: a sensor may be returned within 30 days.", "Returns"),
    ]
    store.docs["other"] = [
        _add(t, "The pump sensor policy: replace the gasket every spring.", "Pump manual",
             workspace_id=OTHER_WORKSPACE, session_id=OTHER_SESSION),
        _add(t, "Pump sensor service policy: the filter is washed monthly.", "Pump service",
             workspace_id=OTHER_WORKSPACE, session_id=OTHER_SESSION),
    ]  # fmt: skip
    return store


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    with Tether(db=db_path, settings=make_settings()) as t:
        yield _fill(t)


class ChatState(RagState, total=False):
    messages: Annotated[list[Any], add_messages]
    user_profile: dict[str, Any]
    counter: int
    route_note: str


def parent_graph(t: Tether, seen: list[dict[str, Any]] | None = None) -> Any:
    """START -> router -> rag (the subgraph) -> respond -> END, as a chat app builds it."""

    def router(state: ChatState) -> dict[str, Any]:
        return {"route_note": f"turn {len(state['messages'])}"}

    def respond(state: ChatState) -> dict[str, Any]:
        if seen is not None:
            seen.append(dict(state))
        prompt = with_rag_context(list(state["messages"]), state)
        return {"messages": [AIMessage(content=f"answer from {len(prompt)} messages")]}

    builder = StateGraph(ChatState)
    builder.add_node("router", router)
    builder.add_node("rag", build_rag_subgraph(t))
    builder.add_node("respond", respond)
    builder.add_edge(START, "router")
    builder.add_edge("router", "rag")
    builder.add_edge("rag", "respond")
    builder.add_edge("respond", END)
    return builder.compile()


def chat_input(question: str = QUESTION, **extra: Any) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=question)], **extra}


def conf(**configurable: Any) -> dict[str, Any]:
    return {"configurable": configurable}


@dataclass
class Run:
    state: dict[str, Any]
    steps: list[tuple[str, str, dict[str, Any]]]  # (namespace, node, update), in order

    @property
    def nodes(self) -> list[str]:
        return [node for _, node, _ in self.steps]

    def rag_nodes(self) -> list[str]:
        return [n for n in self.nodes if n in RAG_NODES]


def stream(
    graph: Any, state: dict[str, Any], config: dict[str, Any], into: Run | None = None
) -> Run:
    """Run ``graph`` and record every node update (subgraphs included) and the final state.
    ``into`` collects the steps even when the run raises."""
    run = into if into is not None else Run({}, [])
    for namespace, mode, data in graph.stream(
        state, config, stream_mode=["updates", "values"], subgraphs=True
    ):
        if mode == "values" and not namespace:
            run.state = data
        elif mode == "updates":
            for node, update in data.items():
                run.steps.append(("/".join(namespace), node, update or {}))
    return run


# -- 1. routing: both routes and the skip -------------------------------------------------


ROUTES = [
    pytest.param(
        conf(session_id=SESSION, conversation_mode="chatpdf"), {},
        "local_rag_node", "session", {"kind": "session", "id": SESSION},
        "mode=chatpdf -> local_rag_node", ("session",), id="chatpdf",
    ),
    pytest.param(
        conf(session_id=SESSION, conversation_mode="normal"), {},
        "global_rag_node", "global", GLOBAL_SCOPE,
        "mode=normal -> global_rag_node", ("global",), id="normal",
    ),
    pytest.param(
        conf(), {},
        "global_rag_node", "global", GLOBAL_SCOPE,
        "mode=normal -> global_rag_node", ("global",), id="no-config",
    ),
    pytest.param(
        conf(session_id=SESSION, rag_scope="workspace", workspace_id=WORKSPACE), {},
        "global_rag_node", "workspace", {"kind": "workspace", "id": WORKSPACE},
        "mode=normal -> global_rag_node", ("workspace", "session"), id="workspace-scope",
    ),
    pytest.param(
        conf(session_id=SESSION), {"active_pdf_document_id": "doc-open"},
        "local_rag_node", "session", {"kind": "session", "id": SESSION},
        "active_pdf_document_id=doc-open -> local_rag_node", ("session",), id="active-pdf",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("config", "extra", "node", "used", "scope", "reason", "docs"), ROUTES)
def test_routes_to_exactly_one_rag_node_with_the_right_scope(
    store: Store,
    config: dict[str, Any],
    extra: dict[str, Any],
    node: str,
    used: str,
    scope: dict[str, str],
    reason: str,
    docs: tuple[str, ...],
) -> None:
    run = stream(parent_graph(store.t), chat_input(**extra), config)
    assert run.rag_nodes() == [node]
    out = run.state
    assert out["rag_used"] == used == scope["kind"]  # the scope searched, not the node
    assert out["rag_scope"] == scope
    assert out["rag_debug"]["route_reason"] == reason
    assert out["rag_debug"]["node"] == node
    assert out["rag_grounded"] is True
    selected = set(out["rag_selected_chunk_ids"])
    assert selected and selected <= set().union(*(store.chunk_ids(n) for n in docs))
    # Every other scope's documents also match the question: none of them got in.
    others = set().union(*(store.chunk_ids(n) for n in store.docs if n not in docs))
    assert not selected & others


def test_a_pdf_attached_to_the_session_routes_local_even_in_normal_mode(
    store: Store, tmp_path: Path
) -> None:
    pdf = make_pdf(
        tmp_path / "manual.pdf",
        ["The sensor policy in this manual: recalibrate the sensor every week.",
         "Page two lists the spare parts."],
        title="Sensor manual",
    )  # fmt: skip
    graph = parent_graph(store.t)
    config = conf(session_id=SESSION, conversation_mode="normal")

    before = stream(graph, chat_input(), config)
    assert before.rag_nodes() == ["global_rag_node"]  # no PDF yet: the global library

    (result,) = store.t.add(pdf, workspace_id=WORKSPACE, session_id=SESSION)
    assert result.status == "indexed"
    assert store.t.get_document(result.document_id).mime == "application/pdf"
    run = stream(graph, chat_input(), config)
    assert run.rag_nodes() == ["local_rag_node"]
    assert run.state["rag_used"] == "session"
    assert run.state["rag_scope"] == {"kind": "session", "id": SESSION}
    assert run.state["rag_debug"]["route_reason"] == (
        "mode=normal, session has a PDF attached -> local_rag_node"
    )
    pdf_chunks = {c.id for c in store.t.chunks(result.document_id)}
    assert set(run.state["rag_selected_chunk_ids"]) & pdf_chunks
    assert set(run.state["rag_selected_chunk_ids"]) <= pdf_chunks | store.chunk_ids("session")

    # Detached, the PDF no longer pulls the session's normal-mode turns local.
    assert store.t.detach(result.document_id, SESSION)
    assert stream(graph, chat_input(), config).rag_nodes() == ["global_rag_node"]


def test_a_pdf_in_another_session_does_not_route_this_session_local(
    store: Store, tmp_path: Path
) -> None:
    pdf = make_pdf(tmp_path / "other.pdf", ["The sensor policy of the other chat."])
    store.t.add(pdf, workspace_id=OTHER_WORKSPACE, session_id=OTHER_SESSION)
    run = stream(parent_graph(store.t), chat_input(), conf(session_id=SESSION))
    assert run.rag_nodes() == ["global_rag_node"]
    assert run.state["rag_scope"] == GLOBAL_SCOPE


def test_rag_disabled_skips_retrieval(db_path: Path) -> None:
    with Tether(db=db_path, settings=make_settings(enabled=False)) as t:
        _fill(t)
        for config in (conf(session_id=SESSION, conversation_mode="chatpdf"), conf()):
            run = stream(parent_graph(t), chat_input(), config)
            assert run.rag_nodes() == ["skip_rag"]
            out = run.state
            assert out["rag_used"] == "none"
            assert out["rag_grounded"] is False
            assert out["rag_context"] == ""
            assert out["rag_citations"] == [] and out["rag_selected_chunk_ids"] == []
            assert out["rag_scope"] is None
            assert out["rag_queries"] == [QUESTION]
            assert out["rag_debug"]["route_reason"] == "rag disabled -> skipped"
            assert out["rag_debug"]["node"] == "skip_rag"
            assert out["rag_debug"]["decision"]["needed"] is False


@pytest.mark.parametrize("mode", ["normal", "chatpdf"])
def test_a_greeting_skips_with_the_decision_reason(store: Store, mode: str) -> None:
    config = conf(session_id=SESSION, conversation_mode=mode)
    run = stream(parent_graph(store.t), chat_input("hi there!"), config)
    assert run.rag_nodes() == ["skip_rag"]
    out = run.state
    assert out["rag_used"] == "none"
    assert out["rag_grounded"] is False and out["rag_selected_chunk_ids"] == []
    assert out["rag_debug"]["route_reason"] == "decision: greeting: no retrieval needed -> skipped"
    assert out["rag_debug"]["decision"] == {
        "needed": False,
        "category": "greeting",
        "reason": "greeting: no retrieval needed",
        "by": "local",
    }
    assert "_question" not in out["rag_debug"]["decision"]


def test_the_question_field_wins_over_the_last_human_message(store: Store) -> None:
    state = {
        "question": QUESTION,
        "messages": [HumanMessage(content="thanks!")],
    }
    out = parent_graph(store.t).invoke(state, conf())
    assert out["rag_used"] == "global"
    assert out["rag_queries"] == [QUESTION]
    assert question_from_state({"messages": [
        HumanMessage(content="first"), AIMessage(content="reply"),
        {"role": "user", "content": [{"type": "text", "text": "last one"}]},
        AIMessage(content="trailing"),
    ]}) == "last one"  # fmt: skip
    with pytest.raises(ScopeError, match="no question"):
        question_from_state({"messages": [AIMessage(content="only the assistant")]})


# -- 2. the config contract ----------------------------------------------------------------


def test_inputs_come_only_from_config_configurable(store: Store) -> None:
    graph = parent_graph(store.t)
    # conversation_mode / session_id outside config["configurable"] are not read.
    run = stream(
        graph,
        chat_input(),
        {"metadata": {"conversation_mode": "chatpdf", "session_id": SESSION}, "configurable": {}},
    )
    assert run.rag_nodes() == ["global_rag_node"]
    assert run.state["rag_scope"] == GLOBAL_SCOPE
    # route() itself reads only config["configurable"]; a None config is normal mode.
    assert route(store.t, {}, {"conversation_mode": "chatpdf"}) == (
        "global_rag_node", "mode=normal -> global_rag_node"
    )  # fmt: skip
    assert route(store.t, {}, None)[0] == "global_rag_node"
    assert route(store.t, {}, conf(session_id=SESSION, conversation_mode="chatpdf")) == (
        "local_rag_node", "mode=chatpdf -> local_rag_node"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("config", "extra", "match"),
    [
        pytest.param(conf(conversation_mode="chatpdf"), {}, "conversation_mode=chatpdf needs",
                     id="chatpdf"),
        pytest.param(conf(conversation_mode="chatpdf", session_id=""), {},
                     "conversation_mode=chatpdf needs", id="chatpdf-empty-session"),
        pytest.param(conf(), {"active_pdf_document_id": "doc-open"}, "an active PDF needs",
                     id="active-pdf"),
    ],
)  # fmt: skip
def test_chatpdf_without_a_session_raises_and_never_searches_globally(
    store: Store, config: dict[str, Any], extra: dict[str, Any], match: str
) -> None:
    run = Run({}, [])
    with pytest.raises(ScopeError, match=match) as excinfo:
        stream(parent_graph(store.t), chat_input(**extra), config, into=run)
    assert type(excinfo.value) is ScopeError
    assert "session_id" in str(excinfo.value)
    assert not set(run.nodes) & RAG_NODES
    assert "respond" not in run.nodes
    # invoke and ainvoke surface the same error type.
    with pytest.raises(ScopeError):
        parent_graph(store.t).invoke(chat_input(**extra), config)
    with pytest.raises(ScopeError):
        asyncio.run(parent_graph(store.t).ainvoke(chat_input(**extra), config))


@pytest.mark.parametrize(
    ("configurable", "match"),
    [
        ({"rag_scope": "everything"}, "rag_scope must be 'global' or 'workspace'"),
        ({"rag_scope": "session", "session_id": SESSION}, "rag_scope must be"),
        ({"rag_scope": "workspace"}, "needs config\\['configurable'\\]\\['workspace_id'\\]"),
    ],
)
def test_an_invalid_rag_scope_raises(
    store: Store, configurable: dict[str, Any], match: str
) -> None:
    run = Run({}, [])
    with pytest.raises(ScopeError, match=match):
        stream(parent_graph(store.t), chat_input(), conf(**configurable), into=run)
    assert "respond" not in run.nodes
    assert not run.state.get("rag_selected_chunk_ids")


def test_normal_mode_in_a_session_tether_does_not_know_searches_globally(store: Store) -> None:
    config = conf(session_id="brand-new-chat", conversation_mode="normal")
    assert route(store.t, {}, config)[0] == "global_rag_node"  # routing itself is fine
    out = parent_graph(store.t).invoke(chat_input(), config)
    assert out["rag_used"] == "global"
    assert out["rag_scope"] == GLOBAL_SCOPE
    assert set(out["rag_selected_chunk_ids"]) <= store.chunk_ids("global")


def test_chatpdf_in_a_session_tether_does_not_know_is_ungrounded_with_guidance(
    store: Store,
) -> None:
    out = parent_graph(store.t).invoke(
        chat_input(), conf(session_id="brand-new-chat", conversation_mode="chatpdf")
    )
    assert out["rag_used"] == "session"
    assert out["rag_scope"] == {"kind": "session", "id": "brand-new-chat"}
    assert out["rag_grounded"] is False and out["rag_selected_chunk_ids"] == []
    assert "no documents yet" in out["rag_debug"]["guidance"]
    assert out["rag_debug"]["suggested_scope"] == "workspace"


def test_an_invalid_rag_scope_raises_in_chatpdf_mode_and_for_greetings_too(
    store: Store,
) -> None:
    for question, mode in ((QUESTION, "chatpdf"), ("hello!", "normal")):
        with pytest.raises(ScopeError, match="rag_scope must be"):
            parent_graph(store.t).invoke(
                chat_input(question),
                conf(session_id=SESSION, conversation_mode=mode, rag_scope="everything"),
            )


# -- 3. the state contract ----------------------------------------------------------------


def test_the_subgraph_writes_only_rag_keys(store: Store) -> None:
    profile = {"name": "Ada", "prefs": {"lang": "en"}}
    history = [HumanMessage(content="earlier", id="m1"), AIMessage(content="ok", id="m2")]
    state = {
        "messages": [*history, HumanMessage(content=QUESTION, id="m3")],
        "user_profile": profile,
        "counter": 41,
    }
    run = stream(
        parent_graph(store.t), state, conf(session_id=SESSION, conversation_mode="chatpdf")
    )

    (rag_update,) = [u for ns, node, u in run.steps if not ns and node == "rag"]
    assert set(rag_update) == RAG_KEYS

    out = run.state
    assert out["user_profile"] == {"name": "Ada", "prefs": {"lang": "en"}}
    assert out["counter"] == 41
    assert out["route_note"] == "turn 3"
    assert [m.id for m in out["messages"][:3]] == ["m1", "m2", "m3"]
    assert [m.content for m in out["messages"][:3]] == ["earlier", "ok", QUESTION]
    assert len(out["messages"]) == 4 and isinstance(out["messages"][3], AIMessage)
    assert not INTERNAL_KEYS & set(out)
    assert set(out) >= RAG_KEYS

    debug = out["rag_debug"]
    assert debug["route_reason"] == "mode=chatpdf -> local_rag_node"
    assert debug["candidates"]["context"] == len(out["rag_selected_chunk_ids"])
    assert debug["candidates"]["fused"] >= debug["candidates"]["context"] >= 2
    assert debug["timings_ms"]["total"] >= debug["timings_ms"]["retrieve"] >= 0
    assert debug["queries"][0]["index"] == 0 and debug["queries"][0]["lexical"] >= 2

    citations = out["rag_citations"]
    assert citations and all(isinstance(c, dict) for c in citations)
    assert [c["number"] for c in citations] == list(range(1, len(citations) + 1))
    cited = [cid for c in citations for cid in c["chunk_ids"]]
    assert sorted(cited) == sorted(out["rag_selected_chunk_ids"])
    assert {c["document_id"] for c in citations} <= set(store.docs["session"])
    for c in citations:
        assert f"[{c['number']}]" in out["rag_context"]


def test_the_subgraph_alone_returns_only_its_output_keys(store: Store) -> None:
    sub = build_rag_subgraph(store.t)
    out = sub.invoke(
        {"question": QUESTION, "messages": [HumanMessage(content="ignored")]},
        conf(session_id=SESSION, conversation_mode="chatpdf"),
    )
    assert set(out) == RAG_KEYS
    assert out["rag_queries"] == [QUESTION]


# -- 4. node order --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "rag_node"), [("chatpdf", "local_rag_node"), ("normal", "global_rag_node")]
)
def test_rag_nodes_run_before_respond_and_respond_sees_their_fields(
    store: Store, mode: str, rag_node: str
) -> None:
    seen: list[dict[str, Any]] = []
    run = stream(
        parent_graph(store.t, seen), chat_input(), conf(session_id=SESSION, conversation_mode=mode)
    )
    order = [(bool(ns), node) for ns, node, _ in run.steps]
    assert order == [
        (False, "router"),
        (True, "decide"),
        (True, rag_node),
        (False, "rag"),
        (False, "respond"),
    ]
    assert all(ns.startswith("rag:") for ns, node, _ in run.steps if node in {"decide", rag_node})
    (state,) = seen
    assert state["rag_used"] == ("session" if mode == "chatpdf" else "global")
    assert state["rag_grounded"] is True
    assert state["rag_context"].startswith("[1] ")
    assert state["rag_selected_chunk_ids"] == run.state["rag_selected_chunk_ids"]
    assert state["messages"][-1].content == QUESTION  # respond has not answered yet
    assert run.state["messages"][-1].content == "answer from 2 messages"  # sources + question


# -- 5. async -------------------------------------------------------------------------------


def _comparable(out: dict[str, Any]) -> dict[str, Any]:
    debug = dict(out["rag_debug"])
    debug.pop("timings_ms", None)
    debug["queries"] = [{k: v for k, v in q.items() if k != "ms"} for q in debug.get("queries", [])]
    rest = {k: v for k, v in out.items() if k not in {"messages", "rag_debug"}}
    return {**rest, "rag_debug": debug, "messages": [(m.type, m.content) for m in out["messages"]]}


@pytest.mark.parametrize(
    "configurable",
    [
        {"session_id": SESSION, "conversation_mode": "chatpdf"},
        {"session_id": SESSION},
        {"rag_scope": "workspace", "workspace_id": WORKSPACE},
    ],
)
def test_ainvoke_gives_the_same_result_as_invoke(
    store: Store, configurable: dict[str, Any]
) -> None:
    graph = parent_graph(store.t)
    sync = graph.invoke(chat_input(), conf(**configurable))
    asynchronous = asyncio.run(graph.ainvoke(chat_input(), conf(**configurable)))
    assert sync["rag_grounded"] is True
    assert asynchronous["rag_used"] == asynchronous["rag_scope"]["kind"]
    assert _comparable(asynchronous) == _comparable(sync)
    assert "timings_ms" in asynchronous["rag_debug"]
    greeting = asyncio.run(graph.ainvoke(chat_input("thanks!"), conf(**configurable)))
    assert greeting["rag_used"] == "none"
    assert _comparable(greeting) == _comparable(
        graph.invoke(chat_input("thanks!"), conf(**configurable))
    )


# -- 6. concurrent sessions -------------------------------------------------------------------


def test_concurrent_runs_in_different_sessions_never_see_each_others_chunks(store: Store) -> None:
    graph = parent_graph(store.t)
    mine, theirs = store.chunk_ids("session"), store.chunk_ids("other")
    assert mine and theirs and not mine & theirs
    questions = [QUESTION, "which sensor policy applies?", "sensor policy details"]

    async def rounds() -> list[tuple[str, dict[str, Any]]]:
        results: list[tuple[str, dict[str, Any]]] = []
        for round_ in range(6):
            question = questions[round_ % len(questions)]
            sessions = [SESSION, OTHER_SESSION, OTHER_SESSION, SESSION]
            outs = await asyncio.gather(
                *(
                    graph.ainvoke(
                        chat_input(question),
                        conf(session_id=sid, conversation_mode="chatpdf"),
                    )
                    for sid in sessions
                )
            )
            results.extend(zip(sessions, outs, strict=True))
        return results

    results = asyncio.run(rounds())
    assert len(results) == 24
    for sid, out in results:
        own, foreign = (mine, theirs) if sid == SESSION else (theirs, mine)
        selected = set(out["rag_selected_chunk_ids"])
        assert out["rag_scope"] == {"kind": "session", "id": sid}
        assert selected and selected <= own, (sid, selected)
        assert not selected & foreign
        cited = {cid for c in out["rag_citations"] for cid in c["chunk_ids"]}
        assert cited == selected


# -- 7. logging -------------------------------------------------------------------------------


def test_each_run_logs_which_path_ran_and_why(
    store: Store, db_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tether.graph")
    graph = parent_graph(store.t)

    def graph_records() -> list[logging.LogRecord]:
        records = [r for r in caplog.records if r.name == "tether.graph"]
        caplog.clear()
        return records

    graph.invoke(chat_input(), conf(session_id=SESSION, conversation_mode="chatpdf"))
    (local,) = graph_records()
    assert local.levelno == logging.INFO
    assert "mode=chatpdf -> local_rag_node" in local.getMessage()
    assert local.rag_node == "local_rag_node"  # type: ignore[attr-defined]
    assert local.rag_reason == "mode=chatpdf -> local_rag_node"  # type: ignore[attr-defined]
    assert local.session_id == SESSION  # type: ignore[attr-defined]
    assert local.conversation_mode == "chatpdf"  # type: ignore[attr-defined]
    assert local.rag_scope == {"kind": "session", "id": SESSION}  # type: ignore[attr-defined]
    assert local.rag_grounded is True  # type: ignore[attr-defined]
    assert local.rag_chunks >= 1  # type: ignore[attr-defined]

    graph.invoke(chat_input(), conf(session_id=SESSION, conversation_mode="normal"))
    (glob,) = graph_records()
    assert "mode=normal -> global_rag_node" in glob.getMessage()
    assert glob.rag_node == "global_rag_node"  # type: ignore[attr-defined]
    assert glob.rag_reason == "mode=normal -> global_rag_node"  # type: ignore[attr-defined]
    assert glob.session_id == SESSION  # type: ignore[attr-defined]
    assert glob.rag_scope == GLOBAL_SCOPE  # type: ignore[attr-defined]

    graph.invoke(chat_input("hello"), conf())
    (greeting,) = graph_records()
    assert greeting.rag_node == "skip_rag"  # type: ignore[attr-defined]
    assert "greeting" in greeting.rag_reason  # type: ignore[attr-defined]
    assert greeting.session_id is None  # type: ignore[attr-defined]

    with Tether(db=tmp_path / "off.db", settings=make_settings(enabled=False)) as off:
        off.create_session(SESSION, workspace_id=WORKSPACE)
        parent_graph(off).invoke(chat_input(), conf(session_id=SESSION))
    (skipped,) = graph_records()
    assert "rag disabled -> skipped" in skipped.getMessage()
    assert skipped.rag_node == "skip_rag"  # type: ignore[attr-defined]
    assert skipped.rag_reason == "rag disabled -> skipped"  # type: ignore[attr-defined]
    assert skipped.session_id == SESSION  # type: ignore[attr-defined]


# -- 8. with_rag_context -------------------------------------------------------------------------


def _grounded_state(store: Store, **configurable: Any) -> dict[str, Any]:
    out = parent_graph(store.t).invoke(chat_input(), conf(**configurable))
    assert out["rag_grounded"] is True
    return out


def test_a_string_prompt_gets_the_context_and_citations_when_grounded(store: Store) -> None:
    state = _grounded_state(store, session_id=SESSION, conversation_mode="chatpdf")
    prompt = with_rag_context("You are a helpful assistant.", state)
    assert prompt.startswith("You are a helpful assistant.\n\n")
    assert GROUNDED_NOTE in prompt
    assert state["rag_context"] in prompt
    assert "[1]" in prompt
    assert "(searched:" not in prompt
    assert prompt == f"You are a helpful assistant.\n\n{rag_prompt_block(state)}"


def test_an_ungrounded_turn_gets_a_disclaimer_and_the_next_step(store: Store) -> None:
    out = parent_graph(store.t).invoke(
        chat_input("which volcano erupted in iceland?"),
        conf(session_id=SESSION, conversation_mode="chatpdf"),
    )
    assert out["rag_used"] == "session" and out["rag_grounded"] is False
    assert out["rag_debug"]["suggested_scope"] == "workspace"
    assert out["rag_debug"]["guidance"]
    assert out["rag_debug"]["grounding"].startswith("not grounded:")  # and why
    prompt = with_rag_context("Be brief.", out)
    assert "No passage in the user's documents was found relevant" in prompt
    assert "searching the whole workspace" in prompt
    assert "[1]" not in prompt and "Sources:" not in prompt

    wider = {**out, "rag_debug": {**out["rag_debug"], "suggested_scope": "global"}}
    assert "searching the global library" in with_rag_context("Be brief.", wider)
    nowhere = {**out, "rag_debug": {"suggested_scope": None}}
    assert "adding documents that cover it" in with_rag_context("Be brief.", nowhere)
    # grounded but with an empty context block is not presented as sourced
    empty = {**out, "rag_grounded": True, "rag_context": ""}
    assert "No passage" in with_rag_context("Be brief.", empty)


def test_nothing_changes_when_rag_did_not_run(store: Store) -> None:
    skipped = parent_graph(store.t).invoke(chat_input("thanks!"), conf())
    assert skipped["rag_used"] == "none"
    assert with_rag_context("Be brief.", skipped) == "Be brief."
    assert with_rag_context("Be brief.", {}) == "Be brief."
    messages = [SystemMessage(content="sys"), HumanMessage(content="thanks!")]
    assert with_rag_context(messages, skipped) == messages
    assert rag_prompt_block(skipped) is None


def test_a_message_list_gets_a_system_message_before_the_last_human_message(
    store: Store,
) -> None:
    state = _grounded_state(store, session_id=SESSION)
    block = rag_prompt_block(state)
    assert block is not None and state["rag_context"] in block

    messages = [
        SystemMessage(content="sys"),
        HumanMessage(content="earlier question"),
        AIMessage(content="earlier answer"),
        HumanMessage(content=QUESTION),
    ]
    original = list(messages)
    out = with_rag_context(messages, state)
    assert messages == original  # the input is not modified
    assert len(out) == 5
    assert out[:3] == original[:3] and out[4] == original[3]
    assert isinstance(out[3], SystemMessage) and out[3].content == block

    dicts = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "a trailing draft"},
    ]
    out = with_rag_context(dicts, state)
    assert out == [dicts[0], {"role": "system", "content": block}, dicts[1], dicts[2]]

    as_tuple = with_rag_context(tuple(original), state)
    assert isinstance(as_tuple, list) and isinstance(as_tuple[3], SystemMessage)
    # no human message: appended at the end
    no_human = with_rag_context([{"role": "system", "content": "sys"}], state)
    assert no_human[-1] == {"role": "system", "content": block}
    assert with_rag_context([], state) == [{"role": "system", "content": block}]


@pytest.mark.parametrize(
    ("configurable", "where"),
    [
        ({"session_id": SESSION, "conversation_mode": "chatpdf"}, "this chat's documents"),
        ({"session_id": SESSION}, "the shared library"),
    ],
)
def test_include_source_names_where_it_searched(
    store: Store, configurable: dict[str, Any], where: str
) -> None:
    state = _grounded_state(store, **configurable)
    prompt = with_rag_context("Be brief.", state, include_source=True)
    assert f"(searched: {where})" in prompt
    assert state["rag_context"] in prompt
    ungrounded = {**state, "rag_grounded": False, "rag_context": ""}
    assert f"(searched: {where})" in with_rag_context("Be brief.", ungrounded, include_source=True)


def test_include_source_names_the_workspace_for_a_workspace_scoped_run(store: Store) -> None:
    state = _grounded_state(store, rag_scope="workspace", workspace_id=WORKSPACE)
    assert state["rag_scope"] == {"kind": "workspace", "id": WORKSPACE}
    assert state["rag_used"] == "workspace"  # not "global": the workspace grounded it
    prompt = with_rag_context("Be brief.", state, include_source=True)
    assert "shared library" not in prompt
    assert "workspace" in prompt.split("(searched:", 1)[1]


@pytest.mark.parametrize(
    ("used", "where"),
    [
        ("session", "this chat's documents"),
        ("workspace", "this workspace's documents"),
        ("global", "the shared library"),
    ],
)
def test_include_source_names_the_scope_in_rag_used_when_the_state_has_no_rag_scope(
    used: str, where: str
) -> None:
    state = {"rag_used": used, "rag_grounded": True, "rag_context": "[1] The sensor policy."}
    prompt = with_rag_context("Be brief.", state, include_source=True)
    assert f"(searched: {where})" in prompt


# -- 9. TetherRetriever ----------------------------------------------------------------------


def test_retriever_returns_one_document_per_citation(store: Store) -> None:
    retriever = TetherRetriever(tether=store.t, scope="session", session_id=SESSION)
    expected = store.t.retrieve(QUESTION, scope="session", session_id=SESSION)
    assert expected.grounded and len(expected.citations) >= 2

    docs = retriever.invoke(QUESTION)
    assert all(isinstance(d, LCDocument) for d in docs)
    assert len(docs) == len(expected.citations)
    for doc, citation in zip(docs, expected.citations, strict=True):
        assert doc.page_content == citation.text
        meta = doc.metadata
        assert meta["citation"] == citation.label == f"[{citation.number}]"
        assert meta["number"] == citation.number
        assert meta["document_id"] == citation.document_id
        assert meta["chunk_ids"] == list(citation.chunk_ids)
        assert meta["title"] == citation.title
        assert meta["grounded"] is True
        assert "text" not in meta
        assert meta["document_id"] in store.docs["session"]
    assert sorted(cid for d in docs for cid in d.metadata["chunk_ids"]) == sorted(
        expected.selected_chunk_ids
    )

    adocs = asyncio.run(retriever.ainvoke(QUESTION))
    assert [(d.page_content, d.metadata) for d in adocs] == [
        (d.page_content, d.metadata) for d in docs
    ]


def test_retriever_scopes(store: Store) -> None:
    default = TetherRetriever(tether=store.t).invoke(QUESTION)  # rag.scope: global
    assert {d.metadata["document_id"] for d in default} == set(store.docs["global"])
    workspace = TetherRetriever(tether=store.t, scope="workspace", workspace_id=WORKSPACE)
    ids = {d.metadata["document_id"] for d in workspace.invoke(QUESTION)}
    assert ids and ids <= set(store.docs["workspace"]) | set(store.docs["session"])
    with pytest.raises(ScopeError):
        TetherRetriever(tether=store.t, scope="session").invoke(QUESTION)


def test_retriever_in_an_lcel_chain(store: Store) -> None:
    def format_docs(docs: list[LCDocument]) -> str:
        return "\n\n".join(f"{d.metadata['citation']} {d.page_content}" for d in docs)

    chain = TetherRetriever(tether=store.t, scope="session", session_id=SESSION) | RunnableLambda(
        format_docs
    )
    text = chain.invoke(QUESTION)
    assert isinstance(text, str)
    assert text.startswith("[1] ") and "[2] " in text
    assert "sensor" in text.lower() and "pump" not in text.lower()
    assert asyncio.run(chain.ainvoke(QUESTION)) == text


def test_retriever_returns_nothing_when_ungrounded_or_skipped(store: Store) -> None:
    retriever = TetherRetriever(tether=store.t, scope="session", session_id=SESSION)
    assert store.t.retrieve("volcanic eruptions in iceland", scope="session",
                            session_id=SESSION).grounded is False  # fmt: skip
    assert retriever.invoke("volcanic eruptions in iceland") == []
    assert retriever.invoke("thanks!") == []
    assert asyncio.run(retriever.ainvoke("volcanic eruptions in iceland")) == []


# -- 10. the example --------------------------------------------------------------------------

EXAMPLE = REPO_ROOT / "examples" / "chat_graph.py"


def test_the_example_prints_the_grounded_prompt_without_an_llm(tmp_path: Path) -> None:
    db = tmp_path / "demo" / "chat.db"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "How long is the battery covered?", "--chatpdf",
         "--db", str(db)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "rag: session (mode=chatpdf -> local_rag_node)" in out
    assert "grounded: True" in out
    assert "no chat model configured" in out
    assert "--- system ---" in out and "--- user ---" in out
    assert "(searched: this chat's documents)" in out
    assert "[1] " in out
    assert db.exists()
    with Tether(db=db, settings=make_settings()) as t:
        assert any(d.mime == "application/pdf" for d in t.documents(session_id="support-chat"))


def test_an_active_pdf_is_the_only_document_searched(store: Store) -> None:
    """``active_pdf_document_id`` routes to the session and filters to that document:
    the session's other documents match the question too, and stay out."""
    run = stream(
        parent_graph(store.t),
        chat_input(active_pdf_document_id="doc-open"),
        conf(session_id=SESSION),
    )
    out = run.state
    assert out["rag_grounded"] is True
    assert {c["document_id"] for c in out["rag_citations"]} == {"doc-open"}
    assert set(out["rag_selected_chunk_ids"]) <= {c.id for c in store.t.chunks("doc-open")}


def test_chatpdf_summarize_this_reads_the_open_document(store: Store) -> None:
    """In ChatPDF mode "summarize this" is about the open document (an overview of its
    opening), not a request to reformat the last answer."""
    graph = parent_graph(store.t)
    chatpdf = conf(session_id=SESSION, conversation_mode="chatpdf")
    run = stream(graph, chat_input("can you summarize this?"), chatpdf)
    assert run.rag_nodes() == ["local_rag_node"]
    assert run.state["rag_grounded"] is True
    assert run.state["rag_debug"]["decision"]["category"] == "document"
    normal = stream(graph, chat_input("can you summarize this?"), conf(session_id=SESSION))
    assert normal.rag_nodes() == ["skip_rag"]  # no open document: reformat the answer
