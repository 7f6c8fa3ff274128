"""LangGraph integration: a RAG subgraph that runs before the reply, and helpers around it.

``build_rag_subgraph(tether)`` compiles a graph ``decide -> route -> global_rag_node |
local_rag_node | skip_rag`` that a parent graph adds as one node before its response
node. Inputs come from the runnable config (``config["configurable"]``):

``session_id``         the chat session (required in ChatPDF mode)
``workspace_id``       the workspace (for ``rag_scope = "workspace"``)
``conversation_mode``  ``"chatpdf"`` routes to ``local_rag_node``; anything else is normal
``rag_scope``          the scope of ``global_rag_node``: ``"global"`` (default) or
                       ``"workspace"``

and from the state: the question is ``state["question"]`` if set, else the last human
message of ``state["messages"]``; ``active_pdf_document_id`` marks an open PDF.

Routing: ChatPDF mode, an ``active_pdf_document_id``, or a PDF attached to the session
runs ``local_rag_node`` (session scope, always the current ``session_id``); otherwise
``global_rag_node`` (the ``GLOBAL`` library, or the configured workspace). Exactly one of
them runs; when the decision says no retrieval is needed (or ``rag.enabled`` is off),
``skip_rag`` runs instead. The nodes write only the ``rag_*`` fields of
:class:`RagState`; nothing else in the state is touched. ``rag_used`` names the scope
the turn searched (``"session"``, ``"workspace"`` or ``"global"``), or ``"none"`` when
retrieval did not run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document as LCDocument
from langchain_core.messages import SystemMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from pydantic import ConfigDict

from tether import (
    ConfigurationError,
    Decision,
    Filters,
    RetrievalResult,
    Scope,
    ScopeError,
    SessionNotFound,
    Tether,
)

logger = logging.getLogger("tether.graph")

#: Where a turn's retrieval looked: the kind of the scope searched (``rag_scope["kind"]``),
#: or ``"none"`` when ``skip_rag`` ran.
RagUsed = Literal["session", "workspace", "global", "none"]
LOCAL_NODE = "local_rag_node"
GLOBAL_NODE = "global_rag_node"
SKIP_NODE = "skip_rag"


class RagOutput(TypedDict, total=False):
    """What the subgraph hands back to its parent: the ``rag_*`` keys and nothing else."""

    rag_context: str
    rag_citations: list[dict[str, Any]]
    rag_grounded: bool
    rag_used: RagUsed
    rag_scope: dict[str, str] | None
    rag_selected_chunk_ids: list[int]
    rag_queries: list[str]
    rag_debug: dict[str, Any]


class RagState(RagOutput, total=False):
    """The state the RAG subgraph reads and writes. Extend it in your own graph's state
    (``class ChatState(RagState): ...``); the subgraph writes only the ``rag_*`` keys."""

    messages: list[Any]
    question: str
    active_pdf_document_id: str | None


class _Internal(RagState, total=False):
    # Private to the subgraph: the decision and the route, between its nodes.
    rag_route: str
    rag_route_reason: str
    rag_decision: dict[str, Any]


def _require_langgraph() -> Any:
    try:
        import langgraph.graph as lg
    except ImportError as exc:
        raise ConfigurationError(
            "tether.graph needs langgraph: pip install 'tether[langgraph]'"
        ) from exc
    return lg


def question_from_state(state: dict[str, Any]) -> str:
    """``state["question"]``, else the text of the last human/user message."""
    question = state.get("question")
    if isinstance(question, str) and question.strip():
        return question
    for message in reversed(state.get("messages") or []):
        role = getattr(message, "type", None) or (
            message.get("role") if isinstance(message, dict) else None
        )
        if role in ("human", "user"):
            content = getattr(message, "content", None)
            if content is None and isinstance(message, dict):
                content = message.get("content")
            text = _text_of(content)
            if text.strip():
                return text
    raise ScopeError(
        "the RAG subgraph found no question: set state['question'] or add a human message"
    )


_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}


def _role_and_text(message: Any) -> tuple[str | None, str]:
    role = getattr(message, "type", None) or (
        message.get("role") if isinstance(message, dict) else None
    )
    content = getattr(message, "content", None)
    if content is None and isinstance(message, dict):
        content = message.get("content")
    return _ROLES.get(role or ""), _text_of(content)


def history_from_state(state: dict[str, Any], question: str) -> list[dict[str, str]]:
    """The user and assistant turns of ``state["messages"]`` before the question (the
    last human message, when the question is that message), oldest first, for
    follow-ups; the last 10 at most."""
    turns = [
        {"role": role, "content": text}
        for role, text in map(_role_and_text, state.get("messages") or [])
        if role is not None and text.strip()
    ]
    if turns and turns[-1] == {"role": "user", "content": question}:
        turns.pop()
    return turns[-10:]


def _document_open(state: dict[str, Any], config: Any) -> bool:
    """ChatPDF mode or an active PDF: "summarize this" is about that document."""
    mode = _configurable(config).get("conversation_mode")
    return mode == "chatpdf" or bool(state.get("active_pdf_document_id"))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal content blocks
        return " ".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def _configurable(config: Any) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def route(tether: Tether, state: dict[str, Any], config: Any) -> tuple[str, str]:
    """``(node, reason)``: which RAG node runs for this turn, and why."""
    conf = _configurable(config)
    mode = conf.get("conversation_mode") or "normal"
    session_id = conf.get("session_id")
    active_pdf = state.get("active_pdf_document_id")
    if mode == "chatpdf" or active_pdf:
        if not session_id:
            why = "conversation_mode=chatpdf" if mode == "chatpdf" else "an active PDF"
            raise ScopeError(
                f"{why} needs config['configurable']['session_id']: ChatPDF retrieval is"
                " scoped to the session, and is never widened to a global search silently"
            )
        if mode == "chatpdf":
            return LOCAL_NODE, f"mode=chatpdf -> {LOCAL_NODE}"
        return LOCAL_NODE, f"active_pdf_document_id={active_pdf} -> {LOCAL_NODE}"
    if session_id and any(
        d.mime == "application/pdf" and d.status == "active"
        for d in tether.documents(session_id=session_id)
    ):
        return LOCAL_NODE, f"mode={mode}, session has a PDF attached -> {LOCAL_NODE}"
    return GLOBAL_NODE, f"mode={mode} -> {GLOBAL_NODE}"


def _global_scope(config: Any) -> Scope:
    conf = _configurable(config)
    rag_scope = conf.get("rag_scope") or "global"
    if rag_scope == "global":
        return Scope.global_()
    if rag_scope == "workspace":
        workspace_id = conf.get("workspace_id")
        if not workspace_id:
            raise ScopeError("rag_scope='workspace' needs config['configurable']['workspace_id']")
        return Scope.workspace(workspace_id)
    raise ScopeError(f"rag_scope must be 'global' or 'workspace', not {rag_scope!r}")


def _update(
    result: RetrievalResult | None, debug: dict[str, Any], question: str | None
) -> dict[str, Any]:
    """The ``rag_*`` update of a turn: ``result``'s, or an empty one when retrieval did
    not run (``result`` None)."""
    if result is None:
        return {
            "rag_context": "",
            "rag_citations": [],
            "rag_grounded": False,
            "rag_used": "none",
            "rag_scope": None,
            "rag_selected_chunk_ids": [],
            "rag_queries": [question] if question else [],
            "rag_debug": debug,
        }
    used: RagUsed = result.scope.kind  # the scope searched, whichever node searched it
    return {
        "rag_context": result.context,
        "rag_citations": [c.to_dict() for c in result.citations],
        "rag_grounded": result.grounded,
        "rag_used": used,
        "rag_scope": result.scope.to_dict(),
        "rag_selected_chunk_ids": list(result.selected_chunk_ids),
        "rag_queries": list(result.queries),
        "rag_debug": debug,
    }


def _summary(result: RetrievalResult, node: str, reason: str) -> dict[str, Any]:
    d = result.debug
    return {
        "node": node,
        "route_reason": reason,
        "decision": d.get("decision"),
        "candidates": d.get("candidates"),
        "queries": [
            {k: q.get(k) for k in ("index", "lexical", "vector", "ms")}
            for q in d.get("queries", [])
        ],
        "timings_ms": d.get("timings_ms"),
        "degradations": d.get("degradations", []),
        "guidance": result.guidance,
        "suggested_scope": result.suggested_scope,
        "grounding": (d.get("grounding") or {}).get("why"),
    }


def _empty_session(question: str, scope: Scope, decision: Decision) -> RetrievalResult:
    """A chat tether has not seen yet (nothing was ever indexed into it): not grounded,
    with the same guidance as an empty session."""
    return RetrievalResult(
        retrieval_id="",
        question=question,
        context="",
        citations=(),
        grounded=False,
        guidance=(
            "This chat has no documents yet. Search the whole workspace instead, or add a"
            " document that covers this to the chat."
        ),
        suggested_scope="workspace",
        retrieved=True,
        queries=(question,),
        scope=scope,
        selected_chunk_ids=(),
        debug={
            "decision": decision.to_dict(),
            "degradations": [],
            "note": f"session {scope.id!r} is not known to tether: no documents",
        },
    )


def _log(node: str, reason: str, config: Any, **fields: Any) -> None:
    conf = _configurable(config)
    logger.info(
        "%s: %s",
        node,
        reason,
        extra={
            "rag_node": node,
            "rag_reason": reason,
            "session_id": conf.get("session_id"),
            "workspace_id": conf.get("workspace_id"),
            "conversation_mode": conf.get("conversation_mode") or "normal",
            **{f"rag_{k}": v for k, v in fields.items()},
        },
    )


def _route_for_decision(
    tether: Tether, state: dict[str, Any], config: Any, decision: Decision
) -> tuple[str, str]:
    """``(node, reason)`` for this turn: :func:`route` when retrieval is needed, else
    ``skip_rag`` with why it was skipped."""
    _global_scope(config)  # a bad rag_scope is an error on every turn, not only some
    if decision.needed:
        return route(tether, state, config)
    if not tether.settings.rag.enabled:
        return SKIP_NODE, "rag disabled -> skipped"
    return SKIP_NODE, f"decision: {decision.reason} -> skipped"


class _DecideNode:
    """The ``decide`` node: decides whether the turn needs retrieval, and records the
    route and the decision in the state for the node that runs next."""

    def __init__(self, tether: Tether) -> None:
        self._tether = tether

    def _record_route(
        self, state: dict[str, Any], config: Any, decision: Decision, question: str
    ) -> dict[str, Any]:
        node, reason = _route_for_decision(self._tether, state, config, decision)
        return {
            "rag_route": node,
            "rag_route_reason": reason,
            "rag_decision": {**decision.to_dict(), "_question": question},
        }

    def decide(self, state: dict[str, Any], config: Any) -> dict[str, Any]:
        question = question_from_state(state)
        decision = self._tether.decide(question, open_document=_document_open(state, config))
        return self._record_route(state, config, decision, question)

    async def adecide(self, state: dict[str, Any], config: Any) -> dict[str, Any]:
        question = question_from_state(state)
        open_document = _document_open(state, config)
        decision = await self._tether.adecide(question, open_document=open_document)
        # Routing may look up the session's documents: keep SQLite off the event loop.
        return await asyncio.to_thread(self._record_route, state, config, decision, question)

    def as_runnable(self) -> RunnableLambda:
        return RunnableLambda(self.decide, afunc=self.adecide, name="decide")


def _recorded_route(state: dict[str, Any]) -> str:
    return state["rag_route"]


@dataclass(frozen=True)
class _RetrievalPlan:
    """What a RAG node retrieves with: the question and decision recorded by ``decide``,
    and the scope (and session) its node searches."""

    question: str
    decision: Decision
    session_id: str | None
    scope: Scope
    filters: Filters | None = None
    history: tuple[dict[str, str], ...] = ()

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``Tether.retrieve`` for this plan."""
        return {
            "scope": self.scope,
            "session_id": self.session_id,
            "decision": self.decision,
            "filters": self.filters,
            "history": list(self.history),
        }


