"""Governance (tether.policy and the [policy] settings): tags validated at index time,
tag filters and the policy's exclusions in SQL, source priorities in the rerank, the
deterministic query builder, require_grounding's failure modes, the audit log (ids and
sanitized queries only) and citation checks."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

from helpers import SlowQueryEmbedder
from tether import (
    ConfigurationError,
    DocumentNotFound,
    Filters,
    GenerationBlocked,
    IndexingFailed,
    InvalidArgument,
    InvalidTag,
    RetrievalTimeout,
    Scope,
    Settings,
    StoreError,
    Tags,
    Tether,
    TextSource,
)
from tether.cli import _shell as cli_shell
from tether.cli import app
from tether.models import Exclusions, RetrievalResult
from tether.policy import (
    MAX_BUILT_QUERY_CHARS,
    MAX_FIELD_CHARS,
    CitationReport,
    Grounding,
    attach_retrieval,
    build_query,
    require_grounding,
    retrieval_metadata,
    validate_tags,
    verify_citations,
)
from tether.retrieve.fts import term_coverage
from tether.retrieve.pipeline import MAX_QUESTION_CHARS
from tether.sanitize import MAX_LOGGED_QUERY_CHARS, sanitize_query
from tether.settings import PolicySettings
from tether.store import scope_sql
from tether.testing import HashEmbedder

LOG_COLUMNS = {
    "id",
    "retrieval_id",
    "created_at",
    "query",
    "scope",
    "filters",
    "chunk_ids",
    "document_ids",
    "outcome",
    "reason",
    "workspace_id",  # the scope's workspace (an id), so the log reads per workspace in SQL
    "citations",  # [n] -> document and chunk ids, so a draft can be verified later
    "asked_by",  # the API key that asked (an id), so a global row is shown to its asker
}
OUTCOMES = {"grounded", "ungrounded", "skipped", "blocked", "error"}
# Text that must never be treated as anything but words.
HOSTILE_QUERIES = [
    "status:active gasket",
    "source_type:policy gasket",
    'gasket" OR 1=1 --',
    "gasket'); DROP TABLE rag_documents; --",
    "gasket' OR d.status = 'draft' OR '",
    "gasket NEAR(draft pending) OR status:* AND {status}: ^draft",
    'gasket* OR "draft" NOT active',
    "gasket UNION SELECT content FROM rag_chunks --",
]


# -- helpers ------------------------------------------------------------------------------


def load_settings(*, rag: dict[str, Any] | None = None, **policy: Any) -> Settings:
    return Settings.load(rag=rag or {}, policy=policy)


@contextmanager
def store(
    path: Path,
    *,
    embedder: HashEmbedder | None = None,
    rag: dict[str, Any] | None = None,
    **policy: Any,
) -> Iterator[Tether]:
    with Tether(db=path, settings=load_settings(rag=rag, **policy), embedder=embedder) as t:
        yield t


def recent(days: int = 1) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).date().isoformat()


def doc_ids(hits: list[Any]) -> set[str]:
    return {h.document_id for h in hits}


def chunk_ids_of(t: Tether, *document_ids: str) -> set[int]:
    return {c.id for d in document_ids for c in t.chunks(d)}


def ranked_documents(result: RetrievalResult) -> set[str]:
    """Every document among the reranked candidates of a retrieval."""
    return {row[1] for row in result.debug.get("ranked", [])}


def log_rows(path: Path) -> list[dict[str, Any]]:
    """Every column of every row of the audit table, read with plain sqlite3."""
    con = sqlite3.connect(path)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute("SELECT * FROM rag_retrieval_log ORDER BY id")]
    finally:
        con.close()


def log_count(path: Path) -> int:
    return len(log_rows(path))


def floats_in(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from floats_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from floats_in(v)


class BrokenEmbedder(HashEmbedder):
    """Embeds documents; fails at query time with an error that is not an EmbeddingError."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.broken:
            raise RuntimeError("the embedding backend crashed")
        return super().embed_batch(texts)


# -- 1. tags ------------------------------------------------------------------------------


def _future_date() -> date:
    return (datetime.now(UTC) + timedelta(days=3)).date()


def _future_datetime() -> datetime:
    return datetime.now(UTC) + timedelta(hours=2)


BAD_TAGS: list[tuple[str, Any, str]] = [
    ("unknown tag", lambda: {"colour": "red"}, "colour"),
    ("unknown tag among good ones", lambda: {"domain": "global", "owner": "x"}, "owner"),
    ("domain not a slug", lambda: {"domain": "Human Resources"}, "domain"),
    ("domain with a slash", lambda: {"domain": "hr/eu"}, "domain"),
    ("domain not text", lambda: {"domain": 5}, "domain"),
    ("domain empty", lambda: {"domain": "   "}, "domain"),
    ("source type", lambda: {"source_type": "wiki"}, "source_type"),
    ("source type wrong case", lambda: {"source_type": "Policy"}, "source_type"),
    ("last_verified words", lambda: {"last_verified": "yesterday"}, "last_verified"),
    ("last_verified impossible date", lambda: {"last_verified": "2024-13-45"}, "last_verified"),
    ("last_verified US format", lambda: {"last_verified": "03/05/2024"}, "last_verified"),
    ("last_verified a number", lambda: {"last_verified": 20240305}, "last_verified"),
    ("last_verified future date", lambda: {"last_verified": _future_date()}, "last_verified"),
    (
        "last_verified future date text",
        lambda: {"last_verified": _future_date().isoformat()},
        "last_verified",
    ),
    ("last_verified future time", lambda: {"last_verified": _future_datetime()}, "last_verified"),
    (
        "last_verified future time text",
        lambda: {"last_verified": _future_datetime().isoformat()},
        "last_verified",
    ),
    ("version empty", lambda: {"version": ""}, "version"),
    ("version too long", lambda: {"version": "v" * 201}, "version"),
    ("version a bool", lambda: {"version": True}, "version"),
    ("project_id control char", lambda: {"project_id": "p1\nDROP"}, "project_id"),
    ("project_id a list", lambda: {"project_id": ["p1"]}, "project_id"),
]


def test_domains_are_open_by_default_and_closed_by_configuration(db_path: Path) -> None:
    with store(db_path) as t:
        (added,) = t.add(text="Leave requests go to the HR portal.", source="hr.md",
                         workspace_id="acme", tags={"domain": "hr"})  # fmt: skip
        assert t.get_document(added.document_id).tags.domain == "hr"
    teams = ["freshdesk-ai", "help-nearby", "futurehub", "global"]
    with store(db_path, domains=teams) as t:
        with pytest.raises(IndexingFailed) as info:
            t.add(text="Pricing.", source="m.md", workspace_id="acme", tags={"domain": "hr"})
        assert "'hr' is not one of freshdesk-ai, help-nearby, futurehub, global" in str(info.value)
        (added,) = t.add(text="Pricing.", source="m.md", workspace_id="acme",
                         tags={"domain": "futurehub"})  # fmt: skip
        assert added.status == "indexed"


@pytest.mark.parametrize(
    ("tags", "field"), [(t, f) for _, t, f in BAD_TAGS], ids=[c for c, _, _ in BAD_TAGS]
)
def test_every_tag_field_is_validated_at_index_time(db_path: Path, tags: Any, field: str) -> None:
    with store(db_path) as t:
        with pytest.raises(IndexingFailed) as info:
            t.add(text="Coolant pump maintenance.", title="Pump", tags=tags())
        error = info.value.results[0].error
        assert isinstance(error, InvalidTag)
        assert error.field == field
        assert f"tag {field!r}" in str(error)
        assert "Pump" in str(error)  # names the source
        assert info.value.results[0].status == "failed"
        assert t.documents() == []  # nothing stored


def test_validate_tags_names_the_field_directly() -> None:
    policy = PolicySettings()
    with pytest.raises(InvalidTag) as info:
        validate_tags("doc-1", {"source_type": "blog"}, policy)
    assert (info.value.field, info.value.source) == ("source_type", "doc-1")
    with pytest.raises(InvalidTag) as info:
        validate_tags("doc-1", ["domain", "global"], policy)  # type: ignore[arg-type]
    assert info.value.field == "tags"
    assert validate_tags("doc-1", None, policy) is None
    assert validate_tags("doc-1", {}, policy) is None  # no tag given: untagged
    # A Tags instance is validated like a dict.
    with pytest.raises(InvalidTag) as info:
        validate_tags("doc-1", Tags(domain="No Where"), policy)
    assert info.value.field == "domain"


def test_a_bad_tag_fails_only_its_own_source(db_path: Path) -> None:
    sources = [
        TextSource("Alpha coolant notes.", "Alpha", document_id="a", tags={"domain": "global"}),
        TextSource("Beta coolant notes.", "Beta", document_id="b", tags={"domain": "Mars!"}),
        TextSource("Gamma coolant notes.", "Gamma", document_id="c", tags={"version": "3"}),
    ]
    with store(db_path) as t:
        results = t.add(sources, on_error="collect")
        assert [r.status for r in results] == ["indexed", "failed", "indexed"]
        assert isinstance(results[1].error, InvalidTag) and results[1].error.field == "domain"
        assert results[1].document_id is None
        assert doc_ids(t.search("coolant", k=100)) == {"a", "c"}

    with store(db_path.with_name("raise.db")) as t:
        with pytest.raises(IndexingFailed) as info:
            t.add(sources)
        assert [r.status for r in info.value.results] == ["indexed", "failed", "indexed"]
        assert info.value.results[1].error.field == "domain"  # type: ignore[union-attr]
        assert {d.id for d in t.documents()} == {"a", "c"}


def test_configured_domains_close_the_open_default(db_path: Path) -> None:
    with store(db_path, domains=["alpha", "beta"]) as t:
        t.add(text="Alpha domain text.", title="A", tags={"domain": "alpha"})
        assert t.documents()[0].tags == Tags(domain="alpha")
        with pytest.raises(IndexingFailed) as info:
            t.add(text="Global domain text.", title="G", tags={"domain": "global"})
        assert info.value.results[0].error.field == "domain"  # type: ignore[union-attr]
        assert "alpha, beta" in str(info.value.results[0].error)
    assert load_settings(domains=[]).policy.domains == []  # open: any slug


@pytest.mark.parametrize(
    ("given_value", "stored"),
    [
        (date(2024, 3, 5), "2024-03-05"),
        ("2024-03-05", "2024-03-05"),
        (" 2024-03-05 ", "2024-03-05"),
        (datetime(2024, 3, 5, 10, 30, tzinfo=timezone(timedelta(hours=2))), "2024-03-05T08:30:00Z"),
        (
            datetime(2024, 3, 5, 23, 30, tzinfo=timezone(timedelta(hours=-3))),
            "2024-03-06T02:30:00Z",
        ),
        (datetime(2024, 3, 5, 10, 30), "2024-03-05T10:30:00Z"),  # naive: UTC
        (datetime(2024, 3, 5, 10, 30, 15, 999_999, tzinfo=UTC), "2024-03-05T10:30:15Z"),
        ("2024-03-05T10:30:00+02:00", "2024-03-05T08:30:00Z"),
        ("2024-03-05T10:30:00Z", "2024-03-05T10:30:00Z"),
        ("2024-03-05T10:30:00", "2024-03-05T10:30:00Z"),
        ("2024-03-05 10:30", "2024-03-05T10:30:00Z"),
    ],
)
def test_last_verified_is_normalized(db_path: Path, given_value: Any, stored: str) -> None:
    assert validate_tags("x", {"last_verified": given_value}, PolicySettings()) == Tags(
        last_verified=stored
    )
    with store(db_path) as t:
        [result] = t.add(text="Verified text.", title="V", tags={"last_verified": given_value})
        assert result.status == "indexed"
        assert t.get_document(result.document_id).tags.last_verified == stored  # type: ignore[arg-type, union-attr]


