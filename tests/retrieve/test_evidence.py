"""Evidence: the number grounding is judged on, its parts, and what it says about itself."""

from __future__ import annotations

import math

import pytest

from tether.retrieve.evidence import (
    CALIBRATED,
    HEADER_SHARE,
    LEXICAL,
    PREMISE_SHARE,
    WINDOW_WORDS,
    QuestionTerms,
    agreement,
    best_window,
    evidence,
    explain,
    premise_stems,
    question_terms,
    search_terms,
    windows,
)
from tether.store import TermStatistics

QUESTION = "Which environment variable turns on debug tracing?"


def stats(store: dict[str, int], in_scope: set[str], chunks: int = 400) -> TermStatistics:
    return TermStatistics(chunks=chunks, store=store, in_scope={t: t in in_scope for t in store})


def terms_of(question: str, absent: set[str] = frozenset(), common: set[str] = frozenset()):
    words = search_terms(question)
    df = {w: (90 if w in common else 3) for w in words}
    return question_terms(question, stats(df, set(words) - set(absent)))


def test_search_terms_are_the_content_words_as_the_index_is_asked_for_them() -> None:
    assert search_terms(QUESTION) == ["environment", "variable", "turns", "debug", "tracing"]


def test_idf_weights_rare_terms_above_common_ones_and_counts_what_the_scope_lacks() -> None:
    words = search_terms(QUESTION)
    terms = question_terms(
        QUESTION,
        stats({**dict.fromkeys(words, 2), "debug": 95}, in_scope=set(words) - {"tracing"}),
    )
    weights = dict(zip(words, (w for _, w in terms.weights), strict=True))  # keyed by stem
    assert weights["debug"] < weights["tracing"]  # in 95 of 400 chunks: weighs less
    assert weights["tracing"] / weights["debug"] == pytest.approx(
        math.log(401 / 2.5) / math.log(401 / 95.5)
    )
    assert terms.total == pytest.approx(1.0)
    assert terms.absent == ("tracing",)
    assert terms.missing == pytest.approx(weights["tracing"])
    # In a store of a few chunks IDF says little: the weights lean to equal shares.
    few = question_terms(QUESTION, stats({**dict.fromkeys(words, 2), "debug": 3}, set(words), 4))
    assert max(w for _, w in few.weights) - min(w for _, w in few.weights) < 0.02


def test_windows_are_two_sentences_and_long_sentences_are_cut() -> None:
    text = "One here. Two there! Three now? Four."
    assert windows(text) == ["One here. Two there!", "Two there! Three now?", "Three now? Four."]
    assert windows("Only one sentence") == ["Only one sentence"]
    long = " ".join(f"w{i}" for i in range(WINDOW_WORDS * 2 + 5))
    pieces = windows(long)
    assert len(pieces) == 2
    assert all(len(p.split()) <= 2 * WINDOW_WORDS for p in pieces)


def test_coverage_counts_terms_inside_one_window_not_across_a_page() -> None:
    terms = terms_of(QUESTION)
    together = "Set the environment variable ASN1_DEBUG. It turns on debug tracing."
    scattered = (
        "The environment is described first. Filler text follows here. More filler text."
        " A variable is declared. Filler again. Other topics. The debug build exists."
        " Yet more filler. And tracing is mentioned last."
    )
    near, window = best_window(terms, together)
    far, _ = best_window(terms, scattered)
    assert near == pytest.approx(1.0)
    assert "debug tracing" in window
    assert far < 0.5
    assert evidence(terms, together, None).evidence > evidence(terms, scattered, None).evidence


