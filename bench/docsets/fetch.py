#!/usr/bin/env python3
"""Fetch the pinned Debian documentation pages of a ``bench/docsets/<set>`` question set.

Usage::

    python3 bench/docsets/fetch.py SET_DIR              # download + verify into SET_DIR/docs/
    python3 bench/docsets/fetch.py SET_DIR --check      # only verify what is already there
    python3 bench/docsets/fetch.py SET_DIR --deb-dir DIR  # use a .deb already downloaded into DIR
    python3 bench/docsets/fetch.py SET_DIR --list       # print the pinned manifest
    python3 bench/docsets/fetch.py --all [--check]      # every set under bench/docsets

A set is a folder with a ``manifest.json`` (see ``bench/docsets/README.md``). It pins either
one Debian package (top-level ``package``, ``version``, ``arch``, ``pool_path``,
``deb_sha256``, ``licence``) or several (a ``packages`` list of objects with those six keys,
each file then naming its ``package``), each by exact version and the SHA-256 of its .deb,
and a list of files inside the package(s), each with the SHA-256 of the file as stored. A
.deb is fetched with ``apt-get download PACKAGE[:ARCH]=VERSION`` into a temporary directory,
its SHA-256 is checked, it is unpacked once with ``dpkg -x`` (or, without dpkg, with the
stdlib ``ar`` + ``tar`` reader of ``bench/manuals/fetch.py``, whose download and unpacking
helpers this script reuses), and each listed member (gunzipped when it ends in ``.gz``) is
written to ``SET_DIR/docs/<name>.html``, ``.md`` or ``.txt`` (by the manifest's
``format``); for format ``man`` (roff man pages), to ``SET_DIR/docs/<name>.<section>`` with
the section taken from the member's own file name (``usr/share/man/man8/ip-route.8.gz``
gives ``.8``); for format ``info`` (GNU Info files made by makeinfo), to
``SET_DIR/docs/<name>.info``, or ``<name>.info-N`` for part N of a split manual
(``usr/share/info/find.info-1.gz`` gives ``.info-1``). Its SHA-256 is then checked. Files
already there with the right SHA-256 are left alone; a package none of whose files is
missing is not downloaded. ``docs/`` is git-ignored: the pages are fetched, not
redistributed.

Exit codes: 0 all files present and verified; 1 ``--check`` found a missing or mismatching
file; 2 bad command line or manifest; 3 a download or unpacking step failed (for example the
pinned version is no longer in the configured apt sources); 4 a checksum did not match after
download. With ``--all`` the first failing set's code is returned (the other sets still run).

Standard library only; Python 3.11+.
"""

from __future__ import annotations

import argparse
import dataclasses
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

# manifest "format" -> file suffix; "man" files take their man section as suffix, "info"
# files "info" or, for part N of a split manual, "info-N" (below)
FORMATS = {"html": "html", "markdown": "md", "text": "txt", "man": "<section>", "info": "info"}
# the man section at the end of a man page's file name: "ip-route.8.gz" -> "8", "x.3pm" -> "3pm"
MAN_SECTION_RE = re.compile(r"\.([0-9][a-z0-9]*)(?:\.gz)?$")
# the end of an Info file's name: "sed.info.gz" -> "info", "find.info-1.gz" -> "info-1"
INFO_SUFFIX_RE = re.compile(r"\.(info(?:-[0-9]+)?)(?:\.gz)?$")
NAME_RE = re.compile(r"[a-z0-9._-]+")
SHA_RE = re.compile(r"[0-9a-f]{64}")
# what pins one package: top-level keys of a single-package manifest, or one entry of the
# "packages" list of a manifest drawn from several
PACKAGE_KEYS = {"package", "version", "arch", "pool_path", "deb_sha256", "licence"}
MANIFEST_KEYS = {"name", "format", "description", "files"} | PACKAGE_KEYS  # one package
MULTI_MANIFEST_KEYS = {"name", "format", "description", "packages", "files"}  # several


class ManifestError(Exception):
    """manifest.json is missing or malformed."""


