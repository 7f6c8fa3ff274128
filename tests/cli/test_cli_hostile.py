"""Hostile input at the CLI: a malformed tether.toml, a --db that names no file, and the
--json of the commands that change the store (watch's as JSON Lines), plus --version."""

from __future__ import annotations

import importlib.metadata
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from typer.testing import CliRunner

from helpers import REPO_ROOT
from openai_fake import FakeOpenAI
from tether import ConfigurationError, Settings
from tether.cli import app

runner = CliRunner()

NOTE = "# Kestrel\n\nThe kestrel hovers over the meadow before it dives.\n"


def ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def ok_json(*args: str) -> dict:
    return json.loads(ok(*args, "--json"))


def one_error_line(args: list[str]) -> str:
    """The command's only output: one ``error:`` line on stderr, exit status 1."""
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert isinstance(result.exception, SystemExit)  # no traceback, no stray exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "hostile.db")


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "kestrel.md"
    path.write_text(NOTE)
    return path


# A malformed tether.toml -------------------------------------------------------------

MALFORMED_TOML = [
    ("[rag\nfoo = ", "Expected ']' at the end of a table declaration at line 1, column 5"),
    ("chunk_size = = 3", "Invalid value at line 1, column 14"),
    ("[rag]\nchunk_size = = 3\n", "Invalid value at line 2, column 14"),
    ('db = "tether.db\n', "Illegal character '\\n' at line 1, column 16"),
    ('[rag]\nchunk_size = 300\ndb = "x', "Unterminated string at line 3 (the end of the file)"),
]


@pytest.mark.parametrize(("text", "problem"), MALFORMED_TOML)
def test_a_malformed_config_file_is_a_configuration_error_naming_file_and_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    config = tmp_path / "custom.toml"
    config.write_text(text)
    with pytest.raises(ConfigurationError) as caught:
        Settings.load(config)
    assert str(caught.value) == f"config file {config} is not valid TOML: {problem}"


@pytest.mark.parametrize("found_by", ["config_file", "TETHER_CONFIG", "./tether.toml"])
def test_every_way_of_finding_the_config_file_reports_it_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, found_by: str
) -> None:
    config = tmp_path / "tether.toml"  # the tests run in tmp_path
    config.write_text("[rag]\nchunk_size = = 3\n")
    if found_by == "TETHER_CONFIG":
        monkeypatch.setenv("TETHER_CONFIG", str(config))
    with pytest.raises(ConfigurationError, match="Invalid value at line 2, column 14") as caught:
        Settings.load(config_file=config if found_by == "config_file" else None)
    assert "tether.toml is not valid TOML" in str(caught.value)


def test_a_config_file_that_is_not_utf8_is_a_configuration_error(tmp_path: Path) -> None:
    config = tmp_path / "latin1.toml"
    config.write_bytes("[rag]\n# caf\xe9\nchunk_size = 300\n".encode("latin-1"))
    with pytest.raises(ConfigurationError) as caught:
        Settings.load(config)
    assert str(caught.value) == f"config file {config} is not UTF-8 text (line 2); save it as UTF-8"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_config_file_is_a_configuration_error(tmp_path: Path) -> None:
    config = tmp_path / "locked.toml"
    config.write_text("[rag]\nchunk_size = 300\n")
    config.chmod(0)
    with pytest.raises(ConfigurationError, match=r"cannot read config file .*locked\.toml"):
        Settings.load(config)


@pytest.mark.parametrize(
    "args",
    [
        ["docs", "list"],
        ["search", "kestrel"],
        ["add", "{note}"],
        ["sessions", "create", "s", "-w", "w"],
    ],
    ids=["docs list", "search", "add", "sessions create"],
)
def test_the_cli_reports_a_malformed_config_in_one_line(
    tmp_path: Path, db: str, note: Path, args: list[str]
) -> None:
    config = tmp_path / "custom.toml"
    config.write_text("[rag]\nchunk_size = = 3\n")
    args = [a.replace("{note}", str(note)) for a in args]
    line = one_error_line([*args, "--db", db, "--config", str(config)])
    assert (
        line == f"error: config file {config} is not valid TOML: Invalid value at line 2, column 14"
    )
    assert not Path(db).exists()  # nothing was opened, let alone created


def test_the_cli_reports_a_malformed_tether_toml_in_the_working_folder() -> None:
    Path("tether.toml").write_text('db = "x.db"\n[rag\n')
    line = one_error_line(["status"])
    assert line == (
        "error: config file tether.toml is not valid TOML:"
        " Expected ']' at the end of a table declaration at line 2, column 5"
    )


