#!/usr/bin/env python3
"""Fetch the pinned Debian documentation pages of a ``bench/docsets/<set>`` question set.

Usage::

    python3 bench/docsets/fetch.py SET_DIR              # download + verify into SET_DIR/docs/
    python3 bench/docsets/fetch.py SET_DIR --check      # only verify what is already there
    python3 bench/docsets/fetch.py SET_DIR --deb-dir DIR  # use a .deb already downloaded into DIR
    python3 bench/docsets/fetch.py SET_DIR --list       # print the pinned manifest
    python3 bench/docsets/fetch.py --all [--check]      # every set under bench/docsets

A set is a folder with a ``manifest.json`` (see ``bench/docsets/README.md``): one Debian
package pinned by exact version and the SHA-256 of its .deb, and a list of files inside the
package, each with the SHA-256 of the file as stored. The .deb is fetched with
``apt-get download PACKAGE=VERSION`` into a temporary directory, its SHA-256 is checked, it
is unpacked once with ``dpkg -x`` (or, without dpkg, with the stdlib ``ar`` + ``tar`` reader
of ``bench/manuals/fetch.py``, whose download and unpacking helpers this script reuses), and
each listed member (gunzipped when it ends in ``.gz``) is written to
``SET_DIR/docs/<name>.html``, ``.md`` or ``.txt`` (by the manifest's ``format``), or, for
format ``man`` (roff man pages), to ``SET_DIR/docs/<name>.<section>`` with the section taken
from the member's own file name (``usr/share/man/man8/ip-route.8.gz`` gives ``.8``), and its
SHA-256 is checked. Files already there with the right SHA-256 are left alone; when all are,
nothing is downloaded. ``docs/`` is git-ignored: the pages are fetched, not redistributed.

Exit codes: 0 all files present and verified; 1 ``--check`` found a missing or mismatching
file; 2 bad command line or manifest; 3 a download or unpacking step failed (for example the
pinned version is no longer in the configured apt sources); 4 a checksum did not match after
download. With ``--all`` the first failing set's code is returned (the other sets still run).

Standard library only; Python 3.11+.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _pinned import manuals_fetch  # noqa: E402

_mf = manuals_fetch()
DebPin = _mf.DebPin
FetchError = _mf.FetchError
sha256_file = _mf.sha256_file
log = _mf.log
EXIT_OK: int = _mf.EXIT_OK
EXIT_CHECK_FAILED: int = _mf.EXIT_CHECK_FAILED
EXIT_USAGE: int = _mf.EXIT_USAGE

# manifest "format" -> file suffix; "man" files take their man section as suffix (below)
FORMATS = {"html": "html", "markdown": "md", "text": "txt", "man": "<section>"}
# the man section at the end of a man page's file name: "ip-route.8.gz" -> "8", "x.3pm" -> "3pm"
MAN_SECTION_RE = re.compile(r"\.([0-9][a-z0-9]*)(?:\.gz)?$")
NAME_RE = re.compile(r"[a-z0-9._-]+")
SHA_RE = re.compile(r"[0-9a-f]{64}")
MANIFEST_KEYS = {
    "name", "format", "description", "package", "version", "arch", "pool_path",
    "deb_sha256", "licence", "files",
}  # fmt: skip


class ManifestError(Exception):
    """manifest.json is missing or malformed."""


def man_section(member: str) -> str | None:
    """The man section in a man page member's file name (``.../ip-route.8.gz`` -> ``"8"``,
    ``.../tc-hfsc.7`` -> ``"7"``); None when the name ends in no section."""
    m = MAN_SECTION_RE.search(member.rsplit("/", 1)[-1])
    return m.group(1) if m else None


@dataclass(frozen=True)
class DocFile:
    name: str  # short name; stored as <set>/docs/<name>.<suffix>
    member: str  # path inside the .deb (gunzipped when it ends in .gz)
    sha256: str  # of the file as stored (after gunzip)


@dataclass(frozen=True)
class DocSet:
    root: Path  # the set's folder
    pin: DebPin  # pin.name is the set's name
    format: str  # "html", "markdown", "text" or "man"
    description: str
    licence: str
    files: tuple[DocFile, ...]

    @property
    def name(self) -> str:
        return str(self.pin.name)

    @property
    def suffix(self) -> str:
        """The file suffix of the format; for "man", where each page has its own, "<section>"."""
        return FORMATS[self.format]

    def suffix_of(self, f: DocFile) -> str:
        """The suffix of ``f`` as stored: the format's, or for "man" the page's man section."""
        if self.format == "man":
            section = man_section(f.member)
            assert section is not None, f.member  # load_manifest checked it
            return section
        return FORMATS[self.format]

    @property
    def docs_dir(self) -> Path:
        return self.root / "docs"

    def path(self, f: DocFile) -> Path:
        return self.docs_dir / f"{f.name}.{self.suffix_of(f)}"


def load_manifest(root: Path) -> DocSet:
    """Read and validate ``root/manifest.json``; raise ManifestError naming every problem."""
    path = root / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ManifestError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: the top level must be an object")
    problems = [f"missing key {k!r}" for k in sorted(MANIFEST_KEYS - set(data))]
    problems += [f"unknown key {k!r}" for k in sorted(set(data) - MANIFEST_KEYS)]
    for key in sorted(MANIFEST_KEYS - {"files"}):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            problems.append(f"{key!r} must be a non-empty string")
    if data.get("format") not in FORMATS:
        problems.append(f"'format' must be one of {sorted(FORMATS)}")
    if isinstance(data.get("name"), str) and not NAME_RE.fullmatch(data["name"]):
        problems.append("'name' must match [a-z0-9._-]+")
    if isinstance(data.get("deb_sha256"), str) and not SHA_RE.fullmatch(data["deb_sha256"]):
        problems.append("'deb_sha256' must be 64 lower-case hex digits")
    files: list[DocFile] = []
    raw_files = data.get("files")
    if not isinstance(raw_files, list) or not raw_files:
        problems.append("'files' must be a non-empty list")
        raw_files = []
    seen: set[str] = set()
    for i, f in enumerate(raw_files):
        if not isinstance(f, dict) or set(f) != {"name", "member", "sha256"}:
            problems.append(f"files[{i}] must be an object with exactly name, member, sha256")
            continue
        name, member, sha = f["name"], f["member"], f["sha256"]
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            problems.append(f"files[{i}]: name {name!r} must match [a-z0-9._-]+")
        elif name in seen:
            problems.append(f"files[{i}]: duplicate name {name!r}")
        if not isinstance(member, str) or not member or member.startswith("/") or ".." in member:
            problems.append(f"files[{i}]: member {member!r} must be a relative path in the .deb")
        elif data.get("format") == "man" and man_section(member) is None:
            problems.append(
                f"files[{i}]: member {member!r} of a man set must end in its man section "
                "(name.8 or name.8.gz)"
            )
        if not isinstance(sha, str) or not SHA_RE.fullmatch(sha):
            problems.append(f"files[{i}]: sha256 must be 64 lower-case hex digits")
        seen.add(str(name))
        files.append(DocFile(str(name), str(member), str(sha)))
    if problems:
        raise ManifestError(f"{path}:\n  " + "\n  ".join(problems))
    pin = DebPin(
        name=data["name"],
        package=data["package"],
        version=data["version"],
        arch=data["arch"],
        pool_path=data["pool_path"],
        deb_sha256=data["deb_sha256"],
    )
    return DocSet(root, pin, data["format"], data["description"], data["licence"], tuple(files))


def verify_file(ds: DocSet, f: DocFile) -> tuple[bool, str]:
    return _mf.verify_file(ds.path(f), f.sha256)


def fetch_set(ds: DocSet, deb_dir: Path | None) -> str:
    """Bring every file of ``ds`` into its docs/ folder; return a one-line status."""
    todo = [f for f in ds.files if not verify_file(ds, f)[0]]
    if not todo:
        return f"{len(ds.files)} files already present"
    with tempfile.TemporaryDirectory(prefix=f"tether-docset-{ds.name}-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # apt drops privileges to _apt for downloads; let it write here
        deb = _mf.obtain_deb(ds.pin, work, deb_dir)
        contents = _mf.extract_members(ds.pin, deb, work, [f.member for f in todo])
        ds.docs_dir.mkdir(parents=True, exist_ok=True)
        for f in todo:
            data = contents[f.member]
            _mf.check_extracted(f"{ds.name}: extracted {f.member}", data, f.sha256)
            _mf.write_atomically(ds.path(f), data)
    kept = len(ds.files) - len(todo)
    return f"{len(todo)} file(s) fetched, {kept} already present"


def check_set(ds: DocSet) -> int:
    results = [(f, *verify_file(ds, f)) for f in ds.files]
    bad = [(f, why) for f, ok, why in results if not ok]
    for f, why in bad:
        print(f"FAIL {ds.name}: {ds.path(f)}: {why}")
    if bad:
        log(
            f"{len(bad)} of {len(ds.files)} file(s) of {ds.name} missing or wrong; run: "
            f"python3 {Path(__file__).as_posix()} {ds.root}"
        )
        return EXIT_CHECK_FAILED
    print(f"OK   {ds.name}: {len(ds.files)} files verified in {ds.docs_dir}")
    return EXIT_OK


def list_set(ds: DocSet) -> None:
    pin = ds.pin
    print(
        f"{ds.name}\t{pin.apt_spec}\t{pin.arch}\t{ds.format}\t{len(ds.files)} files\n"
        f"\tdeb sha256 {pin.deb_sha256}\n\tlicence {ds.licence}"
    )
    for f in ds.files:
        print(f"\t{ds.path(f).name}\t{f.member}\t{f.sha256}")


def all_set_dirs() -> list[Path]:
    return sorted(p.parent for p in HERE.glob("*/manifest.json"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Fetch and verify the pinned documentation pages of a bench/docsets set.",
    )
    ap.add_argument("set_dir", nargs="?", help="the set's folder (holding manifest.json)")
    ap.add_argument("--all", action="store_true", help="every set folder under bench/docsets")
    ap.add_argument(
        "--check", action="store_true", help="only verify docs/ against the pins; download nothing"
    )
    ap.add_argument(
        "--deb-dir", metavar="DIR", help="take the .deb from DIR instead of apt-get download"
    )
    ap.add_argument("--list", action="store_true", help="print the pinned manifest and exit")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on bad usage, 0 on --help
        return int(e.code or 0)
    if bool(args.set_dir) == args.all:
        log("give either SET_DIR or --all")
        return EXIT_USAGE
    deb_dir = Path(args.deb_dir) if args.deb_dir else None
    if deb_dir is not None and not deb_dir.is_dir():
        log(f"--deb-dir {deb_dir}: not a directory")
        return EXIT_USAGE

    roots = all_set_dirs() if args.all else [Path(args.set_dir)]
    if not roots:
        log(f"no set folder with a manifest.json under {HERE}")
        return EXIT_USAGE
    try:
        sets = [load_manifest(root) for root in roots]
    except ManifestError as e:
        log(f"error: {e}")
        return EXIT_USAGE

    result = EXIT_OK
    for ds in sets:
        if args.list:
            list_set(ds)
            continue
        if args.check:
            code = check_set(ds)
        else:
            try:
                print(f"OK   {ds.name}: {fetch_set(ds, deb_dir)} ({ds.docs_dir})")
                code = EXIT_OK
            except FetchError as e:
                log(f"error: {e}")
                code = e.code
        result = result or code
    return result


if __name__ == "__main__":
    sys.exit(main())
