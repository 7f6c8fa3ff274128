#!/usr/bin/env python3
"""Fetch the pinned Debian Reference in four languages for ``bench/languages/measure.py``.

Usage::

    python3 bench/languages/fetch.py [DEST]         # download + unpack (DEST: docs/ here)
    python3 bench/languages/fetch.py --deb-dir DIR  # use .deb files already in DIR
    python3 bench/languages/fetch.py --list         # print the pinned manifest

The Debian Reference (Osamu Aoki, GPL-2+) is one book translated by Debian's translators:
``debian-reference-{en,de,fr,es}`` 2.100, each pinned by exact version and the SHA-256 of
its .deb. Each .deb is fetched with ``apt-get download PACKAGE=VERSION`` into a temporary
directory (by ``bench/manuals/fetch.py``'s helpers), its SHA-256 is checked, and its twelve
HTML chapters are written to ``DEST/<lang>/chNN.html``. ``docs/`` is git-ignored: the
pages are fetched, not redistributed. A language whose chapters are all there is left
alone.

Exit codes: 0 all present; 2 bad command line; 3 a download or unpacking step failed
(for example the pinned version is no longer in the configured apt sources: run
``apt-get update``; a Debian 12 "bookworm" source is needed); 4 a .deb's checksum did not
match. Standard library only; Python 3.11+.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _pinned import manuals_fetch  # noqa: E402

_mf = manuals_fetch()
DEFAULT_DEST = HERE / "docs"
VERSION = "2.100"
CHAPTERS = [f"ch{n:02d}" for n in range(1, 13)]
#: Language code -> SHA-256 of ``debian-reference-<code>_2.100_all.deb`` (bookworm).
DEBS = {
    "en": "9f31d3a17df505de09689ca255512ea58c1fc47c59bb1b0c7bf1c23362e9743f",
    "de": "3b0ce65fd63e75ddf8eb07ca36293425135080e690a07e06a6ac8bc8040ef0aa",
    "fr": "01424cba9bfa2e13166da22d3d692d33a22ec7d8ef935ec81fd8802746087f65",
    "es": "a59b68c96f83d3cf29a476c847aee38364764603ea62eee592791e0a843a269e",
}


def pin(code: str) -> object:
    package = f"debian-reference-{code}"
    return _mf.DebPin(
        name=package,
        package=package,
        version=VERSION,
        arch="all",
        pool_path=f"pool/main/d/debian-reference/{package}_{VERSION}_all.deb",
        deb_sha256=DEBS[code],
    )


def members(code: str) -> dict[str, str]:
    """Path inside the .deb -> file name under ``DEST/<code>/``."""
    return {f"usr/share/debian-reference/{ch}.{code}.html": f"{ch}.html" for ch in CHAPTERS}


def fetch_language(code: str, dest: Path, deb_dir: Path | None) -> str:
    out = dest / code
    wanted = members(code)
    if all((out / name).is_file() for name in wanted.values()):
        return "already present"
    with tempfile.TemporaryDirectory(prefix=f"tether-languages-{code}-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # apt drops privileges to _apt for downloads
        deb = _mf.obtain_deb(pin(code), work, deb_dir)
        found = _mf.extract_members(pin(code), deb, work, wanted)
        out.mkdir(parents=True, exist_ok=True)
        for member, name in wanted.items():
            _mf.write_atomically(out / name, found[member])
    return "fetched"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", nargs="?", type=Path, default=DEFAULT_DEST)
    parser.add_argument("--deb-dir", type=Path, help="use .deb files already in this folder")
    parser.add_argument("--list", action="store_true", help="print the pinned manifest")
    args = parser.parse_args(argv)
    if args.list:
        for code, sha in DEBS.items():
            print(f"debian-reference-{code} {VERSION} all sha256 {sha}")
        return _mf.EXIT_OK
    for code in DEBS:
        try:
            _mf.log(f"[{code}] {fetch_language(code, args.dest, args.deb_dir)}")
        except _mf.FetchError as exc:
            _mf.log(f"[{code}] {exc}")
            return int(exc.code)
    return _mf.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