def test_tag_values_are_stripped_and_versions_may_be_numbers() -> None:
    tags = validate_tags(
        "x",
        {"domain": " global ", "source_type": "guide ", "version": 2, "project_id": " p1"},
        PolicySettings(),
    )
    assert tags == Tags(domain="global", source_type="guide", version="2", project_id="p1")
    assert validate_tags("x", {"version": 1.5}, PolicySettings()).version == "1.5"  # type: ignore[union-attr]
    assert validate_tags("x", {"version": "v" * 200}, PolicySettings()).version == "v" * 200  # type: ignore[union-attr]


FULL_TAGS = {
    "domain": "futurehub",
    "source_type": "guide",
    "last_verified": "2024-01-02",
    "version": "1.0",
}


@pytest.mark.parametrize("missing", ["domain", "source_type", "last_verified", "version"])
def test_require_tags_makes_a_missing_tag_an_error(db_path: Path, missing: str) -> None:
    tags = {k: v for k, v in FULL_TAGS.items() if k != missing}
    with store(db_path, require_tags=True) as t:
        results = t.add(
            [
                TextSource("Missing one tag.", "Partial", tags=tags),
                TextSource("All tags present.", "Complete", tags=FULL_TAGS),
            ],
            on_error="collect",
        )
        assert [r.status for r in results] == ["failed", "indexed"]
        error = results[0].error
        assert isinstance(error, InvalidTag) and error.field == missing
        assert "require_tags" in str(error)
        assert [d.title for d in t.documents()] == ["Complete"]


def test_require_tags_rejects_untagged_documents_and_set_tags(db_path: Path) -> None:
    with store(db_path, require_tags=True) as t:
        [result] = t.add(text="No tags at all.", title="Bare", on_error="collect")
        assert result.status == "failed"
        assert isinstance(result.error, InvalidTag) and result.error.field == "domain"
        # project_id is never required.
        [ok] = t.add(text="Tagged.", title="Tagged", tags=FULL_TAGS)
        assert ok.status == "indexed"
        with pytest.raises(InvalidTag) as info:
            t.set_tags(ok.document_id, {**FULL_TAGS, "version": None})  # type: ignore[arg-type]
        assert info.value.field == "version"
        assert t.get_document(ok.document_id).tags.version == "1.0"  # type: ignore[arg-type, union-attr]


def test_untagged_documents_are_fine_without_require_tags(db_path: Path) -> None:
    with store(db_path) as t:
        [result] = t.add(text="Untagged coolant notes.", title="Bare")
        assert result.status == "indexed"
        document = t.get_document(result.document_id)  # type: ignore[arg-type]
        assert document.tags is None and document.source_type is None
        assert doc_ids(t.search("coolant")) == {result.document_id}


def test_tags_are_stored_and_new_tags_update_in_place(db_path: Path) -> None:
    embedder = HashEmbedder()
    text = "Coolant pump maintenance schedule. " * 40
    with store(db_path, embedder=embedder, rag={"chunk_size": 200, "chunk_overlap": 20}) as t:
        [first] = t.add(
            text=text, title="Pump", document_id="pump", tags={**FULL_TAGS, "project_id": "p1"}
        )
        assert first.status == "indexed" and first.chunk_count > 1
        document = t.get_document("pump")
        assert document.tags == Tags(
            domain="futurehub",
            source_type="guide",
            last_verified="2024-01-02",
            version="1.0",
            project_id="p1",
        )
        assert document.source_type == "guide"
        chunks_before = [(c.id, c.content) for c in t.chunks("pump")]
        embedded_before = len(embedder.embedded_texts)

        [same] = t.add(
            text=text, title="Pump", document_id="pump", tags={**FULL_TAGS, "project_id": "p1"}
        )
        assert same.status == "skipped"

        new_tags = {"domain": "global", "source_type": "policy", "version": "2.0"}
        [updated] = t.add(text=text, title="Pump", document_id="pump", tags=new_tags)
        assert updated.status == "updated"
        assert updated.chunk_count == first.chunk_count
        assert t.get_document("pump").tags == Tags(
            domain="global", source_type="policy", version="2.0"
        )
        # No re-chunking, no re-embedding.
        assert [(c.id, c.content) for c in t.chunks("pump")] == chunks_before
        assert len(embedder.embedded_texts) == embedded_before
        # The new tags are what filters see, in both searches.
        for mode in ("lexical", "vector"):
            hits = t.search(
                "coolant pump", k=100, mode=mode, filters=Filters(source_types=("policy",))
            )
            assert doc_ids(hits) == {"pump"}
            assert not t.search(
                "coolant pump", k=100, mode=mode, filters=Filters(source_types=("guide",))
            )


def test_readding_with_empty_tags_is_skipped(db_path: Path) -> None:
    with store(db_path) as t:
        [first] = t.add(text="Coolant notes.", title="Notes", tags={})
        assert first.status == "indexed"
        [again] = t.add(text="Coolant notes.", title="Notes", tags={})
        assert again.status == "skipped"


def test_set_tags_validates_and_keeps_status(db_path: Path) -> None:
    with store(db_path) as t:
        t.add(
            text="Draft coolant notes.",
            title="Draft",
            document_id="d",
            status="draft",
            tags={"domain": "global"},
        )
        with pytest.raises(InvalidTag) as info:
            t.set_tags("d", {"domain": "global", "source_type": "memo"})
        assert info.value.field == "source_type"
        assert t.get_document("d").tags == Tags(domain="global")
        with pytest.raises(InvalidTag) as info:
            t.set_tags("d", {"last_verified": "soon"})
        assert info.value.field == "last_verified"
        document = t.set_tags("d", Tags(domain="help-nearby", last_verified="2024-02-03"))
        assert document.tags == Tags(domain="help-nearby", last_verified="2024-02-03")
        assert document.status == "draft"
        with pytest.raises(DocumentNotFound):
            t.set_tags("nope", {"domain": "global"})


def test_status_is_validated(db_path: Path) -> None:
    with store(db_path) as t:
        [result] = t.add(text="Some text.", title="S", status="published", on_error="collect")  # type: ignore[arg-type]
        assert isinstance(result.error, InvalidTag) and result.error.field == "status"
        t.add(text="Real text.", title="R", document_id="r")
        with pytest.raises(InvalidArgument):
            t.set_status("r", "published")  # type: ignore[arg-type]
        with pytest.raises(DocumentNotFound):
            t.approve("nope")
        assert t.get_document("r").status == "active"


# -- 2. filters in SQL --------------------------------------------------------------------

TAGGED = [
    ("fd-guide", {"domain": "freshdesk-ai", "project_id": "p1", "source_type": "guide"}),
    ("fd-policy", {"domain": "freshdesk-ai", "project_id": "p2", "source_type": "policy"}),
    ("hn-guide", {"domain": "help-nearby", "project_id": "p1", "source_type": "guide"}),
    ("gl-contract", {"domain": "global", "source_type": "contract"}),
    ("untagged", None),
]
ALL_TAGGED = {d for d, _ in TAGGED}


@pytest.fixture
def tagged(db_path: Path) -> Iterator[Tether]:
    with store(db_path, embedder=HashEmbedder()) as t:
        t.add(
            [
                TextSource(
                    f"The widget calibration of {d} uses a torque wrench.",
                    d,
                    document_id=d,
                    tags=tags,
                )
                for d, tags in TAGGED
            ]
        )
        yield t


FILTER_CASES = [
    (Filters(domains=("freshdesk-ai",)), {"fd-guide", "fd-policy"}),
    (Filters(domains=("freshdesk-ai", "help-nearby")), {"fd-guide", "fd-policy", "hn-guide"}),
    (Filters(project_ids=("p1",)), {"fd-guide", "hn-guide"}),
    (Filters(project_ids=(None,)), {"gl-contract", "untagged"}),
    (Filters(project_ids=("p2", None)), {"fd-policy", "gl-contract", "untagged"}),
    (Filters(source_types=("guide",)), {"fd-guide", "hn-guide"}),
    (Filters(source_types=["contract", "policy"]), {"fd-policy", "gl-contract"}),  # type: ignore[arg-type]
    (Filters(domains=("freshdesk-ai",), source_types=("guide",)), {"fd-guide"}),
    (Filters(domains=("help-nearby",), project_ids=("p2",)), set()),
    (Filters(domains=("futurehub",)), set()),
    (Filters(), ALL_TAGGED),
]


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_search_filters_by_tags(tagged: Tether, mode: str) -> None:
    assert doc_ids(tagged.search("widget calibration", k=1000, mode=mode)) == ALL_TAGGED
    for filters, expected in FILTER_CASES:
        hits = tagged.search("widget calibration", k=1000, mode=mode, filters=filters)
        assert doc_ids(hits) == expected, filters
        if filters.domains is not None:
            assert hits.debug["filters"]["domains"] == list(filters.domains)


def test_retrieve_filters_by_tags(tagged: Tether) -> None:
    for filters, expected in FILTER_CASES:
        result = tagged.retrieve("widget calibration torque", filters=filters)
        assert ranked_documents(result) == expected, filters
        assert {c.document_id for c in result.citations} <= expected
        assert result.grounded == bool(expected)
        assert result.debug["filters"] == filters.to_dict()


def test_filters_are_validated(tagged: Tether) -> None:
    for bad in (
        {"domains": "global"},
        {"domains": ()},
        {"domains": (None,)},
        {"source_types": (1,)},
        {"project_ids": "p1"},
    ):
        with pytest.raises(InvalidArgument):
            Filters(**bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        tagged.search("widget", filters={"domains": ("global",)})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        tagged.retrieve("widget", filters={"domains": ("global",)})  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["lexical", "vector"])