def _plan_retrieval(node: str, state: dict[str, Any], config: Any) -> _RetrievalPlan:
    decided = state["rag_decision"]
    decision = Decision(decided["needed"], decided["category"], decided["reason"], decided["by"])
    question = decided["_question"]
    history = tuple(history_from_state(state, question))
    if node == LOCAL_NODE:
        session_id = _configurable(config)["session_id"]
        # The open PDF, when there is one, is the only document searched.
        active_pdf = state.get("active_pdf_document_id")
        filters = Filters(document_ids=(active_pdf,)) if active_pdf else None
        return _RetrievalPlan(
            question, decision, session_id, Scope.session(session_id), filters, history
        )
    # The global library or a workspace: the chat session plays no part (and need
    # not be known to tether yet).
    return _RetrievalPlan(question, decision, None, _global_scope(config), history=history)


def _retrieval_update(
    node: str, state: dict[str, Any], config: Any, result: RetrievalResult
) -> dict[str, Any]:
    """Logs a RAG node's retrieval and turns it into the node's ``rag_*`` update."""
    reason = state["rag_route_reason"]
    _log(
        node,
        reason,
        config,
        scope=result.scope.to_dict(),
        grounded=result.grounded,
        chunks=len(result.selected_chunk_ids),
    )
    return _update(result, _summary(result, node, reason), None)


