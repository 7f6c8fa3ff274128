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

Then, for each PDF with an outline, it reads its headings by the size they are drawn in,
as tether does for a PDF without one, and compares them with the outline's entries found
at a heading line: precision (the share of headings by size that start where an outline
entry does) and recall (the share of outline entries found by size). A heading by size
that the outline lacks is not always wrong: a Texinfo manual draws each function's name
as a heading, and its outline stops at the sections.

The PDFs: the five manuals of ``bench/manuals`` (when fetched), and those of five Debian
12 documentation packages, pinned by version and .deb checksum in ``pdf_outlines.json``
(downloaded with ``apt-get download`` on first use, or taken from ``--debs``, and
unpacked into ``--cache``). Nothing is downloaded by tether itself.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _pinned import manuals_fetch  # noqa: E402

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


def unpacked(pin: DebPin, cache: Path, debs: Path | None) -> Path:
    """The package's files under ``cache``: obtained, checked and unpacked once."""
    root = cache / pin.name
    if (root / ".done").exists():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        deb = _mf.obtain_deb(pin, Path(tmp), debs)
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
    (root / ".done").touch()
    return root


def placed(path: Path) -> dict[str, object]:
    """The outline's entries in ``path`` and those not found at a line of their page."""
    from tether.ingest import pdf

    try:
        from tether.ingest import pdf_sections
    except ImportError:  # (before the sections had a module of their own)
        pdf_sections = pdf

    seen: list[tuple[int, list[str]]] = []
    headings = pdf_sections.outline_headings

    def counted(text: str, spans: list, outline: list, **kw: object) -> list:
        found = headings(text, spans, outline, **kw)
        missed = [h.title for h in found if h.body == h.start]  # (no heading line found)
        seen.append((len(outline), missed))
        return found

    data = _data(path)
    pdf_sections.outline_headings = counted  # type: ignore[assignment]
    try:
        pdf.read_pdf(data, str(path))
    finally:
        pdf_sections.outline_headings = headings  # type: ignore[assignment]
    entries, missed = seen[0] if seen else (0, [])
    return {"entries": entries, "not_found": len(missed), "examples": missed[:4]}


def guessed(path: Path) -> dict[str, object] | None:
    """For a PDF with an outline: the headings tether reads off the text's sizes (what it
    does for a PDF without one) against the outline's entries placed at a heading line,
    by where they start in the text. None without an outline."""
    from tether.ingest import pdf
    from tether.ingest.pdf_sections import font_headings, outline_headings

    seen: dict[str, object] = {}
    opened, titled = pdf._open, pdf.titled_sections

    def keep_runs(data: bytes, source: str) -> tuple:
        found = opened(data, source)
        seen["runs"] = found[2]
        return found

    def keep_text(text: str, spans: list, outline: list, **kw: object) -> list:
        seen.update(text=text, spans=spans, outline=outline)
        return titled(text, spans, outline, **kw)

    pdf._open, pdf.titled_sections = keep_runs, keep_text  # type: ignore[assignment]
    try:
        pdf.read_pdf(_data(path), str(path))
    finally:
        pdf._open, pdf.titled_sections = opened, titled  # type: ignore[assignment]
    if not seen.get("outline"):
        return None
    text, spans = seen["text"], seen["spans"]
    truth = [(h.start, h.body) for h in outline_headings(text, spans, seen["outline"])
             if h.body != h.start]  # fmt: skip
    read = outline_headings(text, spans, font_headings(seen["runs"]), guessed=True)

    def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:  # (a heading's lines)
        return a[0] < b[1] and b[0] < a[1]

    right = [h for h in read if any(overlaps((h.start, h.body), t) for t in truth)]
    found = [t for t in truth if any(overlaps((h.start, h.body), t) for h in read)]
    starts = read
    both = len(right)
    return {
        "outline_headings": len(truth),
        "headings_by_size": len(starts),
        "precision": round(both / len(starts), 3) if starts else None,
        "recall": round(len(found) / len(truth), 3) if truth else None,
        "not_in_outline": [h.title for h in read if h not in right][:4],
    }


def _data(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data  # (Debian compresses some)


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
    paths = pdf_paths(args.cache, args.debs)
    rows = {name: placed(path) for name, path in paths.items()}
    sizes = {name: guessed(path) for name, path in paths.items()}
    if args.json:
        print(json.dumps({"outline": rows, "headings_by_size": sizes}, indent=2))
        return 0
    print(f"{'PDF':34} {'entries':>7} {'not found':>9}  examples")
    for name, row in rows.items():
        examples = "; ".join(str(t)[:40] for t in row["examples"])  # type: ignore[attr-defined]
        print(f"{name:34} {row['entries']:>7} {row['not_found']:>9}  {examples}")
    total = sum(int(r["entries"]) for r in rows.values())  # type: ignore[call-overload]
    missed = sum(int(r["not_found"]) for r in rows.values())  # type: ignore[call-overload]
    print(f"{'all':34} {total:>7} {missed:>9}")
    print("\nHeadings by size, as for a PDF without an outline, against the outline's:")
    print(
        f"{'PDF':34} {'outline':>7} {'by size':>7} {'precision':>9} {'recall':>6}  not in outline"
    )
    for name, row in sizes.items():
        if row is not None:
            extra = "; ".join(str(t)[:30] for t in row["not_in_outline"])  # type: ignore[attr-defined]
            print(f"{name:34} {row['outline_headings']:>7} {row['headings_by_size']:>7}"
                  f" {row['precision']!s:>9} {row['recall']!s:>6}  {extra}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