def test_filters_combine_with_scopes(db_path: Path, mode: str) -> None:
    with store(db_path, embedder=HashEmbedder()) as t:
        t.add(
            text="Widget torque for acme guide.",
            title="a1",
            document_id="acme-guide",
            workspace_id="acme",
            tags={"domain": "futurehub", "source_type": "guide"},
        )
        t.add(
            text="Widget torque for acme policy.",
            title="a2",
            document_id="acme-policy",
            workspace_id="acme",
            tags={"domain": "global", "source_type": "policy"},
        )
        t.add(
            text="Widget torque for other guide.",
            title="o1",
            document_id="other-guide",
            workspace_id="other",
            tags={"domain": "futurehub", "source_type": "guide"},
        )
        t.add(
            text="Widget torque in the library.",
            title="g1",
            document_id="global-guide",
            tags={"domain": "futurehub", "source_type": "guide"},
        )
        t.create_session("chat", workspace_id="acme")
        t.attach("acme-guide", "chat")
        t.attach("global-guide", "chat")
        t.attach("acme-policy", "chat")
        futurehub = Filters(domains=("futurehub",))

        def found(**scope: Any) -> set[str]:
            return doc_ids(t.search("widget torque", k=1000, mode=mode, filters=futurehub, **scope))

        assert found(scope="workspace", workspace_id="acme") == {"acme-guide"}
        assert found(scope="workspace", workspace_id="other") == {"other-guide"}
        assert found(scope="global") == {"global-guide"}
        assert found(scope="session", session_id="chat") == {"acme-guide", "global-guide"}
        result = t.retrieve(
            "widget torque",
            scope="session",
            session_id="chat",
            filters=Filters(source_types=("policy",)),
        )
        assert ranked_documents(result) == {"acme-policy"}


def test_scope_sql_binds_every_value() -> None:
    values = [
        "x' OR '1'='1",
        "p'; DROP TABLE rag_documents; --",
        'dq" OR 1=1 --',
        "zz-domain%",
        "qq_project",
        ":scope_id",
        "1) OR (1",
    ]
    for scope in (Scope.global_(), Scope.workspace("w'); --"), Scope.session("s' OR 1=1")):
        sql, params = scope_sql(
            scope,
            Filters(domains=tuple(values), project_ids=(*values, None), source_types=tuple(values)),
            Exclusions(log_cutoff="2024-01-01' OR 1=1 --", unverified_urls=True),
        )
        for value in [*values[:5], scope.id, "2024-01-01"]:
            assert value not in sql
        bound = list(params.values())
        for value in values:
            assert bound.count(value) == 3  # once per tag column
        assert params["scope_id"] == scope.id
        assert params["log_cutoff"] == "2024-01-01' OR 1=1 --"
        # Every placeholder has a value, and every value a placeholder.
        assert set(re.findall(r":(\w+)", sql)) == set(params)
        assert "d.project_id IS NULL" in sql


def test_hostile_filter_values_match_nothing(tagged: Tether) -> None:
    hostile = ("x' OR '1'='1", "') OR 1=1 --", "%", "*", "freshdesk-ai' --")
    for mode in ("lexical", "vector", "hybrid"):
        for filters in (
            Filters(domains=hostile),
            Filters(project_ids=hostile),
            Filters(source_types=hostile),
        ):
            assert not tagged.search("widget calibration", k=1000, mode=mode, filters=filters)
    assert tagged.store.scope_document_ids(Scope.global_(), Filters(domains=hostile)) == []
    assert len(tagged.documents()) == len(TAGGED)  # nothing was dropped either


# -- 3. exclusions at SQL time --------------------------------------------------------------


@pytest.fixture
def statuses(db_path: Path) -> Iterator[Tether]:
    with store(db_path, embedder=HashEmbedder()) as t:
        t.add(text="Gasket replacement: published procedure.", title="Pub", document_id="pub")
        t.add(
            text="Gasket replacement: unpublished draft.",
            title="Drf",
            document_id="drf",
            status="draft",
        )
        t.add(
            text="Gasket replacement: a user submission.",
            title="Pen",
            document_id="pen",
            status="pending",
        )
        yield t


def visible(t: Tether, query: str = "gasket replacement", **kwargs: Any) -> set[str]:
    """Documents that reach any stage: every search mode at k=1000 and retrieval's
    reranked candidates."""
    found: set[str] = set()
    for mode in ("lexical", "vector", "hybrid"):
        found |= doc_ids(t.search(query, k=1000, mode=mode, **kwargs))
    found |= ranked_documents(t.retrieve(query, **kwargs))
    return found


def test_drafts_and_pending_documents_are_never_searched(statuses: Tether) -> None:
    t = statuses
    assert visible(t) == {"pub"}
    assert visible(t, "unpublished draft submission") == {"pub"}
    assert t.get_document("drf").status == "draft"
    assert t.get_document("pen").status == "pending"
    result = t.retrieve("unpublished draft")
    assert result.debug["candidates"]["fused"] == 1

    assert t.approve("pen").status == "active"
    assert visible(t) == {"pub", "pen"}
    assert t.set_status("drf", "active").status == "active"
    assert visible(t) == {"pub", "pen", "drf"}
    t.set_status("pub", "draft")
    assert visible(t) == {"pen", "drf"}
    t.set_status("pen", "pending")
    assert visible(t) == {"drf"}


def test_readding_a_draft_with_a_new_status_updates_it(statuses: Tether) -> None:
    t = statuses
    [result] = t.add(
        text="Gasket replacement: unpublished draft.",
        title="Drf",
        document_id="drf",
        status="active",
    )
    assert result.status == "updated"
    assert visible(t) == {"pub", "drf"}


def test_readding_a_draft_without_a_status_keeps_it_a_draft(statuses: Tether) -> None:
    """A plain re-add (no status=) must not publish a draft or approve a submission."""
    t = statuses
    for doc_id, title, text in (
        ("drf", "Drf", "Gasket replacement: unpublished draft."),
        ("pen", "Pen", "Gasket replacement: user submission."),
    ):
        before = t.get_document(doc_id).status
        [result] = t.add(text=text, title=title, document_id=doc_id)
        assert t.get_document(doc_id).status == before != "active", result
    assert visible(t) == {"pub"}
    # New content for a draft keeps it a draft too.
    t.add(text="Gasket replacement: a rewritten draft.", title="Drf", document_id="drf")
    assert t.get_document("drf").status == "draft"
    assert visible(t) == {"pub"}