def man_section(member: str) -> str | None:
    """The man section in a man page member's file name (``.../ip-route.8.gz`` -> ``"8"``,
    ``.../tc-hfsc.7`` -> ``"7"``); None when the name ends in no section."""
    m = MAN_SECTION_RE.search(member.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def info_suffix(member: str) -> str | None:
    """The suffix an Info file keeps (``.../sed.info.gz`` -> ``"info"``, a split manual's
    ``.../find.info-1.gz`` -> ``"info-1"``); None when the name does not end so."""
    m = INFO_SUFFIX_RE.search(member.rsplit("/", 1)[-1])
    return m.group(1) if m else None


@dataclass(frozen=True)
class Package:
    """One pinned Debian package of a set. ``pin.name``, used in messages and temporary
    folder names, is the set's name for a single-package set, ``<set>-<package>`` otherwise."""

    pin: DebPin
    licence: str  # of the documents, from /usr/share/doc/<package>/copyright


@dataclass(frozen=True)
class DocFile:
    name: str  # short name; stored as <set>/docs/<name>.<suffix>
    member: str  # path inside the .deb (gunzipped when it ends in .gz)
    sha256: str  # of the file as stored (after gunzip)
    package: str = ""  # the Debian package it comes from ("": the set's only package)


@dataclass(frozen=True)
class DocSet:
    root: Path  # the set's folder
    pin: DebPin  # pin.name is the set's name; of a set of several packages, the first one's
    format: str  # "html", "markdown", "text", "man" or "info"
    description: str
    licence: str  # of a set of several packages, the first one's
    files: tuple[DocFile, ...]
    # every package of a set drawn from several ("packages" in manifest.json), pin.name
    # "<set>-<package>"; empty for a single-package set, whose package is ``pin``
    package_list: tuple[Package, ...] = ()

    @property
    def name(self) -> str:
        return str(self.pin.name)

    @property
    def packages(self) -> tuple[Package, ...]:
        """Every pinned package: the set's only one, or those of its "packages" list."""
        return self.package_list or (Package(self.pin, self.licence),)

    @property
    def apt_specs(self) -> str:
        """Every pinned package as ``apt-get download`` names it, comma-separated."""
        return ", ".join(p.pin.apt_spec for p in self.packages)

    def package_of(self, f: DocFile) -> Package:
        """The package ``f`` comes from."""
        packages = self.packages
        return next((p for p in packages if p.pin.package == f.package), packages[0])

    @property
    def suffix(self) -> str:
        """The file suffix of the format; for "man", where each page has its own, "<section>"."""
        return FORMATS[self.format]

    def suffix_of(self, f: DocFile) -> str:
        """The suffix of ``f`` as stored: the format's, for "man" the page's man section, for
        "info" ``info`` or a split manual part's ``info-N``."""
        if self.format == "man":
            section = man_section(f.member)
            assert section is not None, f.member  # load_manifest checked it
            return section
        if self.format == "info":
            suffix = info_suffix(f.member)
            assert suffix is not None, f.member  # load_manifest checked it
            return suffix
        return FORMATS[self.format]

    @property
    def docs_dir(self) -> Path:
        return self.root / "docs"

    def path(self, f: DocFile) -> Path:
        return self.docs_dir / f"{f.name}.{self.suffix_of(f)}"


def _check_pin_fields(data: dict, where: str, problems: list[str]) -> None:
    """The six keys that pin a package (``PACKAGE_KEYS``): non-empty strings, a hex SHA-256."""
    for key in sorted(PACKAGE_KEYS):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            problems.append(f"{where}{key!r} must be a non-empty string")
    if isinstance(data.get("deb_sha256"), str) and not SHA_RE.fullmatch(data["deb_sha256"]):
        problems.append(f"{where}'deb_sha256' must be 64 lower-case hex digits")


def _pin(data: dict, name: str) -> DebPin:
    return DebPin(
        name=name,
        package=data["package"],
        version=data["version"],
        arch=data["arch"],
        pool_path=data["pool_path"],
        deb_sha256=data["deb_sha256"],
    )


def _load_packages(data: dict, problems: list[str]) -> list[Package]:
    """The ``packages`` list of a manifest drawn from several packages."""
    raw = data.get("packages")
    if not isinstance(raw, list) or not raw:
        problems.append("'packages' must be a non-empty list")
        return []
    set_name = data.get("name") if isinstance(data.get("name"), str) else "set"
    packages: list[Package] = []
    seen: set[str] = set()
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or set(p) != PACKAGE_KEYS:
            problems.append(
                f"packages[{i}] must be an object with exactly {', '.join(sorted(PACKAGE_KEYS))}"
            )
            continue
        before = len(problems)
        _check_pin_fields(p, f"packages[{i}]: ", problems)
        if len(problems) > before:
            continue
        if p["package"] in seen:
            problems.append(f"packages[{i}]: duplicate package {p['package']!r}")
            continue
        seen.add(p["package"])
        packages.append(Package(_pin(p, f"{set_name}-{p['package']}"), p["licence"]))
    return packages


def load_manifest(root: Path) -> DocSet:
    """Read and validate ``root/manifest.json``; raise ManifestError naming every problem.

    A manifest pins one package with top-level keys, or several with a ``packages`` list;
    then each file names its ``package``."""
    path = root / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ManifestError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: the top level must be an object")
    multi = "packages" in data
    keys = MULTI_MANIFEST_KEYS if multi else MANIFEST_KEYS
    problems = [f"missing key {k!r}" for k in sorted(keys - set(data))]
    problems += [f"unknown key {k!r}" for k in sorted(set(data) - keys)]
    for key in ("description", "format", "name"):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            problems.append(f"{key!r} must be a non-empty string")
    if multi:
        packages = _load_packages(data, problems)
    else:
        _check_pin_fields(data, "", problems)
        packages = []
    fmt = data.get("format")
    if fmt not in FORMATS:
        problems.append(f"'format' must be one of {sorted(FORMATS)}")
    if isinstance(data.get("name"), str) and not NAME_RE.fullmatch(data["name"]):
        problems.append("'name' must match [a-z0-9._-]+")
    files: list[DocFile] = []
    raw_files = data.get("files")
    if not isinstance(raw_files, list) or not raw_files:
        problems.append("'files' must be a non-empty list")
        raw_files = []
    file_keys = {"name", "member", "sha256"} | ({"package"} if multi else set())
    package_names = {p.pin.package for p in packages}
    seen: set[str] = set()
    for i, f in enumerate(raw_files):
        if not isinstance(f, dict) or set(f) != file_keys:
            problems.append(
                f"files[{i}] must be an object with exactly {', '.join(sorted(file_keys))}"
                if multi
                else f"files[{i}] must be an object with exactly name, member, sha256"
            )
            continue
        name, member, sha = f["name"], f["member"], f["sha256"]
        package = f.get("package", data.get("package", ""))
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            problems.append(f"files[{i}]: name {name!r} must match [a-z0-9._-]+")
        elif name in seen:
            problems.append(f"files[{i}]: duplicate name {name!r}")
        if not isinstance(member, str) or not member or member.startswith("/") or ".." in member:
            problems.append(f"files[{i}]: member {member!r} must be a relative path in the .deb")
        elif fmt == "man" and man_section(member) is None:
            problems.append(
                f"files[{i}]: member {member!r} of a man set must end in its man section "
                "(name.8 or name.8.gz)"
            )
        elif fmt == "info" and info_suffix(member) is None:
            problems.append(
                f"files[{i}]: member {member!r} of an info set must end in .info or .info-N "
                "(optionally .gz)"
            )
        if not isinstance(sha, str) or not SHA_RE.fullmatch(sha):
            problems.append(f"files[{i}]: sha256 must be 64 lower-case hex digits")
        if multi and package not in package_names:
            problems.append(f"files[{i}]: package {package!r} is not one of 'packages'")
        seen.add(str(name))
        files.append(DocFile(str(name), str(member), str(sha), str(package)))
    for p in packages:
        if not any(f.package == p.pin.package for f in files):
            problems.append(f"package {p.pin.package!r} has no file in 'files'")
    if problems:
        raise ManifestError(f"{path}:\n  " + "\n  ".join(problems))
    if not multi:
        pin = _pin(data, data["name"])
        return DocSet(root, pin, data["format"], data["description"], data["licence"], tuple(files))
    first = packages[0]
    pin = dataclasses.replace(first.pin, name=data["name"])  # the first one, named as the set
    return DocSet(
        root, pin, data["format"], data["description"], first.licence, tuple(files), tuple(packages)
    )


def verify_file(ds: DocSet, f: DocFile) -> tuple[bool, str]:
    return _mf.verify_file(ds.path(f), f.sha256)


def fetch_set(ds: DocSet, deb_dir: Path | None) -> str:
    """Bring every file of ``ds`` into its docs/ folder; return a one-line status. Only the
    packages that some missing or wrong file comes from are downloaded."""
    todo = [f for f in ds.files if not verify_file(ds, f)[0]]
    if not todo:
        return f"{len(ds.files)} files already present"
    needed = [p for p in ds.packages if any(ds.package_of(f) == p for f in todo)]
    with tempfile.TemporaryDirectory(prefix=f"tether-docset-{ds.name}-") as tmp:
        os.chmod(tmp, 0o755)  # apt drops privileges to _apt for downloads; let it write here
        for package in needed:
            work = Path(tmp) / package.pin.package
            work.mkdir()
            os.chmod(work, 0o755)
            files = [f for f in todo if ds.package_of(f) == package]
            deb = _mf.obtain_deb(package.pin, work, deb_dir)
            contents = _mf.extract_members(package.pin, deb, work, [f.member for f in files])
            ds.docs_dir.mkdir(parents=True, exist_ok=True)
            for f in files:
                data = contents[f.member]
                _mf.check_extracted(f"{ds.name}: extracted {f.member}", data, f.sha256)
                _mf.write_atomically(ds.path(f), data)
    kept = len(ds.files) - len(todo)
    if len(ds.packages) == 1:
        return f"{len(todo)} file(s) fetched, {kept} already present"
    return f"{len(todo)} file(s) fetched from {len(needed)} package(s), {kept} already present"


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
    if len(ds.packages) == 1:
        pin = ds.pin
        print(
            f"{ds.name}\t{pin.apt_spec}\t{pin.arch}\t{ds.format}\t{len(ds.files)} files\n"
            f"\tdeb sha256 {pin.deb_sha256}\n\tlicence {ds.licence}"
        )
        for f in ds.files:
            print(f"\t{ds.path(f).name}\t{f.member}\t{f.sha256}")
        return
    print(f"{ds.name}\t{len(ds.packages)} packages\t{ds.format}\t{len(ds.files)} files")
    for p in ds.packages:
        print(
            f"\t{p.pin.apt_spec}\t{p.pin.arch}\n\t\tdeb sha256 {p.pin.deb_sha256}\n"
            f"\t\tlicence {p.licence}"
        )
        for f in ds.files:
            if ds.package_of(f) == p:
                print(f"\t\t{ds.path(f).name}\t{f.member}\t{f.sha256}")


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
