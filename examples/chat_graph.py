"""A chat-app graph with tether's RAG subgraph: router -> rag -> respond.

    .venv/bin/python examples/chat_graph.py "How long is the battery covered?" --chatpdf
    .venv/bin/python examples/chat_graph.py "What does error E04 mean?"
    .venv/bin/python examples/chat_graph.py "thanks!"

The first run indexes examples/docs into a store (``--db``, default
``.demo/chat_graph.db``): the PDF and the guide into a chat session's workspace, attached
to the session, and the FAQ into the global library. ``--chatpdf`` (or ``--mode
chatpdf``) asks about the session's documents (``local_rag_node``); otherwise the global
library is searched (``global_rag_node``). With an OpenAI-compatible chat model
configured (``[llm]`` in tether.toml, or TETHER_LLM__BASE_URL / TETHER_LLM__API_KEY /
TETHER_LLM__MODEL) the answer comes from that model; without one the script prints the
grounded prompt it would have sent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from tether import Tether
from tether.graph import RagState, build_rag_subgraph, with_rag_context

DOCS = Path(__file__).resolve().parent / "docs"
SESSION, WORKSPACE = "support-chat", "lumen"


class ChatState(RagState, total=False):
    messages: Annotated[list[Any], add_messages]
    route_note: str


def build_graph(tether: Tether) -> Any:
    def router(state: ChatState) -> dict[str, Any]:
        # A real app routes between tools, modes, etc. here; this one notes the turn.
        return {"route_note": f"turn {len(state['messages'])}"}

    def respond(state: ChatState) -> dict[str, Any]:
        system = {
            "role": "system",
            "content": "You are the Lumen Labs support assistant. Be brief.",
        }
        user = {"role": "user", "content": state["messages"][-1].content}
        messages = with_rag_context([system, user], state, include_source=True)
        if tether.chat is None:
            prompt = "\n\n".join(f"--- {m['role']} ---\n{m['content']}" for m in messages)
            reply = f"({tether.chat_unavailable}: the prompt it would get)\n\n{prompt}"
        else:
            reply = tether.chat.complete(messages, max_tokens=400)
        return {"messages": [AIMessage(content=reply)]}

    builder = StateGraph(ChatState)
    builder.add_node("router", router)
    builder.add_node("rag", build_rag_subgraph(tether))
    builder.add_node("respond", respond)
    builder.add_edge(START, "router")
    builder.add_edge("router", "rag")
    builder.add_edge("rag", "respond")
    builder.add_edge("respond", END)
    return builder.compile()


def ensure_documents(tether: Tether) -> None:
    if tether.documents():
        return
    tether.create_session(SESSION, workspace_id=WORKSPACE)
    tether.add(
        [DOCS / "warranty-and-returns.pdf", DOCS / "lumen-s2-user-guide.md"],
        workspace_id=WORKSPACE,
        session_id=SESSION,
    )
    tether.add([DOCS / "support-faq.txt", DOCS / "data-export.html"])  # the global library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question")
    parser.add_argument("--db", default=".demo/chat_graph.db")
    parser.add_argument("--mode", default="normal", choices=["normal", "chatpdf"])
    parser.add_argument("--chatpdf", action="store_true", help="same as --mode chatpdf")
    args = parser.parse_args(argv)

    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    with Tether(db=args.db) as tether:
        ensure_documents(tether)
        graph = build_graph(tether)
        mode = "chatpdf" if args.chatpdf else args.mode
        config = {"configurable": {"session_id": SESSION, "conversation_mode": mode}}
        state = graph.invoke({"messages": [HumanMessage(content=args.question)]}, config)
    print(f"rag: {state['rag_used']} ({state['rag_debug'].get('route_reason')})")
    print(f"grounded: {state['rag_grounded']}; sources: {len(state['rag_citations'])}")
    print()
    print(state["messages"][-1].content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
