"""tether.haystack: tether as a Haystack retriever component, against haystack-ai and a real
SQLite store (the shipped HashEmbedder for vectors), alone and as the first component of a
Haystack Pipeline, run and run_async."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Haystack's telemetry is switched on or off when it is first imported: off, as an
# application that keeps its data local would have it (and no file under ~/.haystack).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
pytest.importorskip("haystack", reason="the haystack extra installs haystack-ai")

from haystack import Document, Pipeline
from haystack.components.builders import PromptBuilder

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
from tether import Filters, InvalidArgument, ScopeError
from tether.haystack import TetherRetriever

TEMPLATE = """{% for d in documents %}{{ d.meta.citation }} {{ d.content }}
{% endfor %}Question: {{ query }}"""


@pytest.fixture
def lib(db_path: Path) -> Iterator[Library]:
    with open_library(db_path) as library:
        yield library


def _document_ids(documents: list[Document]) -> set[str]:
    return {d.meta["document_id"] for d in documents}


def _run(retriever: TetherRetriever, query: str = QUESTION, **inputs: Any) -> list[Document]:
    out = retriever.run(query=query, **inputs)
    assert set(out) == {"documents", "reason"}
    return out["documents"]


# -- retrieve and search ----------------------------------------------------------------------


def test_retrieve_gives_one_document_per_citation_with_the_citation(lib: Library) -> None:
    expected = lib.t.retrieve(QUESTION, scope="session", session_id=SESSION)
    assert expected.grounded and len(expected.citations) == 2

    out = TetherRetriever(lib.t, scope="session", session_id=SESSION).run(query=QUESTION)

    assert out["reason"] is None
    assert len(out["documents"]) == len(expected.citations)
    for doc, citation in zip(out["documents"], expected.citations, strict=True):
        assert doc.content == citation.text and doc.score == citation.relevance
        assert doc.meta["document_id"] == citation.document_id
        assert doc.meta["citation"] == citation.label
        assert doc.meta["chunk_ids"] == list(citation.chunk_ids)
        assert (doc.meta["title"], doc.meta["page"], doc.meta["section_title"]) == (
            citation.title,
            citation.page,
            citation.section_title,
        )
        assert doc.meta["source_path"] == citation.source_path
        assert doc.meta["scope"] == {"kind": "session", "id": SESSION}
        assert doc.id == f"{citation.document_id}:{'+'.join(map(str, citation.chunk_ids))}"


def test_search_gives_the_ranked_hits(lib: Library) -> None:
    expected = lib.t.search(QUESTION, scope="workspace", workspace_id=WORKSPACE)
    retriever = TetherRetriever(lib.t, method="search", scope="workspace", workspace_id=WORKSPACE)
    docs = _run(retriever)
    assert [(d.content, d.score) for d in docs] == [(h.text, h.score) for h in expected]
    assert [d.meta["chunk_id"] for d in docs] == [h.chunk_id for h in expected]


# -- scope, top_k and filters -----------------------------------------------------------------


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_a_sessions_retriever_never_returns_another_sessions_documents(
    lib: Library, method: str
) -> None:
    mine = TetherRetriever(lib.t, method=method, scope="session", session_id=SESSION)
    theirs = TetherRetriever(lib.t, method=method, scope="session", session_id=OTHER_SESSION)
    assert _document_ids(_run(mine)) == lib.ids("session")
    assert _document_ids(_run(theirs)) == lib.ids("other")

    async def both() -> list[dict[str, Any]]:
        runs = (r.run_async(query=QUESTION) for r in (mine, theirs) * 3)
        return await asyncio.gather(*runs)

    for out, name in zip(asyncio.run(both()), ["session", "other"] * 3, strict=True):
        assert _document_ids(out["documents"]) == lib.ids(name)


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_the_workspace_and_global_scopes(lib: Library, method: str) -> None:
    workspace = TetherRetriever(lib.t, method=method, scope="workspace", workspace_id=WORKSPACE)
    ids = _document_ids(_run(workspace))
    assert ids and ids <= lib.ids("session", "workspace")
    default = TetherRetriever(lib.t, method=method)  # rag.scope: global
    assert _document_ids(_run(default)) == lib.ids("global")


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_top_k_caps_the_documents_and_run_overrides_it(lib: Library, method: str) -> None:
    where = {"scope": "workspace", "workspace_id": WORKSPACE}
    assert len(_run(TetherRetriever(lib.t, method=method, top_k=1, **where))) == 1
    retriever = TetherRetriever(lib.t, method=method, **where)
    assert len(_run(retriever)) >= 2
    assert len(_run(retriever, top_k=1)) == 1
    assert len(_run(retriever)) >= 2  # the override was for that run only


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_filters_narrow_the_scope_and_run_overrides_them(lib: Library, method: str) -> None:
    warranty = Filters(domains=("warranty",))
    setup = Filters(document_ids=tuple(lib.docs["setup"]))
    where = {"scope": "session", "session_id": SESSION}
    retriever = TetherRetriever(lib.t, method=method, filters=warranty, **where)
    assert _document_ids(_run(retriever)) == lib.ids("warranty")
    assert _document_ids(_run(retriever, filters=setup)) == lib.ids("setup")
    outside = Filters(document_ids=tuple(lib.docs["other"]))
    assert _run(retriever, filters=outside) == []


def test_options_are_checked_when_the_component_is_made(lib: Library) -> None:
    with pytest.raises(ScopeError, match="workspace id"):
        TetherRetriever(lib.t, scope="workspace")
    with pytest.raises(InvalidArgument, match="'retrieve' or 'search'"):
        TetherRetriever(lib.t, method="rank")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="method='search' only"):
        TetherRetriever(lib.t, mode="vector")


# -- nothing grounded, nothing returned ---------------------------------------------------------


def test_an_ungrounded_retrieval_gives_no_documents_and_says_why(lib: Library) -> None:
    retriever = TetherRetriever(lib.t, scope="session", session_id=SESSION)
    expected = lib.t.retrieve(UNANSWERABLE, scope="session", session_id=SESSION)
    assert not expected.grounded and expected.guidance

    assert retriever.run(query=UNANSWERABLE) == {"documents": [], "reason": expected.guidance}
    skipped = retriever.run(query="thanks!")
    assert skipped == {"documents": [], "reason": "retrieval skipped: thanks: no retrieval needed"}
    aout = asyncio.run(retriever.run_async(query=UNANSWERABLE))
    assert aout == {"documents": [], "reason": expected.guidance}

    empty = TetherRetriever(lib.t, method="search", scope="session", session_id=EMPTY_SESSION)
    assert empty.run(query=QUESTION)["reason"] == (
        f"no passage in session {EMPTY_SESSION!r} matches the query"
    )


# -- async --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["retrieve", "search"])
def test_run_async_gives_what_run_gives(lib: Library, method: str) -> None:
    retriever = TetherRetriever(lib.t, method=method, scope="workspace", workspace_id=WORKSPACE)
    out = retriever.run(query=QUESTION, top_k=2)
    assert len(out["documents"]) == 2
    assert asyncio.run(retriever.run_async(query=QUESTION, top_k=2)) == out


# -- in a Haystack pipeline ---------------------------------------------------------------------


def _pipeline(retriever: TetherRetriever) -> Pipeline:
    pipe = Pipeline()
    pipe.add_component("retriever", retriever)
    pipe.add_component("prompt", PromptBuilder(TEMPLATE, required_variables=["query"]))
    pipe.connect("retriever.documents", "prompt.documents")
    return pipe


def test_a_pipeline_builds_the_prompt_from_the_cited_passages(lib: Library) -> None:
    pipe = _pipeline(TetherRetriever(lib.t, scope="session", session_id=SESSION))
    inputs = {"retriever": {"query": QUESTION}, "prompt": {"query": QUESTION}}

    out = pipe.run(inputs)
    prompt = out["prompt"]["prompt"]
    assert prompt.startswith("[1] ") and "\n[2] " in prompt
    assert prompt.endswith(f"Question: {QUESTION}")
    assert "Pump" not in prompt
    assert out["retriever"] == {"reason": None}  # documents went on to the prompt

    assert asyncio.run(pipe.run_async(inputs)) == out

    unanswerable = {"retriever": {"query": UNANSWERABLE}, "prompt": {"query": UNANSWERABLE}}
    empty = pipe.run(unanswerable)
    assert empty["prompt"]["prompt"] == f"Question: {UNANSWERABLE}"
    assert empty["retriever"]["reason"]


def test_a_pipeline_passes_top_k_and_filters_at_run_time(lib: Library) -> None:
    pipe = _pipeline(TetherRetriever(lib.t, scope="workspace", workspace_id=WORKSPACE))
    warranty = Filters(domains=("warranty",))
    out = pipe.run(
        {
            "retriever": {"query": QUESTION, "top_k": 1, "filters": warranty},
            "prompt": {"query": QUESTION},
        },
        include_outputs_from={"retriever"},
    )
    (doc,) = out["retriever"]["documents"]
    assert doc.meta["document_id"] in lib.ids("warranty")


# -- without haystack -------------------------------------------------------------------------


def test_without_haystack_the_import_names_the_extra() -> None:
    code = "import sys; sys.modules['haystack'] = None; import tether.haystack"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "ImportError: tether.haystack needs haystack-ai" in proc.stderr
    assert "pip install 'tether[haystack]'" in proc.stderr
