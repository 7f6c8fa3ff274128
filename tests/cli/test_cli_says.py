"""The CLI does what it says: --session and --workspace name the scope, guidance never
points at a scope as narrow as the one searched, `add DIR` indexes the folder, search and
context take filters and the agents' options, scores are evidence, and the help shows no
type beside a flag. Each of these was a trap for a new user."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tether import GLOBAL_WORKSPACE, Scope, ScopeError, Tether
from tether.cli import app
from tether.retrieve.guidance import guidance, no_matches

runner = CliRunner()

PUMP = "# Pump\n\nThe pump primes in ten seconds when the intake valve is open.\n"
SENSOR = "# Sensor\n\nHold the reset pin for five seconds to reset the humidity sensor.\n"
KETTLE = "# Kettle\n\nThe kettle boils a litre of water in three minutes.\n"


def run(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


def run_json(*args: str, code: int = 0) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A store with the pump and sensor notes in workspace ``lumen`` attached to session
    ``chat``, the kettle note in the global library, and an empty session ``other`` of
    workspace ``w2``."""
    path = str(tmp_path / "says.db")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "pump.md").write_text(PUMP)
    (notes / "sensor.md").write_text(SENSOR)
    (tmp_path / "kettle.md").write_text(KETTLE)
    run(
        "add",
        str(notes / "pump.md"),
        str(notes / "sensor.md"),
        "--db",
        path,
        "--workspace",
        "lumen",
        "--session",
        "chat",
    )
    run("add", str(tmp_path / "kettle.md"), "--db", path, "--global")
    run("sessions", "create", "other", "--workspace", "w2", "--db", path)
    return path


def _titles(data: dict) -> set[str]:
    return {hit["title"] for hit in data["hits"]}


# -- 1. --session and --workspace name the scope ------------------------------------------


@pytest.mark.parametrize("command", ["search", "context"])
def test_a_session_without_a_scope_is_the_session_scope(db: str, command: str) -> None:
    data = run_json(command, "pump primes", "--db", db, "--session", "chat")
    scope = data["scope"] if command == "search" else data["debug"]["scope"]
    assert scope == {"kind": "session", "id": "chat"}


def test_a_workspace_without_a_scope_is_the_workspace_scope(db: str) -> None:
    data = run_json("search", "pump primes", "--db", db, "--workspace", "lumen")
    assert data["scope"] == {"kind": "workspace", "id": "lumen"}
    assert _titles(data) == {"Pump"}


def test_a_session_and_its_own_workspace_search_the_session(db: str) -> None:
    data = run_json("search", "pump", "--db", db, "--session", "chat", "--workspace", "lumen")
    assert data["scope"] == {"kind": "session", "id": "chat"}


@pytest.mark.parametrize("command", ["search", "context"])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--scope", "global", "--session", "chat"], "scope 'global' contradicts session 'chat'"),
        (
            ["--scope", "global", "--workspace", "lumen"],
            "scope 'global' contradicts workspace 'lumen'",
        ),
        (
            ["--session", "other", "--workspace", "lumen"],
            "session 'other' belongs to workspace 'w2', not 'lumen'",
        ),
        (["--scope", "workspace", "--session", "chat"], "needs a workspace id"),
    ],
    ids=["global-session", "global-workspace", "session-elsewhere", "workspace-without-id"],
)
def test_a_scope_the_ids_contradict_is_an_error(
    db: str, command: str, options: list[str], message: str
) -> None:
    result = runner.invoke(app, [command, "pump", "--db", db, *options])
    assert result.exit_code == 1
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_python_callers_get_the_same_rule(tmp_path: Path) -> None:
    with Tether(db=tmp_path / "rule.db") as t:
        assert t.resolve_scope(session_id="s") == Scope.session("s")
        assert t.resolve_scope(session_id="s", workspace_id="w") == Scope.session("s")
        assert t.resolve_scope(workspace_id="w") == Scope.workspace("w")
        assert t.resolve_scope() == Scope.global_()
        assert t.resolve_scope("global", workspace_id=GLOBAL_WORKSPACE) == Scope.global_()
        with pytest.raises(ScopeError, match="contradicts session"):
            t.resolve_scope("global", session_id="s")
        with pytest.raises(ScopeError, match="yet session_id is 'b'"):
            t.resolve_scope(Scope.session("a"), session_id="b")


# -- 2. guidance suggests only a wider scope ----------------------------------------------


def test_an_empty_global_search_does_not_suggest_a_wider_scope(tmp_path: Path) -> None:
    db = str(tmp_path / "empty.db")
    Path(db).touch()
    output = run("search", "pump", "--db", db, "--scope", "global")
    assert "wider scope" not in output.replace("no scope is wider", "")
    assert "no scope is wider" in output and "tether add" in output


