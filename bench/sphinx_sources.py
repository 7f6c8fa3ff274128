"""How much of real Sphinx sources tether reads: the reStructuredText documentation of
three projects, read with Sphinx's directives and roles known
(:mod:`tether.ingest.formats.sphinx`) against docutils alone.

    .venv/bin/python bench/sphinx_sources.py [--cache DIR] [--json]

Each project's source distribution is fetched from PyPI with ``pip download`` (pinned by
version and SHA-256, kept in ``--cache``) and its documentation folder read. For each
way of reading it reports the characters of text kept, the directives docutils did not
know (it drops each with its content) and the roles left as written. Results are in
``bench/sphinx_sources.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import Any

#: (project, version, SHA-256 of the sdist, its documentation folder).
SOURCES = (
    ("flask", "3.0.3", "ceb27b0af3823ea2737928a4d99d125a06175b8512c445cbd9a9ce200ef76842",
     "docs"),
    ("click", "8.1.7", "ca9853ad459e787e2192211578cc907e7594e294c7ccc834310722b41b9ca6de",
     "docs"),
    ("sphinx", "7.4.7", "242f92a7ea7e6c5b406fdc2615413890ba9f699114a9c09192d7dfead2ee9cfe",
     "doc"),
)  # fmt: skip
_UNKNOWN_DIRECTIVE = re.compile(r'Unknown directive type "([^"]+)"')
_RAW_ROLE = re.compile(r":([\w:+-]+):`")


def fetch(cache: Path) -> list[Path]:
    """Each project's documentation folder, its sdist downloaded and checked first."""
    folders = []
    for name, version, digest, docs in SOURCES:
        archive = cache / f"{name}-{version}.tar.gz"
        if not archive.is_file():
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--no-binary", ":all:", "--dest", str(cache), f"{name}=={version}"],
                check=True,
            )  # fmt: skip
        if hashlib.sha256(archive.read_bytes()).hexdigest() != digest:
            raise SystemExit(f"{archive}: SHA-256 is not the pinned {digest}")
        root = cache / f"{name}-{version}"
        if not root.is_dir():
            with tarfile.open(archive) as tar:
                tar.extractall(cache, filter="data")
        folders.append(root / docs)
    return folders


def read(folder: Path, sphinx: bool) -> dict[str, Any]:
    """Characters kept, unknown directives and raw roles over the folder's ``.rst`` files."""
    from docutils import nodes
    from docutils.core import publish_doctree

    from tether.ingest.formats import data
    from tether.ingest.formats.sphinx import sphinx_markup

    chars, unknown, raw = 0, Counter[str](), Counter[str]()
    files = sorted(folder.rglob("*.rst"))
    for path in files:
        with sphinx_markup() if sphinx else nullcontext():
            doctree = publish_doctree(
                path.read_text("utf-8"), settings_overrides=data._RST_SETTINGS
            )
        for message in doctree.findall(nodes.system_message):
            found = _UNKNOWN_DIRECTIVE.search(message.astext())
            if found:
                unknown[found.group(1)] += 1
        builder = data.TextBuilder()
        data._RstWriter(builder).write(doctree)
        text, _ = builder.sections()
        chars += len(text)
        raw.update(_RAW_ROLE.findall(text))
    return {"files": len(files), "characters": chars, "unknown_directives": dict(unknown),
            "roles_left": sum(raw.values()), "top_roles_left": raw.most_common(5)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tether-sphinx")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    rows = {}
    for folder in fetch(args.cache):
        project = folder.parent.name
        rows[project] = {"docutils": read(folder, False), "sphinx": read(folder, True)}
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        "project         files  docutils chars  +Sphinx chars  ratio  unknown directives"
        " (docutils -> +Sphinx)  roles left"
    )
    for project, r in rows.items():
        before, after = r["docutils"], r["sphinx"]
        print(f"{project:15s} {before['files']:5d}  {before['characters']:14,d}"
              f"  {after['characters']:13,d}  {after['characters'] / before['characters']:5.2f}"
              f"  {sum(before['unknown_directives'].values()):5d} -> "
              f"{sum(after['unknown_directives'].values()):<5d}"
              f"                   {before['roles_left']:5d} -> {after['roles_left']}")  # fmt: skip
    for project, r in rows.items():
        left = Counter(r["sphinx"]["unknown_directives"]).most_common(4)
        print(f"{project}: still unknown: {left}; roles still raw: {r['sphinx']['top_roles_left']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
