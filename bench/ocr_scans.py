"""OCR on real scanned pages: questions written by reading them, answered from the OCR text.

``bench/ocr_manuals.py`` scans real manuals itself (rendered, turned, blurred, with noise);
this script reads pages that were scanned on paper: the LinnSequencer's brochure (300 dpi,
two columns and a bullet list), page 22 of an illustrated *Adventures of Huckleberry
Finn* (an image-only PDF: a woodcut beside the text, old type), a printed Wikipedia page
scanned by an office printer-scanner, a typewritten Dutch recipe, and a printed page of
German Wikipedia, fetched by ``bench/scans/fetch.py``. With each OCR engine, the pages are
added to one workspace of a store made for their questions' language (``"language"``,
English when not given: the German page goes to a German store, whose scans Tesseract
reads with its German model), and each question of ``bench/scans/questions.json`` is
asked at that workspace; a question counts
when its verbatim answer is in its page's OCR text, in ``Tether.retrieve(question).context``
(``min_relevance`` 0: what OCR lets retrieval find, not what the threshold keeps), or nearly
in it (at most one character in ten read wrong).

    .venv/bin/python bench/scans/fetch.py
    .venv/bin/python bench/ocr_scans.py [--engines tesseract,rapidocr] [--json]

Results of a run are in ``bench/ocr_scans.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ocr_manuals import _nearly, _plain

SCANS = Path(__file__).resolve().parent / "scans"


def run(engine: str) -> dict[str, object]:
    spec = json.loads((SCANS / "questions.json").read_text())
    by_language: dict[str, list[dict[str, str]]] = {}
    for q in spec["questions"]:
        by_language.setdefault(q.get("language", "english"), []).append(q)
    rows: list[dict[str, object]] = []
    seconds, pages = 0.0, 0
    for language, questions in by_language.items():
        files = list(dict.fromkeys(q["file"] for q in questions))
        seconds += ask(engine, language, files, questions, rows)
        pages += len(files)
    share = {
        k: round(sum(bool(r[k]) for r in rows) / len(rows), 3)
        for k in ("in_page", "in_context", "nearly")
    }
    return {
        "engine": engine,
        "questions": len(rows),
        "pages": pages,
        "seconds_per_page": round(seconds / pages, 2),
        **share,
        "missed": [r["id"] for r in rows if not r["in_context"]],
    }


def ask(
    engine: str,
    language: str,
    files: list[str],
    questions: list[dict[str, str]],
    rows: list[dict[str, object]],
) -> float:
    """Add ``files`` to a store made for ``language`` (a store is made for one: its
    stemmer, and the OCR model it reads scans with), ask ``questions`` there, append a row
    for each to ``rows``; the seconds adding took."""
    from tether import Settings, Tether

    settings = Settings.load(rag={"ocr_engine": engine, "language": language})
    with (
        tempfile.TemporaryDirectory(prefix="tether-scans-") as tmp,
        Tether(Path(tmp) / "t.db", settings=settings) as t,
    ):
        started = time.perf_counter()
        results = t.add([SCANS / "files" / name for name in files], workspace_id="scans")
        seconds = time.perf_counter() - started
        ids = {Path(r.source).name: r.document_id for r in results}
        for q in questions:
            page = " ".join(c.content for c in t.chunks(ids[q["file"]]))
            context = t.retrieve(
                q["question"], scope="workspace", workspace_id="scans", min_relevance=0.0
            ).context
            answer = _plain(q["answer"])
            in_context = answer in _plain(context)
            rows.append(
                {
                    "id": q["id"],
                    "in_page": answer in _plain(page),
                    "in_context": in_context,
                    "nearly": in_context or _nearly(answer, _plain(context)),
                }
            )
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="tesseract,rapidocr")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if subprocess.run([sys.executable, str(SCANS / "fetch.py"), "--check"]).returncode:
        print("fetch the scans first: python3 bench/scans/fetch.py", file=sys.stderr)
        return 2
    reports = [run(engine) for engine in args.engines.split(",")]
    if args.json:
        print(json.dumps(reports, indent=2))
        return 0
    print(f"{reports[0]['questions']} questions over {reports[0]['pages']} real scanned pages")
    print("| measure | " + " | ".join(str(r["engine"]) for r in reports) + " |")
    print("| --- |" + " --- |" * len(reports))
    for key, label in (
        ("seconds_per_page", "seconds a page (OCR and indexing)"),
        ("in_page", "answer, verbatim, in its page's OCR text"),
        ("in_context", "answer, verbatim, in the retrieved context"),
        ("nearly", "answer nearly in it (9 characters in 10)"),
    ):
        cells = [f"{r[key]:.1%}" if key != "seconds_per_page" else f"{r[key]}" for r in reports]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for r in reports:
        print(f"{r['engine']} missed: {', '.join(r['missed']) or 'none'}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
