#!/usr/bin/env python3
"""Fetch the pinned real-world files of ``bench/formats``: one or two per format tether reads.

Usage::

    python3 bench/formats/fetch.py                  # download + verify into bench/formats/files/
    python3 bench/formats/fetch.py --check          # only verify what is already there
    python3 bench/formats/fetch.py --deb-dir DIR    # use .deb files already downloaded into DIR
    python3 bench/formats/fetch.py --list           # print the pinned manifest

Every file comes from a Debian 12 ("bookworm") package, pinned by exact version and the
SHA-256 of its .deb; the file inside the package is pinned by its path and its own SHA-256.
A .deb is fetched with ``apt-get download PACKAGE[:ARCH]=VERSION`` into a temporary
directory, its SHA-256 is checked, it is unpacked once with ``dpkg -x`` (or, without dpkg,
with the stdlib ``ar`` + ``tar`` reader of ``bench/manuals/fetch.py``, whose download and
unpacking helpers this script reuses), and each listed member is written to
``files/<its original file name>`` and its SHA-256 checked. Files already there with the
right SHA-256 are left alone; a package none of whose files is missing is not downloaded.
``files/`` is git-ignored: the files are fetched, not redistributed.

Exit codes: 0 all files present and verified; 1 ``--check`` found a missing or mismatching
file; 2 bad command line; 3 a download or unpacking step failed (for example the pinned
version is no longer in the configured apt sources); 4 a checksum did not match after
download. The first failing package stops the run.

Standard library only; Python 3.11+.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DEST = HERE / "files"
sys.path.insert(0, str(HERE.parent))
from _pinned import manuals_fetch  # noqa: E402

_mf = manuals_fetch()
DebPin = _mf.DebPin
FetchError = _mf.FetchError
sha256_file = _mf.sha256_file
verify_file = _mf.verify_file
log = _mf.log
EXIT_OK: int = _mf.EXIT_OK
EXIT_CHECK_FAILED: int = _mf.EXIT_CHECK_FAILED
EXIT_USAGE: int = _mf.EXIT_USAGE


@dataclass(frozen=True)
class RealFile:
    """One file of a package, stored as ``files/<name>`` (its name in the package)."""

    format: str  # tether's name for its format (tether.ingest.formats.FORMATS)
    member: str  # path inside the .deb
    sha256: str

    @property
    def name(self) -> str:
        return self.member.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Package:
    pin: DebPin
    licence: str  # from the package's /usr/share/doc/<package>/copyright
    files: tuple[RealFile, ...]


# Debian 12 (bookworm), from deb.debian.org; the .deb hashes are those `apt-cache show` gives.
PACKAGES: tuple[Package, ...] = (
    Package(
        pin=DebPin(
            name="live-manual-epub",
            package="live-manual-epub",
            version="2:20151217.2",
            arch="all",
            pool_path="pool/main/l/live-manual/live-manual-epub_20151217.2_all.deb",
            deb_sha256="8d020f6c902903c388ef2ccf003c5db4f2f067b6935416dce9793a41b9f4e1fc",
        ),
        licence="GPL-3+",
        files=(
            RealFile(
                format="EPUB",
                member="usr/share/doc/live-manual/epub/live-manual.en.epub",
                sha256="a5870fa3bc2c46d7415d4467ec6cee825b72763701a09abb885d7795536bd4f3",
            ),
        ),
    ),
    Package(
        pin=DebPin(
            name="lios",
            package="lios",
            version="2.7.2-6",
            arch="all",
            pool_path="pool/main/l/lios/lios_2.7.2-6_all.deb",
            deb_sha256="16deb73476ea68cbcf2f744950dc79e8f80d19387b6266046cb160d8023bf9a7",
        ),
        licence="GPL-3",
        files=(
            RealFile(
                format="OpenDocument text",
                member="usr/share/doc/lios/user-guide.odt",
                sha256="d6078a3acf060b6cc72730534efeecdca07eb2f884603ef1b0ba13e417851b16",
            ),
        ),
    ),
    Package(
        pin=DebPin(
            name="r-cran-officer",
            package="r-cran-officer",
            version="0.6.0+dfsg-1",
            arch="all",
            pool_path="pool/main/r/r-cran-officer/r-cran-officer_0.6.0+dfsg-1_all.deb",
            deb_sha256="3d6ec99aa9b4e414656b5389600871977dfe79dc4abd49ce11342f80aaffddcc",
        ),
        licence="GPL-3",
        files=(
            RealFile(
                format="Word",
                member="usr/lib/R/site-library/officer/doc_examples/example.docx",
                sha256="cf22eda5ca1cd378df4ef506d9e0ecd31b407a21077c6a10ae3f20d12db324ab",
            ),
            RealFile(
                format="PowerPoint",
                member="usr/lib/R/site-library/officer/doc_examples/example.pptx",
                sha256="9113453408f2556ac191c581cdf1d302f354f01955241d8a9b9eedcc1e63bb5f",
            ),
        ),
    ),
    Package(
        # Architecture-specific (compiled code beside the data): the pin is the amd64
        # build (on other hosts: dpkg --add-architecture amd64, or --deb-dir).
        pin=DebPin(
            name="r-cran-readxl",
            package="r-cran-readxl",
            version="1.4.2-1",
            arch="amd64",
            pool_path="pool/main/r/r-cran-readxl/r-cran-readxl_1.4.2-1_amd64.deb",
            deb_sha256="eb705525f906c968022162e8e58993a8b444ae900ff0487389769721bdcb4e67",
        ),
        licence="GPL-3 (R/, src/), BSD-2 (parts of src/)",
        files=(
            RealFile(
                format="Excel",
                member="usr/lib/R/site-library/readxl/extdata/datasets.xlsx",
                sha256="26547bbe8b4087518ba98279f8bda031fe12b47b8d2877f12ac76f41190c5783",
            ),
            RealFile(
                format="Excel",
                member="usr/lib/R/site-library/readxl/extdata/deaths.xlsx",
                sha256="0469b75be78da0ca9b956d81e2338f32fa3f45b00622cef5e6d7a278897eb80a",
            ),
        ),
    ),
    Package(
        # Architecture-specific (compiled code beside the data): the pin is the amd64
        # build (on other hosts: dpkg --add-architecture amd64, or --deb-dir).
        pin=DebPin(
            name="r-cran-readr",
            package="r-cran-readr",
            version="2.1.4-1",
            arch="amd64",
            pool_path="pool/main/r/r-cran-readr/r-cran-readr_2.1.4-1_amd64.deb",
            deb_sha256="b5c4751c7bbe16ea98b43b0d05007493151acdcf2051db8d37883b189578b824",
        ),
        licence="GPL-2",
        files=(
            RealFile(
                format="CSV",
                member="usr/lib/R/site-library/readr/extdata/chickens.csv",
                sha256="7fa023a1fc5eee4f360e0a9966d328770a9ab8b6db71ae40f4ada8cf6d2effe1",
            ),
        ),
    ),
    Package(
        pin=DebPin(
            name="iso-codes",
            package="iso-codes",
            version="4.15.0-1",
            arch="all",
            pool_path="pool/main/i/iso-codes/iso-codes_4.15.0-1_all.deb",
            deb_sha256="b1beb869303229c38288d4ddacfd582c91f594759b5767c9cecebd87f16ff70e",
        ),
        licence="LGPL-2.1+",
        files=(
            RealFile(
                format="JSON",
                member="usr/share/iso-codes/json/iso_3166-3.json",
                sha256="eb92d1cce3e352559f610e60e2acb23687eb1cf07b23675fb112863a5741a6fa",
            ),
        ),
    ),
    Package(
        pin=DebPin(
            name="fuzzyocr",
            package="fuzzyocr",
            version="3.6.0-16",
            arch="all",
            pool_path="pool/main/f/fuzzyocr/fuzzyocr_3.6.0-16_all.deb",
            deb_sha256="23d52bddc1b6b4e377361ad218373693eb5f0033ae147432b0ce7b71c01bcf8f",
        ),
        licence="Apache-2.0",
        files=(
            RealFile(
                format="E-mail",
                member="usr/share/doc/fuzzyocr/examples/ocr-png.eml",
                sha256="aa5e689ad51018f73c29ef4ba3cc6d7a58dfbd27ac6d815aae2eaa52f2078375",
            ),
            RealFile(
                format="E-mail",
                member="usr/share/doc/fuzzyocr/examples/ocr-jpg.eml",
                sha256="9b0c7bc1c4d353998954bf6a3ea00a0b252068f06cd61e4bae87fbaa5c827b24",
            ),
        ),
    ),
)


def all_files() -> list[tuple[Package, RealFile]]:
    return [(p, f) for p in PACKAGES for f in p.files]


def fetch_package(package: Package, dest: Path, deb_dir: Path | None) -> str:
    """Bring every file of ``package`` into ``dest``; a one-line status."""
    todo = [f for f in package.files if not verify_file(dest / f.name, f.sha256)[0]]
    if not todo:
        return f"{len(package.files)} file(s) already present"
    name = package.pin.name
    with tempfile.TemporaryDirectory(prefix=f"tether-formats-{name}-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # apt drops privileges to _apt for downloads; let it write here
        deb = _mf.obtain_deb(package.pin, work, deb_dir)
        contents = _mf.extract_members(package.pin, deb, work, [f.member for f in todo])
        dest.mkdir(parents=True, exist_ok=True)
        for f in todo:
            data = contents[f.member]
            _mf.check_extracted(f"{name}: extracted {f.member}", data, f.sha256)
            _mf.write_atomically(dest / f.name, data)
    kept = len(package.files) - len(todo)
    return f"{len(todo)} file(s) fetched, {kept} already present"


def fetch_all(dest: Path, deb_dir: Path | None) -> int:
    for package in PACKAGES:
        try:
            status = fetch_package(package, dest, deb_dir)
        except FetchError as e:
            log(f"error: {e}")
            return int(e.code)
        names = ", ".join(f.name for f in package.files)
        print(f"OK   {package.pin.apt_spec:38s} {names}: {status}")
    return EXIT_OK


def check_all(dest: Path) -> int:
    bad = 0
    for _package, f in all_files():
        ok, why = verify_file(dest / f.name, f.sha256)
        print(f"{'OK  ' if ok else 'FAIL'} {f.format:18s} {dest / f.name}: {why}")
        bad += not ok
    if bad:
        log(f"{bad} file(s) missing or wrong; run: python3 {Path(__file__).as_posix()}")
        return EXIT_CHECK_FAILED
    return EXIT_OK


def print_manifest() -> None:
    for package in PACKAGES:
        pin = package.pin
        print(f"{pin.apt_spec}\t{pin.arch}\t{package.licence}\n\tdeb sha256 {pin.deb_sha256}")
        for f in package.files:
            print(f"\t{f.format}\t{f.name}\t{f.member}\n\t\tsha256 {f.sha256}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Fetch and verify the pinned real-world files of bench/formats.",
    )
    ap.add_argument(
        "--dest", default=str(DEFAULT_DEST), help=f"where the files go (default: {DEFAULT_DEST})"
    )
    ap.add_argument("--check", action="store_true", help="only verify the files against the pins")
    ap.add_argument(
        "--deb-dir", metavar="DIR", help="take the .deb files from DIR instead of apt-get"
    )
    ap.add_argument("--list", action="store_true", help="print the pinned manifest and exit")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on bad usage, 0 on --help
        return int(e.code or 0)
    if args.list:
        print_manifest()
        return EXIT_OK
    dest = Path(args.dest)
    if args.check:
        return check_all(dest)
    deb_dir = Path(args.deb_dir) if args.deb_dir else None
    if deb_dir is not None and not deb_dir.is_dir():
        log(f"--deb-dir {deb_dir}: not a directory")
        return EXIT_USAGE
    return fetch_all(dest, deb_dir)


if __name__ == "__main__":
    sys.exit(main())
