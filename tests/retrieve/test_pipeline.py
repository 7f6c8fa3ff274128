"""The retrieval pipeline through Tether.retrieve: decide, retrieve, rerank, cited context,
bounds, grounding and guidance, scope isolation, errors, aretrieve and `tether context`."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

from helpers import make_pdf, make_settings
from tether import (
    GLOBAL_WORKSPACE,
    InvalidArgument,
    Scope,
    SessionNotFound,
    Tether,
    TextSource,
    WorkspaceNotFound,
)
from tether.cli import app
from tether.ingest.chunking import embedding_text
from tether.models import Citation, Hit, RetrievalResult
from tether.retrieve.decide import decide_locally
from tether.retrieve.pipeline import MAX_QUESTION_CHARS
from tether.retrieve.rerank import Candidate, heuristic_rerank, metadata_priority
from tether.settings import RerankSettings
from tether.store import StoredChunk
from tether.testing import HashEmbedder

# Six sentences, all different, so any overlap between neighbouring chunks occurs once.
PLANT = (
    "The pump moves coolant through the primary loop of the reactor. It runs at a fixed speed."
    " Valves isolate the secondary loop during maintenance windows. Each valve is tagged."
    " Operators log every pressure reading in the shift report. The report is kept for a year."
    " Turbines convert steam into rotation that drives the generator. The generator feeds the"
    " grid. Coolant chemistry is sampled weekly. Samples go to the lab for analysis of boron."
)
# One term from every paragraph of PLANT: every chunk matches.
PLANT_EVERYTHING = "pump valves operators generator boron"

HANDBOOK = """# Handbook

## Returns

Customers may return a device within thirty days of delivery for a full refund.

## Battery care