def test_a_term_only_the_header_holds_counts_a_share_of_its_weight() -> None:
    """The passage's context header (its section path, else its document's title) says
    what it is about: its terms count in every window, at HEADER_SHARE of their weight."""
    terms = terms_of(QUESTION)
    weight = dict(terms.weights)
    text = "Set it to 1. It turns on debug tracing."
    alone, _ = best_window(terms, text)
    headed, window = best_window(terms, text, header="Environment variables")
    header_terms = weight["environment"] + weight["variable"]
    assert header_terms > 0
    assert headed == pytest.approx(alone + HEADER_SHARE * header_terms)
    assert "debug tracing" in window
    # A term the window holds counts in full, whatever the header says.
    full, _ = best_window(terms, "The environment variable turns on debug tracing.")
    assert best_window(
        terms, "The environment variable turns on debug tracing.", header="Environment"
    ) == (full, "The environment variable turns on debug tracing.")
    assert evidence(terms, text, 0.5, header="Environment variables").evidence > (
        evidence(terms, text, 0.5).evidence
    )


def test_evidence_rises_with_cosine_and_coverage_and_falls_with_missing_terms() -> None:
    text = "Set the environment variable to turn on debug tracing."
    present = terms_of(QUESTION)
    absent = terms_of(QUESTION, absent={"tracing", "environment"})
    low, high = evidence(present, text, 0.2), evidence(present, text, 0.8)
    assert 0.0 < low.evidence < high.evidence < 1.0
    assert evidence(absent, text, 0.8).evidence < high.evidence
    assert evidence(present, "nothing relevant at all", 0.8).evidence < high.evidence
    # Without vectors the lexical calibration is used, and the cosine is not reported.
    lexical = evidence(present, text, None)
    assert lexical.cosine is None and lexical.to_dict()["cosine"] is None
    assert lexical.evidence == pytest.approx(
        1 / (1 + math.exp(-(LEXICAL.coverage * 1.0 + LEXICAL.bias)))
    )
    expected = CALIBRATED.cosine * 0.8 + CALIBRATED.coverage * 1.0 + CALIBRATED.bias
    assert high.evidence == pytest.approx(1 / (1 + math.exp(-expected)))


def test_match_leads_with_the_cosine() -> None:
    terms = terms_of(QUESTION)
    close = evidence(terms, "an unrelated sentence", 0.9)
    covered = evidence(terms, "environment variable turns debug tracing", 0.3)
    assert close.match == pytest.approx(0.9)
    assert covered.match == pytest.approx(0.3 + 0.5)
    assert close.match > covered.match  # ordering: the cosine leads ...
    assert covered.evidence > close.evidence  # ... grounding: coverage weighs more


def test_explain_says_why() -> None:
    terms = terms_of(QUESTION, absent={"tracing"})
    found = evidence(terms, "Set the environment variable for debug output.", 0.5)
    said = explain(terms, found, 0.9, grounded=False)
    assert said.startswith("not grounded:")
    assert "below min_relevance 0.9" in said
    assert "'tracing' occurs nowhere in scope" in said
    assert "cosine 0.50" in said
    assert explain(terms, found, 0.1, grounded=True).startswith("grounded:")
    assert explain(terms, None, 0.4, grounded=False) == (
        "not grounded: the search found nothing in scope"
    )


def test_an_everyday_word_the_scope_lacks_counts_less_than_a_rare_one() -> None:
    """ "How long is the user kept?" against a manual that says "stored": lacking "kept"
    says little; lacking "memcached" says the scope lacks the subject."""
    question = "Is the session kept in memcached?"
    words = search_terms(question)
    counts = stats(dict.fromkeys(words, 0), in_scope={"session"}, chunks=400)
    plain = question_terms(question, counts)
    weighed = question_terms(question, counts, absence={"kept": 0.2, "memcached": 1.0}.get)
    weights = {stem: w for stem, w in plain.weights}
    assert plain.absent == weighed.absent == ("kept", "memcached")
    assert plain.missing == pytest.approx(weights["kept"] + weights["memcach"])
    assert weighed.missing == pytest.approx(0.2 * weights["kept"] + weights["memcach"])
    assert plain.named_absent == ("kept", "memcached")
    assert weighed.named_absent == ("memcached",)  # what an explanation names


