"""Grounding end to end: the evidence judgment, the wider-scope check, the LLM judge (a
scripted model and the real OpenAI client against the loopback fake), and printed page
labels in citations. Real SQLite files and PDFs; the real MiniLM where it matters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from helpers import make_pdf
from openai_fake import FakeOpenAI
from tether import LocalEmbedder, Settings, Tether
from tether.testing import ScriptedChat

PUMP_MANUAL = [
    "Zephyr pump manual. Priming the pump: open the bleed valve, fill the housing with"
    " water and run the pump for ten seconds. The pump primes in under a minute.",
    "Cleaning the filter. Unscrew the filter cap counterclockwise, rinse the mesh filter"
    " under running water and refit it. Clean the filter every three months.",
    "Error codes. E1 means the pump ran dry. E2 means the motor overheated; let it cool"
    " for thirty minutes before restarting.",
]
FAN_MANUAL = [
    "Aero fan guide. The fan has three speeds. Press the speed button to cycle through"
    " low, medium and high. The oscillation switch turns the head left and right.",
]


@pytest.fixture
def manuals(tmp_path: Path) -> tuple[Path, Path]:
    return (
        make_pdf(tmp_path / "pump.pdf", PUMP_MANUAL, title="Zephyr pump manual"),
        make_pdf(tmp_path / "fan.pdf", FAN_MANUAL, title="Aero fan guide"),
    )


@pytest.fixture
def real(
    tmp_path: Path, local_embedder: LocalEmbedder, manuals: tuple[Path, Path]
) -> Iterator[Tether]:
    """The pump manual in session "pump", the fan guide in session "fan", both in "home"."""
    settings = Settings.load(rag={"embeddings": {"enabled": True}})
    with Tether(db=tmp_path / "g.db", settings=settings, embedder=local_embedder) as t:
        pump, fan = manuals
        t.add(pump, workspace_id="home", session_id="pump")
        t.add(fan, workspace_id="home", session_id="fan")
        yield t


def test_an_answer_in_scope_is_grounded_with_its_evidence(real: Tether) -> None:
    result = real.retrieve("How long does the pump take to prime?", scope="session",
                           session_id="pump")  # fmt: skip
    assert result.grounded
    assert result.citations[0].page == 1
    grounding = result.debug["grounding"]
    assert grounding["why"].startswith("grounded:")
    best = max(c.relevance for c in result.citations)
    assert best >= Settings.load().rag.min_relevance
    # Each citation's relevance is the evidence of its best chunk, as debug records it.
    for citation in result.citations:
        recorded = [grounding["evidence"][cid]["evidence"] for cid in citation.chunk_ids]
        assert citation.relevance == pytest.approx(max(recorded), abs=1e-4)
    assert result.debug["relevance"]["definition"] == "evidence"


def test_a_question_about_something_the_scope_never_names_is_not_grounded(
    real: Tether,
) -> None:
    result = real.retrieve("Is libffi thread safe when called from several threads?",
                           scope="session", session_id="pump")  # fmt: skip
    assert not result.grounded
    assert result.context == "" and result.citations == ()
    assert result.suggested_scope == "workspace"
    grounding = result.debug["grounding"]
    assert "libffi" in grounding["absent_terms"]
    assert grounding["why"].startswith("not grounded:")
    assert "nowhere in scope" in grounding["why"]


def test_a_closer_match_in_the_workspace_ungrounds_the_session(real: Tether) -> None:
    question = "How do I change the fan speed from low to high?"
    # The pump manual is on another topic; a low threshold lets it pass locally, and the
    # workspace's fan guide is what answers.
    result = real.retrieve(question, scope="session", session_id="pump", min_relevance=0.05)
    assert not result.grounded
    assert result.suggested_scope == "workspace"
    assert "The whole workspace" not in (result.guidance or "")
    assert result.guidance == (
        "This workspace answers this better than this chat's documents: search this"
        " workspace instead."
    )
    wider = result.debug["wider_scope"]
    assert wider["scope"] == {"kind": "workspace", "id": "home"}
    assert wider["best_outside_scope"] >= wider["best_in_scope"] + wider["margin"]
    assert "holds a closer match" in result.debug["grounding"]["why"]
    # In the fan's own session it is grounded, and nothing wider is closer.
    own = real.retrieve(question, scope="session", session_id="fan")
    assert own.grounded and own.citations[0].title == "Aero fan guide"


def test_the_wider_scope_check_can_be_turned_off(
    tmp_path: Path, manuals: tuple[Path, Path], local_embedder: LocalEmbedder
) -> None:
    settings = Settings.load(rag={"embeddings": {"enabled": True}, "wider_scope_margin": None})
    with Tether(db=tmp_path / "off.db", settings=settings, embedder=local_embedder) as t:
        t.add(manuals[0], workspace_id="home", session_id="pump")
        t.add(manuals[1], workspace_id="home", session_id="fan")
        result = t.retrieve("How do I change the fan speed from low to high?",
                            scope="session", session_id="pump", min_relevance=0.05)  # fmt: skip
    assert result.grounded
    assert "wider_scope" not in result.debug


# -- the LLM judge ----------------------------------------------------------------------


DOCS = {
    "prime": ("Pump", "Priming the pump takes under a minute once the housing is full."),
    "filter": ("Filter", "Clean the pump filter every three months under running water."),
    "codes": ("Codes", "Pump error E2 means the motor overheated and must cool down."),
}


def judged(tmp_path: Path, chat: ScriptedChat, **rag: object) -> Tether:
    settings = Settings.load(rag={"enable_llm_judge": True, **rag})
    t = Tether(db=tmp_path / "judge.db", settings=settings, chat=chat)
    for doc_id, (title, text) in DOCS.items():
        t.add(text=text, title=title, document_id=doc_id)
    return t


def test_an_answerable_verdict_grounds_on_the_passages_it_names(tmp_path: Path) -> None:
    chat = ScriptedChat([json.dumps({"answerable": True, "passages": [2]})])
    with judged(tmp_path, chat) as t:
        result = t.retrieve("How often should the pump filter be cleaned?", scope="global")
    assert result.grounded
    shown = result.debug["grounding"]["judge"]
    assert shown["by"] == "llm" and shown["answerable"] is True
    assert list(result.selected_chunk_ids) == shown["supporting"]
    assert len(result.selected_chunk_ids) == 1
    assert "Passages:" in chat.calls[0][-1]["content"]
    assert result.debug["grounding"]["why"].startswith("grounded: the LLM judge")


def test_an_unanswerable_verdict_is_not_grounded_whatever_the_evidence(tmp_path: Path) -> None:
    chat = ScriptedChat(['{"answerable": false, "passages": []}'])
    with judged(tmp_path, chat, min_relevance=0.0) as t:
        result = t.retrieve("How often should the pump filter be cleaned?", scope="global")
        assert not result.grounded
        assert result.suggested_scope is None  # global: nothing wider
        assert result.debug["grounding"]["why"].startswith("not grounded: the LLM judge")
        (entry,) = t.retrieval_log(limit=1)
    assert entry.outcome == "ungrounded"


def test_a_judge_that_fails_leaves_the_local_judgment_and_says_so(tmp_path: Path) -> None:
    chat = ScriptedChat(["I think so, yes."])
    with judged(tmp_path, chat) as t:
        result = t.retrieve("How often should the pump filter be cleaned?", scope="global")
    assert result.grounded  # the local evidence grounds it
    assert any("LLM judge failed" in d for d in result.debug["degradations"])
    assert "judge" not in result.debug["grounding"]


def test_the_judge_without_a_chat_model_degrades(tmp_path: Path) -> None:
    settings = Settings.load(rag={"enable_llm_judge": True})
    with Tether(db=tmp_path / "nochat.db", settings=settings) as t:
        t.add(text=DOCS["filter"][1], title="Filter")
        result = t.retrieve("How often should the pump filter be cleaned?", scope="global")
    assert result.grounded
    assert any("LLM judge is on but" in d for d in result.debug["degradations"])


def test_the_judge_through_the_real_openai_client_on_loopback(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script_chat('```json\n{"answerable": true, "passages": [1]}\n```')
        settings = Settings.load(
            llm={"base_url": fake.base_url, "api_key": fake.api_key, "model": "judge-1",
                 "timeout": 2.0, "max_retries": 0},
            rag={"enable_llm_judge": True, "judge_candidates": 2},
        )  # fmt: skip
        with Tether(db=tmp_path / "http.db", settings=settings) as t:
            for doc_id, (title, text) in DOCS.items():
                t.add(text=text, title=title, document_id=doc_id)
            result = t.retrieve("What does pump error E2 mean?", scope="global")
        (request,) = fake.requests_to("/v1/chat/completions")
    assert result.grounded
    assert result.debug["grounding"]["judge"]["shown"] == 2
    body = request.body
    assert body["model"] == "judge-1"
    assert body["messages"][-1]["content"].count("\n[") == 2  # two passages shown


# -- printed page labels -----------------------------------------------------------------


def test_citations_carry_the_printed_page_label_beside_the_physical_page(
    tmp_path: Path,
) -> None:
    plain = make_pdf(tmp_path / "plain.pdf", ["Front matter here.", "Preface text.",
                     "Chapter one. The beacon blinks twice when the battery is low."])  # fmt: skip
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.set_page_label(0, 1, style="/r")  # i, ii
    writer.set_page_label(2, 2, style="/D", start=7)  # 7
    labelled = tmp_path / "labelled.pdf"
    writer.write(labelled)

    with Tether(db=tmp_path / "labels.db") as t:
        t.add(labelled, workspace_id="w")
        result = t.retrieve("Why does the beacon blink twice?", scope="workspace",
                            workspace_id="w")  # fmt: skip
    (citation,) = result.citations
    assert (citation.page, citation.page_label) == (3, "7")
    assert citation.to_dict()["page_label"] == "7"
    assert "(p. 7, PDF page 3)" in result.context.splitlines()[0]