Charge the battery to eighty percent for storage and keep it away from heat.
"""

RESULT_KEYS = {
    "retrieval_id", "question", "context", "citations", "grounded", "guidance", "suggested_scope",
    "retrieved", "queries", "scope", "selected_chunk_ids", "debug",
}  # fmt: skip
CITATION_KEYS = {
    "number", "document_id", "title", "section_title", "page", "pages", "chunk_ids",
    "source_path", "workspace_id", "relevance", "text", "page_label",
}  # fmt: skip


@contextmanager
def store(
    path: Path,
    *,
    embedder: HashEmbedder | None = None,
    count_tokens: Callable[[str], int | None] | None = None,
    **rag: object,
) -> Iterator[Tether]:
    """A store whose chunks have no token counts unless ``count_tokens`` is given, so the
    budget tests see the documented chars/4 estimate (by default tether would count with
    the packaged model's tokenizer)."""
    with Tether(
        db=path,
        settings=make_settings(**rag),
        embedder=embedder,
        count_tokens=count_tokens or no_token_counts,
    ) as t:
        yield t


def no_token_counts(text: str) -> None:
    return None


def stored(t: Tether, *document_ids: str) -> dict[int, StoredChunk]:
    return {c.id: c for d in document_ids for c in t.chunks(d)}


def document_text(chunks: list[StoredChunk]) -> str:
    """The normalized document text, put back together from the chunks' exact offsets
    (what lies between chunks that do not touch is unknown and left as NUL)."""
    text = ["\0"] * max(c.char_end for c in chunks)
    for c in chunks:
        assert len(c.content) == c.char_end - c.char_start
        text[c.char_start : c.char_end] = c.content
    return "".join(text)


def expected_header(c: Citation) -> str:
    """The documented header: ``[n] Title — Section (p. 3)``, the section path without a
    first heading that is the title."""
    header = f"[{c.number}] {c.title}"
    path = (c.section_title or "").split(" > ")
    if path[0] == c.title:
        path = path[1:]
    if path and path[0]:
        header += f" — {' > '.join(path)}"
    if c.pages:
        span = f"p. {c.pages[0]}" if len(c.pages) == 1 else f"pp. {c.pages[0]}-{c.pages[-1]}"
        header += f" ({span})"
    return header


def check_citations(t: Tether, result: RetrievalResult) -> None:
    """Every citation agrees with the stored chunks, and the context is exactly the
    numbered blocks of the citations."""
    assert result.citations, "expected a grounded result"
    assert [c.number for c in result.citations] == list(range(1, len(result.citations) + 1))
    blocks = []
    for c in result.citations:
        chunks = [stored(t, c.document_id)[cid] for cid in c.chunk_ids]
        assert all(ch.document_id == c.document_id for ch in chunks)
        ordinals = [ch.ordinal for ch in chunks]
        assert ordinals == list(range(ordinals[0], ordinals[0] + len(ordinals)))
        document = t.get_document(c.document_id)
        assert c.title == document.title
        assert c.workspace_id == document.workspace_id
        assert c.source_path == document.source_path
        assert c.section_title == chunks[0].section_title
        assert c.page == chunks[0].page
        assert c.pages == tuple(sorted({ch.page for ch in chunks if ch.page is not None}))
        assert 0.0 <= c.relevance <= 1.0
        if all(b.char_start < a.char_end for a, b in itertools.pairwise(chunks)):
            # Overlapping neighbours: the passage is the document's text, written once.
            full = document_text(t.chunks(c.document_id))
            assert c.text == full[chunks[0].char_start : chunks[-1].char_end].strip()
        assert c.label == f"[{c.number}]"
        blocks.append(f"{expected_header(c)}\n{c.text}")
    assert result.context == "\n\n".join(blocks)
    cited = [cid for c in result.citations for cid in c.chunk_ids]
    assert len(cited) == len(set(cited))
    assert set(cited) == set(result.selected_chunk_ids)
    assert len(result.selected_chunk_ids) == len(cited)


def expected_tokens(t: Tether, result: RetrievalResult) -> int:
    """The documented estimate, computed from the store: stored token_count (a part of a
    chunk counts its share by characters), else ceil(chars / 4); headers ceil(chars / 4)
    plus the newline; one token per blank line between blocks. A passage begun inside
    its first chunk's sentence from the chunk before counts that head too, by its share."""
    total = max(0, len(result.citations) - 1)
    for c in result.citations:
        total += math.ceil(len(expected_header(c)) / 4) + 1
        chunks = stored(t, c.document_id)
        previous: StoredChunk | None = None
        for cid in c.chunk_ids:
            ch = chunks[cid]
            piece = ch.content
            head = 0 if previous is not None else c.text.find(ch.content)
            if previous is not None and ch.char_start < previous.char_end:
                piece = ch.content[previous.char_end - ch.char_start :]
            if ch.token_count is None:
                total += math.ceil((head + len(piece)) / 4)
            else:
                share = math.ceil(head / len(ch.content) * ch.token_count)
                total += math.ceil(ch.token_count * (len(piece) / len(ch.content))) + share
            previous = ch
    return total


def word_count(text: str) -> int:
    return len(text.split())


# -- 1. the decision ----------------------------------------------------------------------

SKIPPED = [
    ("hi", "greeting"),
    ("Hello!", "greeting"),
    ("hey there", "greeting"),
    ("good morning :)", "greeting"),
    ("Hiya 👋", "greeting"),
    ("howdy team", "greeting"),
    ("HELLO!!!", "greeting"),
    ("hello?", "greeting"),
    ("Bonjour", "greeting"),
    ("thanks", "thanks"),
    ("Thank you so much!", "thanks"),
    ("ok thanks", "thanks"),
    ("great, thank you!", "thanks"),
    ("thx", "thanks"),
    ("much appreciated", "thanks"),
    ("Thanks again.", "thanks"),
    ("how are you?", "small_talk"),
    ("what\u2019s up", "small_talk"),
    ("who are you?", "small_talk"),
    ("got it", "small_talk"),
    ("sounds good", "small_talk"),
    ("never mind", "small_talk"),
    ("bye", "small_talk"),
    ("ok.", "small_talk"),
    ("2 + 2", "arithmetic"),
    ("what is 2 + 2?", "arithmetic"),
    ("12 * 7", "arithmetic"),
    ("calculate 3.5 / 7", "arithmetic"),
    ("(1 + 2) * 3", "arithmetic"),
    ("100 divided by 4", "arithmetic"),
    ("what is 3 + 4 * (2 - 1)", "arithmetic"),
    ("make it shorter", "formatting"),
    ("rewrite that as a table", "formatting"),
    ("summarize this", "formatting"),
    ("can you format that as bullet points?", "formatting"),
    ("translate it into French please", "formatting"),
    ("shorten your last answer", "formatting"),
    ("rephrase the above", "formatting"),
    ("Could you rewrite your answer in plain English, please?", "formatting"),
]

RETRIEVED = [
    "summarize the warranty document",
    "summarise the warranty",
    "summarize this document",
    "What is 2 + 2 in the spec?",
    "Is model 3 + 2 compatible?",
    "2 + 2 = 5 error code",
    "hi, how do I reset the sensor?",
    "hello, what is the return policy?",
    "hello reset sensor",
    "thanks! and what about refunds?",
    "thanks for the manual, where is the serial number?",
    "What is the warranty? thanks",
    "how do refunds work",
    "reset procedure",
    "bye-law requirements",
    "Hello world program in the guide",
    "what's up with the battery drain?",
    "ok so how do I pair the device",
    "make it work with bluetooth",
    "make it shorter and add the warranty terms",
    "translate the user guide",
    "translate the error message E42",
    "rewrite the export script",
    "format the SD card",
    "turn it off",
    "how are you supposed to clean the filter?",
    "yes or no: is the pump covered?",
    "no battery indicator",
    "cool mode settings",
    "what is 42",
    # dates, phone numbers and part numbers are not sums
    "555-0199",
    "2024-01-15",
    "12/2024",
    "3-4",
    # not requests to reformat the last answer
    "fix it",
    "put that in the returns form",
]


@pytest.mark.parametrize(("message", "category"), SKIPPED)
def test_local_decision_skips_only_whole_small_messages(message: str, category: str) -> None:
    decision = decide_locally(message)
    assert decision.needed is False
    assert decision.category == category
    assert decision.reason == f"{category.replace('_', ' ')}: no retrieval needed"
    assert decision.by == "local"


@pytest.mark.parametrize("message", RETRIEVED)
def test_local_decision_retrieves_everything_else(message: str) -> None:
    decision = decide_locally(message)
    assert decision.needed is True, decision
    assert decision.category == "question"
    assert decision.to_dict() == {
        "needed": True,
        "category": "question",
        "reason": "a question that may be answered from documents",
        "by": "local",
    }


# Words of every skipped message below: had retrieval run, it would have found this.
BAIT = "Say hi and thanks, how are you, 2 + 2, make it shorter, reset the sensor with the pin."


@pytest.mark.parametrize(
    ("message", "category"),
    [
        ("hi", "greeting"),
        ("thanks!", "thanks"),
        ("how are you?", "small_talk"),
        ("2 + 2", "arithmetic"),
        ("make it shorter", "formatting"),
    ],
)
def test_skipped_messages_return_no_context(db_path: Path, message: str, category: str) -> None:
    with store(db_path) as t:
        t.add(text=BAIT, title="Bait")
        assert t.search(message, mode="lexical"), "the store does match the message"
        result = t.retrieve(message)
    assert result.retrieved is False
    assert result.context == ""
    assert result.citations == ()
    assert result.selected_chunk_ids == ()
    assert result.grounded is False
    assert result.guidance is None and result.suggested_scope is None
    assert result.queries == (message,)
    assert result.scope == Scope.global_()
    assert result.debug["decision"] == {
        "needed": False,
        "category": category,
        "reason": f"{category.replace('_', ' ')}: no retrieval needed",
        "by": "local",
    }
    assert "rerank" not in result.debug and "candidates" not in result.debug


def test_greeting_followed_by_a_question_retrieves(db_path: Path) -> None:
    with store(db_path) as t:
        t.add(text=BAIT, title="Bait", document_id="bait")
        result = t.retrieve("hi, how do I reset the sensor?")
        assert result.retrieved is True and result.grounded is True
        assert result.debug["decision"]["category"] == "question"
        assert result.debug["decision"]["needed"] is True
        assert [c.document_id for c in result.citations] == ["bait"]
        check_citations(t, result)


def test_rag_disabled_skips_every_question(db_path: Path) -> None:
    with store(db_path, enabled=False) as t:
        t.add(text=PLANT, title="Plant")
        result = t.retrieve("how does the pump move coolant?")
    assert result.retrieved is False and result.context == "" and result.citations == ()
    assert result.debug["decision"]["needed"] is False
    assert result.debug["decision"]["reason"] == "rag.enabled is off"


# -- 2. context and citations -------------------------------------------------------------


def test_citations_are_numbered_and_match_the_stored_chunks(db_path: Path) -> None:
    with store(db_path, chunk_size=120, chunk_overlap=40) as t:
        t.add(text=PLANT, title="Plant", document_id="plant")
        t.add(text=HANDBOOK, title="Handbook", mime="text/markdown", document_id="book")
        result = t.retrieve("coolant pump battery heat")
        assert result.grounded and result.retrieved
        assert {c.document_id for c in result.citations} == {"plant", "book"}
        for c in result.citations:
            assert re.search(rf"^\[{c.number}\] {re.escape(c.title)}", result.context, re.M)
        assert result.context.startswith("[1] ")
        assert "\n\n[2] " in result.context
        battery = next(c for c in result.citations if c.document_id == "book")
        assert battery.section_title == "Handbook > Battery care"
        assert "[2] Handbook — Battery care\n" in result.context or (
            "[1] Handbook — Battery care\n" in result.context
        )  # the H1 that repeats the title is not said twice
        assert "Handbook > Battery care" not in result.context
        assert battery.page is None and battery.pages == ()
        check_citations(t, result)


def test_adjacent_chunks_merge_into_one_citation_writing_the_overlap_once(
    db_path: Path,
) -> None:
    # min_relevance 0: every matching chunk reaches the context (citations are tested here)
    with store(db_path, chunk_size=120, chunk_overlap=40, min_relevance=0.0) as t:
        t.add(text=PLANT, title="Plant", document_id="plant")
        chunks = t.chunks("plant")
        assert len(chunks) >= 4
        full = document_text(chunks)
        overlaps = [full[b.char_start : a.char_end] for a, b in itertools.pairwise(chunks)]
        assert all(o.strip() for o in overlaps), "chunk_overlap > 0: neighbours share text"

        result = t.retrieve(PLANT_EVERYTHING)
        check_citations(t, result)
    [citation] = result.citations
    assert citation.chunk_ids == tuple(c.id for c in chunks)
    assert citation.text == full.strip() == PLANT
    for overlap in overlaps:
        assert citation.text.count(overlap) == 1
        assert "".join(c.content for c in chunks).count(overlap) == 2  # what naive joining does
    assert result.context == f"[1] Plant\n{PLANT}"
    assert set(result.selected_chunk_ids) == {c.id for c in chunks}


def test_non_adjacent_chunks_of_one_document_are_separate_citations(db_path: Path) -> None:
    with store(db_path, chunk_size=120, chunk_overlap=40, min_relevance=0.0) as t:
        t.add(text=PLANT, title="Plant", document_id="plant")
        chunks = t.chunks("plant")
        result = t.retrieve("pump reactor boron")  # the first and the last chunk
        check_citations(t, result)
    assert [c.chunk_ids for c in result.citations] == [(chunks[0].id,), (chunks[-1].id,)]
    assert result.context.count("[1] Plant") == result.context.count("[2] Plant") == 1


def test_pdf_citations_carry_the_pages_of_their_chunks(db_path: Path, tmp_path: Path) -> None:
    pdf = make_pdf(
        tmp_path / "warranty.pdf",
        [
            "Warranty covers the battery for two years from purchase. " * 3,
            "Refunds are issued to the original payment method within fourteen days. " * 3,
            "Shipping is free for orders above fifty euros. " * 3,
        ],
        title="Warranty",
    )
    with store(db_path, chunk_size=200, chunk_overlap=50, min_relevance=0.0) as t:
        [added] = t.add(pdf)
        doc = added.document_id
        assert doc is not None
        pages = {c.id: c.page for c in t.chunks(doc)}
        assert set(pages.values()) == {1, 2, 3}

        refunds = t.retrieve("refunds to the original payment method")
        check_citations(t, refunds)
        assert refunds.citations[0].page == 2 and refunds.citations[0].pages == (2,)
        assert refunds.context.startswith("[1] Warranty (p. 2)\n")
        assert all(pages[cid] == 2 for cid in refunds.citations[0].chunk_ids)

        shipping = t.retrieve("free shipping for orders")
        check_citations(t, shipping)
        assert shipping.citations[0].page == 3
        assert shipping.citations[0].source_path == str(pdf.resolve())

        # The battery (page 1) and refund (page 2) chunks are neighbours: one passage
        # over two pages.
        both = t.retrieve("battery warranty refunds payment")
        check_citations(t, both)
    spanning = [c for c in both.citations if len(c.pages) > 1]
    assert spanning and spanning[0].pages[0] == 1 and spanning[0].page == 1
    assert f"(pp. 1-{spanning[0].pages[-1]})" in both.context


# -- 3. bounds: max_chunks and the token budget -------------------------------------------

GAUGES = " ".join(
    f"Gauge {n} on panel {chr(65 + n)} reads the pressure of line {n} in bar; keep it"
    f" below the red mark of {n + 3} bar."
    for n in range(16)
)


@pytest.mark.parametrize("max_chunks", [1, 3, 5])
def test_never_more_than_max_chunks(db_path: Path, max_chunks: int) -> None:
    with store(db_path, chunk_size=100, chunk_overlap=0, max_chunks=max_chunks) as t:
        t.add(text=GAUGES, title="Gauges", document_id="gauges")
        assert len(t.chunks("gauges")) > 8
        result = t.retrieve("gauge pressure red mark")
        check_citations(t, result)
    assert len(result.selected_chunk_ids) == max_chunks  # plenty of matches: exactly full
    assert sum(len(c.chunk_ids) for c in result.citations) == max_chunks
    assert result.debug["context"]["max_chunks"] == max_chunks
    assert result.debug["candidates"]["context"] == max_chunks
    assert result.debug["candidates"]["above_min_relevance"] > max_chunks


@pytest.mark.parametrize("counted", [False, True], ids=["estimated", "stored_counts"])
def test_token_budget_is_respected_and_lower_budgets_keep_fewer_chunks(
    tmp_path: Path, counted: bool
) -> None:
    selected: dict[int, int] = {}
    for budget in (2000, 160, 90):
        with store(
            tmp_path / f"budget-{budget}.db",
            count_tokens=word_count if counted else None,
            chunk_size=150,
            chunk_overlap=50,
            max_chunks=100,
            context_budget=budget,
        ) as t:
            t.add(text=GAUGES, title="Gauges", document_id="gauges")
            chunks = t.chunks("gauges")
            assert all(b.char_start < a.char_end for a, b in itertools.pairwise(chunks))
            if counted:
                assert all(c.token_count == word_count(c.content) for c in chunks)
            else:
                assert all(c.token_count is None for c in chunks)  # no embedder, no tokenizer
            result = t.retrieve("gauge pressure red mark")
            check_citations(t, result)
            ctx = result.debug["context"]
            assert ctx["budget"] == budget
            assert ctx["tokens"] == expected_tokens(t, result) <= budget
            assert ctx["truncated"] is False
            assert set(ctx["skipped_for_budget"]).isdisjoint(result.selected_chunk_ids)
            if budget < 2000:
                assert ctx["skipped_for_budget"]
            selected[budget] = len(result.selected_chunk_ids)
            if budget == 2000:  # every chunk, one passage: the overlaps count once
                assert [c.chunk_ids for c in result.citations] == [tuple(c.id for c in chunks)]
                assert result.citations[0].text == GAUGES
    assert selected[2000] == len(chunks)  # everything fits the default budget
    assert selected[2000] > selected[160] > selected[90] >= 1


def test_a_budget_too_small_for_one_chunk_truncates_the_best_chunk(db_path: Path) -> None:
    body = " ".join(
        f"The gauge number {i} reads pressure in bar and must stay below the red line."
        for i in range(12)
    )
    with store(db_path, chunk_size=800, chunk_overlap=100, context_budget=50) as t:
        t.add(text=body, title="Gauges", document_id="gauges")
        chunks = stored(t, "gauges")
        assert all(math.ceil(len(c.content) / 4) > 50 for c in chunks.values())
        result = t.retrieve("gauge pressure red line")
    ctx = result.debug["context"]
    assert ctx["truncated"] is True
    assert result.grounded is True
    [chunk_id] = result.selected_chunk_ids
    best = result.debug["ranked"][0][0]
    assert chunk_id == best
    assert best not in ctx["skipped_for_budget"]
    assert ctx["tokens"] <= 50
    assert math.ceil(len(result.context) / 4) <= 50  # the documented estimate of the block
    [citation] = result.citations
    kept = citation.text
    assert chunks[best].content.startswith(kept) and len(kept) < len(chunks[best].content)
    assert kept.endswith("red line."), "cut at its last sentence end"
    assert result.context == f"[1] Gauges\n{citation.text}"


def test_truncation_respects_the_budget_even_with_a_long_title(db_path: Path) -> None:
    body = " ".join(f"The gauge number {i} reads pressure in bar." for i in range(30))
    with store(db_path, chunk_size=800, chunk_overlap=100, context_budget=50) as t:
        t.add(text=body, title="Gauge manual " * 20, document_id="gauges")
        result = t.retrieve("gauge pressure")
    assert result.debug["context"]["truncated"] is True
    assert result.debug["context"]["tokens"] <= 50
    assert math.ceil(len(result.context) / 4) <= 50


# -- 4. grounding and guidance ------------------------------------------------------------


@pytest.fixture
def scoped(db_path: Path) -> Iterator[Tether]:
    """A session "chat" in workspace "ws" with PLANT, another document of "ws" outside
    the chat, plus a global handbook."""
    with store(db_path) as t:
        t.create_session("chat", workspace_id="ws")
        t.add(text=PLANT, title="Plant", document_id="plant", session_id="chat")
        t.add(text="Water the roses every week.", title="Garden", workspace_id="ws")
        t.add(text=HANDBOOK, title="Handbook", mime="text/markdown", document_id="book")
        yield t


@pytest.mark.parametrize(
    ("scope", "where", "suggested", "advice"),
    [
        ("session", "this chat's documents", "workspace", "Search the whole workspace instead"),
        ("workspace", "this workspace", "global", "Search the global library instead"),
        ("global", "the global library", None, "Add documents that cover this to the library."),
    ],
)
def test_nothing_matching_is_ungrounded_with_guidance(
    scoped: Tether, scope: str, where: str, suggested: str | None, advice: str
) -> None:
    result = scoped.retrieve(
        "zeppelin airship mooring",
        scope=scope,  # type: ignore[arg-type]
        session_id="chat" if scope != "global" else None,  # (global names neither)
        workspace_id="ws" if scope != "global" else None,
    )
    assert result.retrieved is True
    assert result.grounded is False
    assert result.context == "" and result.citations == () and result.selected_chunk_ids == ()
    assert result.guidance is not None
    assert result.guidance.startswith(f"Nothing in {where} matches the question.")
    assert advice in result.guidance
    assert result.suggested_scope == suggested
    assert result.debug["candidates"]["fused"] == 0


@pytest.mark.parametrize(
    ("scope", "opening", "advice"),
    [
        ("session", "This chat has no documents yet.", "the workspace holds no other."),
        ("workspace", "This workspace has no documents yet.", "the global library holds none."),
        ("global", "The global library has no documents yet.", "to the library."),
    ],
)
def test_an_empty_scope_says_it_has_no_documents(
    db_path: Path, scope: str, opening: str, advice: str
) -> None:
    """In an empty store no scope is suggested: a wider one holds nothing more."""
    with store(db_path) as t:
        t.create_session("empty", workspace_id="void")
        result = t.retrieve(
            "how does the pump work",
            scope=scope,  # type: ignore[arg-type]
            session_id="empty" if scope != "global" else None,  # (global names neither)
            workspace_id="void" if scope != "global" else None,
        )
    assert result.retrieved is True and result.grounded is False
    assert result.guidance is not None and result.guidance.startswith(opening)
    assert result.guidance.endswith(advice)
    assert result.suggested_scope is None


def test_a_session_whose_documents_are_elsewhere_has_no_documents(scoped: Tether) -> None:
    scoped.create_session("other", workspace_id="ws")
    result = scoped.retrieve("coolant pump", scope="session", session_id="other")
    assert result.grounded is False
    assert result.guidance is not None
    assert result.guidance.startswith("This chat has no documents yet.")
    # ...while the workspace does answer it.
    assert scoped.retrieve("coolant pump", scope="workspace", workspace_id="ws").grounded


def test_min_relevance_one_makes_partial_matches_ungrounded(db_path: Path) -> None:
    question = "pump coolant zeppelin"  # two of three terms occur
    with store(db_path) as t:
        t.add(text=PLANT, title="Plant")
        every, partial = t.retrieve("pump coolant reactor"), t.retrieve(question)
        assert every.grounded
        assert every.debug["relevance"]["best"] > partial.debug["relevance"]["best"]
    with store(db_path, min_relevance=1.0) as t:
        result = t.retrieve(question)
        assert result.retrieved is True and result.grounded is False
        assert result.context == "" and result.citations == ()
        assert result.guidance is not None
        assert "relevant enough" in result.guidance
        assert result.guidance.startswith("Nothing in the global library is relevant enough")
        relevance = result.debug["relevance"]
        assert relevance["min_relevance"] == 1.0
        assert 0.0 < relevance["best"] < 1.0  # evidence is a probability, never certain
        assert relevance["below_min"] and result.debug["candidates"]["fused"] > 0
        assert "below min_relevance 1" in result.debug["grounding"]["why"]
        assert "'zeppelin' occurs nowhere in scope" in result.debug["grounding"]["why"]
    with store(db_path, min_relevance=0.0) as t:  # compared with >=: 0 lets anything found
        assert t.retrieve(question).grounded


def test_relevance_is_lexical_evidence_without_embeddings(db_path: Path) -> None:
    with store(db_path) as t:
        t.add(text=PLANT, title="Plant")
        full = t.retrieve("pump coolant reactor")
        partial = t.retrieve("pump coolant reactor zeppelin")
    assert partial.debug["method"] == "lexical"
    assert partial.debug["relevance"]["definition"] == "evidence (lexical)"
    assert any("lexical only" in d for d in partial.debug["degradations"])
    [citation] = partial.citations
    [chunk_id] = citation.chunk_ids
    recorded = partial.debug["grounding"]["evidence"][chunk_id]
    assert recorded["cosine"] is None
    assert citation.relevance == pytest.approx(recorded["evidence"], abs=1e-4)
    # Three of four terms (a one-document store: IDF says little, the shares are near
    # equal, the absent term a little heavier).
    assert 0.5 < recorded["coverage"] < 0.75
    # Every term in one passage is stronger evidence than three of four.
    assert full.citations[0].relevance > citation.relevance
    assert full.debug["grounding"]["evidence"][chunk_id]["coverage"] == 1.0


def test_relevance_is_evidence_with_the_question_cosine_inside(db_path: Path) -> None:
    embedder = HashEmbedder()
    question = "how does the pump move coolant"
    with store(db_path, embedder=embedder, chunk_size=120, chunk_overlap=40) as t:
        t.add(text=PLANT, title="Plant", document_id="plant")
        result = t.retrieve(question)
        chunks = stored(t, "plant")
    assert result.debug["method"] == "hybrid"
    assert result.debug["relevance"]["definition"] == "evidence"
    assert result.grounded
    evidence = result.debug["grounding"]["evidence"]
    q = HashEmbedder().embed([question])[0]
    for citation in result.citations:
        for cid in citation.chunk_ids:
            c = chunks[cid]
            v = HashEmbedder().embed([embedding_text("Plant", c.section_title, c.content)])[0]
            assert evidence[cid]["cosine"] == pytest.approx(float(v @ q), abs=1e-3)
        best = max(evidence[cid]["evidence"] for cid in citation.chunk_ids)
        assert citation.relevance == pytest.approx(best, abs=1e-3)


def test_term_coverage_sees_terms_late_in_a_long_chunk(db_path: Path) -> None:
    text = (
        "Before first use, unpack the device, remove every protective film, place the base"
        " station on a flat surface near a power outlet, connect the supplied adapter,"
        " wait until the status light turns green, download the companion application"
        " from your phone's store, create an account with a valid email address, accept"
        " the privacy notice, enable location permissions, pair the handset over"
        " bluetooth, choose a language, set the clock, name each room, calibrate both"
        " sensors, update the firmware, restart twice, verify readings, register online."
        " The battery warranty lasts two years."
    )
    with store(db_path) as t:  # default chunk_size: one chunk
        t.add(text=text, title="Manual")
        assert len(t.chunks(t.documents()[0].id)) == 1 and t.search("battery warranty")
        result = t.retrieve("battery warranty")
    assert result.grounded, result.debug["relevance"]


def test_term_coverage_of_a_stopword_only_question(db_path: Path) -> None:
    with store(db_path) as t:
        t.add(text="To be, or not to be, that is the question.", title="Hamlet")
        assert t.search("to be or not to be")
        result = t.retrieve("to be or not to be")
    assert result.grounded, result.debug["relevance"]


# -- 5. the heuristic rerank --------------------------------------------------------------


def test_source_diversity_defers_a_documents_further_chunks(tmp_path: Path) -> None:
    pump = "\n\n".join(
        [
            "The pump pressure gauge shows the pump pressure in bar.",
            "Check the pump pressure weekly; pump pressure drifts in winter.",
            "A low pump pressure reading means the pump needs service.",
        ]
    )
    tyres = "The pressure of the tyres is checked by the pump at the garage."
    results = {}
    for cap in (100, 1):
        path = tmp_path / f"cap-{cap}.db"
        with store(
            path, chunk_size=100, chunk_overlap=0, max_chunks=2, rerank={"max_per_document": cap}
        ) as t:
            t.add(text=pump, title="Pump", document_id="pump")
            t.add(text=tyres, title="Tyres", document_id="tyres")
            a1, a2, a3 = (c.id for c in t.chunks("pump"))
            [b] = (c.id for c in t.chunks("tyres"))
            results[cap] = t.retrieve("pump pressure")
    free, capped = results[100], results[1]
    assert [r[:2] for r in free.debug["ranked"]] == [[a1, "pump"], [a2, "pump"], [a3, "pump"],
                                                     [b, "tyres"]]  # fmt: skip
    assert free.debug["rerank"]["deferred_for_diversity"] == []
    assert [c.document_id for c in free.citations] == ["pump"]  # two pump chunks fill it
    assert [r[:2] for r in capped.debug["ranked"]] == [[a1, "pump"], [b, "tyres"], [a2, "pump"],
                                                       [a3, "pump"]]  # fmt: skip
    assert capped.debug["rerank"]["deferred_for_diversity"] == [a2, a3]
    assert [(c.document_id, c.chunk_ids) for c in capped.citations] == [
        ("pump", (a1,)),
        ("tyres", (b,)),
    ]


def test_a_matching_section_title_wins_a_tie(tmp_path: Path) -> None:
    # FTS5 indexes section titles with the porter stemmer: "Universe" and "University"
    # are both "univers" to bm25, so these two equal-text chunks tie exactly in the fused
    # score; the title factor compares the question's literal terms and only the
    # "University" heading holds one.
    permits = "Permits are issued at the front desk and cost ten euros per month."
    intro = "Stars and planets are described in this part."
    orders = {}
    for weight in (0.1, 0.0):
        with store(
            tmp_path / f"title-{weight}.db",
            chunk_size=100,
            chunk_overlap=0,
            min_relevance=0.0,
            rerank={"title_weight": weight},
        ) as t:
            t.add(
                text=f"# Universe\n\n{intro}\n\n{permits}",
                title="Notes B",
                mime="text/markdown",
                document_id="universe",
            )
            t.add(
                text=f"# University\n\n{intro}\n\n{permits}",
                title="Notes A",
                mime="text/markdown",
                document_id="university",
            )
            [other] = [c.id for c in t.chunks("universe") if c.content == permits]
            [match] = [c.id for c in t.chunks("university") if c.content == permits]
            result = t.retrieve("university parking permits")
            orders[weight] = result
    with_title, without = orders[0.1], orders[0.0]
    factors = with_title.debug["rerank"]["factors"]
    assert factors[other]["base"] == factors[match]["base"] == 1.0  # an exact tie
    assert factors[match]["title"] == round(0.1 * 1 / 3, 4)  # 1 of 3 terms in the title
    assert factors[other]["title"] == 0.0
    assert with_title.debug["ranked"][0][:2] == [match, "university"]
    assert with_title.citations[0].section_title == "University"
    assert with_title.debug["rerank"]["boosted"]["title"] >= 1
    # Without the factor the tie keeps the fused order (the first indexed chunk first).
    assert without.debug["ranked"][0][:2] == [other, "universe"]
    assert without.debug["rerank"]["boosted"]["title"] == 0


FILTER = "The filter is replaced every six months by a technician."


@pytest.mark.parametrize(
    ("margin", "attach_order", "winner"),
    [
        (0.02, ["g", "w"], "w"),  # the newer attachment wins the tie...
        (0.0, ["g", "w"], "g"),  # ...and without a margin the fused order stays
        (0.02, ["w", "g"], "g"),  # newest is also first in fused order: unchanged
        (0.0, ["w", "g"], "g"),
    ],
)
def test_session_recency_breaks_ties_for_the_newest_attachment(
    db_path: Path, margin: float, attach_order: list[str], winner: str
) -> None:
    with store(db_path, rerank={"recency_margin": margin}) as t:
        t.create_session("chat", workspace_id="ws")
        # Identical content in two workspaces (a global document can join any session).
        t.add(text=FILTER, title="Global copy", document_id="g")
        t.add(text=FILTER, title="Workspace copy", document_id="w", workspace_id="ws")
        for doc in attach_order:
            assert t.attach(doc, "chat")
            time.sleep(0.002)
        ids = {d: t.chunks(d)[0].id for d in ("g", "w")}
        result = t.retrieve("how often is the filter replaced", scope="session", session_id="chat")
        # Outside a session scope recency is no factor at all, the session named or not.
        in_workspace = t.retrieve(
            "how often is the filter replaced",
            scope="workspace",
            workspace_id="ws",
            session_id="chat",
        )
    factors = result.debug["rerank"]["factors"]
    newest = attach_order[-1]
    assert factors[ids["g"]]["base"] == factors[ids["w"]]["base"] == 1.0
    assert factors[ids[newest]]["recency"] == margin
    assert factors[ids[attach_order[0]]]["recency"] == 0.0
    assert result.debug["rerank"]["boosted"]["recency"] == (1 if margin else 0)
    assert result.debug["ranked"][0][:2] == [ids[winner], winner]
    assert result.citations[0].document_id == winner
    assert all(f["recency"] == 0.0 for f in in_workspace.debug["rerank"]["factors"].values())


def test_metadata_priority_lifts_a_document(db_path: Path) -> None:
    with store(db_path) as t:
        t.add(
            [
                TextSource(FILTER, "Plain", document_id="plain"),
                TextSource(
                    FILTER.replace("a technician", "an engineer"),
                    "Boosted",
                    document_id="boosted",
                    metadata={"priority": 1},
                ),
            ]
        )
        t.add(
            text=FILTER.replace("a technician", "the vendor"),
            title="Demoted",
            document_id="demoted",
            metadata={"priority": -0.5},
        )
        ids = {d: t.chunks(d)[0].id for d in ("plain", "boosted", "demoted")}
        result = t.retrieve("how often is the filter replaced")
        assert t.get_document("boosted").metadata == {"priority": 1}
    factors = result.debug["rerank"]["factors"]
    assert {cid: factors[cid]["base"] for cid in ids.values()} == dict.fromkeys(ids.values(), 1.0)
    assert factors[ids["boosted"]]["priority"] == 0.1
    assert factors[ids["plain"]]["priority"] == 0.0
    assert factors[ids["demoted"]]["priority"] == -0.05
    assert result.debug["rerank"]["boosted"]["priority"] == 2
    assert [row[1] for row in result.debug["ranked"]] == ["boosted", "plain", "demoted"]
    assert [c.document_id for c in result.citations] == ["boosted", "plain", "demoted"]


def hit(chunk_id: int, document_id: str, section: str | None = None, ordinal: int = 0) -> Hit:
    return Hit(
        document_id=document_id,
        chunk_id=chunk_id,
        title=document_id.title(),
        section_title=section,
        page=None,
        text=f"text {chunk_id}",
        score=0.0,
        ordinal=ordinal,
        char_start=0,
        char_end=len(f"text {chunk_id}"),
        source_path=None,
        workspace_id=GLOBAL_WORKSPACE,
    )


def test_heuristic_rerank_factor_values() -> None:
    # title 0.1, priority 0.1, recency 0.02, 2 per document; base = the fused score alone
    settings = RerankSettings(evidence_weight=0.0)
    candidates = [
        Candidate(hit(1, "a"), fused=3.0, relevance=1.0, recency="2024-01-01T00:00:00Z"),
        Candidate(
            hit(2, "b", "Refund policy"),
            fused=2.0,
            relevance=1.0,
            priority=0.5,
            recency="2024-01-02T00:00:00Z",
        ),
        Candidate(
            hit(3, "c", "Shipping"), fused=1.0, relevance=1.0, recency="2024-01-03T00:00:00Z"
        ),
    ]
    ranked, debug = heuristic_rerank("refund policy window", candidates, settings, in_session=True)
    assert debug["factors"] == {
        1: {"base": 1.0, "title": 0.0, "priority": 0.0, "recency": 0.0},
        2: {"base": 0.5, "title": round(0.1 * 2 / 3, 4), "priority": 0.05, "recency": 0.01},
        3: {"base": 0.0, "title": 0.0, "priority": 0.0, "recency": 0.02},
    }
    assert [c.hit.chunk_id for c in ranked] == [1, 2, 3]
    assert [c.score for c in ranked] == pytest.approx([1.0, 0.5 + 0.2 / 3 + 0.06, 0.02])
    assert debug["boosted"] == {"title": 1, "priority": 1, "recency": 2}
    assert debug["method"] == "heuristic" and debug["candidates"] == 3
    assert debug["moved"] == 0 and debug["deferred_for_diversity"] == []

    # Outside a session, recency is 0 for everyone.
    _, outside = heuristic_rerank("refund policy window", candidates, settings, in_session=False)
    assert all(f["recency"] == 0.0 for f in outside["factors"].values())
    assert outside["boosted"]["recency"] == 0


def test_the_rerank_base_blends_the_fused_score_with_the_question_match() -> None:
    candidates = [
        Candidate(hit(1, "a"), fused=3.0, relevance=0.3, match=0.2),
        Candidate(hit(2, "b"), fused=2.0, relevance=0.6, match=1.0),
        Candidate(hit(3, "c"), fused=1.0, relevance=0.5, match=0.6),
    ]
    settings = RerankSettings(evidence_weight=0.9, title_weight=0.0)
    ranked, debug = heuristic_rerank("anything", candidates, settings, in_session=False)
    # fused scaled 1, 0.5, 0; match scaled 0, 1, 0.5; base = 0.1 * fused + 0.9 * match
    assert {cid: f["base"] for cid, f in debug["factors"].items()} == {
        2: pytest.approx(0.95),
        3: pytest.approx(0.45),
        1: pytest.approx(0.1),
    }
    assert [c.hit.chunk_id for c in ranked] == [2, 3, 1]
    fused_only, _ = heuristic_rerank(
        "anything", candidates, RerankSettings(evidence_weight=0.0), in_session=False
    )
    assert [c.hit.chunk_id for c in fused_only] == [1, 2, 3]
    # Without vectors there is no match: the fused score is the whole base.
    lexical = [dataclasses.replace(c, match=None) for c in candidates]
    ranked, debug = heuristic_rerank("anything", lexical, settings, in_session=False)
    assert [c.hit.chunk_id for c in ranked] == [1, 2, 3]
    assert debug["factors"][2]["base"] == 0.5


def test_heuristic_rerank_ties_title_and_diversity() -> None:
    settings = RerankSettings(max_per_document=1)
    candidates = [
        Candidate(hit(1, "a", "Unrelated heading", 0), fused=5.0, relevance=0.5),
        Candidate(hit(2, "a", "Unrelated heading", 1), fused=5.0, relevance=0.5),
        Candidate(hit(3, "b", "Battery warranty", 0), fused=5.0, relevance=0.5),
        Candidate(hit(4, "c", None, 0), fused=5.0, relevance=0.5),
    ]
    ranked, debug = heuristic_rerank("battery warranty", candidates, settings, in_session=False)
    # Equal fused scores all scale to 1.0; the matching heading wins, the rest keep order,
    # and document a's second chunk is deferred behind every other document.
    assert {f["base"] for f in debug["factors"].values()} == {1.0}
    assert debug["factors"][3]["title"] == 0.1
    assert [c.hit.chunk_id for c in ranked] == [3, 1, 4, 2]
    assert debug["deferred_for_diversity"] == [2]
    assert debug["moved"] == 4  # no position holds its fused chunk any more
    assert ranked[0].score == pytest.approx(1.1)

    assert heuristic_rerank("anything", [], settings, in_session=True) == (
        [],
        {"method": "heuristic", "candidates": 0},
    )
    # One candidate: base 1, and the only session time counts as the newest.
    [only], single = heuristic_rerank(
        "x", [Candidate(hit(9, "z"), 0.3, 0.1, recency="t")], RerankSettings(), in_session=True
    )
    assert only.score == pytest.approx(1.02)
    assert single["factors"][9] == {"base": 1.0, "title": 0.0, "priority": 0.0, "recency": 0.02}


@pytest.mark.parametrize(
    ("metadata", "priority"),
    [
        (None, 0.0), ({}, 0.0), ({"priority": 1}, 1.0), ({"priority": 0.25}, 0.25),
        ({"priority": 7}, 1.0), ({"priority": -3}, -1.0), ({"priority": True}, 0.0),
        ({"priority": "1"}, 0.0), ({"priority": float("nan")}, 0.0),
        ({"priority": float("inf")}, 0.0), ({"other": 1}, 0.0),
    ],
)  # fmt: skip
def test_metadata_priority_is_a_clamped_number(metadata: dict | None, priority: float) -> None:
    assert metadata_priority(metadata) == priority


# -- 6. scope isolation -------------------------------------------------------------------

VOCAB = ("apple", "river", "stone", "cloud", "tiger", "lemon")


@dataclass(frozen=True)
class Doc:
    id: str
    workspace_id: str
    sessions: tuple[str, ...]
    words: tuple[str, ...]


@st.composite
def layouts(draw: st.DrawFn) -> tuple[dict[str, str], list[Doc]]:
    workspaces = ("ws0", "ws1", GLOBAL_WORKSPACE)
    sessions = {f"s{i}": draw(st.sampled_from(workspaces)) for i in range(3)}
    docs = []
    for i in range(draw(st.integers(1, 8))):
        ws = draw(st.sampled_from(workspaces))
        eligible = sorted(s for s, sw in sessions.items() if ws in (sw, GLOBAL_WORKSPACE))
        attached = (
            draw(st.lists(st.sampled_from(eligible), max_size=2, unique=True)) if (eligible) else []
        )
        words = draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3))
        docs.append(Doc(f"doc{i}", ws, tuple(attached), tuple(words)))
    return sessions, docs