def test_the_readme_quotes_the_real_toml_error() -> None:
    Path("tether.toml").write_text("[rag]\nchunk_size = = 3\n")
    line = one_error_line(["docs", "list"])
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    assert f"`{line}`" in readme


# A store file that does not exist ------------------------------------------------------

READ_ONLY = [
    ["search", "kestrel"],
    ["context", "what does the kestrel do?"],
    ["docs", "list"],
    ["docs", "show", "abc123"],
    ["log"],
    ["status"],
    ["sessions", "list"],
]
READ_ONLY_IDS = [" ".join(args[:2]) if args[0] in ("docs", "sessions") else args[0]
                 for args in READ_ONLY]  # fmt: skip


def missing_store(db: str) -> str:
    return (
        f"error: no store at {db}: the file does not exist; `tether add` creates one,"
        " or name an existing one with --db"
    )


@pytest.mark.parametrize("args", READ_ONLY, ids=READ_ONLY_IDS)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_read_only_commands_refuse_a_missing_store(db: str, args: list[str], as_json: bool) -> None:
    line = one_error_line([*args, "--db", db, *(["--json"] if as_json else [])])
    assert line == missing_store(db)
    assert not Path(db).exists()


@pytest.mark.parametrize("args", READ_ONLY, ids=READ_ONLY_IDS)
def test_read_only_commands_refuse_a_missing_default_store(args: list[str]) -> None:
    assert one_error_line(args) == missing_store("tether.db")
    assert not Path("tether.db").exists()


@pytest.mark.parametrize("named_by", ["TETHER_DB", "tether.toml"])
def test_a_missing_store_named_by_the_environment_or_config_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named_by: str
) -> None:
    db = str(tmp_path / "typo.db")
    if named_by == "TETHER_DB":
        monkeypatch.setenv("TETHER_DB", db)
    else:
        Path("tether.toml").write_text(f'db = "{db}"\n')
    assert one_error_line(["docs", "list"]) == missing_store(db)


@pytest.mark.parametrize(
    "args",
    [["add", "{note}"], ["scan", "{folder}"], ["sessions", "create", "s", "-w", "w"], ["cleanup"]],
    ids=["add", "scan", "sessions create", "cleanup"],
)
def test_commands_that_write_create_the_store(
    tmp_path: Path, db: str, note: Path, args: list[str]
) -> None:
    folder = tmp_path / "library"
    folder.mkdir()
    args = [a.replace("{note}", str(note)).replace("{folder}", str(folder)) for a in args]
    ok(*args, "--db", db)
    assert Path(db).is_file()
    assert "documents" in ok_json("docs", "list", "--db", db)  # a store a reader accepts


def test_read_only_commands_read_an_existing_store(db: str, note: Path) -> None:
    ok("add", str(note), "--db", db, "--workspace", "birds", "--session", "walk")
    assert [d["title"] for d in ok_json("docs", "list", "--db", db)["documents"]] == ["Kestrel"]
    hits = ok_json("search", "kestrel", "--db", db, "--scope", "session", "--session", "walk")
    assert [h["title"] for h in hits["hits"]] == ["Kestrel"]
    assert [s["id"] for s in ok_json("sessions", "list", "--db", db)["sessions"]] == ["walk"]


def test_an_in_memory_store_is_not_a_missing_file() -> None:
    assert ok_json("docs", "list", "--db", ":memory:") == {"documents": []}
    assert not Path(":memory:").exists()


# --version -----------------------------------------------------------------------------


def test_version_prints_the_installed_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"tether {importlib.metadata.version('tether')}\n"


# --json of the commands that change the store ------------------------------------------

SESSION_KEYS = {"id", "workspace_id", "created_at", "closed_at"}


def test_docs_rm_and_approve_json(db: str, tmp_path: Path, note: Path) -> None:
    other = tmp_path / "heron.md"
    other.write_text("# Heron\n\nThe heron waits in the shallows.\n")
    ok("add", str(note), "--db", db, "--status", "pending")
    ok("add", str(other), "--db", db)
    ids = {d["title"]: d["id"] for d in ok_json("docs", "list", "--db", db)["documents"]}
    kestrel, heron = ids["Kestrel"], ids["Heron"]

    assert ok_json("docs", "approve", kestrel, "--db", db) == {"approved": [kestrel]}
    assert ok_json("docs", "show", kestrel, "--db", db)["document"]["status"] == "active"
    # Each id once, in the order given: a repeated id is not a second, failing delete.
    assert ok_json("docs", "rm", heron, kestrel, heron, "--db", db) == {"deleted": [heron, kestrel]}
    assert ok_json("docs", "list", "--db", db) == {"documents": []}


