"""tether.llamaindex: tether as a LlamaIndex retriever, against llama-index-core and a real
SQLite store (the shipped HashEmbedder for vectors), alone and inside LlamaIndex's own
RetrieverQueryEngine with its MockLLM."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core", reason="the llamaindex extra installs llama-index-core")

from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore

from scoped_library import (
    EMPTY_SESSION,
    OTHER_SESSION,
    QUESTION,
    SESSION,
    UNANSWERABLE,
    WORKSPACE,
    Library,
    open_library,
)
from tether import Filters, InvalidArgument, ScopeError, SessionNotFound
from tether.llamaindex import TetherRetriever


@pytest.fixture
def lib(db_path: Path) -> Iterator[Library]:
    with open_library(db_path) as library:
        yield library


def _document_ids(nodes: list[NodeWithScore]) -> set[str]:
    return {n.node.metadata["document_id"] for n in nodes}


def _snapshot(nodes: list[NodeWithScore]) -> list[tuple[str, str, float | None, dict[str, Any]]]:
    return [(n.node.node_id, n.node.get_content(), n.score, n.node.metadata) for n in nodes]


# -- retrieve: one node per citation ------------------------------------------------------


def test_retrieve_gives_one_node_per_citation_with_the_citation(lib: Library) -> None:
    expected = lib.t.retrieve(QUESTION, scope="session", session_id=SESSION)
    assert expected.grounded and len(expected.citations) == 2

    retriever = TetherRetriever(lib.t, scope="session", session_id=SESSION)
    nodes = retriever.retrieve(QUESTION)

    assert len(nodes) == len(expected.citations)
    for n, citation in zip(nodes, expected.citations, strict=True):
        meta = n.node.metadata
        assert n.node.get_content() == citation.text
        assert n.score == citation.relevance
        assert n.node.ref_doc_id == meta["document_id"] == citation.document_id
        assert meta["citation"] == citation.label
        assert meta["chunk_ids"] == list(citation.chunk_ids)
        assert (meta["title"], meta["page"], meta["section_title"], meta["source_path"]) == (
            citation.title,
            citation.page,
            citation.section_title,
            citation.source_path,
        )
        assert meta["scope"] == {"kind": "session", "id": SESSION}
        assert meta["grounded"] is True
    assert retriever.last_reason is None
    assert retriever.last_result == expected


def test_a_prompt_sees_the_citation_and_title_but_not_the_ids(lib: Library) -> None:
    (node, *_) = TetherRetriever(lib.t, scope="session", session_id=SESSION).retrieve(QUESTION)
    prompt = node.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "citation: [1]" in prompt and f"title: {node.node.metadata['title']}" in prompt
    assert node.node.get_content() in prompt
    assert "chunk_ids" not in prompt and "document_id" not in prompt and "None" not in prompt


def test_search_gives_the_ranked_hits(lib: Library) -> None:
    expected = lib.t.search(QUESTION, scope="workspace", workspace_id=WORKSPACE)
    retriever = TetherRetriever(lib.t, method="search", scope="workspace", workspace_id=WORKSPACE)
    nodes = retriever.retrieve(QUESTION)
    assert [(n.node.get_content(), n.score) for n in nodes] == [(h.text, h.score) for h in expected]
    assert [n.node.metadata["chunk_id"] for n in nodes] == [h.chunk_id for h in expected]
    assert all(n.node.metadata["scope"] == {"kind": "workspace", "id": WORKSPACE} for n in nodes)


# -- scope, k and filters ---------------------------------------------------------------------


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_a_sessions_retriever_never_returns_another_sessions_documents(
    lib: Library, method: str
) -> None:
    mine = TetherRetriever(lib.t, method=method, scope="session", session_id=SESSION)
    theirs = TetherRetriever(lib.t, method=method, scope="session", session_id=OTHER_SESSION)

    assert _document_ids(mine.retrieve(QUESTION)) == lib.ids("session")
    assert _document_ids(theirs.retrieve(QUESTION)) == lib.ids("other")

    async def both() -> list[list[NodeWithScore]]:
        return await asyncio.gather(*(r.aretrieve(QUESTION) for r in (mine, theirs) * 3))

    for nodes, name in zip(asyncio.run(both()), ["session", "other"] * 3, strict=True):
        assert _document_ids(nodes) == lib.ids(name)


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_the_workspace_and_global_scopes(lib: Library, method: str) -> None:
    workspace = TetherRetriever(lib.t, method=method, scope="workspace", workspace_id=WORKSPACE)
    ids = _document_ids(workspace.retrieve(QUESTION))
    assert ids and ids <= lib.ids("session", "workspace")
    default = TetherRetriever(lib.t, method=method)  # rag.scope: global
    assert _document_ids(default.retrieve(QUESTION)) == lib.ids("global")


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_k_caps_the_nodes(lib: Library, method: str) -> None:
    def count(k: int | None) -> int:
        retriever = TetherRetriever(
            lib.t, method=method, scope="workspace", workspace_id=WORKSPACE, k=k
        )
        return len(retriever.retrieve(QUESTION))

    assert count(1) == 1
    assert count(None) >= 2


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_filters_narrow_the_scope(lib: Library, method: str) -> None:
    def ids(filters: Filters) -> set[str]:
        retriever = TetherRetriever(
            lib.t, method=method, scope="session", session_id=SESSION, filters=filters
        )
        return _document_ids(retriever.retrieve(QUESTION))

    assert ids(Filters(domains=("warranty",))) == lib.ids("warranty")
    assert ids(Filters(document_ids=tuple(lib.docs["setup"]))) == lib.ids("setup")
    # A filter names a document outside the scope: it stays unseen.
    assert ids(Filters(document_ids=tuple(lib.docs["other"]))) == set()


def test_options_are_checked_when_the_retriever_is_made(lib: Library) -> None:
    with pytest.raises(ScopeError, match="session id"):
        TetherRetriever(lib.t, scope="session")
    with pytest.raises(InvalidArgument, match="'retrieve' or 'search'"):
        TetherRetriever(lib.t, method="rank")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="method='search' only"):
        TetherRetriever(lib.t, mode="lexical")


# -- nothing grounded, nothing returned ---------------------------------------------------------


def test_an_ungrounded_retrieval_gives_no_nodes_and_says_why(lib: Library) -> None:
    retriever = TetherRetriever(lib.t, scope="session", session_id=SESSION)
    expected = lib.t.retrieve(UNANSWERABLE, scope="session", session_id=SESSION)
    assert not expected.grounded and expected.guidance

    assert retriever.retrieve(UNANSWERABLE) == []
    assert retriever.last_reason == expected.guidance
    assert retriever.last_result == expected

    assert retriever.retrieve("thanks!") == []
    assert retriever.last_reason == "retrieval skipped: thanks: no retrieval needed"

    assert asyncio.run(retriever.aretrieve(UNANSWERABLE)) == []
    assert retriever.last_reason == expected.guidance


def test_an_empty_or_unknown_scope(lib: Library) -> None:
    search = TetherRetriever(lib.t, method="search", scope="session", session_id=EMPTY_SESSION)
    assert search.retrieve(QUESTION) == []
    assert search.last_reason == f"no passage in session {EMPTY_SESSION!r} matches the query"
    unknown = TetherRetriever(lib.t, method="search", scope="session", session_id="chat-typo")
    assert unknown.retrieve(QUESTION) == []
    assert unknown.last_reason == "session 'chat-typo' does not exist: nothing was indexed into it"
    with pytest.raises(SessionNotFound):
        TetherRetriever(lib.t, scope="session", session_id="chat-typo").retrieve(QUESTION)


# -- async --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_aretrieve_gives_what_retrieve_gives(lib: Library, method: str) -> None:
    retriever = TetherRetriever(lib.t, method=method, scope="workspace", workspace_id=WORKSPACE)
    nodes = retriever.retrieve(QUESTION)
    assert nodes
    assert _snapshot(asyncio.run(retriever.aretrieve(QUESTION))) == _snapshot(nodes)


# -- inside LlamaIndex's query engine ------------------------------------------------------


def test_a_query_engine_answers_from_the_cited_passages(lib: Library) -> None:
    retriever = TetherRetriever(lib.t, scope="session", session_id=SESSION)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())  # echoes its prompt

    response = engine.query(QUESTION)
    assert _document_ids(response.source_nodes) == lib.ids("session")
    prompt = str(response)
    assert QUESTION in prompt and "citation: [1]" in prompt and "citation: [2]" in prompt
    assert "Pump" not in prompt and "chunk_ids" not in prompt

    aresponse = asyncio.run(engine.aquery(QUESTION))
    assert _snapshot(aresponse.source_nodes) == _snapshot(response.source_nodes)

    empty = engine.query(UNANSWERABLE)
    assert empty.source_nodes == [] and str(empty) == "Empty Response"
    assert retriever.last_reason


# -- without llama-index ----------------------------------------------------------------------


def test_without_llama_index_the_import_names_the_extra() -> None:
    code = "import sys; sys.modules['llama_index'] = None; import tether.llamaindex"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "ImportError: tether.llamaindex needs llama-index-core" in proc.stderr
    assert "pip install 'tether[llamaindex]'" in proc.stderr