@given(layout=layouts(), question=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=2))
@hsettings(max_examples=25, deadline=None)
def test_retrieve_cites_only_documents_of_its_scope(
    layout: tuple[dict[str, str], list[Doc]], question: list[str]
) -> None:
    sessions, docs = layout
    query = " ".join(question)
    with (
        tempfile.TemporaryDirectory() as tmp,
        store(Path(tmp) / "t.db", wider_scope_margin=None) as t,
    ):
        for session, ws in sessions.items():
            t.create_session(session, workspace_id=ws)
        for doc in docs:
            t.add(
                text=" ".join(doc.words) + ".",
                title=doc.id,
                document_id=doc.id,
                workspace_id=doc.workspace_id,
            )
            for session in doc.sessions:
                t.attach(doc.id, session)
        scopes = [Scope.session(s) for s in sessions]
        scopes += [Scope.workspace(w) for w in ("ws0", "ws1")] + [Scope.global_()]
        for w in ("ws0", "ws1"):
            t.create_workspace(w)
        for scope in scopes:
            if scope.kind == "session":
                visible = {d.id for d in docs if scope.id in d.sessions}
            else:
                visible = {d.id for d in docs if d.workspace_id == scope.id}
            matching = {d.id for d in docs if d.id in visible and set(question) & set(d.words)}
            result = t.retrieve(
                query,
                scope=scope,
                session_id=scope.id if scope.kind == "session" else None,
                min_relevance=0.0,  # scoping is tested here: anything matching grounds
            )
            cited = {c.document_id for c in result.citations}
            assert cited <= matching, (scope, cited, matching)
            assert result.grounded == bool(matching)
            ranked = {doc for _, doc, _ in result.debug["ranked"]}
            assert ranked <= visible


