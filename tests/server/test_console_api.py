"""What the web console is built on, over real HTTP on loopback: the console's files and
their headers, ``GET /v1/me``, ``explain`` on retrieve (inside the scope, and only when
asked), and the audit log's time window."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import as_key, make_settings
from tether import InvalidArgument, Tether
from tether.testing import HashEmbedder


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Tether]:
    with Tether(db=tmp_path / "t.db", settings=make_settings(), embedder=HashEmbedder()) as t:
        t.create_session("acme-chat", workspace_id="acme")
        t.add(text="The valve seat of the acme pump is replaced every 500 hours.",
              title="Acme pump", workspace_id="acme", session_id="acme-chat")  # fmt: skip
        t.add(text="The valve seat of the rival pump is secret: 12 bar.",
              title="Rival pump", workspace_id="rival")  # fmt: skip
        t.add(text="Every valve seat is checked with a torque wrench.", title="Global guide")
        yield t


def test_the_console_is_served_from_the_package_with_a_same_origin_policy(
    client: httpx.Client,
) -> None:
    root = client.get("/", follow_redirects=False)
    assert root.status_code == 307 and root.headers["location"] == "/console/"
    page = client.get("/console/")
    assert page.status_code == 200 and '<script type="module" src="console.js">' in page.text
    for name in ("console.js", "console.css"):
        served = client.get(f"/console/{name}")
        assert served.status_code == 200 and len(served.content) > 1000
        policy = served.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert served.headers["x-content-type-options"] == "nosniff"
    assert client.get("/console/nothing.js").status_code == 404
    # The API's own responses are not the console's: no console headers there.
    assert "content-security-policy" not in client.get("/healthz").headers


def test_me_says_what_a_key_may_read_and_write(client: httpx.Client, keys: dict[str, str]) -> None:
    me = client.get("/v1/me", headers=as_key(keys["acme"])).json()
    assert me["admin"] is False and me["workspaces"] == ["acme"] and me["may_write"] is True
    reader = client.get("/v1/me", headers=as_key(keys["reader"])).json()
    assert reader["read_only"] is True and reader["may_write"] is False
    admin = client.get("/v1/me", headers=as_key(keys["admin"])).json()
    assert admin["admin"] is True and admin["workspaces"] is None
    assert client.get("/v1/me").status_code == 401  # keys exist: one is required


def test_explain_lists_each_query_s_candidates_inside_the_scope_only_when_asked(
    client: httpx.Client, keys: dict[str, str], store: Tether
) -> None:
    body = {"query": "How often is the valve seat replaced?", "scope": "workspace",
            "workspace_id": "acme"}  # fmt: skip
    plain = client.post("/v1/retrieve", json=body, headers=as_key(keys["acme"])).json()
    assert plain["debug"] is None
    debugged = client.post("/v1/retrieve", json={**body, "debug": True},
                           headers=as_key(keys["acme"])).json()  # fmt: skip
    assert "explain" not in debugged["debug"]  # debug alone does not pay for it
    out = client.post("/v1/retrieve", json={**body, "explain": True},
                      headers=as_key(keys["acme"])).json()  # fmt: skip
    explain = out["debug"]["explain"]
    (query,) = explain["queries"]
    assert query["query"] == body["query"] and query["method"] == "hybrid"
    named = {cid for side in ("lexical", "vector", "fused") for cid, _ in query[side]}
    assert named and named == {int(c) for c in explain["chunks"]}
    # Every candidate is a chunk of the scope: the acme document (the rival one and the
    # global guide share its words, and are absent).
    assert {c["title"] for c in explain["chunks"].values()} == {"Acme pump"}
    lexical = [score for _, score in query["lexical"]]
    assert lexical == sorted(lexical, reverse=True)  # best first, higher is better
    assert out["selected_chunk_ids"]  # grounded: what it cites came from the fused list
    assert set(out["selected_chunk_ids"]) <= {cid for cid, _ in explain["fused"]}
    # The library gives the same record.
    result = store.retrieve(body["query"], workspace_id="acme", explain=True)
    assert result.debug["explain"]["chunks"] == explain["chunks"]
    assert "explain" not in store.retrieve(body["query"], workspace_id="acme").debug


def test_the_audit_log_reads_a_time_window(
    client: httpx.Client, keys: dict[str, str], store: Tether
) -> None:
    before = datetime.now(UTC)
    client.post("/v1/retrieve", json={"query": "valve seat", "scope": "workspace",
                "workspace_id": "acme"}, headers=as_key(keys["acme"]))  # fmt: skip
    after = datetime.now(UTC) + timedelta(seconds=1)

    def rows(**window: str) -> list[dict[str, Any]]:
        got = client.get("/v1/audit", params=window, headers=as_key(keys["acme"]))
        assert got.status_code == 200, got.text
        return got.json()

    assert len(rows(since=before.isoformat(), until=after.isoformat())) == 1
    assert rows(until=before.isoformat()) == []
    assert rows(since=after.isoformat()) == []
    bad = client.get("/v1/audit", params={"since": "yesterday"}, headers=as_key(keys["acme"]))
    assert bad.status_code == 422
    assert len(store.retrieval_log(since=before, until=after)) == 1
    with pytest.raises(InvalidArgument, match="ISO-8601"):
        store.retrieval_log(since="last week")
