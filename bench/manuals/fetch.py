#!/usr/bin/env python3
"""Fetch the pinned Debian PDF manuals used by the ``bench/manuals`` question set.

Usage::

    python3 bench/manuals/fetch.py [DEST]            # download + verify (DEST: bench/manuals/pdfs/)
    python3 bench/manuals/fetch.py --check [DEST]    # only verify what is already in DEST
    python3 bench/manuals/fetch.py --deb-dir DIR     # use .deb files already downloaded into DIR
    python3 bench/manuals/fetch.py --list            # print the pinned manifest

Each manual is pinned by Debian package, exact version, the SHA-256 of the .deb, the path
of the PDF inside the package and the SHA-256 of the PDF itself. The .deb is fetched with
``apt-get download PACKAGE[:ARCH]=VERSION`` into a temporary directory, its SHA-256 is
checked, it is unpacked with ``dpkg -x`` (or, where dpkg is missing, with a small stdlib
reader for the ``ar`` + ``data.tar.*`` format), the PDF (gunzipped when the package ships
it as ``.pdf.gz``) is copied to ``DEST/<name>.pdf`` and its SHA-256 is checked. A PDF
already in DEST with the right SHA-256 is left alone.

The PDFs are not redistributed by this repository (``bench/manuals/.gitignore``).

Exit codes: 0 all manuals present and verified; 1 ``--check`` found a missing or
mismatching PDF; 2 bad command line; 3 a download or unpacking step failed (for example the
pinned version is no longer in the configured apt sources); 4 a checksum did not match
after download.

Standard library only; Python 3.11+.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DEST = HERE / "pdfs"

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_FETCH_FAILED = 3
EXIT_CHECKSUM = 4


@dataclass(frozen=True)
class DebPin:
    """A Debian package pinned by exact version and .deb checksum (also used by bench/docsets)."""

    name: str  # short name, used in messages and temporary directory names
    package: str
    version: str
    arch: str  # "all" or the architecture the .deb sha256 was taken from
    pool_path: str  # path below a Debian mirror root (for manual downloads)
    deb_sha256: str

    @property
    def deb_filename(self) -> str:
        # Debian file names drop the epoch and keep the rest of the version verbatim.
        version = self.version.split(":", 1)[-1]
        return f"{self.package}_{version}_{self.arch}.deb"

    @property
    def apt_spec(self) -> str:
        if self.arch == "all":
            return f"{self.package}={self.version}"
        return f"{self.package}:{self.arch}={self.version}"


@dataclass(frozen=True)
class Manual(DebPin):
    member: str  # path of the PDF inside the package (.pdf or .pdf.gz)
    pdf_sha256: str  # sha256 of the (decompressed) PDF
    pages: int  # the PDF is stored as DEST/<name>.pdf


# Debian 12 (bookworm), pinned in November 2026 from deb.debian.org; see README.md.
MANUALS: tuple[Manual, ...] = (
    Manual(
        name="libtasn1",
        package="libtasn1-doc",
        version="4.19.0-2+deb12u1",
        arch="all",
        pool_path="pool/main/libt/libtasn1-6/libtasn1-doc_4.19.0-2+deb12u1_all.deb",
        deb_sha256="ce109d7f7611b24d03e41b831eab01c3c7fb1a55b8d8b4350ed24383c0c8dfda",
        member="usr/share/doc/libtasn1-doc/libtasn1.pdf",
        pdf_sha256="3917eb460d87e275f9792b3597029873fd77890ed3ccebe40bbc5a3a7ee516d3",
        pages=36,
    ),
    Manual(
        name="libidn2",
        package="libidn2-doc",
        version="2.3.3-1",
        arch="all",
        pool_path="pool/main/libi/libidn2/libidn2-doc_2.3.3-1_all.deb",
        deb_sha256="027990e0b03a476f35dfbaf62a8f42f68fc3b672ebd5fbfbeb32f38739751fab",
        member="usr/share/doc/libidn2-doc/libidn2.pdf",
        pdf_sha256="0c1fb6ffacd204fa15f5c049daa062a91e48d58d437d5a2b944d0e8124c26877",
        pages=25,
    ),
    Manual(
        name="shared-mime-info",
        package="shared-mime-info",
        version="2.2-1",
        # Architecture-specific package: the PDF is rebuilt per architecture, so the pin
        # is the amd64 build (on other hosts: dpkg --add-architecture amd64, or --deb-dir).
        arch="amd64",
        pool_path="pool/main/s/shared-mime-info/shared-mime-info_2.2-1_amd64.deb",
        deb_sha256="dd026add873483566faefebbd8779a1e5e14ab2e44682ebfe238c3828a2b936b",
        member="usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf",
        pdf_sha256="4d9666c46b4d367a12e2922f4f3b114396c377106c57bbc934d03320e6888002",
        pages=17,
    ),
    Manual(
        name="docbook-xsl",
        package="docbook-xsl-doc-pdf",
        version="1.79.1-1",
        arch="all",
        pool_path="pool/main/d/docbook-xsl-doc/docbook-xsl-doc-pdf_1.79.1-1_all.deb",
        deb_sha256="b0b961def787d991d4d5f9395bb68cdd1d587f97b8f1f9ebc50482a3b097ec8c",
        member="usr/share/doc/docbook-xsl-doc-pdf/doc/reference.pdf.gz",
        pdf_sha256="ce478311b60c093c84791007d6cd81f42736433a34f37a146b3bb99e88911db6",
        pages=95,
    ),
    Manual(
        name="reportlab",
        package="python-reportlab-doc",
        version="3.6.12-1+deb12u1",
        arch="all",
        pool_path="pool/main/p/python-reportlab/python-reportlab-doc_3.6.12-1+deb12u1_all.deb",
        deb_sha256="f7d27c209eb0c2063b604f34414681d0694a83280aa1668f0bccc685f607131c",
        member="usr/share/doc/python-reportlab-doc/reportlab-userguide.pdf",
        pdf_sha256="91ad5429d7b2907b8efefd7b95facfe2fb01ec31b8cefb024e47b0a7ac713420",
        pages=134,
    ),
)


class FetchError(Exception):
    def __init__(self, message: str, code: int = EXIT_FETCH_FAILED) -> None:
        super().__init__(message)
        self.code = code


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def manual_download_hint(m: DebPin) -> str:
    return (
        f"  To fetch it by hand: https://deb.debian.org/debian/{m.pool_path}\n"
        f"  (or, once it has left the archive, "
        f"https://snapshot.debian.org/package/{source_hint(m)}/{m.version}/ ),\n"
        f"  then run: fetch.py --deb-dir DIR_WITH_THE_DEB"
    )


def source_hint(m: DebPin) -> str:
    # pool/main/<prefix>/<source>/<file>
    parts = m.pool_path.split("/")
    return parts[3] if len(parts) > 3 else m.package


def apt_download(m: DebPin, workdir: Path) -> Path:
    if shutil.which("apt-get") is None:
        raise FetchError(
            f"{m.name}: apt-get is not available on this machine; cannot fetch "
            f"{m.package} {m.version}.\n{manual_download_hint(m)}"
        )
    log(f"[{m.name}] apt-get download {m.apt_spec}")
    proc = subprocess.run(
        ["apt-get", "download", m.apt_spec],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        arch_note = "" if m.arch == "all" else f", with architecture {m.arch} enabled"
        raise FetchError(
            f"{m.name}: 'apt-get download {m.apt_spec}' failed (exit {proc.returncode}).\n"
            f"  The pinned version {m.package} {m.version} ({m.arch}) may no longer be in "
            f"your apt sources (run 'apt-get update' first; a Debian 12 'bookworm' source "
            f"is needed{arch_note}).\n"
            f"  apt said: {detail}\n{manual_download_hint(m)}"
        )
    path = workdir / m.deb_filename
    if not path.exists():
        # apt-get URL-encodes some characters (':' of an epoch becomes %3a)
        candidates = sorted(workdir.glob(f"{m.package}_*.deb"))
        if len(candidates) != 1:
            raise FetchError(f"{m.name}: apt-get download produced no single .deb in {workdir}")
        path = candidates[0]
    return path


def find_local_deb(m: DebPin, deb_dir: Path) -> Path:
    direct = deb_dir / m.deb_filename
    if direct.exists():
        return direct
    for cand in sorted(deb_dir.glob(f"{m.package}_*.deb")):
        if sha256_file(cand) == m.deb_sha256:
            return cand
    raise FetchError(
        f"{m.name}: no {m.deb_filename} (sha256 {m.deb_sha256}) in {deb_dir}.\n"
        f"{manual_download_hint(m)}"
    )


def _ar_members(data: bytes):
    if not data.startswith(b"!<arch>\n"):
        raise FetchError("not a Debian package (missing ar header)")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        start = pos + 60
        yield name, data[start : start + size]
        pos = start + size + (size & 1)


def extract_members_stdlib(deb: Path, members: Iterable[str]) -> dict[str, bytes]:
    """Read files out of a .deb without dpkg (data.tar.{xz,gz,bz2} or plain tar)."""
    wanted = set(members)
    raw = deb.read_bytes()
    for name, payload in _ar_members(raw):
        if not name.startswith("data.tar"):
            continue
        if name.endswith(".zst"):
            raise FetchError(f"{deb.name}: data.tar.zst needs dpkg (not readable with the stdlib)")
        found: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tar:
            for info in tar.getmembers():
                path = info.name.lstrip("./")
                if path in wanted and info.isfile():
                    f = tar.extractfile(info)
                    assert f is not None
                    found[path] = f.read()
        missing = sorted(wanted - set(found))
        if missing:
            raise FetchError(f"{deb.name}: {', '.join(missing)} not found in the package")
        return found
    raise FetchError(f"{deb.name}: no data.tar member")


def extract_members(
    pin: DebPin, deb: Path, workdir: Path, members: Iterable[str]
) -> dict[str, bytes]:
    """Unpack ``deb`` once and return each member's bytes, gunzipped when it ends in ``.gz``."""
    members = list(members)
    if shutil.which("dpkg") is not None:
        root = workdir / f"x-{pin.name}"
        root.mkdir()
        proc = subprocess.run(["dpkg", "-x", str(deb), str(root)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise FetchError(f"{pin.name}: dpkg -x {deb.name} failed: {proc.stderr.strip()}")
        raw: dict[str, bytes] = {}
        for member in members:
            path = root / member
            if not path.is_file():
                raise FetchError(f"{pin.name}: {member} is not in {deb.name}")
            raw[member] = path.read_bytes()
    else:
        raw = extract_members_stdlib(deb, members)
    return {k: gzip.decompress(v) if k.endswith(".gz") else v for k, v in raw.items()}


def extract_pdf(m: Manual, deb: Path, workdir: Path) -> bytes:
    return extract_members(m, deb, workdir, [m.member])[m.member]


def verify_file(path: Path, want_sha256: str) -> tuple[bool, str]:
    """(ok, why): is ``path`` there with the pinned SHA-256?"""
    if not path.exists():
        return False, "missing"
    got = sha256_file(path)
    if got != want_sha256:
        return False, f"sha256 mismatch (got {got}, want {want_sha256})"
    return True, "ok"


def verify_existing(m: Manual, dest: Path) -> tuple[bool, str]:
    return verify_file(dest / f"{m.name}.pdf", m.pdf_sha256)


def obtain_deb(pin: DebPin, workdir: Path, deb_dir: Path | None) -> Path:
    """The pinned .deb, from ``deb_dir`` or downloaded into ``workdir``, its SHA-256 checked."""
    deb = find_local_deb(pin, deb_dir) if deb_dir else apt_download(pin, workdir)
    got = sha256_file(deb)
    if got != pin.deb_sha256:
        raise FetchError(
            f"{pin.name}: {deb.name} has sha256 {got}, pinned {pin.deb_sha256}", EXIT_CHECKSUM
        )
    return deb


def check_extracted(what: str, data: bytes, want_sha256: str) -> None:
    """Raise (exit code 4) unless ``data`` has the pinned SHA-256; ``what`` names it."""
    got = hashlib.sha256(data).hexdigest()
    if got != want_sha256:
        raise FetchError(f"{what} has sha256 {got}, pinned {want_sha256}", EXIT_CHECKSUM)


def write_atomically(out: Path, data: bytes) -> None:
    partial = out.with_name(out.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, out)


def fetch_one(m: Manual, dest: Path, deb_dir: Path | None) -> str:
    ok, why = verify_existing(m, dest)
    if ok:
        return "already present"
    with tempfile.TemporaryDirectory(prefix=f"tether-manual-{m.name}-") as tmp:
        work = Path(tmp)
        # apt drops privileges to _apt for downloads; let it write here.
        os.chmod(work, 0o755)
        deb = obtain_deb(m, work, deb_dir)
        data = extract_pdf(m, deb, work)
        check_extracted(f"{m.name}: extracted {m.member}", data, m.pdf_sha256)
        dest.mkdir(parents=True, exist_ok=True)
        write_atomically(dest / f"{m.name}.pdf", data)
    return "fetched" if why == "missing" else f"replaced ({why})"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; argparse's own exit (2 on bad usage, 0 on --help) propagates."""
    ap = argparse.ArgumentParser(
        description="Fetch and verify the pinned Debian PDF manuals for bench/manuals.",
    )
    ap.add_argument(
        "dest",
        nargs="?",
        default=str(DEFAULT_DEST),
        help=f"directory for the PDFs (default: {DEFAULT_DEST})",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="only verify DEST/<name>.pdf against the pinned sha256; download nothing",
    )
    ap.add_argument(
        "--deb-dir",
        metavar="DIR",
        help="take the .deb files from DIR instead of running apt-get download",
    )
    ap.add_argument(
        "--only", metavar="NAME", action="append", help="restrict to this manual (repeatable)"
    )
    ap.add_argument("--list", action="store_true", help="print the pinned manifest and exit")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on bad usage, 0 on --help
        return int(e.code or 0)
    manuals = selected_manuals(args.only)
    if manuals is None:
        return EXIT_USAGE
    if args.list:
        print_manifest(manuals)
        return EXIT_OK
    if args.check:
        return check_all(manuals, args.dest)
    deb_dir = Path(args.deb_dir) if args.deb_dir else None
    if deb_dir is not None and not deb_dir.is_dir():
        log(f"--deb-dir {deb_dir}: not a directory")
        return EXIT_USAGE
    return fetch_all(manuals, Path(args.dest), deb_dir)


def selected_manuals(only: list[str] | None) -> list[Manual] | None:
    """The manuals ``--only`` names (all without it); None, said why, for an unknown name."""
    if not only:
        return list(MANUALS)
    known = {m.name for m in MANUALS}
    unknown = [n for n in only if n not in known]
    if unknown:
        log(f"unknown manual(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return None
    return [m for m in MANUALS if m.name in only]


def print_manifest(manuals: list[Manual]) -> None:
    for m in manuals:
        print(
            f"{m.name}\t{m.apt_spec}\t{m.arch}\t{m.member}\tpages={m.pages}\n"
            f"\tdeb sha256 {m.deb_sha256}\n\tpdf sha256 {m.pdf_sha256}"
        )


def check_all(manuals: list[Manual], dest_arg: str) -> int:
    """``--check``: a line per manual; the exit code."""
    dest = Path(dest_arg)
    bad = 0
    for m in manuals:
        ok, why = verify_existing(m, dest)
        print(f"{'OK  ' if ok else 'FAIL'} {m.name:18s} {dest / (m.name + '.pdf')}: {why}")
        bad += not ok
    if bad:
        where = "" if dest_arg == str(DEFAULT_DEST) else f" {dest_arg}"
        log(
            f"{bad} of {len(manuals)} manual(s) missing or wrong; run: "
            f"python3 {Path(__file__).as_posix()}{where}"
        )
        return EXIT_CHECK_FAILED
    return EXIT_OK


def fetch_all(manuals: list[Manual], dest: Path, deb_dir: Path | None) -> int:
    """Fetch each manual not already there, a line each; the exit code (the first
    failure stops the run)."""
    for m in manuals:
        try:
            status = fetch_one(m, dest, deb_dir)
        except FetchError as e:
            log(f"error: {e}")
            return e.code
        print(f"OK   {m.name:18s} {dest / (m.name + '.pdf')}: {status}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
