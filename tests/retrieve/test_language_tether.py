"""``rag.language`` through the facade: a Tether makes its store for the language, opens
only a store of it, and searches and grounds questions in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import make_settings
from tether import ConfigurationError, Tether

pytest.importorskip("Stemmer", reason="the languages extra installs PyStemmer")
pytest.importorskip("stop_words", reason="the languages extra installs stop-words")

GUIDE = (
    "Les chevaux de la ferme sont vaccinés chaque printemps par le vétérinaire.\n\n"
    "La vaccination des poulains commence à six mois."
)


def test_a_tether_makes_and_opens_its_store_for_its_language(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Tether(db=path, settings=make_settings(language="french")) as t:
        assert t.store.language == "french"
        t.add(text=GUIDE, title="Ferme")
        hits = t.search("Quand le cheval est-il vacciné ?", mode="lexical")
        assert [h.title for h in hits] == ["Ferme"]
    with pytest.raises(ConfigurationError, match=r"rag\.language = 'french'"):
        Tether(db=path, settings=make_settings())


def test_a_french_question_is_grounded_in_a_french_store(tmp_path: Path) -> None:
    """Lexical-only (no vectors), the evidence compares the question's French stems."""
    with Tether(db=tmp_path / "t.db", settings=make_settings(language="french")) as t:
        t.add(text=GUIDE, title="Ferme")
        result = t.retrieve("Quand les chevaux sont-ils vaccinés ?")
        assert result.grounded, result.guidance
        assert result.citations and result.citations[0].title == "Ferme"
