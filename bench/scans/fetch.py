#!/usr/bin/env python3
"""Fetch the real scanned pages of the ``bench/scans`` question set.

Usage::

    python3 bench/scans/fetch.py [DEST]          # download + verify (DEST: bench/scans/files/)
    python3 bench/scans/fetch.py --check [DEST]  # only verify what is already in DEST

The pages are real scans that OCRmyPDF's test suite carries (its ``tests/resources``, whose
README names their sources): ``linn.png``, a page of the LinnSequencer's brochure scanned
at 300 dpi (Wikimedia); ``c02-22.pdf``, page 22 of an illustrated edition of
*Adventures of Huckleberry Finn* (Project Gutenberg), an image-only PDF; ``epson.pdf``, a
printout of Wikipedia's "Optical character recognition" scanned by an Epson
printer-scanner; ``typewriter.png``, a typewritten Dutch recipe (Wikimedia); and
``masks.pdf``, a printout of German Wikipedia's "Linux" scanned into a PDF of layered
images (a text mask over a background). They come from
OCRmyPDF's source distribution on PyPI, pinned by version and SHA-256, fetched with
``pip download`` (the package index's own client) into a temporary directory; each file is
then checked against its own SHA-256. Nothing is redistributed by this repository
(``bench/scans/.gitignore``).

Exit codes: 0 all files present and verified; 1 ``--check`` found a missing or mismatching
file; 3 the download failed; 4 a checksum did not match.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = "ocrmypdf"
VERSION = "16.10.4"
ARCHIVE = f"{PACKAGE}-{VERSION}.tar.gz"
ARCHIVE_SHA256 = "de749ef5f554b63d57e68d032e7cba5500cbd5030835bf24f658f7b7a04f3dc1"
FILES = {
    "linn.png": "dcd90f08a6b8a733612f818330153636c13283dd548e2e092cad1fe628ec7bf3",
    "c02-22.pdf": "ae6a3bec3809e1540911bda42dabb42ffbd63cfda17e74a5c3e9dcd87129462a",
    "epson.pdf": "3fce2d6e5baffec839ffc86b7c91903b139399392ea76a09bdfcca40cb8b5a4d",
    "typewriter.png": "6f7a83685a83af954e9672b3e2db3253af165513d2826d780a48e175742f4469",
    "masks.pdf": "ae8197d8a10b6db0f9a05681600e373b63489134b37529a40d484d380117d909",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def missing(dest: Path) -> list[str]:
    return [
        n for n, digest in FILES.items() if not (dest / n).is_file() or sha256(dest / n) != digest
    ]


def fetch(dest: Path) -> int:
    wanted = missing(dest)
    if not wanted:
        return 0
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tether-scans-") as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"{PACKAGE}=={VERSION}",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--quiet",
            "-d",
            tmp,
        ]
        if subprocess.run(command, check=False).returncode != 0:
            print(f"pip download {PACKAGE}=={VERSION} failed", file=sys.stderr)
            return 3
        archive = Path(tmp) / ARCHIVE
        if not archive.is_file() or sha256(archive) != ARCHIVE_SHA256:
            print(f"{ARCHIVE}: missing or not the pinned SHA-256", file=sys.stderr)
            return 4
        with tarfile.open(archive) as tar:
            for name in wanted:
                member = tar.extractfile(f"{PACKAGE}-{VERSION}/tests/resources/{name}")
                if member is None:
                    print(f"{name} is not in {ARCHIVE}", file=sys.stderr)
                    return 3
                (dest / name).write_bytes(member.read())
    bad = missing(dest)
    for name in bad:
        print(f"{name}: SHA-256 does not match the pinned one", file=sys.stderr)
    return 4 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", nargs="?", type=Path, default=HERE / "files")
    parser.add_argument("--check", action="store_true", help="only verify DEST")
    args = parser.parse_args(argv)
    if args.check:
        bad = missing(args.dest)
        for name in bad:
            print(f"{name}: missing or not the pinned SHA-256", file=sys.stderr)
        return 1 if bad else 0
    return fetch(args.dest)


if __name__ == "__main__":
    sys.exit(main())