# -- 7. errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [None, 42, b"bytes", ["a list"], "", "   \n\t ", "x" * (MAX_QUESTION_CHARS + 1)],
    ids=["none", "int", "bytes", "list", "empty", "whitespace", "too_long"],
)
def test_invalid_questions_raise_invalid_argument(db_path: Path, question: object) -> None:
    with store(db_path) as t:
        t.add(text=PLANT, title="Plant")
        with pytest.raises(InvalidArgument):
            t.retrieve(question)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            asyncio.run(t.aretrieve(question))  # type: ignore[arg-type]


def test_a_question_of_exactly_the_limit_is_accepted(db_path: Path) -> None:
    question = ("pump coolant " * MAX_QUESTION_CHARS)[:MAX_QUESTION_CHARS]
    with store(db_path) as t:
        t.add(text=PLANT, title="Plant")
        result = t.retrieve(question)
    assert result.retrieved and result.grounded and len(result.question) == MAX_QUESTION_CHARS


def test_unknown_session_or_workspace_raise_not_found(scoped: Tether) -> None:
    with pytest.raises(SessionNotFound):
        scoped.retrieve("pump", scope="session", session_id="nope")
    with pytest.raises(SessionNotFound):
        asyncio.run(scoped.aretrieve("pump", scope="session", session_id="nope"))
    with pytest.raises(SessionNotFound):  # a session given for recency must exist too
        scoped.retrieve("pump", scope="workspace", workspace_id="ws", session_id="nope")
    with pytest.raises(WorkspaceNotFound):
        scoped.retrieve("pump", scope="workspace", workspace_id="nope")
    with pytest.raises(WorkspaceNotFound):
        asyncio.run(scoped.aretrieve("pump", scope="workspace", workspace_id="nope"))
    # Nothing was created by the failed calls.
    assert {s.id for s in scoped.sessions()} == {"chat"}
    assert "nope" not in {w.id for w in scoped.workspaces()}


