"""The CLI: every command, the --json contract, errors, and that the docs document it all."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from helpers import EXAMPLES, REPO_ROOT
from tether.cli import app

runner = CliRunner()

HIT_KEYS = {
    "document_id", "chunk_id", "title", "section_title", "page", "text", "score", "ordinal",
    "char_start", "char_end", "source_path", "workspace_id", "page_label", "evidence",
}  # fmt: skip


def run(*args: str, ok: bool = True) -> str:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result.output


def run_json(*args: str) -> dict:
    return json.loads(run(*args, "--json"))


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "cli.db")


@pytest.fixture
def indexed(db: str) -> str:
    run("add", "--db", db, "--workspace", "lumen", "--session", "chat", *map(str, _examples()))
    return db


def _examples() -> list[Path]:
    return sorted(EXAMPLES.iterdir())


def all_command_paths() -> list[str]:
    root = get_command(app)
    paths = []
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        if hasattr(command, "commands"):
            paths += [f"{name} {sub}" for sub in command.commands]
        else:
            paths.append(name)
    return sorted(paths)


@pytest.mark.parametrize("command", all_command_paths())
def test_every_command_is_documented_in_the_readme(command: str) -> None:
    readme = (REPO_ROOT / "docs" / "cli.md").read_text()
    assert f"`tether {command}" in readme, f"README does not document `tether {command}`"


def test_the_command_list_gives_each_command_one_unbroken_sentence() -> None:
    """``tether --help`` lists each command by its help's first paragraph, reflowed: a
    docstring's line break never cuts a sentence in two there."""
    root = get_command(app)
    for group in [root, *(c for c in root.commands.values() if hasattr(c, "commands"))]:  # type: ignore[attr-defined]
        for name, command in group.commands.items():  # type: ignore[attr-defined]
            if hasattr(command, "commands"):
                continue
            first = " ".join(command.help.split("\n\n", 1)[0].split())
            assert command.short_help == first, name


@pytest.mark.parametrize("command", ["search", "context", "keys create"])
def test_a_repeatable_option_shows_the_one_value_it_takes(command: str) -> None:
    """``--domain hr --domain legal``: each takes one value, and the help says ``<str>``,
    not a Python ``list[str]`` that reads as if a list were expected."""
    output = run(*command.split(), "--help")
    assert "list[str]" not in output
    assert re.search(r"--(domain|workspace)\s.*<str>", output)


@pytest.mark.parametrize("command", all_command_paths())
def test_every_command_has_help(command: str) -> None:
    output = run(*command.split(), "--help")
    assert "--db" in output or command.startswith(("eval", "formats"))


def test_add_then_search_json_contract(indexed: str) -> None:
    data = run_json("search", "battery replacement under warranty", "--db", indexed,
                    "--scope", "session", "--session", "chat", "--k", "3")  # fmt: skip
    assert data["scope"] == {"kind": "session", "id": "chat"}
    assert data["k"] == 3
    assert len(data["hits"]) == 3
    for hit in data["hits"]:
        assert set(hit) == HIT_KEYS
        assert hit["workspace_id"] == "lumen"
    assert data["hits"][0]["title"] == "Lumen S2 Warranty and Returns"
    assert data["hits"][0]["page"] == 2
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)
    # Embeddings are off in these tests: hybrid says it ran lexical-only, and why.
    assert data["debug"]["mode"] == "hybrid" and data["debug"]["method"] == "lexical"
    assert "embeddings disabled" in data["debug"]["degradations"][0]


def test_readme_json_example_has_the_real_keys() -> None:
    readme = (REPO_ROOT / "docs" / "cli.md").read_text()
    block = re.search(r"```json\n(.*?)```", readme, re.S)
    assert block is not None
    example = json.loads(block.group(1))
    assert set(example) == {"query", "scope", "k", "hits", "debug"}
    assert set(example["hits"][0]) == HIT_KEYS
    (Path.cwd() / "readme.db").touch()  # search refuses a store file that does not exist
    real = run_json("search", "x", "--db", str(Path.cwd() / "readme.db"), "--scope", "global")
    assert set(example["debug"]) == set(real["debug"])


def _documented_keys(readme: str, command: str, outer: str) -> set[str]:
    """The keys docs/cli.md lists for ``tether COMMAND --json`` as {"outer": [{"a", ...}]}."""
    text = " ".join(readme.split())
    found = re.search(rf"`tether {command} --json` prints `{{\"{outer}\": \[{{(.*?)}}\]}}`", text)
    assert found is not None, f"docs/cli.md does not list the keys of tether {command} --json"
    return set(re.findall(r'"(\w+)"', found.group(1)))


