"""The tests' helpers that are not fixtures: settings for tests, real PDFs written with
fpdf2, API-key headers, an embedder that is slow on demand, and the repository's paths.
Test modules import them from here (``from helpers import make_settings``); the fixtures
are in ``conftest.py``."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tether import Settings, Tether
from tether.testing import HashEmbedder

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples" / "docs"
SCIFACT = REPO_ROOT.parent / "shared" / "datasets" / "scifact"


class SlowQueryEmbedder(HashEmbedder):
    """Fast while indexing; once ``slow`` is set, every embedding takes ``delay`` seconds
    (a model that answers queries slowly)."""

    def __init__(self, delay: float = 0.3) -> None:
        super().__init__()
        self.delay = delay
        self.slow = False

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.slow:
            time.sleep(self.delay)
        return super().embed_batch(texts)


def make_settings(**rag: object) -> Settings:
    """Settings with ``rag`` overrides; a test that sets ``chunk_size`` or
    ``chunk_overlap`` means characters (``chunk_by = "chars"``), as chunks are otherwise
    sized in the configured model's tokens even with embeddings off. Servers over them
    have no per-key request rate."""
    if ("chunk_size" in rag or "chunk_overlap" in rag) and "chunk_by" not in rag:
        rag = {**rag, "chunk_by": "chars"}
    # No per-key request rate: property tests send hundreds of requests a second with one
    # key (the rate limit has its own tests, with its own settings).
    server = {"requests_per_second": 0}
    return Settings.load(rag=rag, server=server) if rag else Settings.load(server=server)


def make_pdf(path: Path, pages: list[str], *, title: str | None = None) -> Path:
    """Write a real PDF with one page per entry of ``pages`` (Helvetica, ASCII text)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(auto=False)
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def as_key(secret: str) -> dict[str, str]:
    """The header that sends ``secret`` as an API key."""
    return {"Authorization": f"Bearer {secret}"}


def service_keys(tether: Tether) -> dict[str, str]:
    """The server tests' keys: bound to acme, to rival, read-only on acme, and admin."""
    return {
        "acme": tether.keys.create(workspaces=["acme"])[1],
        "rival": tether.keys.create(workspaces=["rival"])[1],
        "reader": tether.keys.create(workspaces=["acme"], read_only=True)[1],
        "admin": tether.keys.create(admin=True)[1],
    }