# -- 8. aretrieve -------------------------------------------------------------------------


def test_aretrieve_returns_what_retrieve_returns(db_path: Path) -> None:
    with store(db_path, embedder=HashEmbedder(), chunk_size=120, chunk_overlap=40) as t:
        t.create_session("chat", workspace_id="ws")
        t.add(text=PLANT, title="Plant", document_id="plant", session_id="chat")
        t.add(text=HANDBOOK, title="Handbook", mime="text/markdown", session_id="chat")
        for question in ("coolant pump battery", "hi there", "zeppelin mooring"):
            sync = t.retrieve(question, scope="session", session_id="chat")
            asynchronous = asyncio.run(t.aretrieve(question, scope="session", session_id="chat"))
            assert asynchronous == sync
            assert asynchronous.context == sync.context
            assert asynchronous.citations == sync.citations
            assert asynchronous.selected_chunk_ids == sync.selected_chunk_ids
            assert asynchronous.debug["decision"] == sync.debug["decision"]
            assert asynchronous.debug.get("ranked") == sync.debug.get("ranked")


def test_concurrent_aretrieve_in_different_sessions_never_mix(db_path: Path) -> None:
    with store(db_path, embedder=HashEmbedder(), chunk_size=120, chunk_overlap=40) as t:
        for s in ("one", "two"):
            t.create_session(s, workspace_id="ws")
            for i in range(3):
                t.add(
                    text=f"{PLANT} Session {s} note {i}.",
                    title=f"{s}-{i}",
                    document_id=f"{s}-{i}",
                    session_id=s,
                )
        own = {s: {f"{s}-{i}" for i in range(3)} for s in ("one", "two")}
        questions = ["coolant pump reactor", "pressure report", "generator grid boron"]
        expected = {
            (s, q): t.retrieve(q, scope="session", session_id=s)
            for s in ("one", "two")
            for q in questions
        }

        async def many() -> list[tuple[str, str, RetrievalResult]]:
            jobs = [(s, q) for _ in range(3) for q in questions for s in ("one", "two")]
            results = await asyncio.gather(
                *(t.aretrieve(q, scope="session", session_id=s) for s, q in jobs)
            )
            return [(s, q, r) for (s, q), r in zip(jobs, results, strict=True)]

        results = asyncio.run(many())
        chunk_doc = {c.id: d for s in own for d in own[s] for c in t.chunks(d)}
    assert len(results) == 18
    for s, q, result in results:
        assert result.grounded and result.scope == Scope.session(s)
        assert {c.document_id for c in result.citations} <= own[s]
        assert {chunk_doc[cid] for cid in result.selected_chunk_ids} <= own[s]
        assert {doc for _, doc, _ in result.debug["ranked"]} <= own[s]
        assert result == expected[(s, q)]
        assert result.context == expected[(s, q)].context


