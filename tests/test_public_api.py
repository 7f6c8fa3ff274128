"""The public surface: `tether.__all__` is exactly what a user may import, sorted."""

from __future__ import annotations

import subprocess
import sys

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