def test_docs_rm_json_of_an_unknown_id_is_an_error_and_prints_no_json(db: str, note: Path) -> None:
    ok("add", str(note), "--db", db)
    line = one_error_line(["docs", "rm", "nope", "--db", db, "--json"])
    assert line == "error: no document with id 'nope'; list them with `tether docs list`"
    assert len(ok_json("docs", "list", "--db", db)["documents"]) == 1


def test_sessions_json(db: str, note: Path) -> None:
    ok("add", str(note), "--db", db, "--workspace", "birds")
    document_id = ok_json("docs", "list", "--db", db)["documents"][0]["id"]

    created = ok_json("sessions", "create", "walk", "--workspace", "birds", "--db", db)
    assert set(created) == {"session"} and set(created["session"]) == SESSION_KEYS
    assert created["session"]["id"] == "walk" and created["session"]["workspace_id"] == "birds"
    assert created["session"]["closed_at"] is None

    attach = ["sessions", "attach", document_id, "walk", "--db", db]
    expected = {"document_id": document_id, "session_id": "walk"}
    assert ok_json(*attach) == {**expected, "attached": True}
    assert ok_json(*attach) == {**expected, "attached": False}
    detach = ["sessions", "detach", document_id, "walk", "--db", db]
    assert ok_json(*detach) == {**expected, "detached": True}
    assert ok_json(*detach) == {**expected, "detached": False}

    closed = ok_json("sessions", "close", "walk", "--db", db)["session"]
    assert set(closed) == SESSION_KEYS and closed["closed_at"] is not None
    assert ok_json("sessions", "list", "--db", db)["sessions"] == [closed]


def test_reembed_json_over_a_real_http_embeddings_endpoint(
    db: str, note: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok("add", str(note), "--db", db)  # embeddings off: no vectors yet
    with FakeOpenAI() as fake:
        for name, value in {
            "ENABLED": "true", "PROVIDER": "openai", "MODEL": "text-embedding-3-small",
            "BASE_URL": fake.base_url, "API_KEY": fake.api_key,
        }.items():  # fmt: skip
            monkeypatch.setenv(f"TETHER_RAG__EMBEDDINGS__{name}", value)
        first = ok_json("reembed", "--db", db)
        again = ok_json("reembed", "--db", db)
    assert set(first) == {"model", "documents", "chunks_embedded"}
    assert first["model"] == "text-embedding-3-small"
    assert first["documents"] == 1 and first["chunks_embedded"] >= 1
    assert again["chunks_embedded"] == 0


def test_reembed_json_without_embeddings_is_an_error_line(db: str) -> None:
    line = one_error_line(["reembed", "--db", db, "--json"])
    assert line.startswith("error: ") and "embeddings disabled" in line


SYNC_KEYS = {"indexed", "unchanged", "renamed", "deleted", "failed", "refused", "unsettled",
             "waiting", "unsupported", "errors"}  # fmt: skip


def _lines(stream: IO[str]) -> queue.Queue[str]:
    """The stream's lines as they come, for reads with a deadline."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _next_pass(lines: queue.Queue[str], deadline: float) -> dict:
    line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
    return json.loads(line)


def _settled(path: Path, text: str) -> None:
    """Write ``path`` and date it in the past: a file written just now is left for the
    next pass, as it may still be being written."""
    path.write_text(text)
    past = time.time() - 60
    os.utime(path, (past, past))


@pytest.mark.slow
def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_watch_json_prints_one_line_per_pass_until_ctrl_c(tmp_path: Path, db: str) -> None:
    folder = tmp_path / "library"
    folder.mkdir()
    _settled(folder / "kestrel.md", NOTE)
    exe = Path(sys.executable).with_name("tether")
    proc = subprocess.Popen(
        [str(exe), "watch", str(folder), "--db", db, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        # Ctrl-C must reach it even when this test runs as a background job, which
        # starts with SIGINT ignored (inherited, Python would keep ignoring it).
        preexec_fn=_default_sigint,
    )  # fmt: skip
    try:
        lines = _lines(proc.stdout)  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        first = _next_pass(lines, deadline)
        assert set(first) == SYNC_KEYS
        assert [Path(p).name for p in first["indexed"]] == ["kestrel.md"]

        _settled(folder / "heron.md", "# Heron\n\nThe heron waits in the shallows.\n")
        indexed: list[str] = []
        while "heron.md" not in indexed:  # a pass per batch of changes
            later = _next_pass(lines, deadline)
            assert set(later) == SYNC_KEYS
            indexed += [Path(p).name for p in later["indexed"]]
        assert indexed == ["heron.md"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    stderr = proc.stderr.read()  # type: ignore[union-attr]
    assert proc.returncode == 0, stderr
    assert stderr.splitlines() == [f"watching {folder.resolve()} (Ctrl-C to stop)", "stopped"]
