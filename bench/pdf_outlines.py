"""Outline entries placed at their heading: how many of a PDF's bookmarks tether finds on
their page, in real PDF manuals of several makers (Texinfo, LaTeX, DocBook, ReportLab).

    .venv/bin/python bench/pdf_outlines.py [--cache DIR] [--debs DIR] [--json]

A PDF's outline entry points at a page; tether starts the entry's section at the line of
that page that prints its title (:mod:`tether.ingest.pdf_sections`). An entry whose line
is not found starts where the previous entry on its page starts, else at the page's
start: the text above the heading then goes to the wrong section (page 15 of the
shared-mime-info spec opens with the end of section 2.12, and was cited as 2.13). For
each PDF it prints the outline's entries and those not found on their page, with a few
of their titles.

The PDFs: the five manuals of ``bench/manuals`` (when fetched), and those of five Debian
12 documentation packages, pinned by version and .deb checksum in ``pdf_outlines.json``
(downloaded with ``apt-get download`` on first use, or taken from ``--debs``, and
unpacked into ``--cache``). Nothing is downloaded by tether itself.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _pinned import manuals_fetch, unpacked  # noqa: E402

_mf = manuals_fetch()
DebPin = _mf.DebPin
PINS = tuple(DebPin(**row) for row in json.loads((HERE / "pdf_outlines.json").read_text()))
#: The PDFs of each package measured (the others are reference cards without outlines).
PDFS = {
    "r-doc-pdf": ["usr/share/doc/r-doc-pdf/manual/R-FAQ.pdf",
                  "usr/share/doc/r-doc-pdf/manual/R-intro.pdf",
                  "usr/share/doc/r-doc-pdf/manual/R-data.pdf",
                  "usr/share/doc/r-doc-pdf/manual/R-admin.pdf",
                  "usr/share/doc/r-doc-pdf/manual/R-lang.pdf"],
    "gnuplot-doc": ["usr/share/doc/gnuplot/gnuplot.pdf"],
    "ghostscript-doc": ["usr/share/doc/ghostscript/GS9_Color_Management.pdf"],
    "maxima-doc": ["usr/share/doc/maxima-doc/maximabook-19-Sept-2004.pdf.gz"],
    "octave-doc": ["usr/share/doc/octave/liboctave.pdf"],
}  # fmt: skip


def placed(path: Path) -> dict[str, object]:
    """The outline's entries in ``path`` and those not found at a line of their page."""
    from tether.ingest import pdf

    try:
        from tether.ingest import pdf_sections
    except ImportError:  # (before the sections had a module of their own)
        pdf_sections = pdf

    seen: list[tuple[int, list[str]]] = []
    headings = pdf_sections.outline_headings

    def counted(text: str, spans: list, outline: list) -> list:
        found = headings(text, spans, outline)
        missed = [h.title for h in found if h.body == h.start]  # (no heading line found)
        seen.append((len(outline), missed))
        return found

    data = path.read_bytes()
    if path.suffix == ".gz":  # (Debian compresses some)
        data = gzip.decompress(data)
    pdf_sections.outline_headings = counted  # type: ignore[assignment]
    try:
        pdf.read_pdf(data, str(path))
    finally:
        pdf_sections.outline_headings = headings  # type: ignore[assignment]
    entries, missed = seen[0] if seen else (0, [])
    return {"entries": entries, "not_found": len(missed), "examples": missed[:4]}


def pdf_paths(cache: Path, debs: Path | None) -> dict[str, Path]:
    paths = {p.name: p for p in sorted((HERE / "manuals" / "pdfs").glob("*.pdf"))}
    for pin in PINS:
        root = unpacked(pin, cache, debs)
        paths.update({Path(rel).name.removesuffix(".gz"): root / rel for rel in PDFS[pin.name]})
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tether-pdf-docs")
    p.add_argument("--debs", type=Path, help="a folder holding the pinned .deb files")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    rows = {name: placed(path) for name, path in pdf_paths(args.cache, args.debs).items()}
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'PDF':34} {'entries':>7} {'not found':>9}  examples")
    for name, row in rows.items():
        examples = "; ".join(str(t)[:40] for t in row["examples"])  # type: ignore[attr-defined]
        print(f"{name:34} {row['entries']:>7} {row['not_found']:>9}  {examples}")
    total = sum(int(r["entries"]) for r in rows.values())  # type: ignore[call-overload]
    missed = sum(int(r["not_found"]) for r in rows.values())  # type: ignore[call-overload]
    print(f"{'all':34} {total:>7} {missed:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