class _RetrievalNode:
    """A RAG node (``local_rag_node`` or ``global_rag_node``): retrieves in the scope
    its node plans, treating a session tether has never seen as an empty one."""

    def __init__(self, tether: Tether, node: str) -> None:
        self._tether = tether
        self._node = node

    def retrieve(self, state: dict[str, Any], config: Any) -> dict[str, Any]:
        plan = _plan_retrieval(self._node, state, config)
        try:
            result = self._tether.retrieve(plan.question, **plan.arguments())
        except SessionNotFound:
            result = _empty_session(plan.question, plan.scope, plan.decision)
        return _retrieval_update(self._node, state, config, result)

    async def aretrieve(self, state: dict[str, Any], config: Any) -> dict[str, Any]:
        plan = _plan_retrieval(self._node, state, config)
        try:
            result = await self._tether.aretrieve(plan.question, **plan.arguments())
        except SessionNotFound:
            result = _empty_session(plan.question, plan.scope, plan.decision)
        return _retrieval_update(self._node, state, config, result)

    def as_runnable(self) -> RunnableLambda:
        return RunnableLambda(self.retrieve, afunc=self.aretrieve, name=self._node)


def _skip_rag(state: dict[str, Any], config: Any) -> dict[str, Any]:
    """The ``skip_rag`` node: no retrieval, an empty ``rag_*`` update saying why."""
    reason = state["rag_route_reason"]
    decided = state["rag_decision"]
    _log(SKIP_NODE, reason, config)
    debug = {
        "node": SKIP_NODE,
        "route_reason": reason,
        "decision": {k: v for k, v in decided.items() if k != "_question"},
    }
    return _update(None, debug, decided["_question"])


