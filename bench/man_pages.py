"""Every man page installed on this machine, read by tether's man page reader: how many
read, how long it took, which failed and why, and which texts still hold something that
looks like roff markup (a request line, a font or character escape) with an example of
each, so that a page read wrongly shows itself.

    .venv/bin/python bench/man_pages.py                   # /usr/share/man, ~30 s
    .venv/bin/python bench/man_pages.py --root DIR --json

Pages are the files under ``ROOT/man*/`` (gzip-compressed or not; symbolic links, the
other names of a page, are skipped), read through ``tether.ingest.formats.load_path``,
as ``tether add`` reads them (decompressing, telling man(7) from mdoc(7)). Markup left
in a text is not always a fault: a page about roff itself (``groff(7)``, ``eqn(1)``)
shows roff as its examples. Results of a run are in ``bench/man_pages.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

#: What a text read right should hardly hold: markup the reader should have consumed.
LEFTOVERS = {
    "request line": re.compile(r"^\.[A-Za-z]{1,3}\b", re.MULTILINE),
    "font escape": re.compile(r"\\f[BIRP(\[]"),
    "character escape": re.compile(r"\\[(*]"),
    "hyphen escape": re.compile(r"\\-"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("/usr/share/man"))
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    from tether.ingest.formats import load_path

    pages = [p for p in sorted(args.root.glob("man*/*")) if p.is_file() and not p.is_symlink()]
    if not pages:
        print(f"no man pages under {args.root}", file=sys.stderr)
        return 2
    failures: Counter[str] = Counter()
    leftovers: Counter[str] = Counter()
    examples: dict[str, str] = {}
    characters, slowest = 0, (0.0, "")
    started = time.perf_counter()
    for page in pages:
        began = time.perf_counter()
        try:
            text = load_path(page).text
        except Exception as exc:  # every failure is counted by its kind and reason
            reason = re.sub(r"\(.*?\)", "(...)", str(exc).split(": ", 1)[-1])
            failures[f"{type(exc).__name__}: {reason}"] += 1
            continue
        slowest = max(slowest, (time.perf_counter() - began, page.name))
        characters += len(text)
        for name, pattern in LEFTOVERS.items():
            if pattern.search(text):
                leftovers[name] += 1
                examples.setdefault(name, page.name)
    seconds = time.perf_counter() - started
    report = {
        "root": str(args.root),
        "pages": len(pages),
        "read": len(pages) - sum(failures.values()),
        "seconds": round(seconds, 1),
        "ms_per_page": round(1000 * seconds / len(pages), 2),
        "slowest": {"page": slowest[1], "ms": round(1000 * slowest[0], 1)},
        "characters": characters,
        "failures": dict(failures.most_common()),
        "pages_with_leftover_markup": dict(leftovers.most_common()),
        "leftover_examples": examples,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{report['read']:,} of {len(pages):,} pages read in {seconds:.1f} s"
            f" ({report['ms_per_page']} ms a page; slowest {slowest[1]},"
            f" {1000 * slowest[0]:.0f} ms), {characters / 1e6:.1f} M characters of text"
        )
        for reason, count in failures.most_common():
            print(f"  failed, {count:,}: {reason}")
        for name, count in leftovers.most_common():
            print(f"  {name} left in {count:,} texts (e.g. {examples[name]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