def test_an_empty_session_search_suggests_its_workspace_when_it_holds_more(
    db: str, tmp_path: Path
) -> None:
    """The workspace holds only the chat's notes: searching it could find nothing new,
    so the search says to add a document. Once it holds another, it is suggested."""
    output = " ".join(run("search", "zeppelin", "--db", db, "--session", "chat").split())
    assert "No matches in session 'chat'" in output
    assert "Search the whole workspace instead" not in output
    assert "the workspace holds no other" in output and "tether add" in output
    data = run_json("context", "zeppelin mooring mast", "--db", db, "--session", "chat")
    assert data["grounded"] is False and data["suggested_scope"] is None
    (tmp_path / "kettle-2.md").write_text(KETTLE.replace("three", "four"))
    run("add", str(tmp_path / "kettle-2.md"), "--db", db, "--workspace", "lumen")
    output = " ".join(run("search", "zeppelin", "--db", db, "--session", "chat").split())
    assert "Search the whole workspace instead" in output and "--workspace" in output
    data = run_json("context", "zeppelin mooring mast", "--db", db, "--session", "chat")
    assert data["suggested_scope"] == "workspace"


def test_an_empty_global_library_is_not_suggested(tmp_path: Path) -> None:
    db = str(tmp_path / "alone.db")
    (tmp_path / "pump.md").write_text(PUMP)
    run("add", str(tmp_path / "pump.md"), "--db", db, "--workspace", "lumen")
    output = " ".join(run("search", "zeppelin", "--db", db, "--workspace", "lumen").split())
    assert "Search the global library instead" not in output
    assert "the global library holds none" in output
    data = run_json("context", "zeppelin mooring mast", "--db", db, "--workspace", "lumen")
    assert data["grounded"] is False and data["suggested_scope"] is None


def test_the_global_librarys_workspace_suggests_nothing_wider(db: str) -> None:
    data = run_json("context", "zeppelin mooring mast", "--db", db, "--workspace", GLOBAL_WORKSPACE)
    assert data["grounded"] is False
    assert data["suggested_scope"] is None
    assert "Search the global library instead" not in data["guidance"]


_ORDER = {"session": 0, "workspace": 1, "global": 2}


@pytest.mark.parametrize(
    "scope",
    [Scope.session("s"), Scope.workspace("w"), Scope.workspace(GLOBAL_WORKSPACE), Scope.global_()],
    ids=["session", "workspace", "global-workspace", "global"],
)
@pytest.mark.parametrize(("has_documents", "found"), [(False, 0), (True, 0), (True, 3)])
def test_guidance_suggests_only_a_wider_scope(
    scope: Scope, has_documents: bool, found: int
) -> None:
    searched = "global" if scope.id == GLOBAL_WORKSPACE else scope.kind
    for _, suggested in (
        guidance(scope, has_documents=has_documents, found=found),
        no_matches(scope),
    ):
        if searched == "global":
            assert suggested is None
        else:
            assert suggested is not None and _ORDER[suggested] > _ORDER[searched]
    # A wider scope that holds no document this one does not is never suggested.
    for text, suggested in (
        guidance(scope, has_documents=has_documents, found=found, wider_holds_more=False),
        no_matches(scope, wider_holds_more=False),
    ):
        assert suggested is None and "instead" not in text


# -- 3. add DIR indexes the folder ---------------------------------------------------------


def test_add_a_folder_indexes_its_supported_files(tmp_path: Path) -> None:
    folder = tmp_path / "manuals"
    (folder / "deep" / "deeper").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "pump.md").write_text(PUMP)
    (folder / "deep" / "deeper" / "sensor.txt").write_text(SENSOR)
    (folder / ".git" / "notes.md").write_text(KETTLE)  # hidden: left out, as scan does
    (folder / ".draft.md").write_text(KETTLE)
    (folder / "tool.exe").write_bytes(b"MZ\x90\x00")  # not a format tether reads
    os.symlink(tmp_path / "elsewhere.md", folder / "link.md")
    (tmp_path / "elsewhere.md").write_text(KETTLE)
    db = str(tmp_path / "folder.db")
    data = run_json("add", str(folder), "--db", db, "--workspace", "lumen", "--session", "s")
    sources = sorted(Path(r["source"]).name for r in data["results"])
    assert sources == ["pump.md", "sensor.txt"]
    assert {r["status"] for r in data["results"]} == {"indexed"}
    docs = run_json("docs", "list", "--db", db, "--session", "s")["documents"]
    assert {d["title"] for d in docs} == {"Pump", "sensor"}  # (a text file: its name)
    again = run("add", str(folder), "--db", db, "--workspace", "lumen")
    assert "is a directory" not in again and again.count("skipped") == 2


