"""British and American spellings: a question and a document that spell a word
differently still meet, in search and in the grounding check."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import make_settings
from tether import Tether, TextSource
from tether.retrieve.fts import compile_match, term_coverage
from tether.retrieve.spelling import american, variants


@pytest.mark.parametrize(
    ("british", "us"),
    [
        ("licence", "license"),
        ("colours", "colors"),
        ("behavioural", "behavioral"),
        ("centred", "centered"),
        ("catalogue", "catalog"),
        ("defences", "defenses"),
        ("initialise", "initialize"),
        ("organisation", "organization"),
        ("analysed", "analyzed"),
        ("travelled", "traveled"),
        ("labelling", "labeling"),
        ("programme", "program"),
        ("grey", "gray"),
    ],
)
def test_each_british_spelling_has_its_american_one(british: str, us: str) -> None:
    assert american(british) == us
    assert american(us) == us
    assert variants(british) == [us]
    assert british in variants(us)


@pytest.mark.parametrize("word", ["four", "hour", "filled", "called", "genre", "crisis", "size"])
def test_words_that_only_look_british_are_left_alone(word: str) -> None:
    assert american(word) == word
    assert variants(word) == []


def test_a_query_searches_the_other_spelling_too() -> None:
    assert compile_match("colour licence") == '"colour" OR "licence" OR "color" OR "license"'
    assert compile_match("colour", "french") == '"colour"'  # English only
    assert term_coverage("What colour is the licence?", "The license says: color it gray.") == 1.0


GUIDE = [
    TextSource(
        "License: the library is dual-licensed under LGPLv3 or GPLv2. The command line"
        " tool is licensed under GPLv3.", "Licensing"),
    TextSource("The sensor blinks green when the battery is charged.", "Status light"),
    TextSource("Pairing takes two minutes; hold the button until the light turns blue.",
               "Pairing"),
]  # fmt: skip


def test_a_question_in_british_spelling_is_answered_by_an_american_manual(
    tmp_path: Path,
) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(GUIDE, workspace_id="lumen")
        hits = t.search("licence", scope="workspace", workspace_id="lumen", mode="lexical")
        result = t.retrieve(
            "Under which licence can I use the library?", scope="workspace", workspace_id="lumen"
        )
    assert [h.title for h in hits] == ["Licensing"]
    grounding = result.debug["grounding"]
    assert "licence" not in grounding["absent_terms"]
    assert result.grounded, grounding["why"]
    assert result.citations[0].title == "Licensing"