def test_readme_lists_the_real_json_keys_of_every_listing(indexed: str, tmp_path: Path) -> None:
    readme = (REPO_ROOT / "docs" / "cli.md").read_text()
    note = tmp_path / "n.md"
    note.write_text("# N\n\nkeys\n")
    added = run_json("add", str(note), "--db", indexed)["results"][0]
    assert set(added) == _documented_keys(readme, "add", "results")
    document = run_json("docs", "list", "--db", indexed)["documents"][0]
    assert set(document) == _documented_keys(readme, "docs list", "documents")
    session = run_json("sessions", "list", "--db", indexed)["sessions"][0]
    assert set(session) == _documented_keys(readme, "sessions list", "sessions")


def test_the_readme_quickstart_runs(tmp_path: Path) -> None:
    """The Quickstart's Python, as printed, from a folder holding the sample documents."""
    readme = (REPO_ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1]
    code = re.search(r"```python\n(.*?)```", quickstart, re.S)
    assert code is not None
    (tmp_path / "examples").symlink_to(REPO_ROOT / "examples")
    result = subprocess.run(
        [sys.executable, "-c", code.group(1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TETHER_RAG__EMBEDDINGS__ENABLED": "false"},
    )
    assert result.returncode == 0, result.stderr
    assert "Lumen S2 Warranty and Returns" in result.stdout  # a cited hit from the PDF
    assert (tmp_path / "tether.db").is_file()


def test_add_reports_each_file_and_skips_unchanged(db: str, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nHello lasers.\n")
    bad = tmp_path / "tool.exe"
    bad.write_bytes(b"MZ\x90\x00\x03\x00\x00\x00")
    result = runner.invoke(app, ["add", "--db", db, str(note), str(bad), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    statuses = {Path(r["source"]).name: r["status"] for r in data["results"]}
    assert statuses == {"note.md": "indexed", "tool.exe": "failed"}
    failed = next(r for r in data["results"] if r["status"] == "failed")
    assert "tool.exe" in failed["error"] and ".md" in failed["error"]
    again = run_json("add", "--db", db, str(note))
    assert [r["status"] for r in again["results"]] == ["skipped"]


def test_add_text_output_and_global_flag(db: str) -> None:
    faq = str(EXAMPLES / "support-faq.txt")
    output = run("add", "--db", db, "--global", faq)
    assert re.search(r"indexed\s+\S*support-faq.txt -> \w+ \(\d+ chunks\)", output), output
    assert run_json("search", "warranty", "--db", db, "--scope", "global")["hits"]
    result = runner.invoke(app, ["add", "--db", db, "--global", "--workspace", "w", faq])
    assert result.exit_code == 2


def test_search_text_output_cites_hits(indexed: str) -> None:
    output = run("search", "reset the sensor", "--db", indexed, "--scope", "workspace",
                 "--workspace", "lumen", "--k", "2")  # fmt: skip
    assert "[1]" in output and "[2]" in output and "[3]" not in output
    assert "Resetting the sensor" in output


def test_search_nothing_found_suggests_widening(indexed: str, tmp_path: Path) -> None:
    (tmp_path / "more.md").write_text("# More\n\nA note of the workspace, not of the chat.\n")
    run("add", str(tmp_path / "more.md"), "--db", indexed, "--workspace", "lumen")
    output = run("search", "zeppelin", "--db", indexed, "--scope", "session", "--session", "chat")
    assert "No matches" in output and "Search the whole workspace instead" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "--scope", "session"], "needs a session id"),
        (["search", "x", "--scope", "workspace"], "needs a workspace id"),
        (["docs", "rm", "nope"], "no document with id 'nope'"),
        (["docs", "show", "nope"], "no document with id 'nope'"),
        (["sessions", "close", "nope"], "no session with id 'nope'"),
        (["sessions", "attach", "nope", "nope"], "no document"),
    ],
)
def test_library_errors_become_one_line_and_exit_1(db: str, args: list[str], message: str) -> None:
    Path(db).touch()  # read-only commands refuse a store file that does not exist
    result = runner.invoke(app, [*args, "--db", db])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (["docs", "show", "nope"], "no document with id 'nope'",
         "list them with `tether docs list`"),
        (["sessions", "close", "nope"], "no session with id 'nope'",
         "create it with `tether sessions create`, or pass --session when adding a document"),
        (["context", "x", "--scope", "workspace", "--workspace", "nope"],
         "no workspace with id 'nope'", "create it by adding a document with --workspace"),
    ],
    ids=["document", "session", "workspace"],
)  # fmt: skip
def test_a_missing_id_names_the_command_that_fixes_it(
    db: str, args: list[str], message: str, hint: str
) -> None:
    """The library says what is missing; the CLI adds which command to run."""
    Path(db).touch()  # read-only commands refuse a store file that does not exist
    result = runner.invoke(app, [*args, "--db", db])
    assert result.exit_code == 1
    assert message in result.output and hint in result.output
    # The hint replaces the library's own advice, which speaks to Python callers.
    assert "Tether." not in result.output and result.output.count("create it") <= 1


