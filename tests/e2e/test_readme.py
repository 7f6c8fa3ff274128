"""The README is the front door: its set-up commands are the Makefile's and CI's, and it
leads to every page of docs/. (Its examples, links and size are checked with the docs, in
test_docs.py; its quickstart and command list in test_cli.py.)"""

from __future__ import annotations

import re

from helpers import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _section(heading: str) -> str:
    start = README.index(f"\n## {heading}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_the_two_set_up_commands_are_make_targets_and_ci_runs_the_test_one() -> None:
    block = re.search(r"```sh\n(.*?)```", _section("Set-up: two commands"), re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    commands = [c for c in commands if c]
    assert commands == ["make demo", "make test"]
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"the Makefile has no {target} target"
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, re.M), ".ci/run must run the README's test command"


def test_the_readme_leads_to_every_docs_page() -> None:
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)(?:#[\w-]+)?\)", README))
    pages = {path.name for path in (REPO_ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), f"README.md does not link {sorted(pages - linked)}"


def test_the_readme_names_the_supported_formats() -> None:
    from tether.ingest.formats import markdown_table, supported_extensions

    formats = _section("Formats and limits")
    missing = [ext for ext in supported_extensions() if f"`{ext}`" not in formats]
    assert missing == [], f"README's formats do not name {missing}"
    # The table is the loaders' own (tether.ingest.formats.FORMATS), as it renders now.
    assert markdown_table() in formats, "README's formats table is not FORMATS rendered"
