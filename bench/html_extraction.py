"""How well HTML pages are reduced to their main content: tether's loader against
trafilatura, on the HTML documentation sets of ``bench/docsets`` and the sample page.

    .venv/bin/python bench/html_extraction.py [SET_DIR ...] [--json]

For each extractor and set it prints:

* answers kept: the set's answer snippets (of questions whose document is an HTML page)
  found in the extracted text of their page (compared as the evaluator compares them:
  NFKC, case-folded, whitespace ignored);
* boilerplate lines: distinct lines of three words or more that a third of the pages
  (at least four) repeat word for word: menus, banners, "previous | next" bars, footers;
* code blocks kept: ``<pre>`` blocks of the page's main landmark whose text (whitespace
  ignored) is in the output;
* headings kept: ``<h1>``-``<h3>`` texts of the main landmark that start a line of the
  output (as a ``#`` line or alone);
* ms per page.

trafilatura is optional: ``pip install trafilatura`` to compare with it (it is skipped,
and says so, when missing). It runs with Markdown output, formatting, tables and links'
text kept (``favor_recall``), its most complete setting.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent / "examples" / "docs" / "data-export.html"


def normalized(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


class _MainParts(HTMLParser):
    """``<pre>`` texts and h1-h3 texts inside the page's main landmark (or the body)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pre: list[str] = []
        self.headings: list[str] = []
        self._open: list[str] = []
        self._in: str | None = None
        self._buffer: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"pre", "h1", "h2", "h3"} and self._in is None:
            self._in, self._buffer = tag, []

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            text = "".join(self._buffer).replace("¶", "").strip()
            if text:
                (self.pre if tag == "pre" else self.headings).append(text)
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self._buffer.append(data)


def main_markup(markup: str) -> str:
    """The markup of the main landmark, if the page has one (for counting its parts)."""
    match = re.search(r"<main[\s>]|<[a-z]+[^>]*\brole=[\"']?main\b[^>]*>", markup, re.I)
    return markup[match.start() :] if match else markup


def tether_extract(markup: str) -> str:
    try:
        from tether.ingest.html import html_document
    except ImportError:  # tether before the main-content extractor (to measure the change)
        from tether.ingest.loaders import html_document  # type: ignore[attr-defined,no-redef]

    return html_document(markup)[1]


def trafilatura_extract(markup: str) -> str:
    import trafilatura

    return trafilatura.extract(
        markup, output_format="markdown", include_formatting=True, include_tables=True,
        favor_recall=True, include_comments=False,
    ) or ""  # fmt: skip


def pages_of(set_dir: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The set's HTML pages (name -> markup) and the answer snippets of each."""
    data = json.loads((set_dir / "questions.json").read_text(encoding="utf-8"))
    pages = {
        d["name"]: (set_dir / d["file"]).read_text(encoding="utf-8", errors="replace")
        for d in data["documents"]
        if d["file"].endswith((".html", ".htm"))
    }
    answers: dict[str, list[str]] = {}
    for q in data["questions"]:
        if q.get("answer") and q.get("document") in pages:
            answers.setdefault(q["document"], []).append(q["answer"])
    return pages, answers


def measure(
    extract: Callable[[str], str], pages: dict[str, str], answers: dict[str, list[str]]
) -> dict[str, float | int]:
    texts, times = {}, []
    for name, markup in pages.items():
        t0 = time.perf_counter()
        texts[name] = extract(markup)
        times.append((time.perf_counter() - t0) * 1000)
    kept = sum(
        normalized(a) in normalized(texts[name]) for name, group in answers.items() for a in group
    )
    lines_in: Counter[str] = Counter()
    for text in texts.values():
        lines_in.update({" ".join(x.split()).lower() for x in text.splitlines() if x.strip()})
    common = [
        line for line, n in lines_in.items()
        if len(pages) >= 4 and n >= max(4, len(pages) / 3) and len(line.split()) >= 3
    ]  # fmt: skip
    code = heads = code_total = heads_total = 0
    for name, markup in pages.items():
        parts = _MainParts()
        parts.feed(main_markup(markup))
        out = normalized(texts[name])
        code_total += len(parts.pre)
        code += sum(normalized(p) in out for p in parts.pre)
        starts = {normalized(x.lstrip("#").strip()) for x in texts[name].splitlines()}
        heads_total += len(parts.headings)
        heads += sum(normalized(h) in starts for h in parts.headings)
    return {
        "pages": len(pages),
        "answers_kept": kept,
        "answers": sum(map(len, answers.values())),
        "boilerplate_lines": len(common),
        "code_blocks_kept": code,
        "code_blocks": code_total,
        "headings_kept": heads,
        "headings": heads_total,
        "ms_per_page": round(statistics.median(times), 2) if times else 0.0,
        "examples": common[:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", type=Path, help="set folders (default: every HTML set)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sets = args.sets or [
        d for d in sorted((HERE / "docsets").iterdir())
        if (d / "manifest.json").is_file()
        and json.loads((d / "manifest.json").read_text())["format"] == "html"
    ]  # fmt: skip
    extractors: dict[str, Callable[[str], str]] = {"tether": tether_extract}
    try:
        import trafilatura  # noqa: F401
    except ImportError:
        print("trafilatura is not installed: measuring tether alone", file=sys.stderr)
    else:
        extractors["trafilatura"] = trafilatura_extract
    sources = {d.name: pages_of(d) for d in sets}
    sample = SAMPLE.read_text(encoding="utf-8")
    report = {}
    for label, extract in extractors.items():
        report[label] = {name: measure(extract, *source) for name, source in sources.items()}
        breadcrumb = "lumen labs › support › data export"
        report[label]["sample page breadcrumb kept"] = breadcrumb in extract(sample).lower()
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for label, rows in report.items():
        for name, row in rows.items():
            if not isinstance(row, dict):
                print(f"{label:12} {name}: {row}")
                continue
            print(
                f"{label:12} {name}: answers kept {row['answers_kept']}/{row['answers']},"
                f" boilerplate lines {row['boilerplate_lines']},"
                f" code blocks {row['code_blocks_kept']}/{row['code_blocks']},"
                f" headings {row['headings_kept']}/{row['headings']},"
                f" {row['ms_per_page']} ms/page; e.g. {row['examples'][:3]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
