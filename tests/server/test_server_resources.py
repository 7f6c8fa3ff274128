"""The resource routes (documents, jobs, sessions, workspaces, the library registry)
against a real server on loopback, with real files: what test_server_documents.py leaves
out. Uploads are read only after the key is checked and are held to rag.max_file_bytes as
they arrive (both shown by a client that sends only part of its body), leave no files
behind, and wait or run as a job that is followed, filtered and cancelled; listings keep to
what a key may read; bad input is a 4xx in the one error shape, never a 500."""

from __future__ import annotations

import http.client
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from helpers import SlowQueryEmbedder, make_pdf, make_settings
from tether import Tether
from tether.server import create_app

MAX_FILE_BYTES = 200_000
BOUNDARY = "tether-test-boundary"


def _never_500(response: httpx.Response) -> None:
    assert response.status_code < 500, f"{response.request.url}: {response.status_code}"


class Api:
    """The server's URL and a client per key (acme, rival, reader, admin)."""

    def __init__(self, url: str, keys: dict[str, str]) -> None:
        self.url = url
        self.keys = keys
        self.client = httpx.Client(base_url=url, timeout=60, event_hooks={"response": [_never_500]})

    def __call__(
        self, method: str, path: str, key: str | None = "acme", **options: Any
    ) -> httpx.Response:
        headers = options.pop("headers", {})
        if key is not None:
            headers["Authorization"] = f"Bearer {self.keys[key]}"
        return self.client.request(method, path, headers=headers, **options)

    def wait_for(self, job_id: str, key: str = "acme") -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while (job := self("GET", f"/v1/jobs/{job_id}", key).json()["job"])["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, job
            time.sleep(0.05)
        return job

    def events(self, job_id: str, key: str = "acme") -> list[tuple[str, dict[str, Any]]]:
        """The job's Server-Sent Events, to the end of the stream."""
        events, name = [], None
        headers = {"Authorization": f"Bearer {self.keys[key]}"}
        with self.client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    events.append((name, json.loads(line.removeprefix("data: "))))
        return events


def _seed(t: Tether) -> None:
    t.create_session("acme-chat", workspace_id="acme")
    t.create_session("rival-chat", workspace_id="rival")
    t.add(text="The rival pump runs at 12 bar.", title="Rival pump", workspace_id="rival",
          document_id="rival-pump")  # fmt: skip
    t.add(text="Every valve is checked yearly.", title="Global guide", document_id="guide",
          tags={"domain": "futurehub", "source_type": "guide"})  # fmt: skip
    t.add(text="Draft: the acme valve spec.", title="Acme spec", workspace_id="acme",
          document_id="acme-spec", status="draft", tags={"source_type": "policy"})  # fmt: skip


def _keys(t: Tether) -> dict[str, str]:
    return {
        "acme": t.keys.create(workspaces=["acme"])[1],
        "rival": t.keys.create(workspaces=["rival"])[1],
        "reader": t.keys.create(workspaces=["acme"], read_only=True)[1],
        "admin": t.keys.create(admin=True)[1],
    }


@pytest.fixture
def uploads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the server makes its private upload folders in (the server runs in
    this process, so it takes tempfile's folder from here)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def store(tmp_path: Path, uploads: Path) -> Iterator[Tether]:
    settings = make_settings(max_file_bytes=MAX_FILE_BYTES)
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        _seed(t)
        yield t


@pytest.fixture
def serve(serve_app: Any) -> Callable[[Tether], Any]:
    def serve(t: Tether) -> Any:
        return serve_app(create_app(t, warm=False, mcp=False))

    return serve


@pytest.fixture
def api(store: Tether, serve: Callable[[Tether], Any]) -> Iterator[Api]:
    keys = _keys(store)
    with serve(store) as url:
        api = Api(url, keys)
        yield api
        api.client.close()


def _upload_folders(uploads: Path) -> list[Path]:
    return list(uploads.glob("tether-upload-*"))


def _no_upload_folders_left(uploads: Path) -> None:
    """Upload folders are removed once indexing ends (a job's, just after it)."""
    deadline = time.monotonic() + 30
    while _upload_folders(uploads):
        assert time.monotonic() < deadline, _upload_folders(uploads)
        time.sleep(0.02)


# -- uploads --------------------------------------------------------------------------------


def test_an_upload_with_wait_answers_with_its_results_and_keeps_no_files(
    api: Api, tmp_path: Path, uploads: Path
) -> None:
    pdf = make_pdf(tmp_path / "manual.pdf", ["The drain valve is on the left.",
                                             "Replace the gasket every spring."])  # fmt: skip
    notes = b"# Notes\n\n## Seal kit\n\nThe seal kit is part 4471.\n"
    response = api("POST", "/v1/documents", data={"workspace_id": "acme", "wait": "true"},
                   files=[("files", ("manual.pdf", pdf.read_bytes(), "application/pdf")),
                          ("files", ("notes.md", notes, "text/markdown"))])  # fmt: skip
    assert response.status_code == 200, response.text
    results = {r["source"]: r for r in response.json()["results"]}
    assert set(results) == {"manual.pdf", "notes.md"}
    assert {r["status"] for r in results.values()} == {"indexed"}
    assert _upload_folders(uploads) == []

    shown = api("GET", f"/v1/documents/{results['notes.md']['document_id']}",
                params={"chunks": "true"}).json()  # fmt: skip
    assert shown["document"]["workspace_id"] == "acme"
    assert shown["document"]["mime"] == "text/markdown"
    [chunk] = shown["chunks"]
    assert chunk["section_title"] == "Notes > Seal kit" and "4471" in chunk["text"]
    assert chunk["page"] is None and chunk["token_count"] > 0 and chunk["chunk_id"] > 0
    without = api("GET", f"/v1/documents/{results['manual.pdf']['document_id']}").json()
    assert set(without) == {"document"}  # chunks only on request
    assert without["document"]["chunk_count"] == 2


def test_an_upload_job_is_followed_by_polling_and_by_its_event_stream(
    api: Api, tmp_path: Path, uploads: Path
) -> None:
    pdf = make_pdf(tmp_path / "pump.pdf", ["The pump needs 12 bar.", "Bleed it weekly."])
    files = [("files", ("pump.pdf", pdf.read_bytes(), "application/pdf"))] + [
        ("files", (f"note{i}.md", f"# Note {i}\n\nValve {i}.\n".encode(), "text/markdown"))
        for i in range(3)
    ]
    response = api("POST", "/v1/documents", files=files,
                   data={"session_id": "acme-chat", "tags": '{"domain": "futurehub"}'})  # fmt: skip
    assert response.status_code == 202, response.text
    job = response.json()["job"]
    assert job["kind"] == "upload" and job["workspace_id"] == "acme"
    assert job["progress"]["total"] == 4

    events = api.events(job["id"])
    names = [name for name, _ in events]
    assert names[-1] == "done" and set(names[:-1]) == {"progress"}
    dones = [data["progress"]["done"] for _, data in events]
    assert dones == sorted(dones) and dones[-1] == 4
    final = events[-1][1]
    assert final == api.wait_for(job["id"])  # the stream's last word is the job's
    assert final["status"] == "succeeded" and final["progress"]["current"] is None
    assert sorted(r["source"] for r in final["results"]) == [
        "note0.md", "note1.md", "note2.md", "pump.pdf"]  # fmt: skip
    assert [j["id"] for j in api("GET", "/v1/jobs").json()["jobs"]] == [job["id"]]
    # A finished job's stream still says where it ended: its state, then done.
    assert [name for name, _ in api.events(job["id"])] == ["progress", "done"]

    in_session = api("GET", "/v1/documents", params={"session_id": "acme-chat"}).json()
    assert len(in_session["documents"]) == 4
    assert all(d["tags"]["domain"] == "futurehub" for d in in_session["documents"])
    _no_upload_folders_left(uploads)


@pytest.mark.slow
def test_a_queued_job_is_cancelled_by_a_writer_never_by_a_reader(
    tmp_path: Path, uploads: Path, serve: Callable[[Tether], Any]
) -> None:
    # The first job embeds for 4 s (one worker: the next one waits in the queue), time
    # for three HTTP calls on a loaded machine to find it still queued.
    embedder = SlowQueryEmbedder(delay=4.0)
    embedder.slow = True
    settings = make_settings(index_workers=1)
    with Tether(db=tmp_path / "slow.db", settings=settings, embedder=embedder) as t:
        keys = _keys(t)
        with serve(t) as url:
            api = Api(url, keys)

            def submit(name: str) -> dict[str, Any]:
                files = [("files", (name, b"# A note\n\nThe valve.\n", "text/markdown"))]
                response = api("POST", "/v1/documents", files=files)
                assert response.status_code == 202, response.text
                return response.json()["job"]

            first, queued = submit("first.md"), submit("second.md")
            refused = api("POST", f"/v1/jobs/{queued['id']}/cancel", "reader")
            assert refused.status_code == 403
            assert refused.json()["error"]["type"] == "Forbidden"
            cancelled = api("POST", f"/v1/jobs/{queued['id']}/cancel").json()
            assert cancelled["cancelled"] is True
            assert cancelled["job"]["status"] == "cancelled"
            assert api.wait_for(first["id"])["status"] == "succeeded"
            ended = api.wait_for(queued["id"])
            assert ended["status"] == "cancelled" and ended["results"] == []
            assert [d.title for d in t.documents(workspace_id="acme")] == ["A note"]
            again = api("POST", f"/v1/jobs/{queued['id']}/cancel").json()
            assert again["cancelled"] is False  # it had ended
            api.client.close()
    _no_upload_folders_left(uploads)


def _partial_upload(api: Api, head: bytes, key: str | None) -> http.client.HTTPResponse:
    """Send an upload's headers, declaring a 10 MB body, and only ``head`` of that body;
    the answer must come without the rest (a server that waited would time out)."""
    url = urlsplit(api.url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    connection.putrequest("POST", "/v1/documents")
    connection.putheader("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")
    connection.putheader("Content-Length", str(10 << 20))
    if key is not None:
        connection.putheader("Authorization", f"Bearer {api.keys.get(key, key)}")
    connection.endheaders(head)
    return connection.getresponse()


def _file_part(name: str) -> bytes:
    return (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="{name}"'
            "\r\nContent-Type: text/plain\r\n\r\n").encode()  # fmt: skip


@pytest.mark.parametrize("key", [None, "tether_not-a-real-key"])
def test_an_upload_is_refused_for_its_key_before_its_body_is_read(
    api: Api, store: Tether, uploads: Path, key: str | None
) -> None:
    before = store.store.counts()
    response = _partial_upload(api, _file_part("a.txt") + b"valve " * 100, key)
    assert response.status == 401
    assert json.loads(response.read())["error"]["type"] == "Unauthorized"
    assert store.store.counts() == before
    assert _upload_folders(uploads) == []


def test_a_file_over_the_limit_is_refused_as_it_arrives(
    api: Api, store: Tether, uploads: Path
) -> None:
    before = store.store.counts()
    response = _partial_upload(api, _file_part("big.txt") + b"x" * (MAX_FILE_BYTES + 1), "acme")
    assert response.status == 413
    error = json.loads(response.read())["error"]
    assert error["type"] == "LoadLimitExceeded" and "big.txt" in error["message"]
    assert store.store.counts() == before
    assert _upload_folders(uploads) == []


def test_an_upload_from_a_read_only_key_or_to_another_workspace_is_refused(
    api: Api, store: Tether, uploads: Path
) -> None:
    before = store.store.counts()
    files = [("files", ("a.md", b"# A\n\nValve.\n", "text/markdown"))]
    for key, workspace, status in (("reader", "acme", 403), ("reader", "rival", 404),
                                   ("acme", "rival", 404), ("rival", "acme", 404)):  # fmt: skip
        response = api("POST", "/v1/documents", key, files=files, data={"workspace_id": workspace})
        assert response.status_code == status, (key, workspace, response.text)
    response = api("POST", "/v1/documents", "acme", files=files, data={"session_id": "rival-chat"})
    assert response.status_code == 404
    assert store.store.counts() == before
    assert _upload_folders(uploads) == []


# -- listings -------------------------------------------------------------------------------


def _ids(response: httpx.Response, key: str) -> set[str]:
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()[key]}


def test_documents_are_listed_from_the_workspaces_a_key_reads_and_filtered(api: Api) -> None:
    def listed(key: str = "acme", **params: str) -> set[str]:
        return _ids(api("GET", "/v1/documents", key, params=params), "documents")

    assert listed() == {"acme-spec", "guide"}
    assert listed("rival") == {"rival-pump", "guide"}
    assert listed("admin") == {"acme-spec", "guide", "rival-pump"}
    assert listed(workspace_id="acme") == {"acme-spec"}
    assert listed(status="draft") == {"acme-spec"}
    assert listed(status="active") == {"guide"}
    assert listed(domain="futurehub") == {"guide"}
    assert listed(source_type="policy") == {"acme-spec"}
    assert listed("admin", source_type="guide", workspace_id="GLOBAL") == {"guide"}
    assert api("GET", "/v1/documents", params={"workspace_id": "rival"}).status_code == 404


def test_sessions_workspaces_and_jobs_are_listed_per_key(api: Api) -> None:
    assert _ids(api("GET", "/v1/sessions"), "sessions") == {"acme-chat"}
    assert _ids(api("GET", "/v1/sessions", "admin"), "sessions") == {"acme-chat", "rival-chat"}
    assert _ids(api("GET", "/v1/workspaces"), "workspaces") == {"acme", "GLOBAL"}
    assert _ids(api("GET", "/v1/workspaces", "admin"), "workspaces") == {
        "acme", "rival", "GLOBAL"}  # fmt: skip
    files = [("files", ("r.md", b"# R\n\nRival text.\n", "text/markdown"))]
    job = api("POST", "/v1/documents", "rival", files=files).json()["job"]
    assert job["workspace_id"] == "rival"  # the key's only workspace
    assert _ids(api("GET", "/v1/jobs", "rival"), "jobs") == {job["id"]}
    assert _ids(api("GET", "/v1/jobs", "admin"), "jobs") == {job["id"]}
    assert _ids(api("GET", "/v1/jobs"), "jobs") == set()
    api.wait_for(job["id"], "rival")


# -- sessions and documents -----------------------------------------------------------------


def test_a_session_is_made_attached_detached_and_closed(api: Api) -> None:
    created = api("POST", "/v1/sessions", json={"session_id": "s2", "workspace_id": "acme"})
    assert created.status_code == 201
    assert created.json()["session"] == {**created.json()["session"], "id": "acme:s2",
                                         "workspace_id": "acme", "closed_at": None}  # fmt: skip
    attached = api("POST", "/v1/sessions/acme:s2/attach", json={"document_id": "acme-spec"})
    assert attached.json() == {
        "attached": True,
        "document_id": "acme-spec",
        "session_id": "acme:s2",
    }
    again = api("POST", "/v1/sessions/acme:s2/attach", json={"document_id": "acme-spec"})
    assert again.json()["attached"] is False
    shown = api("GET", "/v1/documents/acme-spec").json()["document"]
    assert shown["session_ids"] == ["acme:s2"]
    detached = api("POST", "/v1/sessions/acme:s2/detach", json={"document_id": "acme-spec"})
    assert detached.json() == {
        "detached": True,
        "document_id": "acme-spec",
        "session_id": "acme:s2",
    }
    assert api("POST", "/v1/sessions/acme:s2/detach",
               json={"document_id": "acme-spec"}).json()["detached"] is False  # fmt: skip
    closed = api("POST", "/v1/sessions/acme:s2/close")
    assert closed.status_code == 200 and closed.json()["session"]["closed_at"] is not None


def test_session_rules_are_kept(api: Api) -> None:
    # A session id held by a workspace the key cannot read answers exactly as a free one:
    # the key names ids in its own workspace's namespace (no takeover, nothing learnt).
    foreign = api("POST", "/v1/sessions", json={"session_id": "rival-chat", "workspace_id": "acme"})
    free = api("POST", "/v1/sessions", json={"session_id": "free-chat", "workspace_id": "acme"})
    assert (foreign.status_code, free.status_code) == (201, 201)
    assert foreign.json()["session"]["id"] == "acme:rival-chat"
    assert free.json()["session"]["id"] == "acme:free-chat"
    assert "rival" not in foreign.text.replace("acme:rival-chat", "")
    # Documents of one workspace are never attached to another's session (the library
    # refuses it even for an admin, who may see both).
    across = api("POST", "/v1/sessions/acme-chat/attach", "admin",
                 json={"document_id": "rival-pump"})  # fmt: skip
    assert across.status_code == 400
    assert across.json()["error"]["type"] == "ScopeError"
    # A read-only key changes no session of a workspace it reads.
    for path, body in (("/v1/sessions/acme-chat/attach", {"document_id": "guide"}),
                       ("/v1/sessions/acme-chat/detach", {"document_id": "guide"})):  # fmt: skip
        assert api("POST", path, "reader", json=body).status_code == 403


def test_a_read_only_key_may_not_approve_or_delete(api: Api, store: Tether) -> None:
    for method, path in (("POST", "/v1/documents/acme-spec/approve"),
                         ("DELETE", "/v1/documents/acme-spec")):  # fmt: skip
        response = api(method, path, "reader")
        assert response.status_code == 403, response.text
    assert store.get_document("acme-spec").status == "draft"
    approved = api("POST", "/v1/documents/acme-spec/approve").json()["document"]
    assert approved["status"] == "active" and approved["id"] == "acme-spec"
    assert api("DELETE", "/v1/documents/acme-spec").json() == {"deleted": "acme-spec"}
    assert api("DELETE", "/v1/documents/acme-spec").status_code == 404


def test_text_is_indexed_in_the_placement_the_key_may_write(api: Api, store: Tether) -> None:
    added = api("POST", "/v1/documents/text", json={"text": "The acme valve opens at 3 bar.",
                                                    "title": "Valve"})  # fmt: skip
    assert added.status_code == 200, added.text
    result = added.json()["result"]
    assert result["status"] == "indexed" and result["chunk_count"] == 1
    assert store.get_document(result["document_id"]).workspace_id == "acme"  # the key's only
    again = api("POST", "/v1/documents/text", json={"text": "The acme valve opens at 3 bar.",
                                                    "title": "Valve"})  # fmt: skip
    assert again.json()["result"]["status"] == "skipped"
    in_session = api("POST", "/v1/documents/text",
                     json={"text": "Chat note.", "session_id": "acme-chat"}).json()  # fmt: skip
    assert store.get_document(in_session["result"]["document_id"]).session_ids == ("acme-chat",)


# -- the library registry -------------------------------------------------------------------


def test_the_library_registry_shows_each_files_status_and_error_to_admins(
    api: Api, store: Tether, tmp_path: Path
) -> None:
    folder = tmp_path / "library"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nValve.\n")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a PDF")
    store.library(folder, settle=0).scan()
    assert api("GET", "/v1/library", "acme").status_code == 403
    assert api("GET", "/v1/library", "reader").status_code == 403
    files = {Path(f["source_path"]).name: f for f in api("GET", "/v1/library", "admin").json()[
        "files"]}  # fmt: skip
    assert files["good.md"]["status"] == "indexed" and files["good.md"]["error"] is None
    assert files["broken.pdf"]["status"] == "error" and "broken.pdf" in files["broken.pdf"]["error"]
    assert files["broken.pdf"]["retry_count"] >= 1


# -- bad input ------------------------------------------------------------------------------

_MD = ("files", ("a.md", b"# A\n\nValve.\n", "text/markdown"))
_TRUNCATED = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"files\";"
              ' filename="a.md"\r\n\r\n# A\n').encode()  # fmt: skip
_MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


@pytest.mark.parametrize(
    ("method", "path", "options", "status"),
    [
        ("POST", "/v1/documents", {"files": [_MD], "data": {"tags": "{not json"}}, 422),
        ("POST", "/v1/documents", {"files": [_MD], "data": {"tags": "[1, 2]"}}, 422),
        ("POST", "/v1/documents", {"files": [_MD], "data": {"wait": "perhaps"}}, 422),
        ("POST", "/v1/documents", {"files": [_MD], "data": {"workspace": "acme"}}, 422),
        ("POST", "/v1/documents", {"files": [_MD], "data": {"workspace_id": "a" * 600}}, 422),
        ("POST", "/v1/documents", {"files": [_MD], "data": {"workspace_id": "../x"}}, 404),
        ("POST", "/v1/documents", {"data": {"workspace_id": "acme"}}, 422),
        ("POST", "/v1/documents", {"json": {"files": ["a.md"]}}, 422),
        ("POST", "/v1/documents", {"content": _TRUNCATED, "headers": _MULTIPART}, 400),
        (
            "POST",
            "/v1/documents",
            {"content": b"--x--", "headers": {"Content-Type": "multipart/form-data"}},
            422,
        ),
        ("POST", "/v1/documents/text", {"json": {"text": ""}}, 422),
        ("POST", "/v1/documents/text", {"json": {"text": "x", "colour": "red"}}, 422),
        ("POST", "/v1/documents/text", {"json": {"text": "x", "document_id": "a\x00b"}}, 400),
        (
            "POST",
            "/v1/documents/text",
            {"content": b"{", "headers": {"Content-Type": "application/json"}},
            422,
        ),
        ("GET", "/v1/documents", {"params": {"status": "archived"}}, 422),
        ("GET", "/v1/documents/acme-spec", {"params": {"chunks": "maybe"}}, 422),
        ("GET", "/v1/documents/nope", {}, 404),
        ("GET", "/v1/jobs/nope", {}, 404),
        ("GET", "/v1/jobs/nope/events", {}, 404),
        ("POST", "/v1/jobs/nope/cancel", {}, 404),
        ("POST", "/v1/sessions", {"json": {"session_id": "s"}}, 422),
        ("POST", "/v1/sessions", {"json": {"session_id": "  ", "workspace_id": "acme"}}, 400),
        ("POST", "/v1/sessions/nope/close", {}, 404),
        ("POST", "/v1/sessions/acme-chat/attach", {"json": {}}, 422),
        ("POST", "/v1/sessions/acme-chat/attach", {"json": {"document_id": "nope"}}, 404),
    ],
)
def test_bad_input_is_a_4xx_in_the_one_error_shape(
    api: Api, store: Tether, method: str, path: str, options: dict[str, Any], status: int
) -> None:
    before = store.store.counts()
    response = api(method, path, **options)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["status"] == status and error["type"] and error["message"]
    assert store.store.counts() == before


# -- the schema -----------------------------------------------------------------------------


def test_every_resource_route_describes_its_answer(api: Api) -> None:
    spec = api("GET", "/openapi.json", None).json()
    for path, operations in spec["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            ok = [code for code in operation["responses"] if code.startswith("2")]
            assert ok, (method, path)
            for code in ok:
                content = operation["responses"][code]["content"]
                schema = next(iter(content.values()))["schema"]
                if "text/event-stream" not in content:
                    assert "$ref" in schema or schema.get("type") == "array", (method, path)
    upload = spec["paths"]["/v1/documents"]["post"]
    assert set(upload["responses"]) >= {"200", "202", "401", "403", "404", "413", "422"}
    form = upload["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["required"] == ["files"]
    assert set(form["properties"]) == {"files", "workspace_id", "session_id", "tags", "wait"}
