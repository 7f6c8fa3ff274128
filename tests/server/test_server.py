"""`tether serve`'s core against a real server on loopback: the key wall, search and
retrieve as the CLI prints them, the audit log per key, errors, limits, metrics, traces,
and the `serve` and `keys` commands."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.trace import SpanKind
from typer.testing import CliRunner

from helpers import as_key, make_settings
from tether import Tether
from tether.cli import app as cli_app

runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Tether]:
    """Two workspaces (a session in each) and the global library, with documents that
    share words, so that a scope leak would show."""
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.create_session("acme-chat", workspace_id="acme")
        t.create_session("rival-chat", workspace_id="rival")
        t.add(text="The valve seat of the acme pump is replaced every 500 hours.",
              title="Acme pump", workspace_id="acme", session_id="acme-chat")  # fmt: skip
        t.add(text="The valve seat of the rival pump is secret: 12 bar.",
              title="Rival pump", workspace_id="rival", session_id="rival-chat")  # fmt: skip
        t.add(text="Every valve seat is checked with a torque wrench.", title="Global guide")
        yield t


# -- the key wall -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "an API key is required"),
        ({"Authorization": "Basic abc"}, "Bearer <key>"),
        ({"Authorization": "Bearer tether_wrong"}, "unknown or revoked"),
    ],
)
def test_without_a_live_key_nothing_is_read(
    client: httpx.Client, headers: dict[str, str], message: str
) -> None:
    response = client.post("/v1/search", json={"query": "valve", "scope": "global"},
                           headers=headers)  # fmt: skip
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert message in response.json()["error"]["message"]


def test_a_revoked_key_stops_at_once(client: httpx.Client, store: Tether) -> None:
    key, secret = store.keys.create(workspaces=["acme"])
    body = {"query": "valve", "scope": "workspace", "workspace_id": "acme"}
    assert client.post("/v1/search", json=body, headers=as_key(secret)).status_code == 200
    store.keys.revoke(key.id)
    assert client.post("/v1/search", json=body, headers=as_key(secret)).status_code == 401


@pytest.mark.parametrize(
    "body",
    [
        {"scope": "workspace", "workspace_id": "rival"},
        {"scope": "session", "session_id": "rival-chat"},
    ],
    ids=["workspace", "session"],
)
@pytest.mark.parametrize("route", ["/v1/search", "/v1/retrieve"])
def test_another_workspace_is_the_same_404_as_one_that_does_not_exist(
    client: httpx.Client, keys: dict[str, str], body: dict[str, str], route: str
) -> None:
    kind = body["scope"]
    missing = {**body, f"{kind}_id": "no-such-thing", "query": "valve"}
    theirs = client.post(route, json={**body, "query": "valve"}, headers=as_key(keys["acme"]))
    nothing = client.post(route, json=missing, headers=as_key(keys["acme"]))
    assert theirs.status_code == 404
    assert theirs.json()["error"]["message"] == f"no {kind} {body[f'{kind}_id']!r}"
    if kind == "session":  # a missing session reads the same, name aside
        assert nothing.status_code == 404
        assert nothing.json()["error"]["type"] == theirs.json()["error"]["type"]
    # The owner sees it.
    mine = client.post(route, json={**body, "query": "valve"}, headers=as_key(keys["rival"]))
    assert mine.status_code == 200


def test_search_sees_its_scope_and_the_global_library(
    client: httpx.Client, keys: dict[str, str]
) -> None:
    def titles(body: dict[str, str]) -> set[str]:
        response = client.post("/v1/search", json={"query": "valve seat", **body},
                               headers=as_key(keys["acme"]))  # fmt: skip
        assert response.status_code == 200, response.text
        return {hit["title"] for hit in response.json()["hits"]}

    assert titles({"scope": "workspace", "workspace_id": "acme"}) == {"Acme pump"}
    assert titles({"scope": "session", "session_id": "acme-chat"}) == {"Acme pump"}
    assert titles({"scope": "global"}) == {"Global guide"}


# -- the same answers as the library and the CLI --------------------------------------------


def test_search_returns_what_the_cli_prints(
    client: httpx.Client, keys: dict[str, str], store: Tether
) -> None:
    body = {"query": "valve seat hours", "scope": "workspace", "workspace_id": "acme", "k": 3,
            "mode": "lexical", "judge": True}  # fmt: skip
    served = client.post("/v1/search", json=body, headers=as_key(keys["acme"])).json()
    printed = runner.invoke(cli_app, ["search", "valve seat hours", "--scope", "workspace",
                                      "--workspace", "acme", "--k", "3", "--mode", "lexical",
                                      "--db", store.store.location, "--json"])  # fmt: skip
    assert printed.exit_code == 0, printed.output
    cli = json.loads(printed.stdout)
    for result in (served, cli):
        result["debug"].pop("timings_ms", None)
    assert served == cli


def test_retrieve_gives_the_cited_context_and_debug_on_request(
    client: httpx.Client, keys: dict[str, str]
) -> None:
    body = {"query": "How often is the acme pump valve seat replaced?", "scope": "workspace",
            "workspace_id": "acme"}  # fmt: skip
    plain = client.post("/v1/retrieve", json=body, headers=as_key(keys["acme"])).json()
    assert plain["grounded"] is True
    assert "500 hours" in plain["context"]
    assert plain["citations"][0]["title"] == "Acme pump"
    assert plain["debug"] is None
    detailed = client.post("/v1/retrieve", json={**body, "debug": True},
                           headers=as_key(keys["acme"])).json()  # fmt: skip
    assert "grounding" in detailed["debug"]


def test_a_guarded_retrieval_with_nothing_grounded_is_blocked_with_its_advisory(
    client: httpx.Client, keys: dict[str, str]
) -> None:
    body = {"query": "What is the boiling point of liquid nitrogen in kelvin?",
            "scope": "workspace", "workspace_id": "acme", "guarded": True}  # fmt: skip
    response = client.post("/v1/retrieve", json=body, headers=as_key(keys["acme"]))
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["type"] == "GenerationBlocked"
    assert error["advisory"]
    unguarded = client.post("/v1/retrieve", json={**body, "guarded": False},
                            headers=as_key(keys["acme"])).json()  # fmt: skip
    assert unguarded["grounded"] is False and unguarded["guidance"]


def test_a_guarded_retrieval_reads_the_conversation_and_only_raises_the_threshold(
    client: httpx.Client, keys: dict[str, str]
) -> None:
    history = [
        {"role": "user", "content": "How often is the acme pump valve seat replaced?"},
        {"role": "assistant", "content": "Every 500 hours [1]."},
    ]
    body = {"query": "and who does it?", "scope": "workspace", "workspace_id": "acme",
            "guarded": True, "history": history, "debug": True}  # fmt: skip
    answer = client.post("/v1/retrieve", json=body, headers=as_key(keys["acme"])).json()
    assert answer["debug"]["standalone"]["changed"] is True
    assert "pump" in answer["debug"]["standalone"]["question"].lower()
    strict = {**body, "query": "How often is the acme pump valve seat replaced?",
              "history": None, "min_relevance": 1.0}  # fmt: skip
    blocked = client.post("/v1/retrieve", json=strict, headers=as_key(keys["acme"]))
    assert blocked.status_code == 409
    lowered = client.post("/v1/retrieve", json={**strict, "min_relevance": 0.0},
                          headers=as_key(keys["acme"])).json()  # fmt: skip
    assert lowered["grounded"] is True  # the policy's threshold still applies, met


def test_the_audit_log_shows_a_key_only_its_workspaces(
    client: httpx.Client, keys: dict[str, str]
) -> None:
    for key, body in (("acme", {"scope": "workspace", "workspace_id": "acme"}),
                      ("rival", {"scope": "session", "session_id": "rival-chat"}),
                      ("acme", {"scope": "global"})):  # fmt: skip
        response = client.post("/v1/retrieve", json={"query": "valve seat", **body},
                               headers=as_key(keys[key]))  # fmt: skip
        assert response.status_code == 200

    def scopes(key: str) -> list[dict[str, str]]:
        response = client.get("/v1/audit", headers=as_key(keys[key]))
        assert response.status_code == 200
        return [entry["scope"] for entry in response.json()]

    assert scopes("acme") == [{"kind": "global", "id": "GLOBAL"},
                              {"kind": "workspace", "id": "acme"}]  # fmt: skip
    # acme's question to the global library is acme's: rival's key does not read it.
    assert scopes("rival") == [{"kind": "session", "id": "rival-chat"}]
    assert len(scopes("admin")) == 3
    rival_id = client.get("/v1/audit", headers=as_key(keys["rival"])).json()[0]["retrieval_id"]
    seen = client.get("/v1/audit", params={"retrieval_id": rival_id}, headers=as_key(keys["acme"]))
    assert seen.json() == []
    # Each row names the key that asked.
    acme_key = client.get("/v1/me", headers=as_key(keys["acme"])).json()["key_id"]
    rows = client.get("/v1/audit", headers=as_key(keys["acme"])).json()
    assert {row["asked_by"] for row in rows} == {acme_key}


# -- bad input is a 4xx in one shape ------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "status", "kind"),
    [
        (b"{not json", 422, "ValidationError"),
        (json.dumps({"query": "x", "unknown": 1}).encode(), 422, "ValidationError"),
        (json.dumps({"query": "x", "k": 0}).encode(), 422, "ValidationError"),
        (json.dumps({"query": "x", "scope": "workspace"}).encode(), 400, "ScopeError"),
        (
            json.dumps(
                {"query": "x", "scope": "global", "filters": {"domains": ["a\u0000"]}}
            ).encode(),
            400,
            "InvalidArgument",
        ),
        (json.dumps({"query": "x" * 300_000}).encode(), 422, "ValidationError"),
        (b"x" * (2 << 20), 413, "RequestTooLarge"),
    ],
    ids=["not json", "unknown field", "k", "scope", "filter id", "long query", "too large"],
)
def test_bad_requests_get_a_typed_error_never_a_500(
    client: httpx.Client, keys: dict[str, str], content: bytes, status: int, kind: str
) -> None:
    response = client.post("/v1/search", content=content, headers={
        **as_key(keys["admin"]), "content-type": "application/json"})  # fmt: skip
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["type"], error["status"]) == (kind, status)
    assert error["message"]


def test_an_unknown_route_is_a_json_404(client: httpx.Client, keys: dict[str, str]) -> None:
    # Without a key, /v1 says nothing of which routes exist.
    assert client.get("/v1/nothing-here").status_code == 401
    response = client.get("/v1/nothing-here", headers=as_key(keys["acme"]))
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NotFound"


# -- service endpoints ----------------------------------------------------------------------


def test_health_readiness_and_metrics(client: httpx.Client, keys: dict[str, str]) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and "documents" not in ready  # no counts without a key
    body = {"query": "valve seat", "scope": "global"}
    for _ in range(2):
        client.post("/v1/retrieve", json=body, headers=as_key(keys["acme"]))
    client.post("/v1/search", json=body)  # 401
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=as_key(keys["acme"])).status_code == 403
    text = client.get("/metrics", headers=as_key(keys["admin"])).text
    assert 'tether_http_requests_total{method="POST",route="/v1/retrieve",status="200"} 2.0' in text
    assert 'tether_http_requests_total{method="POST",route="/v1/search",status="401"} 1.0' in text
    assert 'tether_retrievals_total{outcome="grounded"} 2.0' in text
    assert 'tether_http_request_duration_seconds_count{method="POST",route="/v1/retrieve"}' in text
    schema = client.get("/openapi.json").json()
    assert {"/v1/search", "/v1/retrieve", "/v1/audit"} <= set(schema["paths"])
    assert client.get("/docs").status_code == 200


def test_each_request_is_one_trace_with_the_server_span_as_parent(
    client: httpx.Client, keys: dict[str, str], span_exporter: Any
) -> None:
    span_exporter.clear()
    body = {"query": "valve seat", "scope": "workspace", "workspace_id": "acme"}
    assert client.post("/v1/retrieve", json=body, headers=as_key(keys["acme"])).status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        spans = span_exporter.get_finished_spans()
        if any(s.name == "POST /v1/retrieve" for s in spans):
            break
        time.sleep(0.05)
    names = [s.name for s in spans]
    assert "POST /v1/retrieve" in names, f"the server span never ended, spans: {names}"
    server = next(s for s in spans if s.name == "POST /v1/retrieve")
    retrieve = next(s for s in spans if s.name == "rag.retrieve")
    by_id = {s.context.span_id: s for s in spans}
    ancestors = []
    parent = retrieve.parent
    while parent is not None and parent.span_id in by_id:
        ancestors.append(by_id[parent.span_id].name)
        parent = by_id[parent.span_id].parent
    assert ancestors[-1] == "POST /v1/retrieve", ancestors
    assert retrieve.context.trace_id == server.context.trace_id
    assert server.parent is None  # the request's own trace
    assert server.kind == SpanKind.SERVER
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["http.route"] == "/v1/retrieve"


def test_writes_queue_on_one_writer_while_reads_go_on(
    client: httpx.Client, keys: dict[str, str], store: Tether
) -> None:
    """Concurrent searches and text adds: every request answers 200, none says the
    database is locked."""
    import concurrent.futures

    def search(i: int) -> int:
        return client.post("/v1/search", json={"query": f"valve {i}", "scope": "global"},
                           headers=as_key(keys["admin"])).status_code  # fmt: skip

    def add(i: int) -> int:
        return client.post("/v1/documents/text", json={
            "text": f"Note {i}: the valve seat was checked.", "title": f"note {i}",
            "workspace_id": "acme"}, headers=as_key(keys["acme"])).status_code  # fmt: skip

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(search if i % 2 else add, i) for i in range(40)]
        statuses = [f.result() for f in futures]
    assert set(statuses) == {200}, statuses
    assert len(store.documents(workspace_id="acme")) == 21


# -- the commands -----------------------------------------------------------------------------


def test_keys_commands_print_the_secret_once_and_never_again(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    made = runner.invoke(cli_app, ["keys", "create", "--db", db, "-w", "acme", "-w", "beta",
                                   "--global-write", "--name", "bot", "--json"])  # fmt: skip
    assert made.exit_code == 0, made.output
    created = json.loads(made.stdout)
    secret, key = created["key"], created["api_key"]
    assert secret.startswith("tether_") and key["workspaces"] == ["acme", "beta"]
    listed = runner.invoke(cli_app, ["keys", "list", "--db", db, "--json"])
    assert secret not in listed.stdout
    assert [k["id"] for k in json.loads(listed.stdout)["keys"]] == [key["id"]]
    revoked = runner.invoke(cli_app, ["keys", "revoke", key["id"], "--db", db, "--json"])
    assert json.loads(revoked.stdout)["api_key"]["active"] is False
    nothing = runner.invoke(cli_app, ["keys", "create", "--db", db])
    assert nothing.exit_code == 1 and "a key needs --workspace" in nothing.output
    bad = runner.invoke(cli_app, ["keys", "create", "--db", db, "-w", "a", "--read-only",
                                  "--global-write"])  # fmt: skip
    assert bad.exit_code == 1 and "read-only key cannot also have global write" in bad.output


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    result = runner.invoke(cli_app, ["serve", "--db", str(tmp_path / "t.db"), "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert "refusing to serve on 0.0.0.0 without API keys" in result.output


@pytest.mark.slow
def test_serve_without_keys_binds_loopback_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Tether(db=db, settings=make_settings()) as t:
        t.add(text="The valve seat is checked weekly.", title="Guide")
    port = free_port()
    env = {**os.environ, "TETHER_RAG__EMBEDDINGS__ENABLED": "false"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tether.cli", "serve", "--db", str(db), "--port", str(port),
         "--log-level", "warning"],
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
        hits = httpx.post(f"http://127.0.0.1:{port}/v1/search",
                          json={"query": "valve", "scope": "global"}).json()["hits"]  # fmt: skip
        assert [h["title"] for h in hits] == ["Guide"]
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "No API keys: serving on 127.0.0.1 only" in stderr
