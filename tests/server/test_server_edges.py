"""The service's edges, each as a stranger would try it, over real HTTP on loopback:
DNS rebinding and cross-site pages, bodies sent to be buffered before the key is checked,
ids that tell a foreign tenant's from a free one, MCP listings and audit rows that show
other tenants, an audit that cannot be written, accepted uploads lost to a crash, one key
starving the rest, and what answers without a key."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from helpers import as_key, make_settings
from tether import Tether
from tether.models import GLOBAL_WORKSPACE
from tether.server import create_app
from tether.server._spool import SpooledJob, spool_root
from tether.settings import Settings

Serve = Callable[[Any], AbstractContextManager[str]]


def settings(**server: Any) -> Settings:
    return Settings.load(server={"requests_per_second": 0, **server})


@pytest.fixture
def keyless(tmp_path: Path, serve_app: Serve) -> Iterator[tuple[str, Tether]]:
    """A server without keys (the local operator's, on loopback)."""
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(text="The valve seat is torqued to 40 Nm.", title="Valve", workspace_id="acme")
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            yield url, t


def raw_request(url: str, head: str, body: bytes = b"", wait: float = 5.0) -> str:
    """Send ``head`` (and the start of a body) on a socket and read what comes back
    within ``wait`` seconds ("" if nothing): a server that waits for the whole body
    before answering answers nothing."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait) as sock:
        sock.sendall(head.encode() + body)
        sock.settimeout(wait)
        try:
            return sock.recv(65536).decode("latin-1")
        except TimeoutError:
            return ""


# -- 1. hosts and origins ---------------------------------------------------------------------


def test_a_keyless_server_refuses_a_rebound_host_name(keyless: tuple[str, Tether]) -> None:
    url, _ = keyless
    for path in ("/v1/documents", "/console/", "/openapi.json"):
        refused = httpx.get(url + path, headers={"Host": "evil.example:8000"})
        assert refused.status_code == 421, (path, refused.text)
        assert "documents" not in refused.json()
    assert httpx.get(url + "/v1/documents").status_code == 200
    assert httpx.get(url + "/v1/documents", headers={"Host": "localhost:1"}).status_code == 200


def test_a_cross_site_page_cannot_plant_a_document(
    keyless: tuple[str, Tether], tmp_path: Path
) -> None:
    url, t = keyless
    planted = tmp_path / "planted.md"
    planted.write_text("# Valve\n\nThe valve seat is torqued to 999 Nm.\n")
    before = len(t.documents())
    with planted.open("rb") as file:
        response = httpx.post(
            url + "/v1/documents",
            files={"files": file},
            data={"wait": "true"},
            headers={"Origin": "http://evil.example"},
        )
    assert response.status_code == 403
    assert len(t.documents()) == before
    # A simple cross-site GET (no Origin, Sec-Fetch-Site says so) is refused as well.
    sneaky = httpx.get(url + "/v1/documents", headers={"Sec-Fetch-Site": "cross-site"})
    assert sneaky.status_code == 403
    # The console's own page is same-origin.
    own = httpx.get(url + "/v1/documents", headers={"Origin": url})
    assert own.status_code == 200


def test_an_allowed_origin_is_served_with_cors(tmp_path: Path, serve_app: Serve) -> None:
    with Tether(
        db=tmp_path / "t.db",
        settings=settings(allowed_origins=["https://app.example"], allowed_hosts=["docs.example"]),
    ) as t:
        secret = t.keys.create(workspaces=["acme"])[1]
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            origin = {"Origin": "https://app.example"}
            ok = httpx.get(url + "/v1/me", headers={**origin, **as_key(secret)})
            assert ok.status_code == 200
            assert ok.headers["access-control-allow-origin"] == "https://app.example"
            preflight = httpx.options(
                url + "/v1/search",
                headers={
                    **origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization,content-type",
                },
            )
            assert preflight.status_code == 200
            other = httpx.get(
                url + "/v1/me", headers={"Origin": "https://evil.example", **as_key(secret)}
            )
            assert other.status_code == 403
            # With allowed_hosts set, a keyed server answers those names (and loopback) only.
            named = httpx.get(url + "/healthz", headers={"Host": "docs.example"})
            assert named.status_code == 200
            assert httpx.get(url + "/healthz", headers={"Host": "x.example"}).status_code == 421


# -- 2. the key before the body -----------------------------------------------------------------


def test_a_keyless_request_is_refused_before_its_body_is_read(
    tmp_path: Path, serve_app: Serve
) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.keys.create(admin=True)
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            size = 200 << 20
            for path, kind in (
                ("/v1/search", "application/json"),
                ("/v1/documents", "multipart/form-data; boundary=x"),
            ):
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {kind}\r\n"
                    f"Content-Length: {size}\r\n\r\n"
                )
                answer = raw_request(url, head, b"x" * 4096)
                assert answer.startswith("HTTP/1.1 401"), (path, answer[:200])


def test_the_body_limit_is_the_routes_not_the_content_types(
    tmp_path: Path, serve_app: Serve
) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        secret = t.keys.create(admin=True)[1]
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            head = (
                "POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: multipart/form-data; boundary=x\r\n"
                f"Authorization: Bearer {secret}\r\nContent-Length: {200 << 20}\r\n\r\n"
            )
            answer = raw_request(url, head, b"x" * 4096)
            assert answer.startswith("HTTP/1.1 413"), answer[:200]


# -- 3-5. what one tenant learns of another ------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def tenants(
    request: pytest.FixtureRequest, tmp_path: Path, serve_app: Serve
) -> Iterator[tuple[str, Tether, dict[str, str]]]:
    """Two tenants and an admin, on a SQLite file and on a real PostgreSQL server."""
    db = tmp_path / "t.db" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    with Tether(db=db, settings=make_settings()) as t:
        t.create_session("acme-chat", workspace_id="acme")
        t.create_session("bravo-secret-chat", workspace_id="bravo")
        t.add(
            text="Bravo's plan: launch in May.",
            title="Plan",
            document_id="bravo-plan",
            workspace_id="bravo",
        )
        t.add(
            text="The shared valve guide: torque the seat to 40 Nm.",
            title="Guide",
            document_id="guide",
            workspace_id=GLOBAL_WORKSPACE,
        )
        t.attach("guide", "acme-chat")
        t.attach("guide", "bravo-secret-chat")
        keys = {
            "acme": t.keys.create(workspaces=["acme"])[1],
            "bravo": t.keys.create(workspaces=["bravo"])[1],
            "admin": t.keys.create(admin=True)[1],
        }
        with serve_app(create_app(t, warm=False)) as url:
            yield url, t, keys


def test_a_foreign_id_reads_exactly_as_a_free_one(
    tenants: tuple[str, Tether, dict[str, str]],
) -> None:
    url, t, keys = tenants
    acme = as_key(keys["acme"])
    answers = {}
    for document_id in ("bravo-plan", "free-plan"):
        response = httpx.post(
            url + "/v1/documents/text",
            headers=acme,
            json={"text": "Acme's own plan.", "document_id": document_id},
        )
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        answers[document_id] = (result["status"], result["document_id"])
        assert "bravo" not in response.text.replace("acme:bravo-plan", "")
    assert answers == {
        "bravo-plan": ("indexed", "acme:bravo-plan"),
        "free-plan": ("indexed", "acme:free-plan"),
    }
    assert t.get_document("bravo-plan").workspace_id == "bravo"  # untouched
    for session_id in ("bravo-secret-chat", "free-chat"):
        created = httpx.post(
            url + "/v1/sessions",
            headers=acme,
            json={"session_id": session_id, "workspace_id": "acme"},
        )
        assert created.status_code == 201
        assert created.json()["session"]["id"] == f"acme:{session_id}"
    # An id the key got back is used as it is.
    again = httpx.post(
        url + "/v1/documents/text",
        headers=acme,
        json={"text": "Acme's own plan, v2.", "document_id": "acme:free-plan"},
    )
    assert again.json()["result"] == {
        **again.json()["result"],
        "status": "replaced",
        "document_id": "acme:free-plan",
    }


def test_mcp_lists_a_global_document_without_other_tenants_sessions(
    tenants: tuple[str, Tether, dict[str, str]],
) -> None:
    url, _, keys = tenants

    async def listing() -> dict[str, Any]:
        sent = {"Authorization": f"Bearer {keys['acme']}", "X-Tether-Scope": "global"}
        async with httpx2.AsyncClient(headers=sent, timeout=30) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport) as client:
                result = await client.call_tool("list_documents", {})
                assert not result.is_error
                return result.structured_content

    out = asyncio.run(listing())
    [guide] = [d for d in out["documents"] if d["id"] == "guide"]
    assert guide["session_ids"] == ["acme-chat"]
    assert "bravo" not in json.dumps(out)


def test_global_audit_rows_are_the_askers_own(
    tenants: tuple[str, Tether, dict[str, str]],
) -> None:
    url, _, keys = tenants
    body = {"query": "valve seat torque", "scope": "global"}
    asked = httpx.post(url + "/v1/retrieve", json=body, headers=as_key(keys["bravo"]))
    assert asked.status_code == 200
    retrieval_id = asked.json()["retrieval_id"]
    assert httpx.get(url + "/v1/audit", headers=as_key(keys["acme"])).json() == []
    bravo_rows = httpx.get(url + "/v1/audit", headers=as_key(keys["bravo"])).json()
    assert [row["retrieval_id"] for row in bravo_rows] == [retrieval_id]
    assert len(httpx.get(url + "/v1/audit", headers=as_key(keys["admin"])).json()) == 1

    async def verify() -> Any:  # MCP's verify_citations reads the same rows
        sent = {"Authorization": f"Bearer {keys['acme']}", "X-Tether-Scope": "global"}
        async with httpx2.AsyncClient(headers=sent, timeout=30) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport) as client:
                return await client.call_tool(
                    "verify_citations", {"retrieval_id": retrieval_id, "text": "Torque it [1]."}
                )

    refused = asyncio.run(verify())
    assert refused.is_error and "no retrieval" in refused.content[0].text


# -- 6. an audit that cannot be written ------------------------------------------------------


def _audit_fails(t: Tether) -> None:
    """Make every audit row's insert fail inside SQLite, as a full disk would."""
    with t.store.db.write() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "CREATE TRIGGER no_audit BEFORE INSERT ON rag_retrieval_log"
            " BEGIN SELECT RAISE(ABORT, 'the audit log cannot be written'); END"
        )