def test_a_question_without_terms_has_no_evidence() -> None:
    terms = QuestionTerms(weights=(), absent=(), missing=0.0)
    assert best_window(terms, "anything at all") == (0.0, "")


def test_phrasing_words_are_not_evidence_and_a_tiny_store_discounts_missing_terms() -> None:
    question = "How long does priming take?"
    words = search_terms(question)
    assert words == ["long", "priming", "take"]  # searched for ...
    tiny = question_terms(question, stats(dict.fromkeys(words, 0), set(), chunks=4))
    assert [stem for stem, _ in tiny.weights] == ["prim"]  # ... but not evidence terms
    assert tiny.absent == ("priming",)
    big = question_terms(question, stats(dict.fromkeys(words, 0), set(), chunks=400))
    assert big.missing == pytest.approx(1.0)
    assert tiny.missing == pytest.approx(4 / 200)  # IDF over 4 chunks says little


def test_agreement_is_the_lexical_rank_of_the_vector_sides_best_chunk() -> None:
    assert agreement([7, 3, 9], [7, 1]) == 1.0  # both put chunk 7 first
    assert agreement([3, 7, 9], [7, 1]) == pytest.approx(1 / math.log2(3))
    assert agreement([3, 9], [7, 1]) == 0.0  # the lexical side never found it
    assert agreement([3, 9], []) is None  # no vector side
    terms = terms_of(QUESTION)
    text = "Set the environment variable to turn on debug tracing."
    agreed = evidence(terms, text, 0.5, agreed=1.0).evidence
    assert agreed > evidence(terms, text, 0.5, agreed=0.0).evidence
    assert evidence(terms, text, 0.5).evidence == evidence(terms, text, 0.5, agreed=0.0).evidence


def test_a_premise_before_the_question_weighs_half_when_the_question_names_more() -> None:
    question = "The update route uses <int:id>. Which converter lets a URL variable hold slashes?"
    assert premise_stems(question) == {"update", "route", "use", "int", "id"}
    weights = dict(terms_of(question).weights)
    asked = weights[next(s for s in weights if s.startswith("convert"))]
    said = weights["route"]
    assert said == pytest.approx(PREMISE_SHARE * asked)
    # A passage on the premise alone now covers less than one on what is asked.
    on_premise = best_window(terms_of(question), "The update route uses <int:id> as its id.")
    answer = "The path converter lets a variable hold slashes."
    on_question = best_window(terms_of(question), answer)
    assert on_premise[0] < on_question[0]


def test_a_question_sentence_that_names_little_keeps_its_premise_whole() -> None:
    question = "My TableOfContents stays empty when I call doc.build(). What should I call instead?"
    weights = dict(terms_of(question).weights)
    assert len(set(weights.values())) == 1  # equal document frequencies: equal weights
    assert premise_stems(question) == {"stay", "tableofcontent", "empty", "doc", "build"}


def test_one_sentence_or_only_questions_have_no_premise() -> None:
    assert premise_stems("Which converter lets a URL variable hold slashes?") == set()
    assert premise_stems("What does e.g. the route say?") == set()
    assert premise_stems("Is it a route? Or a view?") == set()  # all questions
    assert premise_stems("It is a route. It has a view.") == set()  # all statements


def test_a_statement_after_the_question_is_premise_too() -> None:
    # What the asker tried, said after what they ask, is their situation as well.
    tried = premise_stems("How do I run it? I tried waitress locally.")
    assert tried == {"tri", "waitress", "locally"}
    question = "Which converter holds slashes? My route uses <int:id>. Is there another?"
    assert premise_stems(question) == {"route", "use", "int", "id"}


def test_an_abbreviation_does_not_end_a_premise() -> None:
    assert premise_stems("Which converter, e.g. Path, lets a URL variable hold slashes?") == set()
    assert premise_stems("Flask vs. Django: which one handles async views?") == set()
    assert premise_stems("How does Dr. Smith's library parse YAML?") == set()
