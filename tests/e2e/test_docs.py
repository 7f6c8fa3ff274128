"""The README and docs/ match the code, as sqlite-utils' test_docs.py keeps its docs: the
site builds, every Python example runs, every CLI command and option and every setting
is documented (settings with the code's defaults), links stay in the repository, and
the module layout names every module."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel

from helpers import REPO_ROOT
from tether.cli import app
from tether.settings import Settings

DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
DOCUMENTS = [README, *PAGES]
SRC = REPO_ROOT / "src" / "tether"

README_MAX_BYTES = 15_000
MAX_SKIPPED_EXAMPLES = 5
# The only places a link may leave the repository: homepages of projects tether uses.
ALLOWED_HOMEPAGES = ("https://github.com/pgvector/pgvector",)

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
NO_RUN = re.compile(r"^<!-- docs: no-run \((?P<reason>[^()]+)\) -->$")


def _name(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Example:
    """A ```python block: its code, the line its code starts on, and why it does not run
    (the ``<!-- docs: no-run (reason) -->`` comment on the line above it), if it does not."""

    code: str
    line: int
    skip: str | None


def python_examples(path: Path) -> list[Example]:
    text = _read(path)
    examples = []
    for fence in FENCE.finditer(text):
        if fence.group(1) != "python":
            continue
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = NO_RUN.match(before)
        line = text.count("\n", 0, fence.start(2)) + 1
        examples.append(Example(fence.group(2), line, marker["reason"] if marker else None))
    return examples


# -- (a) the site builds ----------------------------------------------------------------


def test_the_site_builds_offline_and_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict` (strict: true is in mkdocs.yml too): a broken link or anchor,
    or a page missing from the nav, fails the build. (Not --quiet: it hides the warnings
    that strict mode counts.) No page loads a script, stylesheet, font or image from
    elsewhere."""
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(REPO_ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for page in PAGES:
        built = site / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert built.is_file(), f"{_name(page)} was not built"
        remote = re.search(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"https?://", _read(built))
        assert remote is None, f"{_name(page)} loads {remote.group(0)}"


def test_the_site_fetches_nothing_at_build() -> None:
    config = _read(REPO_ROOT / "mkdocs.yml")
    assert re.search(r"^\s+font: false\b", config, re.M), "theme.font: false (no Google Fonts)"
    assert re.search(r"^docs_dir: docs$", config, re.M)
    assert "privacy" not in config and "social" not in config  # plugins that download


# -- (b) every Python example runs ------------------------------------------------------

RUNNER = """\
import json, sys
namespace = {"__name__": "__main__"}
for path, line, code in json.load(open(sys.argv[1], encoding="utf-8")):
    exec(compile("\\n" * (line - 1) + code, path, "exec"), namespace)
"""


RUNNABLE = [d for d in DOCUMENTS if any(e.skip is None for e in python_examples(d))]


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_every_python_example_compiles(document: Path) -> None:
    for example in python_examples(document):
        compile("\n" * (example.line - 1) + example.code, _name(document), "exec")


@pytest.mark.parametrize("document", RUNNABLE, ids=_name)
def test_the_python_examples_run(document: Path, tmp_path: Path) -> None:
    """A page's examples run in order, in one namespace, in a fresh folder that holds a
    link to examples/, with embeddings off; a failure's traceback names the page and
    its line. Examples marked no-run are only compiled."""
    examples = python_examples(document)
    runnable = [(_name(document), e.line, e.code) for e in examples if e.skip is None]
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO_ROOT / "examples")
    (tmp_path / "examples.json").write_text(json.dumps(runnable), encoding="utf-8")
    (tmp_path / "runner.py").write_text(RUNNER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "RAG_FUSION_"))}
    env["TETHER_RAG__EMBEDDINGS__ENABLED"] = "false"
    result = subprocess.run(
        [sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "examples.json")],
        cwd=work, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]


def test_only_a_handful_of_examples_do_not_run() -> None:
    skipped = {
        f"{_name(document)}:{example.line}": example.skip
        for document in DOCUMENTS
        for example in python_examples(document)
        if example.skip is not None
    }
    assert len(skipped) <= MAX_SKIPPED_EXAMPLES, skipped
    assert all(reason.strip() for reason in skipped.values()), skipped


def test_a_no_run_comment_sits_right_above_a_python_block() -> None:
    for document in DOCUMENTS:
        lines = _read(document).splitlines()
        for number, line in enumerate(lines[:-1], start=1):
            if line.lstrip().startswith("<!-- docs"):
                assert NO_RUN.match(line.strip()), f"{_name(document)}:{number}: {line}"
                assert lines[number] == "```python", f"{_name(document)}:{number}"


# -- (c) every command and option is in docs/cli.md -------------------------------------

CLI_PAGE = DOCS / "cli.md"


def _commands() -> dict[str, Any]:
    """Every leaf command of the CLI by its path (``docs list``), from the Typer app."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, (*path, name))
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _commands()


def _options(command: Any) -> list[str]:
    names = []
    for param in command.params:
        if param.param_type_name == "option":
            names += [n for n in (*param.opts, *param.secondary_opts) if n != "--help"]
    return names