def test_a_guarded_retrieval_whose_audit_fails_is_blocked(tmp_path: Path, serve_app: Serve) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(text="The valve seat is torqued to 40 Nm.", title="Valve", workspace_id="acme")
        secret = t.keys.create(workspaces=["acme"])[1]
        _audit_fails(t)
        body = {"query": "valve seat torque", "scope": "workspace", "workspace_id": "acme"}
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            guarded = httpx.post(
                url + "/v1/retrieve", json={**body, "guarded": True}, headers=as_key(secret)
            )
            assert guarded.status_code == 409, guarded.text
            assert guarded.json()["error"]["type"] == "AuditUnavailable"
            plain = httpx.post(
                url + "/v1/retrieve", json={**body, "debug": True}, headers=as_key(secret)
            )
            assert plain.status_code == 200
            degradations = plain.json()["debug"]["degradations"]
            assert any("audit row" in d for d in degradations)


# -- 8. a 202 is a promise -----------------------------------------------------------------------


def _serve(db: Path | str, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tether.cli",
            "serve",
            "--db",
            str(db),
            "--port",
            str(port),
            "--no-mcp",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server did not start")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_uploads_answered_202_survive_kill_9(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    db: Any = tmp_path / "t.db" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    with Tether(db=db) as t:
        spool = spool_root(t)
    assert spool is not None
    env = {**os.environ, "TETHER_RAG__EMBEDDINGS__ENABLED": "false"}
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _serve(db, port, env)
    accepted: list[str] = []
    names = [f"note-{n}" for n in range(24)]
    try:
        _ready(url, server)
        for batch in range(4):
            files = [
                ("files", (f"{name}.md", (f"# {name}\n\n" + f"Pump {name} runs at 7 bar. " * 8000)))
                for name in names[batch * 6 : batch * 6 + 6]
            ]
            response = httpx.post(url + "/v1/documents", timeout=60, files=files)
            assert response.status_code == 202, response.text
            accepted.append(response.json()["job"]["id"])
        server.send_signal(signal.SIGKILL)  # mid-indexing
        server.wait(timeout=30)
        with Tether(db=db) as t:
            indexed_at_kill = len(t.documents())
        assert indexed_at_kill < len(names)  # the restart has work to resume
        server = _serve(db, port, env)
        _ready(url, server)
        deadline = time.monotonic() + 300
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline:
            statuses = {
                j: httpx.get(f"{url}/v1/jobs/{j}").json()["job"]["status"] for j in accepted
            }
            if all(s in ("succeeded", "failed") for s in statuses.values()):
                break
            time.sleep(0.5)
        assert set(statuses.values()) == {"succeeded"}, statuses
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    with Tether(db=db) as t:
        titles = {d.title for d in t.documents()}
    assert titles == set(names)
    assert not list(spool.glob("*.partial"))
    assert [p for p in spool.rglob("*") if p.is_file() and p.name != "job.json"] == []


# -- 11. one key does not starve the rest ----------------------------------------------------


def test_a_key_over_its_rate_gets_429_and_others_are_served(
    tmp_path: Path, serve_app: Serve
) -> None:
    with Tether(
        db=tmp_path / "t.db", settings=settings(requests_per_second=2, request_burst=3)
    ) as t:
        greedy, modest = (t.keys.create(workspaces=["acme"])[1] for _ in range(2))
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            answers = [httpx.get(url + "/v1/me", headers=as_key(greedy)) for _ in range(10)]
            codes = [a.status_code for a in answers]
            assert codes[:3] == [200, 200, 200] and 429 in codes
            limited = next(a for a in answers if a.status_code == 429)
            assert int(limited.headers["Retry-After"]) >= 1
            assert httpx.get(url + "/v1/me", headers=as_key(modest)).status_code == 200


def test_uploads_are_bounded_per_key_and_in_bytes(tmp_path: Path, serve_app: Serve) -> None:
    with Tether(
        db=tmp_path / "t.db", settings=settings(uploads_per_key=1, max_queued_upload_bytes=50_000)
    ) as t:
        secret = t.keys.create(workspaces=["acme"])[1]
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            big = httpx.post(
                url + "/v1/documents",
                headers=as_key(secret),
                files={"files": ("big.md", b"# Big\n\n" + b"word " * 20_000)},
            )
            assert big.status_code == 429 and big.headers["Retry-After"]
            assert not list((tmp_path / "t.db-uploads").glob("*"))  # nothing half-kept
            small = httpx.post(
                url + "/v1/documents",
                headers=as_key(secret),
                files={"files": ("a.md", b"# A\n\nThe pump runs at 3 bar.\n")},
            )
            assert small.status_code == 202


# -- 12. what answers without a key ----------------------------------------------------------------


def test_metrics_and_readiness_tell_strangers_nothing(keyless: tuple[str, Tether]) -> None:
    url, t = keyless
    assert httpx.get(url + "/metrics").status_code == 200  # keyless: the local operator
    ready = httpx.get(url + "/readyz").json()
    assert set(ready) == {"status", "embeddings"}
    admin = t.keys.create(admin=True)[1]
    # The first key closes the server at once (another process could have made it).
    assert httpx.get(url + "/v1/documents").status_code == 401
    assert httpx.get(url + "/metrics").status_code == 401
    assert httpx.get(url + "/metrics", headers=as_key(admin)).status_code == 200


def test_an_upload_job_reads_ended_only_once_its_end_is_recorded(tmp_path: Path) -> None:
    """The indexing job has succeeded but the spool has not yet recorded it (manifest
    written, files deleted): the job still reads ``running``, so that a client that saw
    it end and stops the server leaves nothing for the next start to resume."""
    entry = SpooledJob(id="j", folder=tmp_path, workspace_id="w", session_id=None,
                       tags=None, names={}, asked_by=None)  # fmt: skip
    assert entry.status == "queued"
    entry.job = SimpleNamespace(status="running")  # type: ignore[assignment]
    assert entry.status == "running"
    entry.job = SimpleNamespace(status="succeeded")  # type: ignore[assignment]
    assert entry.status == "running" and not entry.done()
    entry.ended = {"status": "succeeded", "results": [], "ended_at": 0.0}
    assert entry.status == "succeeded" and entry.done()


def test_the_spool_deletes_an_ended_jobs_files_before_the_job_reads_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spool.end writes the manifest, deletes the files, and only then lets the job read
    as ended; a start that finds an ended job's files (the process stopped between the
    two) deletes them."""
    from tether.server._spool import MANIFEST, Spool

    folder = tmp_path / "job-1"
    folder.mkdir()
    for name in ("a.md", "b.md"):
        (folder / name).write_text("# A\n\nText.\n")
    names = {"a.md": "a.md", "b.md": "b.md"}
    entry = SpooledJob(id="job-1", folder=folder, workspace_id="w", session_id=None,
                       tags=None, names=names, asked_by=None)  # fmt: skip
    entry.job = SimpleNamespace(status="succeeded")  # type: ignore[assignment]
    seen: list[str] = []
    real_unlink = Path.unlink

    def unlink(path: Path, missing_ok: bool = False) -> None:
        seen.append(entry.status)
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    spool = Spool(tmp_path, max_bytes=1 << 20)
    spool.end(entry, "succeeded", [])
    monkeypatch.undo()
    assert seen == ["running", "running"] and entry.status == "succeeded"
    assert sorted(p.name for p in folder.iterdir()) == [MANIFEST]
    # The process stopped after the manifest was written, before the files went:
    (folder / "a.md").write_text("left behind")
    assert Spool(tmp_path, max_bytes=1 << 20).recover() == []
    assert sorted(p.name for p in folder.iterdir()) == [MANIFEST]