def build_rag_subgraph(tether: Tether) -> Any:
    """The compiled RAG subgraph for ``tether``. Add it to a parent graph as a node
    (``builder.add_node("rag", build_rag_subgraph(t))``) and put it before the node that
    generates the reply. It reads ``question``, ``messages`` and
    ``active_pdf_document_id`` from the parent's state and returns only the ``rag_*``
    keys (:class:`RagOutput`); the parent's state class should extend :class:`RagState`."""
    lg = _require_langgraph()
    builder = lg.StateGraph(_Internal, input_schema=RagState, output_schema=RagOutput)
    builder.add_node("decide", _DecideNode(tether).as_runnable())
    builder.add_node(LOCAL_NODE, _RetrievalNode(tether, LOCAL_NODE).as_runnable())
    builder.add_node(GLOBAL_NODE, _RetrievalNode(tether, GLOBAL_NODE).as_runnable())
    builder.add_node(SKIP_NODE, RunnableLambda(_skip_rag, name=SKIP_NODE))
    builder.add_edge(lg.START, "decide")
    builder.add_conditional_edges("decide", _recorded_route, [LOCAL_NODE, GLOBAL_NODE, SKIP_NODE])
    for node in (LOCAL_NODE, GLOBAL_NODE, SKIP_NODE):
        builder.add_edge(node, lg.END)
    return builder.compile(name="rag")