def _named(option: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def _section(text: str, heading: str) -> str:
    """The text under the heading that is exactly ``heading``, up to the next heading of
    the same or a higher level."""
    found = re.search(rf"^(#+) {re.escape(heading)}[ \t]*$", text, re.M)
    assert found is not None, f"no heading {heading!r}"
    level = len(found.group(1))
    after = text[found.end() :]
    end = re.search(rf"^#{{1,{level}}} ", after, re.M)
    return after[: end.start()] if end else after


def test_every_command_has_its_section_in_cli_md_and_no_other() -> None:
    documented = set(re.findall(r"^#+ `tether ([a-z -]+)`[ \t]*$", _read(CLI_PAGE), re.M))
    assert documented == set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_is_named_in_its_commands_section(path: str) -> None:
    """Long options in the command's own section; short aliases (-w, -s, -k) anywhere on
    the page, which says once what each stands for."""
    page = _read(CLI_PAGE)
    section = _section(page, f"`tether {path}`")
    missing = [
        option
        for option in _options(COMMANDS[path])
        if not _named(option, section if option.startswith("--") else page)
    ]
    assert missing == [], f"docs/cli.md does not name {missing} under `tether {path}`"


def test_the_root_options_are_named_in_cli_md() -> None:
    page = _read(CLI_PAGE)
    missing = [o for o in _options(typer.main.get_command(app)) if not _named(o, page)]
    assert missing == []


# -- (d) every setting is in docs/configuration.md, with its default ---------------------

CONFIG_PAGE = DOCS / "configuration.md"
UNSET = "unset"


def _settings(model: type[BaseModel] = Settings, prefix: str = "") -> dict[str, Any]:
    """Every leaf setting by its dotted key (``rag.embeddings.model``), with its default."""
    found: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found |= _settings(kind, f"{prefix}{name}.")
        else:
            found[prefix + name] = field.get_default(call_default_factory=True)
    return found


def _reference_rows() -> dict[str, str]:
    """The reference tables' rows: ``| `key` | default | what it does |``."""
    rows = re.findall(r"^\| `([a-z_.]+)` \| ([^|]+?) \|", _read(CONFIG_PAGE), re.M)
    keys = [key for key, _ in rows]
    assert len(keys) == len(set(keys)), "a setting is listed twice"
    return dict(rows)


def _default_in_docs(cell: str) -> Any:
    if cell == UNSET:
        return None
    assert cell.startswith("`") and cell.endswith("`"), cell
    return tomllib.loads(f"value = {cell.strip('`')}")["value"]


def test_every_setting_is_in_the_reference_and_nothing_else() -> None:
    assert set(_reference_rows()) == set(_settings())


@pytest.mark.parametrize("key", sorted(_settings()))
def test_the_reference_gives_the_codes_default(key: str) -> None:
    cell = _reference_rows()[key]
    assert _default_in_docs(cell) == _settings()[key], f"{key}: the docs say {cell}"


# -- (e) links stay in the repository and resolve ---------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
HTML_LINK = re.compile(r"(?:href|src)=[\"']([^\"']+)[\"']")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose(text: str) -> str:
    """The text without fenced blocks and code spans, where nothing is a link."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]+`", "", text)


def links(path: Path) -> list[str]:
    prose = _prose(_read(path))
    return [
        match.group(1)
        for pattern in (LINK, AUTOLINK, REFERENCE, HTML_LINK)
        for match in pattern.finditer(prose)
    ]


def slug(heading: str) -> str:
    """A heading's anchor, as Python-Markdown's toc (and GitHub) make it."""
    text = unicodedata.normalize("NFKD", heading.replace("`", ""))
    text = re.sub(r"[^\w\s-]", "", text.encode("ascii", "ignore").decode()).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", _read(path))
    return {slug(h) for h in re.findall(r"^#+ (.+?)[ \t]*$", text, re.M)}


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_links_stay_in_the_repository_and_resolve(document: Path) -> None:
    """An outside link only to an allowed homepage; a relative link to a file or folder
    of this repository (in docs/, to one of docs/, so the site's links work), and its
    #anchor to a heading there."""
    problems = []
    for target in links(document):
        if SCHEME.match(target):
            if not target.startswith(ALLOWED_HOMEPAGES):
                problems.append(f"{target}: leaves the repository")
            continue
        where, _, anchor = target.partition("#")
        resolved = (document.parent / where).resolve() if where else document
        home = DOCS if document.parent == DOCS else REPO_ROOT
        if not resolved.is_relative_to(home) or not resolved.exists():
            problems.append(f"{target}: no such file under {_name(home)}/")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading #{anchor}")
    assert problems == [], f"{_name(document)}: {problems}"


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "[a](https://example.com/x) [b](../shared/DESIGN.md) `[c](https://ok.example)`\n"
        "<https://example.org> ![d](pic.png)\n\n```\n[e](https://in.code.example)\n```\n",
        encoding="utf-8",
    )
    assert links(page) == ["https://example.com/x", "../shared/DESIGN.md", "pic.png",
                           "https://example.org"]  # fmt: skip
    assert slug("MCP: tether for agent hosts") == "mcp-tether-for-agent-hosts"
    assert slug("Choosing `min_relevance`") == "choosing-min_relevance"


# -- (f) the README is a front door -----------------------------------------------------


def test_the_readme_is_at_most_15_kb() -> None:
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes; move reference to docs/"


# -- the module layout ------------------------------------------------------------------


def test_the_layout_names_every_module() -> None:
    """docs/development.md's layout names every module of the tree as it is now."""
    text = _read(DOCS / "development.md")
    section = _section(text, "Module layout")
    layout = next(m.group(2) for m in FENCE.finditer(section) if m.group(2).startswith("src/"))
    words = {word.lstrip("_") for word in re.findall(r"\w+", layout)}
    missing = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and (
            path.stem.lstrip("_") not in words
            or (path.parent != SRC and f"{path.parent.name}/" not in layout)
        )
    ]
    assert missing == [], f"docs/development.md's layout does not show {missing}"
