"""Navigation left in HTML pages of many site generators: tether's main-content extraction
on real documentation from six Debian packages, each made by another generator.

    .venv/bin/python bench/html_generators.py [--pages 40] [--cache DIR] [--json]

For each package (pinned by version and .deb checksum, downloaded with ``apt-get
download`` on first use and unpacked into ``--cache``), it indexes ``--pages`` of its HTML
pages (over 2 kB, drawn with a fixed seed) into a new store, lexical only, and counts the
chunks that carry a line of three words or more, outside code and headings, that a third
of the pages repeat word for word: a site's menu, banner, breadcrumb, language list or
footer (what ``tether eval --grounding`` counts as ``boilerplate_chunks``). It prints the
lines found, so that a repeated line of content (a man page's "Part of the git(1) suite",
a license header in a source listing) can be told from furniture.

The pages are not in the repository; nothing is downloaded at run time by tether itself.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _pinned import manuals_fetch, unpacked  # noqa: E402

_mf = manuals_fetch()
DebPin = _mf.DebPin


def _generators() -> tuple[tuple[str, DebPin, str], ...]:
    """Debian 12 (bookworm), pinned in November 2026 (``html_generators.json``): each
    package, the generator its HTML was made by, and the folder inside the package that
    its pages are drawn from (``under``; the whole package when absent: ``rust-doc``
    holds rustdoc's API pages and mdBook's books)."""
    rows = json.loads((HERE / "html_generators.json").read_text(encoding="utf-8"))
    return tuple(
        (row.pop("generator"), DebPin(**{k: v for k, v in row.items() if k != "under"}),
         row.get("under", ""))
        for row in rows
    )  # fmt: skip


GENERATORS = _generators()


def measure(root: Path, pages: int, seed: int) -> dict[str, object]:
    """Index a sample of the pages under ``root``; count the chunks holding a line that a
    third of the pages repeat, and the pages tether could not read (with why)."""
    from tether import Settings, Tether
    from tether.eval.documents import _joined, _shape, prose_lines, text_quality, words

    found = sorted(p for p in root.rglob("*.html") if p.stat().st_size > 2000)
    sample = random.Random(seed).sample(found, min(pages, len(found)))
    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    with (
        tempfile.TemporaryDirectory() as tmp,
        Tether(db=Path(tmp) / "g.db", settings=settings) as t,
    ):
        results = t.add(sample, workspace_id="docs", on_error="collect")
        ids = {r.source: r.document_id for r in results if r.document_id}
        failed = Counter(str(r.error).rpartition(": ")[2] for r in results if r.error)
        quality = text_quality(t, ids, None)
        documents_with: Counter[str] = Counter()
        chunks = 0
        for document_id in ids.values():
            stored = t.chunks(document_id)
            chunks += len(stored)
            documents_with.update({_shape(x) for x in prose_lines(_joined(stored))})
    common = sorted(
        line for line, n in documents_with.items() if n >= max(4, len(ids) / 3) and words(line) >= 3
    )
    return {
        "pages": len(ids),
        "failed": len(sample) - len(ids),
        "failed_why": dict(failed),
        "chunks": chunks,
        "boilerplate_chunks": quality["boilerplate_chunks"],
        "repeated_lines": common,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=40, help="pages per package (default 40)")
    p.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    p.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "tether-html-generators"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    rows = {}
    for generator, pin, under in GENERATORS:
        root = unpacked(pin, args.cache) / under
        rows[generator] = {"package": f"{pin.package}={pin.version}",
                           **measure(root, args.pages, args.seed)}  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'generator':22} {'package':42} {'pages':>5} {'failed':>6} {'chunks':>6}"
          f" {'boilerplate':>11}")  # fmt: skip
    for generator, row in rows.items():
        share = row["boilerplate_chunks"] / max(1, row["chunks"])
        print(f"{generator:22} {row['package']:42} {row['pages']:5} {row['failed']:6}"
              f" {row['chunks']:6} {row['boilerplate_chunks']:5} ({share:.1%})")  # fmt: skip
        for why, n in row["failed_why"].items():
            print(f"    not read: {n} page(s): {why}")
        for line in row["repeated_lines"][:4]:
            print(f"    repeated: {line[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