def test_log_retention_uses_last_verified_then_indexed_at(db_path: Path) -> None:
    logs = {
        "old-log": {"source_type": "log", "last_verified": recent(60)},
        "fresh-log": {"source_type": "log", "last_verified": recent(5)},
        "old-indexed-log": {"source_type": "log"},
        "new-log": {"source_type": "log"},
        "reverified-log": {"source_type": "log", "last_verified": recent(1)},
        "old-guide": {"source_type": "guide", "last_verified": recent(400)},
        "old-untagged": None,
    }
    with store(db_path, embedder=HashEmbedder(), log_retention_days=30) as t:
        t.add(
            [
                TextSource(f"Boiler pressure reading {d}.", d, document_id=d, tags=tags)
                for d, tags in logs.items()
            ]
        )
    long_ago = (datetime.now(UTC) - timedelta(days=60)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    con = sqlite3.connect(db_path)
    con.execute(
        "UPDATE rag_documents SET indexed_at = ?, created_at = ? WHERE id IN"
        " ('old-indexed-log', 'reverified-log', 'old-untagged')",
        (long_ago, long_ago),
    )
    con.commit()
    con.close()
    expected = {"fresh-log", "new-log", "reverified-log", "old-guide", "old-untagged"}
    with store(db_path, embedder=HashEmbedder(), log_retention_days=30) as t:
        assert visible(t, "boiler pressure reading") == expected
        assert {row[0] for row in t.retrieve("boiler pressure").debug["ranked"]}.isdisjoint(
            chunk_ids_of(t, "old-log", "old-indexed-log")
        )
    with store(db_path, embedder=HashEmbedder(), log_retention_days=1000) as t:
        assert visible(t, "boiler pressure reading") == set(logs)
    with store(db_path, embedder=HashEmbedder(), log_retention_days=3) as t:
        assert visible(t, "boiler pressure reading") == {
            "new-log",
            "reverified-log",
            "old-guide",
            "old-untagged",
        }
    with pytest.raises(ConfigurationError):
        load_settings(log_retention_days=0)


WEB = [
    ("https-bare", "https://example.com/a", None),
    ("http-bare", "http://example.com/b", None),
    ("https-upper", "HTTPS://EXAMPLE.COM/C", None),
    ("https-typed", "https://example.com/d", {"source_type": "guide", "domain": "global"}),
    ("https-verified", "https://example.com/e", {"last_verified": "2024-05-01"}),
    ("link-bare", None, {"source_type": "link"}),
    ("link-verified", None, {"source_type": "link", "last_verified": "2024-05-01"}),
    ("artifact", "artifact:42", None),
    ("plain", None, None),
]
UNVERIFIED_WEB = {"https-bare", "http-bare", "https-upper", "https-typed", "link-bare"}


def add_web(t: Tether) -> None:
    t.add(
        [
            TextSource(f"Firmware update notes from {d}.", d, document_id=d, source=src, tags=tags)
            for d, src, tags in WEB
        ]
    )


def test_unverified_web_documents_are_excluded(db_path: Path) -> None:
    with store(db_path, embedder=HashEmbedder()) as t:
        add_web(t)
        assert t.get_document("https-bare").source_path == "https://example.com/a"
        everything = {d for d, _, _ in WEB}
        assert visible(t, "firmware update notes") == everything - UNVERIFIED_WEB
        # Verifying a web document (a tag change) brings it in, in every search.
        t.set_tags("https-bare", {"last_verified": recent(2)})
        assert visible(t, "firmware update notes") == everything - UNVERIFIED_WEB | {"https-bare"}
    with store(db_path, embedder=HashEmbedder(), exclude_unverified_urls=False) as t:
        assert visible(t, "firmware update notes") == {d for d, _, _ in WEB}


def test_exclusions_combine_with_filters_and_scopes(db_path: Path) -> None:
    with store(db_path, embedder=HashEmbedder()) as t:
        t.add(
            text="Firmware for acme.",
            title="w",
            document_id="acme-web",
            workspace_id="acme",
            source="https://acme.example/fw",
            tags={"domain": "global"},
        )
        t.add(
            text="Firmware for acme draft.",
            title="d",
            document_id="acme-draft",
            workspace_id="acme",
            status="draft",
            tags={"domain": "global"},
        )
        t.add(
            text="Firmware for acme ok.",
            title="o",
            document_id="acme-ok",
            workspace_id="acme",
            tags={"domain": "global"},
        )
        kwargs = {
            "scope": "workspace",
            "workspace_id": "acme",
            "filters": Filters(domains=("global",)),
        }
        assert visible(t, "firmware acme", **kwargs) == {"acme-ok"}


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_query_text_cannot_unexclude(statuses: Tether, query: str) -> None:
    assert visible(statuses, query) == {"pub"}
    assert statuses.get_document("drf").status == "draft"
    assert len(statuses.documents()) == 3


def test_metadata_and_tag_values_cannot_unexclude(db_path: Path) -> None:
    hostile_tags = {
        "version": "x' OR '1'='1",
        "project_id": "p'; UPDATE rag_documents SET status = 'active'; --",
        "domain": "global",
        "source_type": "policy",
    }
    hostile_metadata = {
        "status": "active",
        "priority": 1,
        "x": "') OR 1=1 --",
        "source_type": "guide",
        "last_verified": "2024-01-01",
    }
    with store(db_path, embedder=HashEmbedder()) as t:
        t.add(text="Gasket replacement published.", title="Pub", document_id="pub")
        t.add(
            text="Gasket replacement hostile draft.",
            title="x' OR 1=1 --",
            document_id="drf'; --",
            status="draft",
            tags=hostile_tags,
            metadata=hostile_metadata,
        )
        t.add(
            text="Gasket replacement hostile web.",
            title="web",
            document_id="web",
            source="https://x.example/' OR d.last_verified IS NULL --",
            metadata={"last_verified": "2024-01-01"},
        )
        assert t.get_document("drf'; --").tags.project_id == hostile_tags["project_id"]  # type: ignore[union-attr]
        assert visible(t) == {"pub"}
        assert visible(t, filters=Filters(project_ids=(hostile_tags["project_id"],))) == set()
        assert visible(t, filters=Filters(domains=("global",))) == set()
        assert t.get_document("drf'; --").status == "draft"
        assert {d.status for d in t.documents()} == {"active", "draft"}


_hostile_text = st.text(
    alphabet=st.sampled_from(list("'\";-)(*%_:=^ORANDSELECTdraftactive\\/ 0123456789")),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip())


@hsettings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(project=_hostile_text, version=_hostile_text, meta=_hostile_text, query=_hostile_text)
def test_hostile_values_never_unexclude_a_draft(
    statuses: Tether, project: str, version: str, meta: str, query: str
) -> None:
    t = statuses
    [result] = t.add(
        text=f"Gasket replacement draft {len(t.documents())} zz.",
        title=meta,
        status="draft",
        metadata={"note": meta, "status": "active"},
        tags={"project_id": project, "version": version},
    )
    assert result.status == "indexed"
    drafts = {d.id for d in t.documents() if d.status != "active"}
    for mode in ("lexical", "vector"):
        for q in (f"gasket {query}", query):
            for filters in (None, Filters(project_ids=(project,)), Filters(domains=(meta,))):
                hits = t.search(q, k=1000, mode=mode, filters=filters)
                assert doc_ids(hits) <= {"pub"}
    assert ranked_documents(t.retrieve(f"gasket {query}")) <= {"pub"}
    assert {d.id for d in t.documents() if d.status != "active"} == drafts


# -- 4. priorities ------------------------------------------------------------------------


def test_source_type_priorities_reach_the_rerank(db_path: Path) -> None:
    priorities = {"policy": 0.9, "guide": -0.5, "link": 0.25}
    docs = {
        "p": ({"source_type": "policy"}, None, 0.9),
        "g": ({"source_type": "guide"}, None, -0.5),
        "l": ({"source_type": "link", "last_verified": "2024-01-01"}, None, 0.25),
        "c": ({"source_type": "contract"}, None, 0.0),  # not in the setting: 0
        "u": (None, None, 0.0),
        "override": ({"source_type": "policy"}, {"priority": -0.7}, -0.7),
        "clamped": ({"source_type": "guide"}, {"priority": 5}, 1.0),
        "not-a-number": ({"source_type": "policy"}, {"priority": "high"}, 0.9),
    }
    rag = {"rerank": {"priority_weight": 0.2}, "min_relevance": 0.0}
    with store(db_path, rag=rag, priorities=priorities) as t:
        # Equal text and title: the same fused score, so priority alone decides the order.
        t.add(
            [
                TextSource(
                    "Valve torque values for the plant.",
                    "Plant sheet",
                    document_id=d,
                    tags=tags,
                    metadata=meta,
                )
                for d, (tags, meta, _) in docs.items()
            ]
        )
        result = t.retrieve("valve torque values")
        factors = result.debug["rerank"]["factors"]
        by_doc = {row[1]: row[0] for row in result.debug["ranked"]}
        assert set(by_doc) == set(docs)
        for doc, (_, _, priority) in docs.items():
            assert factors[by_doc[doc]]["priority"] == pytest.approx(round(0.2 * priority, 4))
        order = [row[1] for row in result.debug["ranked"]]
        assert order[0] == "clamped" and order[-1] == "override"


def test_default_priorities_put_policies_first(db_path: Path) -> None:
    with store(db_path, rag={"min_relevance": 0.0}) as t:
        t.add(
            [
                TextSource(
                    "Valve torque values.",
                    st_,
                    document_id=st_,
                    tags={"source_type": st_, "last_verified": recent(1)},
                )
                for st_ in ("log", "link", "guide", "policy")
            ]
        )
        result = t.retrieve("valve torque values")
        weight = t.settings.rag.rerank.priority_weight
        factors = result.debug["rerank"]["factors"]
        defaults = PolicySettings().priorities
        for chunk, doc, *_ in result.debug["ranked"]:
            assert factors[chunk]["priority"] == pytest.approx(round(weight * defaults[doc], 4))
        assert [row[1] for row in result.debug["ranked"]][:2] == ["policy", "guide"]


@pytest.mark.parametrize(
    "policy",
    [
        {"priorities": {"wiki": 0.5}},
        {"priorities": {"guide": 1.5}},
        {"priorities": {"log": -1.01}},
        {"priorities": {"guide": "high"}},
        {"max_chunks": 11},
        {"max_chunks": 0},
        {"min_relevance": 1.5},
        {"timeout": 0},
        {"unknown_key": True},
    ],
)
def test_invalid_policy_settings_are_configuration_errors(policy: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.load(policy=policy)
    assert "policy" in str(info.value)


def test_policy_settings_from_toml_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "tether.toml"
    toml.write_text(
        '[policy]\nrequire_tags = true\ndomains = ["a", "b"]\n[policy.priorities]\nguide = 0.5\n'
    )
    settings = Settings.load(toml)
    assert settings.policy.require_tags and settings.policy.domains == ["a", "b"]
    assert settings.policy.priorities == {"guide": 0.5}
    monkeypatch.setenv("TETHER_POLICY__MAX_CHUNKS", "4")
    assert Settings.load(toml).policy.max_chunks == 4
    toml.write_text("[policy.priorities]\nblog = 0.5\n")
    with pytest.raises(ConfigurationError):
        Settings.load(toml)


# -- 5. build_query -----------------------------------------------------------------------

EVENT = {
    "type": "incident",
    "title": "Pump failure on line 3",
    "summary": "The coolant pump stopped after a pressure spike.",
    "error": "E-PRESSURE-42",
    "keywords": ["pump", "coolant", "pressure", "pump"],
    "components": ["line-3"],
}
STATE = {"task": "triage", "step": "diagnose", "project_id": "futurehub", "domain": "ops"}


def test_build_query_reads_the_documented_fields_in_order() -> None:
    query = build_query(EVENT, STATE)
    assert query == (
        "incident Pump failure on line 3 The coolant pump stopped after a pressure spike."
        " E-PRESSURE-42 coolant line-3 pressure pump"
        " (task triage; step diagnose; project id futurehub; domain ops)"
    )
    # Reversed dict orders, a keyword list in another order and as a tuple: the same.
    shuffled_event = {k: EVENT[k] for k in reversed(list(EVENT))}
    shuffled_event["keywords"] = ("pressure", "pump", "coolant")
    shuffled_state = {k: STATE[k] for k in reversed(list(STATE))}
    assert build_query(shuffled_event, shuffled_state) == query
    # Undocumented fields are not read.
    noisy = {**EVENT, "password": "hunter2", "notes": "zebra", "payload": {"a": 1}}
    assert build_query(noisy, {**STATE, "history": ["zebra"], "user": "bob"}) == query
    # The first present field of a group wins.
    assert build_query({"title": "Primary", "subject": "Secondary"}, {}) == "Primary"
    assert build_query({"subject": "Secondary", "name": "Third"}, {}) == "Secondary"
    assert build_query({"message": "Last", "description": "First"}, {}) == "First"
    assert build_query({"title": "A", "subject": None, "summary": None}, {"task": None}) == "A"
    assert build_query({"title": 404}, {"step": 2.5}) == "404 (step 2.5)"


_field_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
_keywords = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20), max_size=6)
_event = st.fixed_dictionaries(
    {},
    optional={
        **{
            name: _field_text
            for name in (
                "type",
                "event_type",
                "kind",
                "title",
                "subject",
                "name",
                "summary",
                "description",
                "body",
                "text",
                "message",
                "error",
                "error_code",
                "status",
            )
        },
        **{name: _keywords for name in ("keywords", "tags", "labels", "components")},
        "noise": _field_text,
        "extra": st.integers(),
    },
)
_state = st.fixed_dictionaries(
    {}, optional={name: _field_text for name in ("task", "step", "project_id", "domain", "x")}
)


@hsettings(max_examples=150, deadline=None)
@given(event=_event, state=_state, seed=st.integers(0, 2**32 - 1))
def test_build_query_is_a_pure_function_of_event_and_state(
    event: dict[str, Any], state: dict[str, Any], seed: int
) -> None:
    rng = random.Random(seed)

    def shuffled(d: dict[str, Any]) -> dict[str, Any]:
        keys = list(d)
        rng.shuffle(keys)
        out = {}
        for k in keys:
            v = d[k]
            if isinstance(v, list):
                v = list(v)
                rng.shuffle(v)
                v = rng.choice([v, tuple(v), set(v)])
            out[k] = v
        return out

    try:
        query = build_query(event, state)
    except InvalidArgument:
        with pytest.raises(InvalidArgument):
            build_query(shuffled(event), shuffled(state))
        return
    assert query == build_query(shuffled(event), shuffled(state))
    assert query == build_query(dict(event), dict(state))
    noise_free = {k: v for k, v in event.items() if k not in ("noise", "extra")}
    assert query == build_query(noise_free, {k: v for k, v in state.items() if k != "x"})
    assert 0 < len(query) <= MAX_BUILT_QUERY_CHARS
    assert any(ch.isalnum() for ch in query)
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", query)
    assert query == " ".join(query.split())


SECRETS = {
    "email": "jane.doe@example.com",
    "openai": "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "aws": "AKIAABCDEFGHIJKLMNOP",
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    ),
    "hex": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "password": "hunter2hunter2",
    "bearer": "abcDEF123456ghiJKL",
    "card": "4111 1111 1111 1111",
}


def test_build_query_masks_secrets() -> None:
    event = {
        "title": f"Login fails for {SECRETS['email']}",
        "summary": (
            f"Key {SECRETS['openai']} and {SECRETS['github']} and {SECRETS['aws']};"
            f" session {SECRETS['jwt']}; digest {SECRETS['hex']};"
            f" password={SECRETS['password']}; Authorization: Bearer {SECRETS['bearer']};"
            f" card {SECRETS['card']}"
        ),
        "keywords": [SECRETS["email"], "login"],
    }
    query = build_query(event, {"task": f"reply to {SECRETS['email']}"})
    for name, secret in SECRETS.items():
        assert secret not in query, name
    assert "hunter2" not in query and "abcDEF" not in query
    for mask in ("[EMAIL]", "[API_KEY]", "[JWT]", "[TOKEN]", "[SECRET]", "[NUMBER]"):
        assert mask in query
    assert "Login fails" in query and "login" in query


