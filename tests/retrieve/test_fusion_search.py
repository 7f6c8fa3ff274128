"""Hybrid search end to end: a code that only the lexical side finds (an error code, a
part number) is found first, under both fusions (issue 17).

The vector list is full (its top 10 of 30-odd chunks) and lacks the chunks that hold the
code; the lexical list holds those chunks alone. Before the fix, z-score fusion gave a
lone lexical hit the list's mean (z = 0, the list had no spread), so every vector-only
hit above the vector list's mean outranked it; two hits were +1 and -1 whatever their
scores; and RRF ranked chunks with equal BM25 scores 1, 2, 3 by the order the tie
happened to be listed in.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from helpers import make_settings
from tether import Tether, TextSource
from tether.retrieve.fusion import ZSCORE_FLOOR
from tether.testing import HashEmbedder

CODE = "XK4471"


class CodeBlindEmbedder(HashEmbedder):
    """Like a small sentence model, it has no idea what "XK4471" means: it reads any word
    holding a digit as the store's most common word, so the vector side finds the pump
    notes, not the code."""

    reads_codes_as = "pump"

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        word = f" {self.reads_codes_as} "
        return super().embed_batch([re.sub(r"\w*\d\w*", word, text) for text in texts])


class StatusMinded(CodeBlindEmbedder):
    """Reads a code as "status": for it a code is the status notes' topic."""

    reads_codes_as = "status"


# 30 notes that say "pump" 1 to 30 times: the vector side ranks them by how often, with a
# spread (no ties), and its top 10 are all notes.
NOTES = [
    TextSource(f"Pump note: the valve seat is checked weekly. {'pump ' * i}", f"pump {i}")
    for i in range(1, 31)
]
ONE_CHUNK = [
    TextSource(
        f"Error {CODE} means that the seal sensor of the drive lost its contact while the"
        " machine was running under load, so the controller stopped the line.",
        "code A",
    )
]
# Different lengths: different BM25 scores, a list of two (z = +1 and -1 before the fix).
TWO_CHUNKS = [
    TextSource(f"Error {CODE}: the seal sensor lost contact.", "code A"),
    TextSource(
        f"Service log: after error {CODE} the technician replaced the seal sensor cable,"
        " cleaned the contacts of the drive and restarted the line at half load.",
        "code B",
    ),
]
# The same length and one occurrence each: equal BM25 scores, a tie of three.
THREE_TIED_CHUNKS = [
    TextSource(f"Error {CODE} stopped the line in hall {hall}.", f"code {hall.upper()}")
    for hall in ["A", "B", "C"]
]


def hybrid_search(tmp_path: Path, fusion: str, coded: list[TextSource]):
    settings = make_settings(fusion=fusion, k_vector=10)
    embedder = CodeBlindEmbedder(dims=2048, model="code-blind")
    with Tether(db=tmp_path / "t.db", settings=settings, embedder=embedder) as t:
        t.add([*NOTES, *coded], workspace_id="plant")

        def search(mode: str):
            return t.search(CODE, scope="workspace", workspace_id="plant", mode=mode, k=10)

        lexical, vector, hybrid = search("lexical"), search("vector"), search("hybrid")
    assert sorted(h.title for h in lexical) == sorted(s.title for s in coded)
    assert not {h.title for h in vector} & {s.title for s in coded}  # the bug's precondition
    assert hybrid.debug["method"] == "hybrid"
    return lexical, hybrid


@pytest.mark.parametrize("fusion", ["rrf", "zscore"])
def test_a_code_in_one_chunk_is_the_first_hybrid_hit(tmp_path: Path, fusion: str) -> None:
    _, hybrid = hybrid_search(tmp_path, fusion, ONE_CHUNK)
    assert hybrid[0].title == "code A", [h.title for h in hybrid]


