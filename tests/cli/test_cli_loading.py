"""A command that must load the local model says so on a terminal, and only there."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from tether import Settings, Tether
from tether.cli._shell import load_model_visibly, log_warnings_to_stderr
from tether.testing import HashEmbedder


class LazyEmbedder(HashEmbedder):
    """Loads on its first embedding, as a local model does."""

    def __init__(self) -> None:
        super().__init__()
        self.is_loaded = False

    @property
    def loaded(self) -> bool:
        return self.is_loaded

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.is_loaded = True
        return super().embed_batch(texts)


def console(*, terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=100), buffer


def test_on_a_terminal_the_model_loads_under_a_status_line(tmp_path: Path) -> None:
    embedder = LazyEmbedder()
    with Tether(db=tmp_path / "s.db", embedder=embedder) as t:
        t.add(text="The sensor resets after ten seconds.", title="Reset", workspace_id="w")
        embedder.is_loaded = False  # a new process: nothing loaded yet
        screen, shown = console(terminal=True)
        load_model_visibly(t, vectors=True, console=screen)
        assert embedder.loaded and t._searcher.warm  # the model and the vectors
        assert "Loading the embedding model (hash-64)" in shown.getvalue()
        shown.truncate(0)
        load_model_visibly(t, vectors=True, console=screen)  # loaded: nothing to say
        assert "Loading" not in shown.getvalue()


def test_off_a_terminal_nothing_loads_ahead(tmp_path: Path) -> None:
    embedder = LazyEmbedder()
    with Tether(db=tmp_path / "s.db", embedder=embedder) as t:
        pipe, shown = console(terminal=False)
        load_model_visibly(t, vectors=False, console=pipe)
        assert not embedder.loaded and shown.getvalue() == ""


def test_a_store_kept_on_torch_by_auto_says_how_to_move(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Tether(db=db, embedder=HashEmbedder(dims=384, model="all-MiniLM-L6-v2")) as t:
        t.add(text="The sensor resets after ten seconds.", title="Reset", workspace_id="w")
    settings = Settings.load(rag={"embeddings": {"enabled": True}})
    with Tether(db=db, settings=settings) as t:
        screen, shown = console(terminal=True)
        t._searcher._vector_side()[0]._model = object()  # no need to load torch for this
        load_model_visibly(t, vectors=False, console=screen)
        assert "TETHER_RAG__EMBEDDINGS__RUNTIME=onnx-int8 tether reembed" in shown.getvalue()
    with Tether(db=tmp_path / "new.db", settings=settings) as t:  # a new store: onnx-int8
        screen, shown = console(terminal=True)
        t._searcher._vector_side()[0]._runner = object()  # no need to load it for this
        load_model_visibly(t, vectors=False, console=screen)
        assert shown.getvalue() == ""


def test_the_long_running_shells_show_the_librarys_warnings_while_they_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logger = logging.getLogger("tether")
    before = list(logger.handlers)
    with log_warnings_to_stderr():
        logging.getLogger("tether.server").warning("warming the embedder failed")
        assert capsys.readouterr().err.count("warming the embedder failed") == 1
        logging.getLogger("tether.server").info("ready")
        assert capsys.readouterr().err == ""
    assert logger.handlers == before  # nothing left behind for the next command
    logging.getLogger("tether.server").warning("after the command")
    assert "after the command" not in capsys.readouterr().err