def test_build_query_caps_lengths() -> None:
    long_title = "alpha " * 400
    query = build_query({"title": long_title}, {})
    assert len(query) <= MAX_FIELD_CHARS and query.endswith("…")
    big = {name: f"{name} " + "word " * 200 for name in ("type", "title", "summary", "error")}
    big["keywords"] = [f"k{i}" * 30 for i in range(50)]
    query = build_query(big, {name: "state " * 100 for name in ("task", "step", "domain")})
    assert len(query) <= MAX_BUILT_QUERY_CHARS
    assert query.startswith("type word") and query.endswith("…")
    # A secret that straddles a cut is still masked, never half-kept.
    query = build_query({"title": "x " * 140 + SECRETS["openai"]}, {})
    assert "sk-proj" not in query and "abcdefghij" not in query
    # Control characters are dropped, whitespace collapsed.
    assert build_query({"title": "pump\x00\x07  \n\t failure\x1b"}, {}) == "pump failure"


@pytest.mark.parametrize(
    ("event", "state"),
    [
        (["title", "x"], {}),
        ("title: pump", {}),
        (None, {}),
        ({"title": "pump"}, ["task"]),
        ({"title": "pump"}, None),
        ({"title": {"text": "pump"}}, {}),
        ({"title": ["pump"]}, {}),
        ({"title": True}, {}),
        ({"title": b"pump"}, {}),
        ({"keywords": "pump, valve"}, {}),
        ({"keywords": {"pump": 1}}, {}),
        ({"keywords": ["pump", None]}, {}),
        ({"keywords": ["pump", ["valve"]]}, {}),
        ({"title": "pump"}, {"task": {"a": 1}}),
        ({"title": "pump"}, {"project_id": False}),
        ({}, {}),
        ({"notes": "pump failure"}, {"history": "pump"}),
        ({"title": "  ", "summary": "!!! ???"}, {}),
        ({"title": "\x00\x01"}, {}),
        ({"keywords": ["", " "]}, {}),
    ],
)
def test_build_query_rejects_invalid_input(event: Any, state: Any) -> None:
    with pytest.raises(InvalidArgument):
        build_query(event, state)


def test_build_query_state_alone_is_searchable() -> None:
    assert build_query({}, {"task": "refunds"}) == "(task refunds)"


# -- 6. require_grounding -----------------------------------------------------------------

PUMP = "Coolant pump maintenance: replace the impeller seal every spring."
FORMS = [
    "with",
    "async with",
    "decorator",
    "decorator plain",
    "async decorator",
    "async decorator plain",
]


def guarded(form: str, t: Tether, question: Any, ran: list[Any], **kwargs: Any) -> Any:
    """Run a guarded generation of one of the FORMS; ``ran`` gets what it received."""
    if form == "with":
        with require_grounding(t, question, **kwargs) as grounding:
            ran.append(grounding)
        return grounding
    if form == "async with":

        async def main() -> Grounding:
            async with require_grounding(t, question, **kwargs) as grounding:
                ran.append(grounding)
            return grounding

        return asyncio.run(main())
    if form == "decorator":

        @require_grounding(t, **kwargs)
        def draft(*, question: str, grounding: Grounding) -> str:
            ran.append(grounding)
            return "drafted"

        assert draft(question=question) == "drafted"
        return ran[-1]
    if form == "decorator plain":

        @require_grounding(t, query=lambda q: q, **kwargs)
        def draft_plain(q: str) -> str:
            ran.append(None)
            return "drafted"

        assert draft_plain(question) == "drafted"
        return None
    if form == "async decorator":

        @require_grounding(t, **kwargs)
        async def adraft(*, question: str, grounding: Grounding) -> str:
            await asyncio.sleep(0)
            ran.append(grounding)
            return "drafted"

        assert asyncio.run(adraft(question=question)) == "drafted"
        return ran[-1]
    assert form == "async decorator plain"

    @require_grounding(t, query=lambda q: q, **kwargs)
    async def adraft_plain(q: str) -> str:
        ran.append(None)
        return "drafted"

    assert asyncio.run(adraft_plain(question)) == "drafted"
    return None


@pytest.fixture
def pump_store(db_path: Path) -> Iterator[Tether]:
    with store(db_path) as t:
        t.add(
            text=PUMP,
            title="Pump manual",
            document_id="pump",
            tags={"domain": "futurehub", "source_type": "guide"},
        )
        yield t


def test_a_guard_takes_the_conversation_and_only_raises_the_threshold(pump_store: Tether) -> None:
    """``history`` makes a follow-up standalone before the guarded retrieval; a guard's
    ``min_relevance`` can raise ``policy.min_relevance`` but never lower it."""
    turns = [
        {"role": "user", "content": "How often is the coolant pump impeller seal replaced?"},
        {"role": "assistant", "content": "Every spring [1]."},
    ]
    follow_up = "and what about its maintenance?"
    grounding = require_grounding(pump_store, history=turns).run(follow_up)
    standalone = grounding.result.debug["standalone"]
    assert standalone["changed"] and "pump" in standalone["question"].lower()
    assert grounding.document_ids == ("pump",)
    with pytest.raises(GenerationBlocked):
        require_grounding(pump_store, min_relevance=1.0).run("coolant pump impeller seal")
    lowered = require_grounding(pump_store, min_relevance=0.0)
    assert lowered._arguments()["min_relevance"] == pump_store.settings.policy.min_relevance


@pytest.mark.parametrize("form", FORMS)
def test_grounded_generation_runs_with_its_grounding(
    pump_store: Tether, db_path: Path, form: str
) -> None:
    ran: list[Any] = []
    grounding = guarded(form, pump_store, "coolant pump impeller seal", ran)
    assert len(ran) == 1
    if form in ("decorator plain", "async decorator plain"):
        assert ran == [None]
        [row] = pump_store.retrieval_log()
        assert row.outcome == "grounded" and row.document_ids == ["pump"]
        return
    assert isinstance(grounding, Grounding) and ran[0] is grounding
    assert grounding.result.grounded
    assert grounding.document_ids == ("pump",)
    assert grounding.chunk_ids == grounding.result.selected_chunk_ids
    assert set(grounding.chunk_ids) == chunk_ids_of(pump_store, "pump")
    assert grounding.context.startswith("[1] Pump manual") and "impeller seal" in grounding.context
    [row] = pump_store.retrieval_log()
    assert row.retrieval_id == grounding.retrieval_id == grounding.result.retrieval_id
    assert (row.outcome, row.reason) == ("grounded", None)
    assert row.chunk_ids == list(grounding.chunk_ids)
    assert grounding.metadata() == retrieval_metadata(grounding.result)


@pytest.mark.parametrize("form", FORMS)
def test_no_results_block_the_generation(pump_store: Tether, form: str) -> None:
    ran: list[Any] = []
    with pytest.raises(GenerationBlocked) as info:
        guarded(form, pump_store, "zebra migration routes", ran)
    assert ran == []
    blocked = info.value
    assert blocked.reason == "no_results"
    assert "no results" in blocked.advisory and len(blocked.advisory) > 20
    assert isinstance(blocked.result, RetrievalResult) and not blocked.result.grounded
    assert blocked.result.context == ""
    [row] = pump_store.retrieval_log()
    assert row.retrieval_id == blocked.retrieval_id == blocked.result.retrieval_id
    assert (row.outcome, row.reason) == ("blocked", "no results")


def test_an_empty_scope_blocks_with_advice(db_path: Path) -> None:
    with store(db_path) as t:
        t.create_workspace("acme")
        with (
            pytest.raises(GenerationBlocked) as info,
            require_grounding(t, "pump seal", scope="workspace", workspace_id="acme"),
        ):
            pytest.fail("must not run")
        assert info.value.reason == "no_results"
        assert "no documents" in info.value.advisory
        # The global library is empty too: nothing wider to search, only documents to add.
        assert info.value.result.suggested_scope is None
        assert "the global library holds none" in (info.value.result.guidance or "")
        t.add(text="The kettle boils a litre of water.", title="Kettle")  # -> global
        with (
            pytest.raises(GenerationBlocked) as info,
            require_grounding(t, "pump seal", scope="workspace", workspace_id="acme"),
        ):
            pytest.fail("must not run")
        assert info.value.result.suggested_scope == "global"


@pytest.mark.parametrize("form", ["with", "async with", "decorator", "async decorator"])
def test_below_policy_min_relevance_blocks(db_path: Path, form: str) -> None:
    question = "coolant pump window garden"  # 2 of 4 terms in PUMP (common words: no veto)
    assert term_coverage(question, PUMP) == 0.5
    with store(db_path, rag={"min_relevance": 0.1}, min_relevance=0.6) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        assert t.retrieve(question).grounded  # rag.min_relevance lets it through
        ran: list[Any] = []
        with pytest.raises(GenerationBlocked) as info:
            guarded(form, t, question, ran)
        assert ran == []
        assert info.value.reason == "no_results"
        assert "min_relevance" in info.value.advisory
        assert info.value.result.debug["relevance"]["min_relevance"] == 0.6
        assert info.value.result.debug["relevance"]["below_min"]
        rows = t.retrieval_log()
        assert [r.outcome for r in rows] == ["blocked", "grounded"]
        assert rows[0].reason == "no chunk above min_relevance"
        # At 0.4 it is grounded (half the terms of a one-chunk store: evidence 0.44).
    with store(db_path, rag={"min_relevance": 0.1}, min_relevance=0.4) as t:
        assert guarded(form, t, question, []).document_ids == ("pump",)