def test_docs_and_sessions_commands(indexed: str) -> None:
    docs = run_json("docs", "list", "--db", indexed, "--session", "chat")["documents"]
    assert len(docs) == 4
    pdf = next(d for d in docs if d["mime"] == "application/pdf")
    assert pdf["session_ids"] == ["chat"]

    shown = run_json("docs", "show", pdf["id"], "--db", indexed)
    assert {c["page"] for c in shown["chunks"]} == {1, 2, 3}

    run("sessions", "create", "review", "--workspace", "lumen", "--db", indexed)
    assert "attached" in run("sessions", "attach", pdf["id"], "review", "--db", indexed)
    sessions = run_json("sessions", "list", "--db", indexed)["sessions"]
    assert {s["id"] for s in sessions} == {"chat", "review"}
    hits = run_json("search", "warranty", "--db", indexed, "--scope", "session",
                    "--session", "review")["hits"]  # fmt: skip
    assert hits and {h["document_id"] for h in hits} == {pdf["id"]}

    assert "detached" in run("sessions", "detach", pdf["id"], "review", "--db", indexed)
    hits = run_json("search", "warranty", "--db", indexed, "--scope", "session",
                    "--session", "review")["hits"]  # fmt: skip
    assert hits == []
    assert "closed" in run("sessions", "close", "review", "--db", indexed)

    run("docs", "rm", pdf["id"], "--db", indexed)
    left = run_json("docs", "list", "--db", indexed)["documents"]
    assert pdf["id"] not in {d["id"] for d in left} and len(left) == 3


def test_tether_db_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "from-env.db"
    monkeypatch.setenv("TETHER_DB", str(target))
    run("add", "--global", str(EXAMPLES / "support-faq.txt"))
    assert target.exists()
    assert run_json("docs", "list")["documents"]


def test_config_file_sets_db_and_rag_keys(tmp_path: Path) -> None:
    config = tmp_path / "custom.toml"
    config.write_text(
        f'db = "{tmp_path / "cfg.db"}"\n[rag]\nchunk_size = 300\nchunk_overlap = 30\n'
    )
    run("add", "--config", str(config), str(EXAMPLES / "lumen-s2-user-guide.md"))
    docs = run_json("docs", "list", "--config", str(config))["documents"]
    assert docs and docs[0]["chunk_count"] > 18  # smaller chunks than the default
    bad = tmp_path / "bad.toml"
    bad.write_text("[rag]\nchunk_sise = 3\n")
    result = runner.invoke(app, ["docs", "list", "--config", str(bad)])
    assert result.exit_code == 1 and "chunk_sise" in result.output


