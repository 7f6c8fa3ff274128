"""tether is a library: it logs, and the application decides where the records go. A
program that configures no logging hears nothing from it (no last-resort lines on
stderr); one that does (``logging.basicConfig()``) gets tether's warnings as any other.

Each case runs a real ``python -c`` program: whether Python's last-resort handler
prints depends on the whole process's logging set-up, which pytest's own capture
changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: A real warning path: embeddings through an OpenAI-compatible endpoint with no API key
#: degrade to lexical-only retrieval, and tether.embed logs a warning saying so.
OPEN_WITHOUT_EMBEDDINGS = """
import tether
on = {"embeddings": {"enabled": True, "provider": "openai"}}
with tether.Tether(db=":memory:", settings=tether.Settings.load(rag=on)) as t:
    print(t.embeddings_unavailable)
"""
WARNING = "no embeddings, lexical-only retrieval: no API key"


def run_program(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, with no TETHER_* settings and no API key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "OPENAI_", "RAG_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        check=False,
    )


def test_a_program_without_logging_configured_hears_nothing(tmp_path: Path) -> None:
    proc = run_program(OPEN_WITHOUT_EMBEDDINGS, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert WARNING in proc.stdout  # the warning path ran ...
    assert proc.stderr == ""  # ... and nothing reached stderr


@pytest.mark.parametrize(
    ("setup", "line"),
    [
        ("import logging; logging.basicConfig()", f"WARNING:tether.embed:{WARNING}"),
        (
            "import logging; logging.getLogger('tether').addHandler(logging.StreamHandler())",
            WARNING,
        ),
    ],
    ids=["basicConfig", "a-handler-on-tether"],
)
def test_a_program_that_configures_logging_gets_the_warning(
    tmp_path: Path, setup: str, line: str
) -> None:
    proc = run_program(setup + "\n" + OPEN_WITHOUT_EMBEDDINGS, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert line in proc.stderr
    assert proc.stderr.count(WARNING) == 1  # once: tether adds no printing handler of its own