def test_add_a_folder_without_a_supported_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "tool.exe").write_bytes(b"MZ\x90\x00")
    result = runner.invoke(app, ["add", str(tmp_path / "junk"), "--db", str(tmp_path / "j.db")])
    assert result.exit_code == 1
    assert "without a file of a format tether reads" in result.output
    assert "tether formats" in result.output


# -- 4. filters, --min-relevance, --guarded and --history ----------------------------------


def test_search_and_context_take_tag_and_document_filters(tmp_path: Path) -> None:
    db = str(tmp_path / "tags.db")
    for name, text, domain in (("pump.md", PUMP, "plumbing"), ("sensor.md", SENSOR, "climate")):
        (tmp_path / name).write_text(text.replace("\n\n", "\n\nThe unit manual. "))
        run(
            "add",
            str(tmp_path / name),
            "--db",
            db,
            "--workspace",
            "w",
            "--domain",
            domain,
            "--project",
            f"p-{domain}",
            "--source-type",
            "guide",
        )
    every = run_json("search", "unit manual", "--db", db, "--workspace", "w")
    assert _titles(every) == {"Pump", "Sensor"}
    pump = next(h["document_id"] for h in every["hits"] if h["title"] == "Pump")
    for options in (
        ["--domain", "plumbing"],
        ["--project", "p-plumbing"],
        ["--document", pump],
        ["--domain", "plumbing", "--source-type", "guide"],
    ):
        found = run_json("search", "unit manual", "--db", db, "--workspace", "w", *options)
        assert _titles(found) == {"Pump"}, options
        assert found["debug"]["filters"]
    both = ["--domain", "plumbing", "--domain", "climate"]
    assert _titles(run_json("search", "unit manual", "--db", db, "-w", "w", *both)) == {
        "Pump",
        "Sensor",
    }
    context = run_json(
        "context",
        "how does the pump prime",
        "--db",
        db,
        "-w",
        "w",
        "--domain",
        "climate",
        "--min-relevance",
        "0",
    )
    assert {c["title"] for c in context["citations"]} <= {"Sensor"}


def test_a_bad_filter_value_is_a_usage_error(db: str) -> None:
    result = runner.invoke(app, ["search", "pump", "--db", db, "--document", "a\x00b"])
    assert result.exit_code == 2
    assert "Filters.document_ids" in result.output


def test_context_min_relevance_overrides_the_setting(db: str) -> None:
    strict = run_json(
        "context",
        "how does the pump prime",
        "--db",
        db,
        "--session",
        "chat",
        "--min-relevance",
        "1",
    )
    assert strict["grounded"] is False
    loose = run_json(
        "context",
        "how does the pump prime",
        "--db",
        db,
        "--session",
        "chat",
        "--min-relevance",
        "0",
    )
    assert loose["grounded"] is True


def test_context_guarded_blocks_and_audits_it(db: str) -> None:
    result = runner.invoke(
        app, ["context", "zeppelin mooring mast", "--db", db, "--session", "chat", "--guarded"]
    )
    assert result.exit_code == 1
    assert "Blocked (--guarded)" in result.output
    assert run_json("log", "--db", db)["entries"][0]["outcome"] == "blocked"
    grounded = runner.invoke(
        app, ["context", "how does the pump prime", "--db", db, "--session", "chat", "--guarded"]
    )
    assert grounded.exit_code == 0, grounded.output
    assert run_json("log", "--db", db)["entries"][0]["outcome"] == "grounded"


def test_context_guarded_applies_the_policy_limits(db: str, tmp_path: Path) -> None:
    """--guarded retrieves as the agents' guard does: policy.max_chunks and a
    policy.min_relevance that --min-relevance can raise but never lower."""
    question = ["context", "how does the pump prime or the sensor reset", "--db", db]
    question += ["--session", "chat"]
    few = tmp_path / "few.toml"
    few.write_text("[policy]\nmax_chunks = 1\nmin_relevance = 0.0\n")
    plain = run_json(*question, "--config", str(few), "--min-relevance", "0")
    assert len(plain["citations"]) == 2
    guarded = run_json(*question, "--config", str(few), "--guarded")
    assert guarded["grounded"] is True
    assert len(guarded["citations"]) == 1
    strict = tmp_path / "strict.toml"
    strict.write_text("[policy]\nmin_relevance = 1.0\n")
    assert run_json(*question, "--config", str(strict), "--min-relevance", "0")["grounded"]
    blocked = run_json(
        *question, "--config", str(strict), "--guarded", "--min-relevance", "0", code=1
    )
    assert blocked["blocked"]["reason"] == "no_results"
    assert blocked["grounded"] is False


