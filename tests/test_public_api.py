"""The public surface: `tether.__all__` is exactly what a user may import, sorted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tether


def test_all_is_sorted_and_complete() -> None:
    public = {name for name in vars(tether) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(tether, name)).__name__ == "module"}
    assert set(tether.__all__) - {"__version__"} == public - modules
    names = [n for n in tether.__all__ if n != "__version__"]
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))


def test_every_error_is_a_tether_error() -> None:
    errors = [getattr(tether, n) for n in tether.__all__ if n.endswith(("Error", "NotFound"))]
    errors += [tether.UnsupportedFileType, tether.UnreadableFile, tether.EmptyDocument,
               tether.IndexingFailed]  # fmt: skip
    assert errors
    for error in errors:
        assert issubclass(error, tether.TetherError), error


def test_import_does_no_work() -> None:
    """Importing tether reads no settings, opens no files and loads no heavy modules."""
    code = (
        "import sys, tether; "
        "heavy = [m for m in ('pypdf', 'torch', 'sentence_transformers', 'openai') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_command_builds_only_what_it_uses(tmp_path: Path) -> None:
    """Opening a store and listing, tagging or searching lexically loads no model, no
    tokenizer and no chat client, and starts no thread, even with local embeddings on
    (the default): those are made when something first needs them."""
    db = tmp_path / "lazy.db"
    with tether.Tether(db=db, settings=tether.Settings.load(
        rag={"embeddings": {"enabled": False}}
    )) as t:  # fmt: skip
        t.add(text="The sensor resets with the pin.", title="Guide", workspace_id="w")
    code = f"""
import sys, threading, tether
on = tether.Settings.load(rag={{"embeddings": {{"enabled": True}}}})
t = tether.Tether(db={str(db)!r}, settings=on)
assert [d.title for d in t.documents()] == ["Guide"]
assert t.search("sensor", scope="workspace", workspace_id="w", mode="lexical")[0].title == "Guide"
t.sessions(); t.workspaces(); t.retrieval_log()
heavy = [m for m in ("torch", "sentence_transformers", "tokenizers", "openai") if m in sys.modules]
print(heavy, threading.active_count())
t.close()
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[] 1", out.stderr