# -- 9. the CLI ---------------------------------------------------------------------------

runner = CliRunner()


@pytest.fixture
def cli_db(tmp_path: Path) -> str:
    path = tmp_path / "cli.db"
    with store(path, chunk_size=120, chunk_overlap=40) as t:
        t.add(text=PLANT, title="Plant", document_id="plant")
        t.add(text=HANDBOOK, title="Handbook", mime="text/markdown", document_id="book")
    return str(path)


def context_cli(*args: str) -> str:
    result = runner.invoke(app, ["context", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_cli_context_json_is_the_retrieval_result(cli_db: str) -> None:
    question = "coolant pump battery heat"
    data = json.loads(context_cli(question, "--db", cli_db, "--scope", "global", "--json"))
    assert set(data) == RESULT_KEYS
    assert data["question"] == question
    assert data["scope"] == {"kind": "global", "id": GLOBAL_WORKSPACE}
    assert data["retrieved"] is True and data["grounded"] is True
    assert data["guidance"] is None and data["suggested_scope"] is None
    assert data["queries"] == [question]
    assert data["citations"] and all(set(c) == CITATION_KEYS for c in data["citations"])
    assert [c["number"] for c in data["citations"]] == list(range(1, len(data["citations"]) + 1))
    cited = [cid for c in data["citations"] for cid in c["chunk_ids"]]
    assert sorted(cited) == sorted(data["selected_chunk_ids"])
    assert data["context"].startswith("[1] ")
    assert data["debug"]["decision"]["category"] == "question"
    with Tether(db=cli_db, settings=make_settings(chunk_size=120, chunk_overlap=40)) as t:
        expected = t.retrieve(question, scope="global")
    assert data["context"] == expected.context
    assert data["citations"] == [c.to_dict() for c in expected.citations]
    assert data["selected_chunk_ids"] == list(expected.selected_chunk_ids)


def test_cli_context_text_prints_the_block_and_the_citations(cli_db: str) -> None:
    question = "coolant pump battery heat"
    output = context_cli(question, "--db", cli_db, "--scope", "global")
    with Tether(db=cli_db, settings=make_settings(chunk_size=120, chunk_overlap=40)) as t:
        expected = t.retrieve(question, scope="global")
    assert output.startswith(expected.context + "\n")
    lines = output[len(expected.context) :].strip().splitlines()
    assert len(lines) == len(expected.citations)
    for c, line in zip(expected.citations, lines, strict=True):
        chunks = ",".join(map(str, c.chunk_ids))
        assert line.startswith(f"{c.label} ")
        assert c.title in line
        assert f"{c.document_id}#{chunks} · evidence {c.relevance:.2f}" in line
        if c.section_title:  # its path, without a first heading that is the title
            path = c.section_title.removeprefix(f"{c.title} > ")
            assert f"  {path}  " in line


def test_cli_context_greeting_prints_no_retrieval(cli_db: str) -> None:
    output = context_cli("hello!", "--db", cli_db, "--scope", "global")
    assert output.strip() == "No retrieval: greeting: no retrieval needed."
    data = json.loads(context_cli("hello!", "--db", cli_db, "--scope", "global", "--json"))
    assert data["retrieved"] is False and data["context"] == "" and data["citations"] == []


def test_cli_context_no_match_prints_not_grounded(cli_db: str) -> None:
    output = context_cli("zeppelin mooring", "--db", cli_db, "--scope", "global")
    assert output.startswith("Not grounded. Nothing in the global library matches the question.")
    assert "Why: not grounded: the search found nothing in scope." in output
    assert "[1]" not in output
    data = json.loads(
        context_cli("zeppelin mooring", "--db", cli_db, "--scope", "global", "--json")
    )
    assert data["grounded"] is False and data["suggested_scope"] is None
    assert data["guidance"] in output


def test_cli_context_unknown_session_is_a_one_line_error(cli_db: str) -> None:
    result = runner.invoke(
        app, ["context", "pump", "--db", cli_db, "--scope", "session", "--session", "nope"]
    )
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output


def test_a_long_section_path_is_cut_from_the_left_in_the_header(db_path: Path) -> None:
    """The context header keeps a long path's last headings, which say where the passage
    is, and says the document's title once."""
    title = "Field Manual"
    text = (
        "# Field Manual\n\n## Operating the instruments in the field\n\n"
        "### Storage between seasons and transport\n\n#### Cold weather\n\n"
        "Keep the zircon gauges above freezing.\n"
    )
    with store(db_path) as t:
        t.add(text=text, title=title, mime="text/markdown", document_id="manual")
        result = t.retrieve("how to store zircon gauges in cold weather", scope="global")
        [citation] = result.citations
        assert citation.section_title.startswith("Field Manual > Operating")
        header = result.context.splitlines()[0]
        assert header.startswith("[1] Field Manual — … ")
        assert header.endswith("> Cold weather")
        assert "Field Manual >" not in header