@pytest.mark.slow
def test_installed_entry_point_runs(tmp_path: Path) -> None:
    """The console script installed by `pip install` works in a real subprocess."""
    exe = Path(sys.executable).with_name("tether")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    db = str(tmp_path / "sub.db")
    proc = subprocess.run(
        [str(exe), "add", "--db", db, str(EXAMPLES / "warranty-and-returns.pdf"), "--json"],
        capture_output=True, text=True, env=env, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["chunk_count"] > 0


def test_reembed_without_embeddings_is_a_clear_error(db: str) -> None:
    result = runner.invoke(app, ["reembed", "--db", db])
    assert result.exit_code == 1
    assert "embeddings disabled" in result.output


@pytest.mark.parametrize(
    ("option", "value"), [("--mode", "psychic"), ("--scope", "galaxy")], ids=["mode", "scope"]
)
def test_search_choices_are_usage_errors(indexed: str, option: str, value: str) -> None:
    result = runner.invoke(app, ["search", "x", "--db", indexed, option, value])
    assert result.exit_code == 2
    words = " ".join(result.output.replace("│", " ").split())  # the error box wraps
    assert f"'{value}' is not one of" in words and "Traceback" not in result.output


def test_titles_and_ids_are_printed_as_text_not_markup(db: str, tmp_path: Path) -> None:
    """Rich markup in a document (a title like "[red] notes", a closing "[/]") is shown
    as written, never interpreted: no MarkupError, no lost or restyled text."""
    note = tmp_path / "cheats.md"
    note.write_text("# Regex cheats [/] and [red]\n\n## Brackets [/b] usage\n\nzebra [bold]x\n")
    run("add", "--db", db, str(note), "--session", "s[/]1")
    search = run("search", "zebra", "--db", db, "--scope", "session", "--session", "s[/]1")
    assert "Regex cheats [/] and [red]" in search and "Brackets [/b] usage" in search
    assert "zebra [bold]x" in search
    listing = run("docs", "list", "--db", db)
    assert "[/]" in listing and "[red]" in listing
    context = run("context", "zebra x", "--db", db, "--scope", "session", "--session", "s[/]1")
    assert "Regex cheats [/] and [red]" in context
    for args in (["docs", "rm", "[bold]nope"], ["sessions", "close", "[/x]"]):
        result = runner.invoke(app, [*args, "--db", db])
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert args[-1] in result.output  # the id as typed, markup and all


@pytest.mark.parametrize(
    ("scope", "flag"), [("session", "--session"), ("workspace", "--workspace")]
)
def test_a_search_in_a_scope_that_does_not_exist_says_so(
    indexed: str, scope: str, flag: str
) -> None:
    result = runner.invoke(
        app, ["search", "battery", "--db", indexed, "--scope", scope, flag, "lumnen"]
    )
    assert result.exit_code == 0
    assert f"there is no {scope} 'lumnen' in this store" in result.output
    assert "No matches" in result.output
    # An existing but empty session gets no such note.
    run("sessions", "create", "empty", "--workspace", "lumen", "--db", indexed)
    empty = run("search", "battery", "--db", indexed, "--scope", "session", "--session", "empty")
    assert "No matches" in empty and "there is no" not in empty


def test_docs_rm_removes_all_or_nothing(indexed: str) -> None:
    ids = [d["id"] for d in run_json("docs", "list", "--db", indexed)["documents"]]
    result = runner.invoke(app, ["docs", "rm", ids[0], "no-such-doc", "--db", indexed])
    assert result.exit_code == 1 and "no-such-doc" in result.output
    assert [d["id"] for d in run_json("docs", "list", "--db", indexed)["documents"]] == ids
    run("docs", "rm", *ids[:2], "--db", indexed)
    assert len(run_json("docs", "list", "--db", indexed)["documents"]) == len(ids) - 2


@pytest.mark.slow
def test_local_embeddings_end_to_end(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI with the real local model: add embeds, vector search finds by meaning,
    and reembed has nothing left to do."""
    monkeypatch.setenv("TETHER_RAG__EMBEDDINGS__ENABLED", "true")
    added = run_json("add", "--db", db, "--workspace", "lumen", *map(str, _examples()))
    assert all(r["status"] == "indexed" and not r["warnings"] for r in added["results"])
    data = run_json("search", "my gadget dies every night", "--db", db, "--scope", "workspace",
                    "--workspace", "lumen", "--mode", "vector", "--k", "3")  # fmt: skip
    assert data["debug"]["method"] == "vector" and len(data["hits"]) == 3
    assert any("battery" in h["text"].lower() for h in data["hits"])
    hybrid = run_json("search", "battery replacement", "--db", db, "--scope", "workspace",
                      "--workspace", "lumen")  # fmt: skip
    assert hybrid["debug"]["method"] == "hybrid"
    assert hybrid["debug"]["candidates"]["vector"] > 0
    assert "embedded 0 new chunk texts" in run("reembed", "--db", db)


def test_compact_rewrites_the_full_text_index_and_says_so(indexed: str) -> None:
    data = run_json("compact", "--db", indexed)
    assert data["segments_after"] == 1 and data["pages_after"] >= 1
    assert data["segments_before"] >= 1 and data["seconds"] >= 0
    assert "-> 1 segment(s)" in run("compact", "--db", indexed)