def test_context_history_makes_a_follow_up_standalone(db: str, tmp_path: Path) -> None:
    history = tmp_path / "turns.json"
    history.write_text(
        json.dumps(
            [
                {"role": "user", "content": "How does the pump prime?"},
                {"role": "assistant", "content": "It primes in ten seconds [1]."},
            ]
        )
    )
    data = run_json(
        "context",
        "and the intake valve?",
        "--db",
        db,
        "--session",
        "chat",
        "--history",
        str(history),
    )
    assert data["debug"]["standalone"]["changed"] is True
    assert "pump" in data["debug"]["standalone"]["question"].lower()


@pytest.mark.parametrize(
    ("content", "code", "message"),
    [
        ("not json", 2, "not a readable JSON file"),
        ('[{"role": "robot", "content": "x"}]', 1, "role must be user, assistant or system"),
        ('{"role": "user"}', 1, "history must be a list"),
    ],
    ids=["not-json", "bad-role", "not-a-list"],
)
def test_a_bad_history_file_says_what_is_wrong(
    db: str, tmp_path: Path, content: str, code: int, message: str
) -> None:
    history = tmp_path / "turns.json"
    history.write_text(content)
    result = runner.invoke(app, ["context", "and then?", "--db", db, "--history", str(history)])
    assert result.exit_code == code
    assert message in " ".join(result.output.split())


# -- 5. scores are evidence ----------------------------------------------------------------


def test_a_citation_names_a_section_that_is_its_documents_title_once(db: str) -> None:
    """A Markdown note whose one heading is its title: "Pump", not "Pump  Pump"."""
    output = run("context", "how fast does the pump prime", "--db", db, "--session", "chat")
    line = next(x for x in output.splitlines() if x.startswith("[1]") and "evidence" in x)
    assert line.split()[1:3] == ["Pump", "pump.md"], line


def test_search_shows_evidence_and_keeps_the_fused_score_in_json(db: str) -> None:
    output = run("search", "pump primes", "--db", db, "--session", "chat")
    assert "evidence 0." in output and "score" not in output
    data = run_json("search", "pump primes", "--db", db, "--session", "chat")
    with Tether(db=db) as t:
        plain = t.search("pump primes", session_id="chat")
    assert [h["score"] for h in data["hits"]] == [h.score for h in plain]
    assert all(0.0 <= h["evidence"] <= 1.0 for h in data["hits"])
    assert plain.evidence is None  # a Python search judges nothing unless asked
    assert "evidence" not in plain.to_dict()["hits"][0]


def test_search_evidence_is_the_evidence_context_cites(db: str) -> None:
    question = "how long does the pump take to prime"
    hits = run_json("search", question, "--db", db, "--session", "chat")["hits"]
    citations = run_json("context", question, "--db", db, "--session", "chat")["citations"]
    assert citations
    by_chunk = {h["chunk_id"]: h["evidence"] for h in hits}
    for citation in citations:
        assert by_chunk[citation["chunk_ids"][0]] == pytest.approx(citation["relevance"], abs=1e-3)


def test_search_min_relevance_keeps_only_enough_evidence(db: str) -> None:
    every = run_json("search", "pump primes valve", "--db", db, "--session", "chat")["hits"]
    assert every
    best = max(h["evidence"] for h in every)
    kept = run_json(
        "search",
        "pump primes valve",
        "--db",
        db,
        "--session",
        "chat",
        "--min-relevance",
        str(round(best - 1e-4, 4)),
    )["hits"]
    assert kept and all(h["evidence"] >= best - 1e-4 for h in kept)
    assert (
        run_json(
            "search", "pump primes valve", "--db", db, "--session", "chat", "--min-relevance", "1"
        )["hits"]
        == []
    )


# -- 6. help -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ([], "--version"),
        (["search"], "--json"),
        (["add"], "--global"),
        (["context"], "--guarded"),
        ([], "--help"),
        (["search"], "--help"),
        (["docs"], "--help"),
        (["docs", "list"], "--help"),
    ],
)
def test_a_flag_shows_no_type_in_help(command: list[str], flag: str) -> None:
    output = run(*command, "--help")
    line = next(line for line in output.splitlines() if f"{flag} " in line)
    assert "<bool>" not in line, line