@pytest.mark.parametrize("fusion", ["rrf", "zscore"])
def test_a_code_in_two_chunks_leads_the_hybrid_hits(tmp_path: Path, fusion: str) -> None:
    lexical, hybrid = hybrid_search(tmp_path, fusion, TWO_CHUNKS)
    assert lexical[0].score > lexical[1].score  # a spread of two
    assert hybrid[0].title == lexical[0].title, [h.title for h in hybrid]
    assert {h.title for h in hybrid} >= {"code A", "code B"}


@pytest.mark.parametrize("fusion", ["rrf", "zscore"])
def test_a_code_in_three_equally_scored_chunks_gives_the_first_three_hits(
    tmp_path: Path, fusion: str
) -> None:
    lexical, hybrid = hybrid_search(tmp_path, fusion, THREE_TIED_CHUNKS)
    assert len({h.score for h in lexical}) == 1  # a tie of three
    assert {h.title for h in hybrid[:3]} == {"code A", "code B", "code C"}
    assert hybrid[0].score == hybrid[1].score == hybrid[2].score


@pytest.mark.parametrize("coded", [ONE_CHUNK, TWO_CHUNKS, THREE_TIED_CHUNKS])
def test_zscore_debug_accounts_for_each_score(tmp_path: Path, coded: list[TextSource]) -> None:
    """``debug.fusion`` says each side's mean, standard deviation and lift: with them a
    hit's score is the sum over its sides of weight * (z + lift), -3 for a missing side."""
    _, hybrid = hybrid_search(tmp_path, "zscore", coded)
    fusion = hybrid.debug["fusion"]
    assert fusion["lexical"]["lift"] > 0  # a short lexical list is raised
    for hit in hybrid:
        ranks = hybrid.debug["ranks"][hit.chunk_id]
        expected = 0.0
        for key, side, weight in (("bm25", "lexical", 1.0), ("cosine", "vector", 1.0)):
            moments = fusion[side]
            if key not in ranks:
                expected += weight * ZSCORE_FLOOR
                continue
            z = (ranks[key] - moments["mean"]) / moments["std"] if moments["std"] else 0.0
            expected += weight * max(z + moments["lift"], ZSCORE_FLOOR)
        # (to 0.01: debug rounds the moments to 6 decimals, and the vector std is ~1e-3)
        assert hit.score == pytest.approx(expected, abs=1e-2)


# A small store: the vector list holds every chunk, so the one chunk holding a code is in
# it too, at its bottom, far below 60 near-equal notes (z about -7.7). Before the fix that
# cost it more than being missing (-3), and z-score fusion ranked three status notes first.
STATUS_NOTES = [
    TextSource(f"Status update {day}: the team met, the build is green, nothing blocks us.",
               f"status {day}")
    for day in range(1, 61)
]  # fmt: skip
GARDEN_NOTE = TextSource(
    "Garden shed inventory: the irrigation controller ZX-9047 waters the tomato beds at"
    " dawn, and the spare hose reel hangs behind the door.",
    "garden",
)


@pytest.mark.parametrize("fusion", ["rrf", "zscore"])
def test_a_code_the_vector_list_holds_last_is_still_the_first_hybrid_hit(
    tmp_path: Path, fusion: str
) -> None:
    settings = make_settings(fusion=fusion)
    embedder = StatusMinded(dims=2048, model="status-minded")
    with Tether(db=tmp_path / "t.db", settings=settings, embedder=embedder) as t:
        t.add([*STATUS_NOTES, GARDEN_NOTE], workspace_id="notes")

        def search(mode: str):
            return t.search("ZX-9047", scope="workspace", workspace_id="notes", mode=mode,
                            k=3)  # fmt: skip

        lexical, hybrid = search("lexical"), search("hybrid")
        vector = t.search("ZX-9047", scope="workspace", workspace_id="notes", mode="vector",
                          k=61)  # fmt: skip
    assert [h.title for h in lexical] == ["garden"]
    assert len(vector) == 61 and vector[-1].title == "garden"  # held, at the bottom
    assert hybrid[0].title == "garden", [h.title for h in hybrid]