@pytest.mark.parametrize("form", ["with", "async with", "decorator", "async decorator"])
def test_a_timeout_blocks_and_logs_an_error(
    db_path: Path, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = SlowQueryEmbedder(delay=1.0)
    with store(db_path, embedder=embedder, timeout=0.05) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        t.warmup()  # a model loads once, outside any budget; then every query is slow
        embedder.slow = True
        ran: list[Any] = []
        caplog.set_level(logging.ERROR, logger="tether.retrieve")
        started = time.perf_counter()
        with pytest.raises(GenerationBlocked) as info:
            guarded(form, t, f"coolant pump seal ({form})", ran)
        if not form.startswith("async"):  # (asyncio.run waits for its threads on exit)
            assert time.perf_counter() - started < 0.8  # did not wait for the embedder (1 s)
        assert ran == []
        assert info.value.reason == "timeout"
        assert "0.05s" in info.value.advisory and "Retry" in info.value.advisory
        assert isinstance(info.value.__cause__, RetrievalTimeout)
        errors = [
            r for r in caplog.records if r.name == "tether.retrieve" and r.levelno == logging.ERROR
        ]
        assert len(errors) == 1 and info.value.retrieval_id in errors[0].getMessage()
        [row] = t.retrieval_log()
        assert row.retrieval_id == info.value.retrieval_id
        assert row.outcome == "blocked" and row.reason.startswith("timeout")
        assert row.chunk_ids == [] and row.document_ids == []


def test_a_timeout_outside_a_guard_is_a_retrieval_timeout(db_path: Path) -> None:
    embedder = SlowQueryEmbedder(delay=0.3)
    with store(db_path, embedder=embedder) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        embedder.slow = True
        with pytest.raises(RetrievalTimeout) as info:
            t.retrieve("coolant pump seal", timeout=0.05)
        [row] = t.retrieval_log()
        assert row.retrieval_id == info.value.retrieval_id
        assert row.outcome == "error" and row.reason.startswith("timeout")
        with pytest.raises(InvalidArgument):
            t.retrieve("coolant pump", timeout=0)


def test_tiny_policy_timeout_blocks(db_path: Path) -> None:
    embedder = SlowQueryEmbedder(delay=0.05)
    with store(db_path, embedder=embedder, timeout=0.001) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        embedder.slow = True
        with pytest.raises(GenerationBlocked) as info, require_grounding(t, "coolant pump seal"):
            pytest.fail("must not run")
        assert info.value.reason == "timeout"


INVALID_QUESTIONS = [
    ("", "empty"),
    ("   \n ", "empty"),
    ("x" * (MAX_QUESTION_CHARS + 1), "limit"),
    (42, "text|question"),
    (b"pump", "text|question"),
    (["pump"], "text|question"),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("question", "says"),
    INVALID_QUESTIONS,
    ids=["empty", "blank", "too-long", "int", "bytes", "list"],
)
def test_an_invalid_query_is_invalid_argument(
    pump_store: Tether, db_path: Path, form: str, question: Any, says: str
) -> None:
    ran: list[Any] = []
    with pytest.raises(InvalidArgument, match=says) as info:
        guarded(form, pump_store, question, ran)
    assert not isinstance(info.value, GenerationBlocked)
    assert ran == []
    assert log_count(db_path) == 0  # refused before anything ran


def test_a_query_at_the_limit_is_accepted(pump_store: Tether) -> None:
    # Exactly at the limit, cut at a word boundary (a cut word would be a missing term).
    question = ("coolant pump " * 700)[:MAX_QUESTION_CHARS].rsplit(" ", 1)[0]
    question = question.ljust(MAX_QUESTION_CHARS)
    assert require_grounding(pump_store, question).run(question).document_ids == ("pump",)
    [row] = pump_store.retrieval_log()
    assert len(row.query) <= MAX_LOGGED_QUERY_CHARS


def test_require_grounding_needs_a_question(pump_store: Tether) -> None:
    with pytest.raises(InvalidArgument), require_grounding(pump_store):
        pytest.fail("must not run")

    @require_grounding(pump_store)
    def draft(x: int) -> int:
        return x

    with pytest.raises(InvalidArgument):
        draft(1)


def test_decorator_builds_the_query_from_event_and_state(pump_store: Tether) -> None:
    event = {
        "title": "Impeller seal",
        "keywords": ["coolant", "pump"],
        "reporter": "jane.doe@example.com",
    }
    state = {"task": "maintenance"}
    seen: list[Grounding] = []

    @require_grounding(pump_store, scope="global")
    def handle(event: dict[str, Any], state: dict[str, Any], *, grounding: Grounding) -> str:
        seen.append(grounding)
        return grounding.retrieval_id

    retrieval_id = handle(event, state)
    [row] = pump_store.retrieval_log()
    assert row.retrieval_id == retrieval_id == seen[0].retrieval_id
    assert row.query == build_query(event, state)
    assert seen[0].result.question == build_query(event, state)

    @require_grounding(pump_store, question="coolant pump seal")
    def fixed(*, grounding: Grounding) -> tuple[int, ...]:
        return grounding.chunk_ids

    assert fixed() == seen[0].chunk_ids


def test_require_grounding_applies_filters_and_scope(pump_store: Tether) -> None:
    t = pump_store
    with (
        pytest.raises(GenerationBlocked),
        require_grounding(t, "coolant pump seal", filters=Filters(domains=("global",))),
    ):
        pytest.fail("must not run")
    with require_grounding(
        t, "coolant pump seal", filters=Filters(domains=("futurehub",))
    ) as grounding:
        assert grounding.document_ids == ("pump",)
    t.add(text="Coolant pump seal in acme.", title="Acme", document_id="acme", workspace_id="acme")
    with require_grounding(
        t, "coolant pump seal", scope="workspace", workspace_id="acme"
    ) as grounding:
        assert grounding.document_ids == ("acme",)
    assert t.retrieval_log()[0].scope == {"kind": "workspace", "id": "acme"}
    assert t.retrieval_log()[1].filters["domains"] == ["futurehub"]


@pytest.mark.parametrize("form", ["with", "async with", "decorator", "async decorator"])
def test_a_store_error_blocks_with_reason_error(
    pump_store: Tether,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("disk I/O error reading tether.db")

    monkeypatch.setattr(pump_store.store, "search_lexical_scores", broken)
    ran: list[Any] = []
    caplog.set_level(logging.ERROR)
    with pytest.raises(GenerationBlocked) as info:
        guarded(form, pump_store, "coolant pump seal", ran)
    assert ran == []
    assert info.value.reason == "error"
    assert "StoreError" in info.value.advisory and "disk I/O" in info.value.advisory
    assert isinstance(info.value.__cause__, StoreError)
    assert any(r.levelno == logging.ERROR and r.name == "tether.policy" for r in caplog.records)
    [row] = pump_store.retrieval_log()
    assert (row.outcome, row.reason) == ("error", "StoreError")


@pytest.mark.parametrize("form", ["with", "async with"])
def test_a_real_sqlite_failure_blocks_with_reason_error(db_path: Path, form: str) -> None:
    with store(db_path) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        con = sqlite3.connect(db_path)
        con.execute("DROP TABLE rag_chunks_fts")
        con.commit()
        con.close()
        ran: list[Any] = []
        with pytest.raises(GenerationBlocked) as info:
            guarded(form, t, "coolant pump seal", ran)
        assert ran == [] and info.value.reason == "error"


def test_an_embedder_crash_blocks_with_reason_error(db_path: Path) -> None:
    embedder = BrokenEmbedder()
    with store(db_path, embedder=embedder) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        embedder.broken = True
        with pytest.raises(GenerationBlocked) as info, require_grounding(t, "coolant pump seal"):
            pytest.fail("must not run")
        assert info.value.reason == "error"


class TimeoutRaisingEmbedder(HashEmbedder):
    """Fails at query time with the builtin TimeoutError, as a socket timeout does."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.broken:
            raise TimeoutError("timed out")  # socket.timeout is TimeoutError
        return super().embed_batch(texts)


def test_a_timeout_error_inside_an_unbudgeted_retrieval_is_audited(db_path: Path) -> None:
    embedder = TimeoutRaisingEmbedder()
    with store(db_path, embedder=embedder) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        embedder.broken = True
        with pytest.raises(Exception) as info:  # any error but a TypeError
            t.retrieve("coolant pump seal")
        assert not isinstance(info.value, TypeError), info.value
        [row] = t.retrieval_log()
        assert row.outcome == "error"


def test_policy_max_chunks_caps_the_context(db_path: Path) -> None:
    rag = {"max_chunks": 30, "context_budget": 100_000, "rerank_top_n": 50}
    with store(db_path, rag=rag) as t:
        t.add(
            [
                TextSource(
                    f"Coolant pump note {i}: check seal number {i}.",
                    f"Note {i}",
                    document_id=f"n{i}",
                )
                for i in range(15)
            ]
        )
        assert len(t.retrieve("coolant pump seal").selected_chunk_ids) == 15
        with require_grounding(t, "coolant pump seal") as grounding:
            assert len(grounding.chunk_ids) == 10
            assert len(grounding.document_ids) == 10
            assert grounding.result.debug["context"]["max_chunks"] == 10
        assert len(retrieval_metadata(grounding.result)["chunk_ids"]) == 10
    with store(db_path, rag=rag, max_chunks=3) as t:
        with require_grounding(t, "coolant pump seal") as grounding:
            assert len(grounding.chunk_ids) == 3
        assert len(t.retrieval_log()[0].chunk_ids) == 3


# -- 7. the audit log ---------------------------------------------------------------------


def test_one_audit_row_per_retrieval_with_its_outcome(pump_store: Tether, db_path: Path) -> None:
    t = pump_store
    grounded = t.retrieve("coolant pump seal", scope="global")
    ungrounded = t.retrieve("zebra migration routes")
    skipped = t.retrieve("thanks!")
    async_grounded = asyncio.run(t.aretrieve("impeller seal"))
    with pytest.raises(GenerationBlocked) as blocked, require_grounding(t, "zebra stripes"):
        pass
    filtered = t.retrieve("coolant pump", filters=Filters(project_ids=("p1", None)))
    rows = list(reversed(t.retrieval_log()))
    expected = [
        (grounded.retrieval_id, "grounded", None),
        (ungrounded.retrieval_id, "ungrounded", "no results"),
        (skipped.retrieval_id, "skipped", skipped.debug["decision"]["reason"]),
        (async_grounded.retrieval_id, "grounded", None),
        (blocked.value.retrieval_id, "blocked", "no results"),
        (filtered.retrieval_id, "grounded", None),
    ]
    assert [(r.retrieval_id, r.outcome, r.reason) for r in rows] == expected
    assert len({r.retrieval_id for r in rows}) == 6
    assert all(re.fullmatch(r"[0-9a-f]{32}", r.retrieval_id) for r in rows)
    assert rows[0].query == "coolant pump seal"
    assert rows[0].scope == {"kind": "global", "id": "GLOBAL"}
    assert rows[0].filters == {}
    assert rows[0].chunk_ids == list(grounded.selected_chunk_ids)
    assert rows[0].document_ids == ["pump"]
    assert rows[1].chunk_ids == [] and rows[2].chunk_ids == []
    assert rows[5].filters == {
        "domains": None,
        "project_ids": ["p1", None],
        "source_types": None,
    }
    assert rows[2].reason and "thank" in rows[2].reason
    assert [r.outcome for r in t.retrieval_log(outcome="grounded")] == ["grounded"] * 3
    assert len(t.retrieval_log(limit=2)) == 2
    assert t.retrieval_log(limit=2)[0].retrieval_id == filtered.retrieval_id
    assert {r.outcome for r in rows} <= OUTCOMES
    # search() is not a retrieval: nothing is appended.
    t.search("coolant pump", k=5)
    assert log_count(db_path) == 6
    for bad in (0, -1, True, "5"):
        with pytest.raises(InvalidArgument):
            t.retrieval_log(limit=bad)  # type: ignore[arg-type]


def test_an_error_is_audited(db_path: Path) -> None:
    with store(db_path) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        con = sqlite3.connect(db_path)
        con.execute("DROP TABLE rag_chunks_fts")
        con.commit()
        con.close()
        with pytest.raises(sqlite3.OperationalError):
            t.retrieve("coolant pump seal")
        [row] = t.retrieval_log()
        assert (row.outcome, row.reason) == ("error", "OperationalError")
        assert row.query == "coolant pump seal" and row.chunk_ids == []


def test_the_audit_log_masks_secrets_and_caps_queries(pump_store: Tether) -> None:
    t = pump_store
    question = (
        f"coolant pump seal for {SECRETS['email']} with key {SECRETS['openai']}"
        f" password={SECRETS['password']} and Authorization: Bearer {SECRETS['bearer']}"
        f" token {SECRETS['github']} secret: 's3cr3t value'"
    )
    result = t.retrieve(question)
    assert result.question == question  # the caller's question is unchanged
    [row] = t.retrieval_log()
    for name, secret in SECRETS.items():
        assert secret not in row.query, name
    assert "s3cr3t" not in row.query
    for mask in ("[EMAIL]", "[API_KEY]", "[SECRET]", "[TOKEN]"):
        assert mask in row.query
    assert row.query.startswith("coolant pump seal for [EMAIL]")
    assert row.query == sanitize_query(question)

    long_question = "coolant pump " + "seal " * 1000 + SECRETS["email"]
    t.retrieve(long_question)
    logged = t.retrieval_log()[0].query
    assert len(logged) <= MAX_LOGGED_QUERY_CHARS and logged.endswith("…")
    assert logged.startswith("coolant pump seal seal")


_local = st.from_regex(r"[a-z0-9][a-z0-9._%+-]{0,15}", fullmatch=True)
_domain = st.from_regex(
    r"[a-z0-9]{1,10}(\.[a-z0-9]{1,8}){0,2}\.(com|org|io|de|co\.uk)", fullmatch=True
)
_words = st.lists(
    st.sampled_from(["pump", "seal", "reset", "the", "for", "how", "valve"]), max_size=8
).map(" ".join)


@hsettings(max_examples=150, deadline=None)
@given(
    local=_local,
    domain=_domain,
    key=st.from_regex(r"[A-Za-z0-9]{20,40}", fullmatch=True),
    password=st.from_regex(r"[A-Za-z0-9!#$%&*]{6,20}", fullmatch=True),
    before=_words,
    after=_words,
    padding=st.integers(0, 900),
)
def test_logged_queries_never_keep_secrets(
    local: str, domain: str, key: str, password: str, before: str, after: str, padding: int
) -> None:
    email = f"{local}@{domain}"
    question = (
        f"{before} {email} {'x ' * padding}sk-{key} password={password}"
        f" Authorization: Bearer {key} {after}"
    )
    logged = sanitize_query(question)
    assert len(logged) <= MAX_LOGGED_QUERY_CHARS
    assert email not in logged and f"@{domain}" not in logged
    assert f"sk-{key}" not in logged and key not in logged
    assert f"password={password}" not in logged
    assert "\n" not in logged and logged == " ".join(logged.split())


DISTINCT = {
    "alpha": "Zanzibar7 quartz coefficient equals forty two under nominal pressure.",
    "beta": "Quokka9 sapphire tolerance remains within eleven microns after annealing.",
    "gamma": "Vortex3 obsidian fixture must be torqued to ninety newton metres exactly.",
}


def test_the_audit_log_never_holds_text_vectors_or_scores(db_path: Path) -> None:
    embedder = HashEmbedder()
    rag = {"chunk_size": 120, "chunk_overlap": 10, "min_relevance": 0.0}
    results: list[RetrievalResult] = []
    with store(db_path, embedder=embedder, rag=rag) as t:
        t.add(
            [
                TextSource(
                    f"Turbine maintenance guide {d}. {text} " * 4,
                    f"Doc {d}",
                    document_id=d,
                    tags={"source_type": "guide"},
                )
                for d, text in DISTINCT.items()
            ]
        )
        results.append(t.retrieve("turbine maintenance guide"))
        results.append(t.retrieve("turbine maintenance", filters=Filters(domains=("global",))))
        with require_grounding(t, "turbine maintenance guide") as grounding:
            results.append(grounding.result)
        with pytest.raises(GenerationBlocked) as info, require_grounding(t, "unrelated marmalade"):
            pass
        if info.value.result is not None:
            results.append(info.value.result)
        chunks = [c for d in DISTINCT for c in t.chunks(d)]
        hits = t.search("turbine maintenance guide", k=50)
    assert results[0].grounded and len(results[0].selected_chunk_ids) > 3

    con = sqlite3.connect(db_path)
    vectors = [row[0] for row in con.execute("SELECT vector FROM rag_embeddings")]
    columns = [row[1] for row in con.execute("PRAGMA table_info(rag_retrieval_log)")]
    types: set[str] = set()
    for column in columns:
        query = f"SELECT DISTINCT typeof({column}) FROM rag_retrieval_log"
        types |= {r[0] for r in con.execute(query)}
    con.close()
    assert set(columns) == LOG_COLUMNS
    assert types <= {"text", "integer", "null"}  # no blob, no real
    assert vectors

    rows = log_rows(db_path)
    assert len(rows) == 4
    scores = {s for r in results for s in floats_in(r.debug)}
    scores |= {c.relevance for r in results for c in r.citations} | {h.score for h in hits}
    score_texts = {repr(s) for s in scores if not float(s).is_integer()}
    score_texts |= {f"{s:.4f}" for s in scores if not float(s).is_integer()}
    assert score_texts
    for row in rows:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", row["created_at"])
        for column, value in row.items():
            assert not isinstance(value, bytes | float), column
            if not isinstance(value, str):
                continue
            for chunk in chunks:
                assert chunk.content not in value
                words = chunk.content.split()
                for i in range(0, max(1, len(words) - 3)):
                    window = " ".join(words[i : i + 4])
                    if any(w in window for w in ("Zanzibar7", "Quokka9", "Vortex3")):
                        assert window not in value, (column, window)
            for secret in DISTINCT.values():
                assert secret.split()[0] not in value and secret[-30:] not in value
            for blob in vectors:
                assert blob.hex() not in value
                assert blob.decode("latin-1") not in value
                first = np.frombuffer(blob, dtype="<f4")
                for x in first[:8]:
                    if not float(x).is_integer():
                        assert repr(float(x)) not in value
            if column != "created_at":
                for text in score_texts:
                    assert text not in value, (column, text)
    # What the rows do hold: ids.
    assert json.loads(rows[0]["chunk_ids"]) == list(results[0].selected_chunk_ids)
    assert set(json.loads(rows[0]["document_ids"])) <= set(DISTINCT)


def test_audit_off_writes_nothing(db_path: Path) -> None:
    with store(db_path, audit=False) as t:
        t.add(text=PUMP, title="Pump manual", document_id="pump")
        result = t.retrieve("coolant pump seal")
        assert result.grounded and re.fullmatch(r"[0-9a-f]{32}", result.retrieval_id)
        t.retrieve("hello")
        with pytest.raises(GenerationBlocked), require_grounding(t, "zebra stripes"):
            pass
        with require_grounding(t, "coolant pump seal"):
            pass
        assert t.retrieval_log() == []
    assert log_count(db_path) == 0


def test_tether_log_cli(pump_store: Tether, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_shell.out, "width", 250)
    runner = CliRunner()
    empty = runner.invoke(app, ["log", "--db", str(db_path)])
    assert empty.exit_code == 0, empty.output
    assert "The audit log is empty." in empty.output
    assert json.loads(runner.invoke(app, ["log", "--db", str(db_path), "--json"]).output) == {
        "entries": []
    }

    grounded = pump_store.retrieve("coolant pump seal")
    with (
        pytest.raises(GenerationBlocked) as blocked,
        require_grounding(pump_store, f"zebra stripes for {SECRETS['email']}"),
    ):
        pass

    out = runner.invoke(app, ["log", "--db", str(db_path), "--json"])
    assert out.exit_code == 0, out.output
    entries = json.loads(out.output)["entries"]
    assert entries == [e.to_dict() for e in pump_store.retrieval_log()]
    assert [e["retrieval_id"] for e in entries] == [
        blocked.value.retrieval_id,
        grounded.retrieval_id,
    ]
    assert set(entries[0]) == {
        "retrieval_id",
        "created_at",
        "query",
        "scope",
        "filters",
        "chunk_ids",
        "document_ids",
        "outcome",
        "reason",
        "citations",
        "asked_by",
    }
    assert SECRETS["email"] not in out.output
    assert PUMP not in out.output and "impeller" not in out.output

    only = runner.invoke(app, ["log", "--db", str(db_path), "--json", "--outcome", "blocked"])
    assert [e["outcome"] for e in json.loads(only.output)["entries"]] == ["blocked"]
    one = runner.invoke(app, ["log", "--db", str(db_path), "--json", "--limit", "1"])
    assert len(json.loads(one.output)["entries"]) == 1

    text = runner.invoke(app, ["log", "--db", str(db_path)])
    assert text.exit_code == 0, text.output
    flat = re.sub(r"[\s│┃|─━┏┓┗┛┡┩└┘┌┐├┤┬┴┼╇╈]+", "", text.output)
    assert "blocked" in text.output and "grounded" in text.output
    assert "[EMAIL]" in flat and SECRETS["email"] not in flat
    assert "impeller" not in text.output
    bad = runner.invoke(app, ["log", "--db", str(db_path), "--limit", "0"])
    assert bad.exit_code != 0


# -- 8. citations ---------------------------------------------------------------------------


@pytest.fixture
def two_sources(db_path: Path) -> Iterator[tuple[Tether, RetrievalResult]]:
    with store(db_path) as t:
        t.add(
            text="Coolant pump seals are replaced every spring.", title="Pump", document_id="pump"
        )
        t.add(
            text="Coolant valve seals are checked every month.", title="Valve", document_id="valve"
        )
        result = t.retrieve("coolant seals")
        assert [c.number for c in result.citations] == [1, 2]
        yield t, result


def test_valid_citations_pass(two_sources: tuple[Tether, RetrievalResult]) -> None:
    _, result = two_sources
    chunk = result.selected_chunk_ids[0]
    doc = result.citations[1].document_id
    text = (
        "Pump seals are replaced each spring [1].\n"
        f"Valve seals are checked monthly [2], see [doc:{doc}] and [chunk:{chunk}].\n"
        f"Also [document: {doc}], [SOURCE:{doc}] and [Chunk: {chunk}]."
    )
    report = verify_citations(text, result)
    assert isinstance(report, CitationReport)
    assert report.ok and report.violations == ()
    assert report.cited_numbers == (1, 2)
    assert report.cited_documents == (doc,)
    assert report.cited_chunks == (chunk,)
    assert report.findings == 0
    assert verify_citations(text, Grounding(result)) == report
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_citations_are_verified_against_the_audit_row_alone(
    two_sources: tuple[Tether, RetrievalResult],
) -> None:
    """The audit row keeps how the retrieval numbered its sources (ids only), so a draft
    is checked against it exactly as against the result itself."""
    t, result = two_sources
    (row,) = t.retrieval_log(retrieval_id=result.retrieval_id)
    assert row.citations == [c.ids() for c in result.citations]
    assert set(row.citations[0]) == {"number", "document_id", "chunk_ids"}
    chunk, doc = result.selected_chunk_ids[0], result.citations[1].document_id
    for text in (f"Replaced [1], checked [2] [doc:{doc}] [chunk:{chunk}].",
                 "[3] [doc:nope] [chunk:999999] [1-2]"):  # fmt: skip
        assert verify_citations(text, row) == verify_citations(text, result)
    assert not verify_citations("[3]", row).ok


def test_unknown_citations_are_violations_with_lines(
    two_sources: tuple[Tether, RetrievalResult],
) -> None:
    _, result = two_sources
    text = (
        "Fine [1].\n"
        "Out of range [3] and [0].\n"
        "\n"
        "Unknown document [doc:nope].\n"
        "Unknown chunk [chunk:999999] and a good one [2]."
    )
    report = verify_citations(text, result)
    assert not report.ok
    assert [(v.kind, v.line) for v in report.violations] == [
        ("unknown_citation", 2),
        ("unknown_citation", 2),
        ("unknown_document", 4),
        ("unknown_chunk", 5),
    ]
    assert "[3]" in report.violations[0].detail and "nope" in report.violations[2].detail
    assert report.cited_numbers == (1, 3, 0, 2)
    assert report.cited_chunks == (999999,)
    data = report.to_dict()
    assert data["ok"] is False and data["violations"][3] == {
        "kind": "unknown_chunk",
        "detail": "chunk 999999 was not retrieved",
        "line": 5,
    }


def test_citations_against_an_ungrounded_result(
    two_sources: tuple[Tether, RetrievalResult],
) -> None:
    t, _ = two_sources
    empty = t.retrieve("zebra migration")
    assert not empty.grounded
    report = verify_citations("Claim [1].", empty)
    assert [v.kind for v in report.violations] == ["unknown_citation"]
    assert verify_citations("No citations at all.", empty).ok
    with pytest.raises(InvalidArgument):
        verify_citations(b"Claim [1].", empty)  # type: ignore[arg-type]


def test_review_mode_flags_uncited_findings(two_sources: tuple[Tether, RetrievalResult]) -> None:
    _, result = two_sources
    doc = result.citations[0].document_id
    bullets = (
        "Review of the maintenance plan:\n"
        "- Pump seals are replaced in spring [1].\n"
        "- Valve seals are never checked.\n"
        f"* Valve checks are monthly [doc:{doc}].\n"
        "• Impeller wear is unmonitored.\n"
        "1. Numbered finding with a source [2].\n"
        "2) Numbered finding without one.\n"
    )
    report = verify_citations(bullets, result, review=True)
    assert report.findings == 6
    assert [(v.kind, v.line) for v in report.violations] == [
        ("uncited_finding", 3),
        ("uncited_finding", 5),
        ("uncited_finding", 7),
    ]
    assert "never checked" in report.violations[0].detail
    # Without review, uncited findings are fine.
    assert verify_citations(bullets, result).ok

    paragraphs = (
        "The pump seals are replaced\nevery spring [1].\n"
        "\n"
        "The valve seals are not\nchecked at all.\n"
        "\n\n"
        "Monthly checks exist [2]."
    )
    report = verify_citations(paragraphs, result, review=True)
    assert report.findings == 3
    assert [(v.kind, v.line) for v in report.violations] == [("uncited_finding", 4)]

    mixed = "- Cited with a bad number [7].\n- Uncited."
    report = verify_citations(mixed, result, review=True)
    assert [(v.kind, v.line) for v in report.violations] == [
        ("unknown_citation", 1),
        ("uncited_finding", 2),
    ]
    assert verify_citations("", result, review=True) == CitationReport((), (), (), 0)


def test_retrieval_metadata_carries_ids_only(two_sources: tuple[Tether, RetrievalResult]) -> None:
    t, result = two_sources
    meta = retrieval_metadata(result)
    assert meta == {
        "retrieval_id": result.retrieval_id,
        "chunk_ids": list(result.selected_chunk_ids),
        "document_ids": [c.document_id for c in result.citations],
        "citations": [
            {"number": c.number, "document_id": c.document_id, "chunk_ids": list(c.chunk_ids)}
            for c in result.citations
        ],
    }
    dumped = json.dumps(meta)
    for c in result.citations:
        assert c.text not in dumped and c.title not in dumped
        assert repr(c.relevance) not in dumped or float(c.relevance).is_integer()
    for chunk in (c for d in ("pump", "valve") for c in t.chunks(d)):
        assert chunk.content not in dumped
    assert "seals" not in dumped and "Coolant" not in dumped

    draft = {"title": "Maintenance answer", "body": "Seals [1]."}
    attached = attach_retrieval(draft, result)
    assert attached == {**draft, "retrieval": meta}
    assert "retrieval" not in draft  # a copy
    assert attach_retrieval("Seals [1].", Grounding(result)) == {
        "content": "Seals [1].",
        "retrieval": meta,
    }
    assert Grounding(result).metadata() == meta
    # The ids match the audit log.
    [row] = t.retrieval_log()
    assert row.retrieval_id == meta["retrieval_id"]
    assert row.chunk_ids == meta["chunk_ids"]
    assert row.document_ids == sorted(meta["document_ids"])


# -- 8b. citations in the forms models write (lists, ranges, footnotes) ----------------------


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Seals [1, 2].", (1, 2)),
        ("Seals [1,2].", (1, 2)),
        ("Seals [1; 2].", (1, 2)),
        ("Seals [1-2].", (1, 2)),
        ("Seals [1–2].", (1, 2)),
        ("Seals [1 - 2].", (1, 2)),
        ("Seals [2-2].", (2,)),
        ("Seals [^1].", (1,)),
        ("Seals [1][2].", (1, 2)),
        ("Seals [2, 1-2].", (2, 1)),
        ("Seals [^2] and [1; 2] and [2].", (2, 1)),
    ],
)
def test_citation_lists_ranges_and_footnotes_are_read(
    two_sources: tuple[Tether, RetrievalResult], text: str, numbers: tuple[int, ...]
) -> None:
    _, result = two_sources
    report = verify_citations(text, result)
    assert report.ok, report.violations
    assert report.cited_numbers == numbers


@pytest.mark.parametrize(
    ("text", "details"),
    [
        ("Seals [1, 3].", ["[3] in [1, 3] is not a retrieved source"]),
        ("Seals [3,1].", ["[3] in [3,1] is not a retrieved source"]),
        (
            "Seals [1-4].",
            ["[3] in [1-4] is not a retrieved source", "[4] in [1-4] is not a retrieved source"],
        ),
        ("Seals [^7].", ["[7] in [^7] is not a retrieved source"]),
        ("Seals [1][5].", ["[5] is not a retrieved source"]),
        ("Seals [3, 3].", ["[3] in [3, 3] is not a retrieved source"]),
        (
            "Seals [0; 2, 3–4].",
            [f"[{n}] in [0; 2, 3–4] is not a retrieved source" for n in (0, 3, 4)],
        ),
    ],
)
def test_each_unknown_number_in_a_citation_list_is_flagged(
    two_sources: tuple[Tether, RetrievalResult], text: str, details: list[str]
) -> None:
    _, result = two_sources
    report = verify_citations("Fine [1].\n" + text, result)
    assert [v.detail for v in report.violations] == details
    assert {(v.kind, v.line) for v in report.violations} == {("unknown_citation", 2)}


@pytest.mark.parametrize(
    ("text", "words", "numbers"),
    [
        ("Seals [5-2].", ["5-2 in [5-2] is a reversed range; write [2-5]"], ()),
        ("Seals [2–1].", ["2–1 in [2–1] is a reversed range; write [1-2]"], ()),
        ("Seals [1-51].", ["1-51 in [1-51] spans 51 sources (at most 50)"], ()),
        ("Seals [1-9999].", ["1-9999 in [1-9999] spans 9999 sources"], ()),
        ("Seals [1, 9-2, 2].", ["9-2 in [1, 9-2, 2] is a reversed range"], (1, 2)),
    ],
)
def test_reversed_and_oversized_citation_ranges_are_violations(
    two_sources: tuple[Tether, RetrievalResult],
    text: str,
    words: list[str],
    numbers: tuple[int, ...],
) -> None:
    _, result = two_sources
    report = verify_citations(text, result)
    assert [v.kind for v in report.violations] == ["invalid_citation"] * len(words)
    for violation, expected in zip(report.violations, words, strict=True):
        assert violation.detail.startswith(expected)
    assert report.cited_numbers == numbers


def test_a_citation_range_of_fifty_is_expanded(
    two_sources: tuple[Tether, RetrievalResult],
) -> None:
    _, result = two_sources
    report = verify_citations("Seals [1-50].", result)
    assert report.cited_numbers == tuple(range(1, 51))
    assert [v.kind for v in report.violations] == ["unknown_citation"] * 48
    assert report.violations[0].detail == "[3] in [1-50] is not a retrieved source"


@pytest.mark.parametrize(
    "text",
    [
        "See [the pump manual](https://example.test/pump).",
        "- [ ] check the seals\n- [x] order new ones",
        "Use `a[7]` or ``b[7, 8]`` in code.",
        "```\nx = a[7]\ny = b[1, 9]\n```",
        "~~~python\n[3-4]\n~~~",
        "   ```\n[9]\n   ```",
        "```\n[9]\n~~~\n[9]",  # a ~~~ does not close a ``` block; unclosed runs to the end
        "````\n```\n[9]\n````",
        "Not citations: [12345], [1-2-3], [ 7 ], [^note], [7a], [1,], [-3].",
    ],
)
def test_citation_lookalikes_and_code_are_ignored(
    two_sources: tuple[Tether, RetrievalResult], text: str
) -> None:
    _, result = two_sources
    report = verify_citations(text, result)
    assert report.ok, report.violations
    assert report.cited_numbers == ()


def test_citations_after_code_keep_their_line_numbers_and_years_stay_citations(
    two_sources: tuple[Tether, RetrievalResult],
) -> None:
    _, result = two_sources
    text = "```\n[9]\n```\nOut of range [9] but `[8]` is code.\nSince [2024]."
    report = verify_citations(text, result)
    assert [(v.kind, v.line, v.detail) for v in report.violations] == [
        ("unknown_citation", 4, "[9] is not a retrieved source"),
        ("unknown_citation", 5, "[2024] is not a retrieved source"),
    ]
    assert report.cited_numbers == (9, 2024)


@pytest.mark.parametrize(
    ("finding", "kinds"),
    [
        ("- Seals are replaced in spring [1, 2].", []),
        ("- Seals are replaced in spring [1; 2].", []),
        ("- Seals are replaced in spring [1-2].", []),
        ("- Seals are replaced in spring [1–2].", []),
        ("- Seals are replaced in spring [^1].", []),
        ("- Seals are replaced in spring [1][2].", []),
        ("- Seals are replaced in spring [1, 3].", ["unknown_citation"]),
        ("- Seals are replaced in spring [5-2].", ["invalid_citation"]),
        ("- Seals are replaced in spring, see `a[1]`.", ["uncited_finding"]),
        ("- [x] Seals are replaced in spring.", ["uncited_finding"]),
        ("- See [the manual](https://example.test/1).", ["uncited_finding"]),
    ],
)
def test_review_mode_accepts_list_range_and_footnote_citations(
    two_sources: tuple[Tether, RetrievalResult], finding: str, kinds: list[str]
) -> None:
    _, result = two_sources
    report = verify_citations(f"Review:\n{finding}", result, review=True)
    assert report.findings == 1
    assert [v.kind for v in report.violations] == kinds
    assert all(v.line == 2 for v in report.violations)


def test_review_mode_does_not_count_code_blocks_as_findings(
    two_sources: tuple[Tether, RetrievalResult],
) -> None:
    _, result = two_sources
    text = "Seals are replaced in spring [1, 2].\n\n```\n- not a finding\n```\n"
    report = verify_citations(text, result, review=True)
    assert report.findings == 1 and report.ok
