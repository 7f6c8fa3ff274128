"""Cited passages end where a sentence ends: a chunk cut by a page end is finished from
the next page, and a passage cut to the budget stops at its last sentence end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from helpers import make_pdf, make_settings
from tether import Tether, TextSource
from tether.eval.documents import starts_inside_a_sentence
from tether.models import Citation
from tether.retrieve.context import (
    build_context,
    continue_over_pages,
    ends_a_sentence,
    finish_sentences,
)
from tether.retrieve.rerank import Candidate

PAGE_ONE = (
    "Battery care. Keep the sensor out of direct sun. Wipe the housing with a dry cloth"
    " once a month, and never with solvents, which cloud the window over the light"
    " sensor. Store a spare cell in its sealed bag, away from metal objects such as keys"
    " and coins, and recycle a used cell at a collection point rather than with household"
    " waste. Before a long trip, charge the cell to about half of its capacity, switch the"
    " sensor off with the button under its lid, and keep it in a dry place. When the"
    " sensor comes back into use, let it reach room temperature before you charge it."
    " The lithium cell is permanently damaged by heat above 60 degrees"
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


FUNCTION_HEAD = (
    "asn1_der_decoding_startEnd finds where an element starts and ends in a DER encoding."
    " ider: the vector that holds the DER encoding."
)
FUNCTION_BODY = (
    "name_element: an element of the structure. If you have a DER encoding and have"
    " already filled a structure from it, you may want the piece of the encoding that"
    " holds one element of it, such as tbsCertificate inside an X509 certificate. Since"
    " libtasn1 3.7 the vector and its length can be omitted when the element is already"
    " decoded. It returns ASN1_SUCCESS when the encoding is right, and"
    " ASN1_ELEMENT_NOT_FOUND when the element is not a valid element of the structure."
)


def outlined_pdf(path: Path, pages: list[str], section: str) -> Path:
    """A real PDF whose outline has one entry, ``section``, at the top of its second page
    (written there as its heading): its second and later pages are that section."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(auto=False)
    for number, text in enumerate(pages, start=1):
        pdf.add_page()
        pdf.set_font("Helvetica", size=11)
        if number == 2:
            pdf.start_section(section)
            pdf.multi_cell(0, 6, section, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def test_a_passage_a_page_break_cut_short_goes_on_over_the_page(tmp_path: Path) -> None:
    """A page's last chunk ends where the page does: the function's name closes page 2,
    what it does and since which release on page 3. The cited passage is both."""
    pdf = outlined_pdf(tmp_path / "manual.pdf", [PAGE_ONE + " Celsius.", FUNCTION_HEAD,
                                                 FUNCTION_BODY], "DER functions")  # fmt: skip
    question = "Since which release can asn1_der_decoding_startEnd be called without ider?"
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        [added] = t.add(pdf, workspace_id="w")
        chunks = t.chunks(added.document_id)
        assert [(c.page, c.section_title) for c in chunks] == [
            (1, None), (2, "DER functions"), (3, "DER functions")
        ]  # fmt: skip
        found = t.retrieve(question, scope="workspace", workspace_id="w", min_relevance=0.0)
        relevance = {chunk_id: r for chunk_id, _, r in found.debug["ranked"]}
        head, body = relevance[chunks[1].id], relevance[chunks[2].id]
        assert head > body  # the function's name is on page 2, not on page 3
        # A threshold that page 2 passes and page 3, alone, does not: page 3's chunk is a
        # candidate ranked below it, and is moved up to go on from page 2.
        result = t.retrieve(question, scope="workspace", workspace_id="w",
                            min_relevance=(head + body) / 2)  # fmt: skip
    cited = next(c for c in result.citations if 2 in c.pages)
    assert cited.pages == (2, 3)
    assert "Since libtasn1 3.7" in cited.text and "asn1_der_decoding_startEnd" in cited.text
    assert cited.chunk_ids == (chunks[1].id, chunks[2].id)


def test_only_a_short_chunk_ranked_in_goes_on_over_the_page(tmp_path: Path) -> None:
    pdf = outlined_pdf(tmp_path / "manual.pdf", ["Contents.", FUNCTION_HEAD, FUNCTION_BODY],
                       "DER functions")  # fmt: skip
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        [added] = t.add(pdf, workspace_id="w")
        _, head, body = t.chunks(added.document_id)
        hits = t.store.hits_for_chunks([head.id, body.id])
        fragment = Candidate(hit=hits[head.id], fused=1.0, relevance=0.5,
                             token_count=head.token_count)  # fmt: skip
        lookup = t.store.hits_for_chunks

        def counts(ids: list[int]) -> dict[int, int | None]:
            return {i: row.token_count for i, row in t.store.candidate_rows(ids).items()}

        [after] = continue_over_pages([fragment], lookup, min_relevance=0.5, short_tokens=128,
                                      token_counts=counts)[1:]  # fmt: skip
        assert (after.hit.chunk_id, after.hit.page, after.relevance) == (body.id, 3, 0.5)
        assert after.token_count == body.token_count  # the stored count
        # Ranked below the threshold, the next chunk is moved up, not listed twice.
        low = Candidate(hit=hits[body.id], fused=0.1, relevance=0.1, token_count=7)
        other = Candidate(hit=replace(hits[body.id], chunk_id=10**6), fused=0.2, relevance=0.2)
        moved = continue_over_pages([fragment, other, low], lookup, min_relevance=0.5,
                                    short_tokens=128)  # fmt: skip
        assert [(c.hit.chunk_id, c.relevance) for c in moved] == [
            (head.id, 0.5), (body.id, 0.5), (10**6, 0.2)
        ]  # fmt: skip
        # Below the threshold, or a full chunk: nothing is added.
        for threshold, short in ((0.6, 128), (0.5, 10)):
            same = continue_over_pages([fragment], lookup, min_relevance=threshold,
                                       short_tokens=short)  # fmt: skip
            assert same == [fragment]
        # The next chunk of another document, or not on the next page: nothing either.
        [other_doc] = t.add(TextSource(FUNCTION_BODY, "notes"), workspace_id="w")
        [note] = t.chunks(other_doc.document_id)
        [text_hit] = t.store.hits_for_chunks([note.id]).values()
        alone = Candidate(hit=replace(text_hit, page=1), fused=1.0, relevance=0.5, token_count=5)
        assert continue_over_pages([alone], lookup, min_relevance=0.5, short_tokens=128) == [alone]


def test_without_sections_a_page_goes_on_only_from_inside_a_sentence(tmp_path: Path) -> None:
    """A PDF without an outline has no sections to say that page 2 goes on with its topic:
    a short last chunk of a page is continued only when it stops inside a sentence."""
    cut = FUNCTION_HEAD.removesuffix(".") + " and its"
    for name, page, continued in (("ends", FUNCTION_HEAD, False), ("cut", cut, True)):
        pdf = make_pdf(tmp_path / f"{name}.pdf", [page, "length, " + FUNCTION_BODY])
        with Tether(db=tmp_path / f"{name}.db", settings=make_settings()) as t:
            [added] = t.add(pdf, workspace_id="w")
            head, body = t.chunks(added.document_id)
            [hit] = t.store.hits_for_chunks([head.id]).values()
            fragment = Candidate(hit=hit, fused=1.0, relevance=0.5, token_count=head.token_count)
            out = continue_over_pages([fragment], t.store.hits_for_chunks, min_relevance=0.5,
                                      short_tokens=128)  # fmt: skip
        assert [c.hit.chunk_id for c in out] == ([head.id, body.id] if continued else [head.id])


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


def test_a_passage_that_starts_inside_long_fenced_code_starts_inside_no_sentence(
    tmp_path: Path,
) -> None:
    """Code longer than a chunk is cut inside its fence; a passage opening there opens
    inside no sentence (the evaluation counts sentences, not lines of code)."""
    lines = "\n".join(f"export step_{i}=step_{i - 1}_done" for i in range(1, 60))
    text = f"Run the pipeline like this:\n\n```sh\n{lines}\n```\n\nThat is all."
    settings = make_settings(chunk_size=300, chunk_overlap=0, embeddings={"enabled": False})
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        [result] = t.add(TextSource(text, "pipeline"), workspace_id="w")
        inside = [c for c in t.chunks(result.document_id) if c.content.startswith("export")]
        assert inside
        citation = Citation(
            number=1, document_id=result.document_id, title="pipeline", section_title=None,
            page=None, pages=(), chunk_ids=(inside[0].id,), source_path=None,
            workspace_id="w", relevance=1.0, text=inside[0].content,
        )  # fmt: skip
        assert not starts_inside_a_sentence(t, citation, {})
