"""``bench/manuals/fetch.py`` as a module, for the other fetch scripts (``docsets``,
``formats``), which pin their Debian packages the same way: they are all called
``fetch.py``, so it is imported by its path, under a name of its own. Standard library
only."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

MANUALS_FETCH = Path(__file__).resolve().parent / "manuals" / "fetch.py"


def manuals_fetch() -> ModuleType:
    """The module of ``bench/manuals/fetch.py`` (its download, unpacking and checksum
    helpers), imported once."""
    name = "bench_manuals_fetch"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, MANUALS_FETCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
