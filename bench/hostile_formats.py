"""Hostile files of the formats that are zip files, XML, spreadsheets or images, each
indexed by a real ``Tether.add`` (worker processes, the default limits) beside a store
that already holds a document: the time each takes, the peak memory of the process that
loaded it, and what the result says. Nothing stored before may be lost.

    .venv/bin/python bench/hostile_formats.py            # every case, ~1 minute
    .venv/bin/python bench/hostile_formats.py --rows 200000 --cases sheet

The files are made here (the test suite uses the same makers, smaller):

- ``zip-bomb.docx``: a Word file whose one member unpacks to 2 GB of zeros (2 MB on disk);
- ``million-rows.xlsx``: a workbook of 1,000,000 rows (written as raw sheet XML);
- ``million-rows.csv``: the same as CSV;
- ``billion-laughs.xml``: nested entities that expand to 10^9 "lol"s;
- ``pixel-bomb.png``: a 40,000 x 40,000 image (1.6 gigapixels) that compresses to 200 kB.

Results of a run are in ``bench/hostile_formats.md``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

ZEROS = bytes(1 << 20)


def zip_bomb_docx(path: Path, megabytes: int = 2048) -> Path:
    """A .docx whose ``word/document.xml`` declares ``megabytes`` of zeros."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(megabytes):
                member.write(ZEROS)
    return path


def sheet_xlsx(path: Path, rows: int) -> Path:
    """A minimal valid workbook of ``rows`` rows of three cells, written as raw XML."""
    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats'
            '-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/'
            'sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml'
            '.worksheet+xml"/></Types>'
        ),
        "_rels/.rels": (
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            f'2006/relationships"><Relationship Id="rId1" Type="{rel}/officeDocument" '
            'Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            f'<?xml version="1.0"?><workbook xmlns="{ns}" xmlns:r="{rel}"><sheets>'
            '<sheet name="Orders" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            f'2006/relationships"><Relationship Id="rId1" Type="{rel}/worksheet" '
            'Target="worksheets/sheet1.xml"/></Relationships>'
        ),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(f'<?xml version="1.0"?><worksheet xmlns="{ns}"><sheetData>'.encode())
            sheet.write(_row(1, ("Order", "Item", "Price")))
            for n in range(2, rows + 2):
                sheet.write(_row(n, (f"A-{n}", f"Part {n % 97}", str(n % 500))))
            sheet.write(b"</sheetData></worksheet>")
    return path


def _row(n: int, values: tuple[str, str, str]) -> bytes:
    cells = "".join(
        f'<c r="{col}{n}" t="inlineStr"><is><t>{value}</t></is></c>'
        for col, value in zip("ABC", values, strict=True)
    )
    return f'<row r="{n}">{cells}</row>'.encode()


def sheet_csv(path: Path, rows: int) -> Path:
    with path.open("w") as out:
        out.write("Order,Item,Price\n")
        for n in range(2, rows + 2):
            out.write(f"A-{n},Part {n % 97},{n % 500}\n")
    return path


def billion_laughs(path: Path) -> Path:
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)
    ]
    path.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE lolz [{"".join(entities)}]>\n<lolz>&lol9;</lolz>\n'
    )
    return path


def pixel_bomb_png(path: Path, side: int = 40_000) -> Path:
    """A 1-bit PNG of ``side`` x ``side`` white pixels, written without Pillow (which
    would refuse to make it): its rows compress to almost nothing."""
    row = b"\x00" + b"\xff" * ((side + 7) // 8)
    squeezer = zlib.compressobj(9)
    data = b"".join(squeezer.compress(row) for _ in range(side)) + squeezer.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return len(body).to_bytes(4, "big") + kind + body + crc.to_bytes(4, "big")

    header = side.to_bytes(4, "big") * 2 + bytes([1, 0, 0, 0, 0])  # 1 bit, grey
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data)
    path.write_bytes(png + chunk(b"IEND", b""))
    return path


CASES: dict[str, tuple[str, Callable[[Path, int], Path]]] = {
    "zip-bomb": ("zip-bomb.docx", lambda p, rows: zip_bomb_docx(p)),
    "sheet": ("million-rows.xlsx", lambda p, rows: sheet_xlsx(p, rows)),
    "csv": ("million-rows.csv", lambda p, rows: sheet_csv(p, rows)),
    "laughs": ("billion-laughs.xml", lambda p, rows: billion_laughs(p)),
    "pixels": ("pixel-bomb.png", lambda p, rows: pixel_bomb_png(p)),
}


def run_case(folder: Path, name: str, rows: int) -> dict[str, object]:
    """Make the case's file, add it to a store that holds one document, and report."""
    from tether import Settings, Tether

    filename, make = CASES[name]
    path = make(folder / filename, rows)
    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    with Tether(folder / f"{name}.db", settings=settings) as t:
        [kept] = t.add(text="The harbour crane lifts 40 tonnes.", title="Crane note")
        started = time.perf_counter()
        [result] = t.add(path, on_error="collect")
        seconds = time.perf_counter() - started
        still = [h.document_id for h in t.search("harbour crane", scope="global", mode="lexical")]
        document = t.get_document(result.document_id) if result.document_id else None
        warnings = document.metadata.get("warnings", []) if document else []
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "case": name,
        "file": filename,
        "file_bytes": path.stat().st_size,
        "status": result.status,
        "error": None if result.error is None else f"{type(result.error).__name__}: {result.error}",
        "warnings": warnings,
        "seconds": round(seconds, 2),
        "loader_peak_mb": round(children, 1),
        "kept_what_was_stored": still == [kept.document_id],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the sheets")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    args = parser.parse_args(argv)
    for name in args.cases.split(","):
        with tempfile.TemporaryDirectory(prefix="tether-hostile-") as tmp:
            # Each case in a process of its own: the children's peak memory is its own.
            report = _in_child(Path(tmp), name, args.rows)
        print(json.dumps(report) if args.json else _line(report), flush=True)
    return 0


def _in_child(folder: Path, name: str, rows: int) -> dict[str, object]:
    import subprocess

    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import hostile_formats as h;"
        " print(json.dumps(h.run_case(h.Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))))"
    )
    here = str(Path(__file__).resolve().parent)
    command = [sys.executable, "-c", code, here, str(folder), name, str(rows)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _line(r: dict[str, object]) -> str:
    what = r["error"] or f"{r['status']}; warnings: {r['warnings']}"
    size = float(str(r["file_bytes"])) / 2**20
    return (
        f"{r['file']:<20} {size:8.1f} MB  {r['seconds']:>6} s"
        f"  loader peak {r['loader_peak_mb']:>7} MB  kept stored: {r['kept_what_was_stored']}"
        f"  -> {what}"
    )


if __name__ == "__main__":
    sys.exit(main())
