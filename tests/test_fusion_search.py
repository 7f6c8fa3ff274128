"""The fusion fixes end to end: a chunk that only the lexical side finds (a part number,
an error code) is the first hybrid hit, under both fusions."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import make_settings
from tether import Tether, TextSource
from tether.testing import HashEmbedder


class CodeBlindEmbedder(HashEmbedder):
    """Like a small sentence model, it has no idea what "XK4471" means: it reads any word
    holding a digit as the store's most common word, so the vector side finds the pump
    notes, not the code."""

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return super().embed_batch([re.sub(r"\w*\d\w*", " pump ", text) for text in texts])


@pytest.mark.parametrize("fusion", ["rrf", "zscore"])
def test_a_code_found_only_lexically_is_the_first_hybrid_hit(tmp_path: Path, fusion: str) -> None:
    """The vector list is full (its top 10 of 40 chunks) and lacks the chunk; the lexical
    list holds that one chunk alone. Before the fix, z-score fusion gave the lone hit the
    list's mean and ranked it below every vector-only hit above the vector list's mean."""
    words = ["seal", "gasket", "bearing", "flow", "check", "weekly", "torque", "inlet"]
    notes = [
        TextSource(
            f"Pump note {i}: the pump valve seat {' '.join(words[: 1 + i % 8])}", f"pump {i}"
        )
        for i in range(40)
    ]
    unique = TextSource(
        "Error XK4471 means that the seal sensor of the drive lost its contact while the"
        " machine was running under load, so the controller stopped the line.",
        "error codes",
    )
    settings = make_settings(fusion=fusion, k_vector=10)
    with Tether(
        db=tmp_path / "t.db",
        settings=settings,
        embedder=CodeBlindEmbedder(dims=2048, model="code-blind"),
    ) as t:
        t.add([*notes, unique], workspace_id="plant")
        lexical = t.search("XK4471", scope="workspace", workspace_id="plant", mode="lexical")
        vector = t.search("XK4471", scope="workspace", workspace_id="plant", mode="vector", k=10)
        hybrid = t.search("XK4471", scope="workspace", workspace_id="plant", mode="hybrid")
    assert [h.title for h in lexical] == ["error codes"]
    assert "error codes" not in [h.title for h in vector]  # the bug's precondition
    assert hybrid.debug["method"] == "hybrid"
    assert hybrid[0].title == "error codes", [h.title for h in hybrid]
