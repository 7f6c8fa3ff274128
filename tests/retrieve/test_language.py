"""The language of the lexical side on the query's end (``rag.language``): which words a
query is searched without, how evidence compares words, and the setting itself. What a
store of a language indexes is tested in tests/store/test_store_language.py."""

from __future__ import annotations

import typing

import pytest

from tether.errors import ConfigurationError
from tether.retrieve.fts import (
    STOPWORDS,
    _stem,
    compile_match,
    query_terms,
    stopwords,
    term_coverage,
)
from tether.settings import RagSettings, Settings
from tether.text import LANGUAGES, stemmed_text

pytest.importorskip("Stemmer", reason="the languages extra installs PyStemmer")
pytest.importorskip("stop_words", reason="the languages extra installs stop-words")


def test_the_setting_names_every_language_and_defaults_to_english() -> None:
    field = RagSettings.model_fields["language"]
    assert typing.get_args(field.annotation) == LANGUAGES
    assert RagSettings().language == "english"
    assert Settings.load(rag={"language": "german"}).rag.language == "german"
    with pytest.raises(ConfigurationError, match="language"):
        Settings.load(rag={"language": "klingon"})


@pytest.mark.parametrize(
    "query",
    ["what does the guide say about pumps", "Straße und Häuser", "how to reset the sensor?"],
)
def test_english_queries_compile_as_before(query: str) -> None:
    """English is the default and keeps its own list: the compiled query is the one the
    compiler wrote before languages."""
    assert stopwords() is STOPWORDS
    assert compile_match(query) == compile_match(query, "english")
    assert compile_match("what does the guide say about pumps") == '"guide" OR "say" OR "pumps"'


QUESTIONS = {
    "german": ("Wie installiere ich die Pakete auf dem Rechner?", "installiere pakete rechner"),
    "french": ("Comment installer les paquets sur la machine ?", "installer paquets machine"),
    "spanish": ("¿Cómo instalo los paquetes en la máquina?", "instalo paquetes máquina"),
}


@pytest.mark.parametrize(("language", "question"), QUESTIONS.items())
def test_a_language_drops_its_own_stopwords(language: str, question: tuple[str, str]) -> None:
    """Each language's function words go (the stop-words package's lists); English's
    list would keep them, so the question would be searched for its articles too."""
    query, terms = question[0], question[1].split()
    assert query_terms(query, language) == terms
    assert len(query_terms(query)) > len(terms)
    assert compile_match(query, language) == " OR ".join(f'"{t}"' for t in terms)


def test_a_query_of_stopwords_only_keeps_them() -> None:
    assert query_terms("qui est-ce", "french") == ["qui", "est", "ce"]


def test_evidence_compares_words_by_their_snowball_stems() -> None:
    """Term coverage (the evidence of an answer) matches a French question's words to
    other forms of them in the passage, without accents, as the store's index does."""
    question = "Quand les chevaux ont-ils été vaccinés ?"
    passage = "Le cheval est vacciné chaque printemps; la vaccination dure une heure."
    assert term_coverage(question, passage, "french") == 1.0
    assert term_coverage(question, passage) < 1.0
    assert _stem("vaccinés", "french") == _stem("vaccine", "french")


def test_stemmed_text_is_what_the_index_holds() -> None:
    """Lower case, no diacritics, one stem per word, words cut where FTS5 cuts them."""
    assert stemmed_text("Die Häuser_am See—überfüllt!", "german") == "die haus am see uberfullt"
    assert stemmed_text(None, "german") is None
    assert stemmed_text("", "french") == ""
