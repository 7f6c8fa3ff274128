"""The CLI: every command, the --json contract, errors, and that README documents it all."""

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

from conftest import EXAMPLES, REPO_ROOT
from tether.cli import app

runner = CliRunner()

HIT_KEYS = {
    "document_id", "chunk_id", "title", "section_title", "page", "text", "score", "ordinal",
    "char_start", "char_end", "source_path", "workspace_id",
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
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"`tether {command}" in readme, f"README does not document `tether {command}`"


@pytest.mark.parametrize("command", all_command_paths())
def test_every_command_has_help(command: str) -> None:
    output = run(*command.split(), "--help")
    assert "--db" in output or command.startswith("eval")


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
    readme = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"```json\n(.*?)```", readme, re.S)
    assert block is not None
    example = json.loads(block.group(1))
    assert set(example) == {"query", "scope", "k", "hits", "debug"}
    assert set(example["hits"][0]) == HIT_KEYS
    real = run_json("search", "x", "--db", str(Path.cwd() / "readme.db"), "--scope", "global")
    assert set(example["debug"]) == set(real["debug"])


def test_add_reports_each_file_and_skips_unchanged(db: str, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nHello lasers.\n")
    bad = tmp_path / "slides.pptx"
    bad.write_bytes(b"PK\x03\x04")
    result = runner.invoke(app, ["add", "--db", db, str(note), str(bad), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    statuses = {Path(r["source"]).name: r["status"] for r in data["results"]}
    assert statuses == {"note.md": "indexed", "slides.pptx": "failed"}
    failed = next(r for r in data["results"] if r["status"] == "failed")
    assert "slides.pptx" in failed["error"] and ".md" in failed["error"]
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


def test_search_nothing_found_suggests_widening(indexed: str) -> None:
    output = run("search", "zeppelin", "--db", indexed, "--scope", "session", "--session", "chat")
    assert "No matches" in output and "wider scope" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "--scope", "session"], "needs a session id"),
        (["search", "x", "--scope", "workspace"], "needs a workspace id"),
        (["search", "x", "--scope", "galaxy"], "unknown scope"),
        (["docs", "rm", "nope"], "no document with id 'nope'"),
        (["docs", "show", "nope"], "no document with id 'nope'"),
        (["sessions", "close", "nope"], "no session with id 'nope'"),
        (["sessions", "attach", "nope", "nope"], "no document"),
    ],
)
def test_library_errors_become_one_line_and_exit_1(db: str, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--db", db])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


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


def test_search_mode_is_validated(indexed: str) -> None:
    result = runner.invoke(app, ["search", "x", "--db", indexed, "--mode", "psychic"])
    assert result.exit_code == 1 and "mode must be" in result.output


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
