"""Cited passages end where a sentence ends: a chunk cut by a page end is finished from
the next page, and a passage cut to the budget stops at its last sentence end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from helpers import make_pdf, make_settings
from tether import Tether, TextSource
from tether.eval.documents import starts_inside_a_sentence
from tether.retrieve.context import build_context, ends_a_sentence, finish_sentences
from tether.retrieve.rerank import Candidate

PAGE_ONE = (
    "Battery care. Keep the sensor out of direct sun. The lithium cell is permanently"
    " damaged by heat above 60 degrees"
)
PAGE_TWO = (
    "Celsius when the sensor is left in a closed car for more than an hour. Other pages"
    " describe pairing, firmware updates and the warranty in detail."
)


def test_a_sentence_cut_by_a_page_end_is_finished_in_the_cited_passage(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "care.pdf", [PAGE_ONE, PAGE_TWO])
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(pdf, workspace_id="w")
        result = t.retrieve("at what heat is the lithium cell damaged?", scope="workspace",
                            workspace_id="w")  # fmt: skip
    first = result.citations[0]
    assert first.pages[0] == 1
    assert first.text.rstrip().endswith("for more than an hour."), first.text
    assert "closed car" in result.context


def test_ends_a_sentence() -> None:
    assert ends_a_sentence("It is done.")
    assert ends_a_sentence('He said "stop."')
    assert ends_a_sentence("Options:")
    assert not ends_a_sentence("damaged by heat above 60 degrees")
    assert not ends_a_sentence("First line.\nthe cell is damaged by heat above")
    assert not ends_a_sentence("the fix ships in version 2.1 of the")
    for block in ("| --name | string | the name |", "- a list item", "```\nls -l", "    code",
                  "## Heading", "$ idn2 --register fußball", "See <https://example.org/x>",
                  "--quiet Silent operation",
                  "Response body    | []byte    | Raw docker daemon response body",
                  "7b369448dccb   bridge     bridge    local",
                  "only some [Dockerfile instructions.](#environment-replacement)"):  # fmt: skip
        assert ends_a_sentence(f"Some prose.\n{block}"), block
    assert not ends_a_sentence("Some prose.\nsee the [full list](#list) of the options that")
    # A PDF table comes out one cell per line: its last row ends the passage.
    cells = "Token\nMeaning\nValue\nreadOnly\nThe widget is read only\n1<<0"
    assert ends_a_sentence(f"Flags are shown below.\n{cells}")
    assert ends_a_sentence("Some prose.\nforceBorder\ndraw a border\nFalse\nrelative\ndashLen")
    # Wrapped prose whose last line is short is still open.
    wrapped = "the widget is drawn with a border when forceBorder is true and\nthe"
    assert not ends_a_sentence(f"Some prose.\n{wrapped}")
    assert not ends_a_sentence("Some prose.\nToken\nMeaning\nValue\nthe widget is drawn when")


def test_a_candidate_is_left_alone_when_the_next_chunk_is_not_its_continuation(
    tmp_path: Path,
) -> None:
    """The next chunk id belongs to another document: it finishes nothing."""
    texts = [
        TextSource("The cell is damaged by heat above 60 degrees", "a"),
        TextSource("Celsius in a car. Unrelated second document.", "b"),
    ]
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(texts, workspace_id="w")
        hits = t.search("damaged heat celsius", scope="workspace", workspace_id="w", k=5)
        by_title = {h.title: h for h in hits}
        assert by_title["b"].chunk_id == by_title["a"].chunk_id + 1
        alone = [Candidate(hit=by_title["a"], fused=1.0, relevance=1.0)]
        assert finish_sentences(alone, t.store.hits_for_chunks) == alone


def test_a_passage_cut_to_the_budget_stops_at_a_sentence_end(tmp_path: Path) -> None:
    text = " ".join(f"Step {i} tightens the bolt number {i} by a quarter turn." for i in range(60))
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(TextSource(text, "steps"), workspace_id="w")
        hit = t.search("bolt quarter turn", scope="workspace", workspace_id="w", k=1)[0]
    context = build_context([Candidate(hit=hit, fused=1.0, relevance=1.0)], max_chunks=1,
                            budget=60)  # fmt: skip
    assert context.truncated
    assert context.citations[0].text.endswith("turn."), context.citations[0].text


def test_a_passage_that_starts_inside_a_sentence_is_begun_at_its_start(tmp_path: Path) -> None:
    """A chunk's overlap starts at a word when no sentence starts in it: the cited passage
    takes the sentence's opening words from the chunk before it, offsets exact."""
    text = (
        "The pump has two modes. In winter mode the pump circulates warm water through the"
        " outer loop every twenty minutes so that the pipes never freeze, whatever the"
        " weather outside and however long the house stays empty during the holidays."
        " The quartz filter in the outer loop is replaced every two years by the installer."
    )
    settings = make_settings(chunk_size=180, chunk_overlap=60, embeddings={"enabled": False})
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        [result] = t.add(TextSource(text, "pump"), workspace_id="w")
        chunks = t.chunks(result.document_id)
        later = [c for c in chunks[1:] if c.content[0].islower()]
        assert later, [c.content for c in chunks]  # a chunk starts inside a sentence
        answer = t.retrieve(
            "how long the house stays empty during the holidays", scope="workspace",
            workspace_id="w",
        )  # fmt: skip
        document = t.document_text(result.document_id)
        texts: dict[str, str] = {}
        for citation in answer.citations:
            assert citation.text[0].isupper(), citation.text  # a sentence's start
            assert citation.text in document
            assert not starts_inside_a_sentence(t, citation, texts)
            # What the evaluation counts: a passage opening after a sentence's first words.
            cut = replace(citation, text=citation.text[citation.text.index(" ") + 1 :])
            assert starts_inside_a_sentence(t, cut, texts)
