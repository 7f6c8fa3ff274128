"""``bench/manuals/fetch.py`` as a module, for the other fetch scripts (``docsets``,
``formats``), which pin their Debian packages the same way: they are all called
``fetch.py``, so it is imported by its path, under a name of its own. Standard library
only."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

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


def unpacked(pin: Any, cache: Path, debs: Path | None = None) -> Path:
    """The files of the pinned Debian package ``pin`` (a ``DebPin``) under ``cache``: its
    .deb taken from ``debs`` or downloaded with ``apt-get download``, its SHA-256 checked,
    and unpacked with ``dpkg -x``, once."""
    root = cache / pin.name
    if (root / ".done").exists():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        deb = manuals_fetch().obtain_deb(pin, Path(tmp), debs)
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
    (root / ".done").touch()
    return root
