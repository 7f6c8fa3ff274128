"""Hostile text: every str input works or fails alone with a typed InvalidArgument, and
no audit row is dropped. Lone surrogates (what surrogateescape makes of undecodable
bytes), NUL, right-to-left marks and FTS syntax, against a real store, the real local
embedder and the real CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tether import (
    Filters,
    InvalidArgument,
    LocalEmbedder,
    Scope,
    ScopeError,
    Settings,
    Tether,
    TextSource,
)
from tether.cli import app
from tether.sanitize import sanitize_query
from tether.testing import HashEmbedder
from tether.text import check_identifier, normalize_text, valid_text

#: Text an attacker or a careless caller sends: lone surrogates, NUL, bidi controls,
#: FTS5 syntax, emoji, and ordinary words.
HOSTILE = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "\ud800",
                "\udcff",
                "\udfff",
                "\x00",
                "\u202e",
                "\u200f",
                '"',
                "*",
                "^",
                ":",
                "(",
                ")",
                "NEAR",
                "AND",
                "OR",
                "NOT",
                "{",
                "}",
                "-",
                "🔋",
                "battery",
                "warranty",
                " ",
            ]
        ),
        st.characters(),
    ),
    max_size=40,
).map("".join)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Tether]:
    with Tether(db=tmp_path / "h.db", embedder=HashEmbedder()) as t:
        t.add(text="Battery warranty: two years from purchase.", title="Warranty",
              workspace_id="w", session_id="s", document_id="warranty")  # fmt: skip
        yield t


def test_valid_text_replaces_lone_surrogates_and_ids_refuse_them() -> None:
    assert valid_text("battery \ud800 \udcff") == "battery \ufffd \ufffd"
    assert valid_text("plain") == "plain"
    assert normalize_text("a\udcffb") == "a\ufffdb"
    assert sanitize_query("key \ud800") == "key \ufffd"
    for bad in ("w\ud800", "nul\x00id"):
        with pytest.raises(InvalidArgument, match="cannot be stored"):
            check_identifier("workspace_id", bad)
    check_identifier("workspace_id", "émoji 🔋 ok")


def test_lone_surrogates_in_queries_work_with_the_real_local_embedder(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = Settings.load(rag={"embeddings": {"enabled": True}})
    with Tether(db=tmp_path / "real.db", settings=settings, embedder=local_embedder) as t:
        t.add(text="Battery warranty: two years from purchase.", title="Warranty")
        for mode in ("hybrid", "vector", "lexical"):
            hits = t.search("battery \ud800", mode=mode, scope="global")
            assert hits and hits[0].title == "Warranty", mode
        result = t.retrieve("battery \udcff warranty", scope="global")
        assert result.retrieved and result.grounded
        (row,) = t.retrieval_log()
    assert row.retrieval_id == result.retrieval_id  # the audit row is not dropped
    assert "\ufffd" in row.query


def test_a_bad_source_in_a_batch_fails_alone(store: Tether) -> None:
    results = store.add(
        [
            TextSource("good text about pumps", "good"),
            TextSource("bad\ud800 text about pumps", "bad\udcff"),
            TextSource("named badly", "x", document_id="id\ud800"),
            TextSource("keyed badly", "y", source="key\x00"),
        ],
        on_error="collect",
    )
    assert [r.status for r in results] == ["indexed", "indexed", "failed", "failed"]
    assert all(isinstance(r.error, InvalidArgument) for r in results[2:])
    assert "document_id" in str(results[2].error) and "source" in str(results[3].error)
    titles = {d.title for d in store.documents()}
    assert {"good", "bad\ufffd"} <= titles


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.add(text="x y", title="T", workspace_id="w\ud800"),
        lambda t: t.add(text="x y", title="T", session_id="s\udcff"),
        lambda t: t.search("battery", scope="session", session_id="s\ud800"),
        lambda t: t.search("battery", scope="workspace", workspace_id="w\x00"),
        lambda t: t.retrieve("battery", scope="session", session_id="s\ud800"),
        lambda t: t.search("battery", scope="global", filters=Filters(domains=("d\ud800",))),
    ],
)
def test_bad_identifiers_are_typed_errors(store: Tether, call: object) -> None:
    with pytest.raises(InvalidArgument):
        call(store)  # type: ignore[operator]
    assert store.retrieval_log() == []  # nothing half-done was recorded


def test_a_scope_refuses_an_id_it_could_not_store() -> None:
    with pytest.raises(ScopeError, match="lone surrogate"):
        Scope.session("chat\udcff")


@pytest.mark.slow
@given(text=HOSTILE)
@hsettings(max_examples=60, deadline=None)
def test_any_hostile_query_works_or_fails_typed(text: str) -> None:
    with Tether(db=":memory:", embedder=HashEmbedder()) as t:
        t.add(text="Battery warranty: two years from purchase.", title="Warranty")
        for mode in ("hybrid", "lexical", "vector"):
            t.search(text, mode=mode, scope="global")  # never raises: any text is a query
        try:
            result = t.retrieve(text, scope="global")
        except InvalidArgument:
            assert not text.strip() or len(text) > 8000  # empty: the only refusal
        else:
            (row,) = t.retrieval_log()
            assert row.retrieval_id == result.retrieval_id


def test_the_cli_takes_undecodable_argv(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    runner = CliRunner()
    added = runner.invoke(app, ["add", "--db", db, str(_text_file(tmp_path))])
    assert added.exit_code == 0, added.output
    # What Python makes of the argv bytes b"battery \xff": a lone surrogate.
    result = runner.invoke(app, ["search", "battery \udcff", "--db", db, "--scope", "global"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "Warranty" in result.output


def _text_file(tmp_path: Path) -> Path:
    path = tmp_path / "warranty.md"
    path.write_text("# Warranty\n\nBattery warranty: two years from purchase.\n")
    return path


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("hostile-cli")
    db = str(folder / "cli.db")
    with Tether(db=db) as t:
        t.add(text="Battery warranty: two years from purchase.", title="Warranty")
    return db


@pytest.mark.slow
@given(text=HOSTILE.filter(lambda s: "\x00" not in s))  # argv cannot hold NUL
@hsettings(max_examples=40, deadline=None)
def test_any_hostile_argument_to_the_cli_is_an_answer_or_one_error_line(
    cli_store: str, text: str
) -> None:
    runner = CliRunner()
    for command in (["search", text], ["context", text], ["docs", "show", text or "x"]):
        result = runner.invoke(app, [*command, "--db", cli_store, "--scope", "global"][
            : len(command) + 2 if command[0] == "docs" else None
        ])  # fmt: skip
        # 2: a usage error (text that starts with '-' reads as an option)
        assert result.exit_code in (0, 1, 2), (command, result.output)
        assert not isinstance(result.exception, Exception) or isinstance(
            result.exception, SystemExit
        ), (command, result.exception)
        if result.exit_code == 1:
            assert result.output.strip().startswith("error:"), result.output