# -- prompt helper ----------------------------------------------------------------------

UNGROUNDED_NOTE = (
    "No passage in the user's documents was found relevant to this question. Say so"
    " plainly, do not present anything as coming from the documents, and suggest"
    " {step}."
)
GROUNDED_NOTE = (
    "Answer from the sources below when they cover the question, and cite them by their"
    " numbers, like [1]. If they do not cover it, say so."
)


#: How the prompt names each scope a turn searched (``include_source``).
_SEARCHED = {
    "session": "this chat's documents",
    "workspace": "this workspace's documents",
    "global": "the shared library",
}


def rag_prompt_block(state: dict[str, Any], *, include_source: bool = False) -> str | None:
    """The text :func:`with_rag_context` adds, or ``None`` when RAG did not run."""
    used = state.get("rag_used")
    if not used or used == "none":
        return None
    kind = (state.get("rag_scope") or {}).get("kind") or used
    source = f" (searched: {_SEARCHED.get(kind, _SEARCHED['global'])})" if include_source else ""
    if state.get("rag_grounded") and state.get("rag_context"):
        lines = [f"{GROUNDED_NOTE}{source}", "", "Sources:", state["rag_context"]]
        return "\n".join(lines)
    debug = state.get("rag_debug") or {}
    step = {"workspace": "searching the whole workspace", "global": "searching the global library"}
    hint = step.get(debug.get("suggested_scope") or "", "adding documents that cover it")
    return UNGROUNDED_NOTE.format(step=hint) + source


def with_rag_context(
    messages_or_prompt: str | Sequence[Any], state: dict[str, Any], *, include_source: bool = False
) -> Any:
    """``messages_or_prompt`` with the turn's retrieval added.

    A string prompt gets the block appended. A message list (LangChain messages or
    ``{"role", "content"}`` dicts) gets it as a system message placed just before the
    last human message, so the model reads the sources right before the question. With
    ``rag_grounded`` false, the block is a short disclaimer and the next step instead of
    sources; when RAG did not run (``rag_used`` "none" or absent) nothing changes.
    ``include_source`` names where retrieval looked (``rag_scope``, else ``rag_used``)."""
    block = rag_prompt_block(state, include_source=include_source)
    if isinstance(messages_or_prompt, str):
        return messages_or_prompt if block is None else f"{messages_or_prompt}\n\n{block}"
    messages = list(messages_or_prompt)
    if block is None:
        return messages
    uses_dicts = any(isinstance(m, dict) for m in messages) or not messages
    if uses_dicts:
        note: Any = {"role": "system", "content": block}
    else:
        note = SystemMessage(content=block)
    at = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        role = m.get("role") if isinstance(m, dict) else getattr(m, "type", None)
        if role in ("human", "user"):
            at = i
            break
    return [*messages[:at], note, *messages[at:]]


# -- LangChain retriever ----------------------------------------------------------------


class TetherRetriever(BaseRetriever):
    """tether as a LangChain retriever, for LCEL chains: one Document per citation of
    :meth:`Tether.retrieve` (the cited passage; ``metadata`` holds the citation label
    and number, document id, title, section, page(s), chunk ids and relevance). An
    ungrounded or skipped retrieval returns no documents."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tether: Any
    scope: Literal["session", "workspace", "global"] | None = None
    session_id: str | None = None
    workspace_id: str | None = None

    def _documents(self, result: RetrievalResult) -> list[LCDocument]:
        return [
            LCDocument(
                page_content=c.text,
                metadata={k: v for k, v in c.to_dict().items() if k != "text"}
                | {"citation": c.label, "grounded": result.grounded},
            )
            for c in result.citations
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        result = self.tether.retrieve(
            query, scope=self.scope, session_id=self.session_id, workspace_id=self.workspace_id
        )
        return self._documents(result)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        result = await self.tether.aretrieve(
            query, scope=self.scope, session_id=self.session_id, workspace_id=self.workspace_id
        )
        return self._documents(result)


__all__ = [
    "RagOutput",
    "RagState",
    "TetherRetriever",
    "build_rag_subgraph",
    "question_from_state",
    "rag_prompt_block",
    "route",
    "with_rag_context",
]
