"""The resource routes against a real server on loopback: uploads (a PDF made here) as a
background job followed to the end by polling and by Server-Sent Events, text, listing,
chunks, approve and delete, sessions, workspaces, the library registry, and the key wall
on each (another workspace's document, session or job is a 404; a read-only key's write
is a 403)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import make_pdf, make_settings
from tether import Tether
from tether.server import create_app


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Tether]:
    with Tether(db=tmp_path / "t.db", settings=make_settings(max_file_bytes=200_000)) as t:
        t.create_session("acme-chat", workspace_id="acme")
        t.create_session("rival-chat", workspace_id="rival")
        t.add(text="The rival pump runs at 12 bar.", title="Rival pump", workspace_id="rival",
              document_id="rival-pump", session_id="rival-chat")  # fmt: skip
        t.add(text="Every valve is checked yearly.", title="Global guide", document_id="guide")
        yield t


@pytest.fixture
def api(store: Tether, keys: dict[str, str], serve_app: Any) -> Iterator[Any]:
    with serve_app(create_app(store, warm=False, mcp=False)) as url:

        def call(method: str, path: str, key: str = "acme", **options: Any) -> httpx.Response:
            headers = {"Authorization": f"Bearer {keys[key]}"}
            return httpx.request(method, url + path, headers=headers, timeout=60, **options)

        call.url = url  # type: ignore[attr-defined]
        yield call


def wait_for_job(api: Any, job_id: str, key: str = "acme") -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        job = api("GET", f"/v1/jobs/{job_id}", key).json()["job"]
        if job["status"] not in ("queued", "running"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def test_an_upload_is_a_job_whose_progress_ends_in_searchable_documents(
    api: Any, tmp_path: Path
) -> None:
    pdf = make_pdf(tmp_path / "manual.pdf", ["The drain valve is on the left.",
                                             "Replace the gasket every spring."])  # fmt: skip
    notes = b"# Notes\n\nThe seal kit is part 4471.\n"
    files = [
        ("files", ("manual.pdf", pdf.read_bytes(), "application/pdf")),
        ("files", ("../../etc/notes.md", notes, "text/markdown")),
    ]
    form = {"workspace_id": "acme", "tags": json.dumps({"domain": "futurehub"})}
    response = api("POST", "/v1/documents", files=files, data=form)
    assert response.status_code == 202, response.text
    job = response.json()["job"]
    assert job["workspace_id"] == "acme" and job["progress"]["total"] == 2
    done = wait_for_job(api, job["id"])
    assert done["status"] == "succeeded", [r["error"] for r in done["results"]]
    assert sorted(r["source"] for r in done["results"]) == ["../../etc/notes.md", "manual.pdf"]
    assert all("tether-upload-" not in json.dumps(r) for r in done["results"])  # no temp paths
    listed = api("GET", "/v1/documents", params={"workspace_id": "acme"}).json()["documents"]
    assert {d["title"] for d in listed} >= {"Notes"}
    pdf_doc = next(d for d in listed if d["mime"] == "application/pdf")
    shown = api("GET", f"/v1/documents/{pdf_doc['id']}", params={"chunks": "true"}).json()
    assert [c["page"] for c in shown["chunks"]] == [1, 2]
    assert all(c["token_count"] for c in shown["chunks"])
    hits = api("POST", "/v1/search", json={"query": "gasket", "scope": "workspace",
                                           "workspace_id": "acme"}).json()["hits"]  # fmt: skip
    assert hits[0]["page"] == 2


def test_the_job_event_stream_reports_progress_then_done(api: Any) -> None:
    files = [("files", (f"note{i}.md", f"# Note {i}\n\nValve {i}.\n".encode(), "text/markdown"))
             for i in range(3)]  # fmt: skip
    job = api("POST", "/v1/documents", files=files, data={"workspace_id": "acme"}).json()["job"]
    events = []
    with httpx.stream("GET", f"{api.url}/v1/jobs/{job['id']}/events", timeout=60,
                      headers={"Authorization": api("GET", "/healthz").request.headers[
                          "authorization"]}) as stream:  # fmt: skip
        assert stream.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    assert events[-1][0] == "done"
    assert events[-1][1]["status"] == "succeeded"
    assert events[-1][1]["progress"]["done"] == 3
    assert all(name == "progress" for name, _ in events[:-1]) and len(events) >= 2


def test_uploads_over_the_limit_or_unsupported_fail_typed(api: Any, tmp_path: Path) -> None:
    big = api("POST", "/v1/documents", data={"workspace_id": "acme", "wait": "true"},
              files=[("files", ("big.txt", b"x" * 300_000, "text/plain"))])  # fmt: skip
    assert big.status_code == 413
    assert big.json()["error"]["type"] == "LoadLimitExceeded"
    before = api("GET", "/v1/documents", params={"workspace_id": "acme"}).json()["documents"]
    files = [
        ("files", ("notes.md", b"# Notes", "text/markdown")),
        ("files", ("tool.exe", b"MZ\x90\x00\x03", "application/octet-stream")),
    ]
    odd = api("POST", "/v1/documents", data={"workspace_id": "acme", "wait": "true"}, files=files)
    # Refused before anything is indexed, the readable file of the upload included.
    assert odd.status_code == 415, odd.text
    assert odd.json()["error"]["type"] == "UnsupportedFileType"
    assert "tool.exe" in odd.json()["error"]["message"]
    after = api("GET", "/v1/documents", params={"workspace_id": "acme"}).json()["documents"]
    assert after == before
    # A file whose name says nothing is read by its content: an extensionless PDF is a PDF.
    pdf = make_pdf(tmp_path / "scan.pdf", ["The sump pump is rated for 40 litres a minute."])
    upload = [("files", ("scan-0042", pdf.read_bytes(), "application/octet-stream"))]
    found = api(
        "POST", "/v1/documents", data={"workspace_id": "acme", "wait": "true"}, files=upload
    )
    assert found.status_code == 200, found.text
    [result] = found.json()["results"]
    assert result["status"] == "indexed", result
    none = api("POST", "/v1/documents", data={"workspace_id": "acme"})
    assert none.status_code == 422


def test_text_approve_and_delete(api: Any, store: Tether) -> None:
    added = api("POST", "/v1/documents/text", json={
        "text": "Draft: the new valve spec.", "title": "Spec", "workspace_id": "acme",
        "tags": {"source_type": "guide"}})  # fmt: skip
    assert added.status_code == 200, added.text
    document_id = added.json()["result"]["document_id"]
    store.set_status(document_id, "draft")
    approved = api("POST", f"/v1/documents/{document_id}/approve").json()["document"]
    assert approved["status"] == "active"
    assert api("DELETE", f"/v1/documents/{document_id}").json() == {"deleted": document_id}
    assert api("GET", f"/v1/documents/{document_id}").status_code == 404


def test_sessions_create_attach_detach_close(api: Any) -> None:
    created = api("POST", "/v1/sessions", json={"session_id": "s2", "workspace_id": "acme"})
    assert created.status_code == 201
    added = api("POST", "/v1/documents/text", json={"text": "Valve note.", "title": "N",
                                                    "workspace_id": "acme"}).json()  # fmt: skip
    doc = added["result"]["document_id"]
    assert api("POST", "/v1/sessions/acme:s2/attach", json={"document_id": doc}).json()["attached"]
    assert api("POST", "/v1/sessions/acme:s2/attach", json={"document_id": "guide"}).json()[
        "attached"
    ]
    in_session = api("GET", "/v1/documents", params={"session_id": "acme:s2"}).json()["documents"]
    assert {d["id"] for d in in_session} == {doc, "guide"}
    assert api("POST", "/v1/sessions/acme:s2/detach", json={"document_id": doc}).json()["detached"]
    closed = api("POST", "/v1/sessions/acme:s2/close").json()["session"]
    assert closed["closed_at"] is not None
    assert {s["id"] for s in api("GET", "/v1/sessions").json()["sessions"]} == {
        "acme-chat",
        "acme:s2",
    }
    assert {w["id"] for w in api("GET", "/v1/workspaces").json()["workspaces"]} == {
        "acme", "GLOBAL"}  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "options"),
    [
        ("GET", "/v1/documents/rival-pump", {}),
        ("DELETE", "/v1/documents/rival-pump", {}),
        ("POST", "/v1/documents/rival-pump/approve", {}),
        ("GET", "/v1/documents", {"params": {"workspace_id": "rival"}}),
        ("GET", "/v1/documents", {"params": {"session_id": "rival-chat"}}),
        ("POST", "/v1/sessions/rival-chat/close", {}),
        ("POST", "/v1/sessions/rival-chat/attach", {"json": {"document_id": "guide"}}),
        ("POST", "/v1/documents/text", {"json": {"text": "x", "workspace_id": "rival"}}),
        ("POST", "/v1/documents/text", {"json": {"text": "x", "session_id": "rival-chat"}}),
        ("GET", "/v1/sessions", {"params": {"workspace_id": "rival"}}),
    ],
)
def test_another_workspace_is_a_404_and_changes_nothing(
    api: Any, store: Tether, method: str, path: str, options: dict[str, Any]
) -> None:
    before = store.store.counts()
    response = api(method, path, **options)
    assert response.status_code == 404, response.text
    assert response.json()["error"]["type"] == "NotFound"
    assert store.store.counts() == before
    assert store.get_document("rival-pump").status == "active"


def test_a_job_of_another_workspace_is_a_404(api: Any) -> None:
    files = [("files", ("a.md", b"# A\n\nText.\n", "text/markdown"))]
    job = api("POST", "/v1/documents", files=files, data={"workspace_id": "rival"},
              key="rival").json()["job"]  # fmt: skip
    assert api("GET", f"/v1/jobs/{job['id']}", "acme").status_code == 404
    assert api("POST", f"/v1/jobs/{job['id']}/cancel", "acme").status_code == 404
    assert api("GET", f"/v1/jobs/{job['id']}/events", "acme").status_code == 404
    assert [j["id"] for j in api("GET", "/v1/jobs", "acme").json()["jobs"]] == []
    assert [j["id"] for j in api("GET", "/v1/jobs", "rival").json()["jobs"]] == [job["id"]]


def test_a_read_only_key_reads_but_every_write_is_a_403(api: Any, store: Tether) -> None:
    before = store.store.counts()
    assert api("GET", "/v1/documents", "reader").status_code == 200
    for method, path, options in (
        ("POST", "/v1/documents/text", {"json": {"text": "x", "workspace_id": "acme"}}),
        ("POST", "/v1/sessions", {"json": {"session_id": "s9", "workspace_id": "acme"}}),
        ("POST", "/v1/sessions/acme-chat/close", {}),
        ("POST", "/v1/documents/text", {"json": {"text": "x"}}),  # the global library
    ):
        response = api(method, path, "reader", **options)
        assert response.status_code == 403, (path, response.text)
    assert store.store.counts() == before


def test_a_global_documents_sessions_elsewhere_are_not_shown(api: Any) -> None:
    api("POST", "/v1/sessions/rival-chat/attach", "rival", json={"document_id": "guide"})
    seen = api("GET", "/v1/documents/guide").json()["document"]
    assert seen["session_ids"] == []
    assert api("GET", "/v1/documents/guide", "rival").json()["document"]["session_ids"] == [
        "rival-chat"]  # fmt: skip


def test_the_library_registry_is_for_admins(api: Any, store: Tether, tmp_path: Path) -> None:
    folder = tmp_path / "library"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nValve.\n")
    store.library(folder, settle=0).scan()
    assert api("GET", "/v1/library", "acme").status_code == 403
    files = api("GET", "/v1/library", "admin").json()["files"]
    assert [Path(f["source_path"]).name for f in files] == ["a.md"]
    assert files[0]["status"] == "indexed"


def test_bad_tags_fail_an_upload_at_once_and_a_nul_session_id_is_refused(api: Any) -> None:
    files = [("files", ("a.md", b"# A\n\nText.\n", "text/markdown"))]
    bad = api("POST", "/v1/documents", files=files,
              data={"workspace_id": "acme", "tags": json.dumps({"domain": "No!"})})  # fmt: skip
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "InvalidTag"
    assert api("GET", "/v1/jobs").json()["jobs"] == []
    nul = api("POST", "/v1/sessions", json={"session_id": "a\u0000b", "workspace_id": "acme"})
    assert nul.status_code == 400 and "cannot be stored" in nul.json()["error"]["message"]


def test_the_same_upload_again_is_the_same_document(api: Any, store: Tether) -> None:
    """An upload is known by the name it came under (``upload:NAME``), not by the
    temporary path it was saved to: unchanged it is skipped, changed it is replaced."""

    def upload(text: bytes) -> dict[str, Any]:
        files = [("files", ("notes.md", text, "text/markdown"))]
        response = api("POST", "/v1/documents", files=files,
                       data={"workspace_id": "acme", "wait": "true"})  # fmt: skip
        [result] = response.json()["results"]
        return result

    first = upload(b"# Notes\n\nThe seal kit is part 4471.\n")
    again = upload(b"# Notes\n\nThe seal kit is part 4471.\n")
    changed = upload(b"# Notes\n\nThe seal kit is part 4472.\n")
    assert (first["status"], again["status"], changed["status"]) == (
        "indexed", "skipped", "replaced")  # fmt: skip
    assert first["document_id"] == again["document_id"] == changed["document_id"]
    [document] = store.documents(workspace_id="acme")
    assert document.source_path == "upload:notes.md"


def test_every_write_of_the_server_runs_on_its_one_writer_thread(
    store: Tether, keys: dict[str, str], serve_app: Any, tmp_path: Path
) -> None:
    """Uploads (as a job and waited for), text, sessions, approve and delete: every
    write transaction the server opens runs on the writer thread, while the files load
    and embed elsewhere; after the server stops, the library writes in place again."""
    db = store.store.db
    threads: list[str] = []
    write = db.write

    def recorded() -> Any:
        if not db.connection().in_transaction:  # an outermost transaction
            threads.append(threading.current_thread().name)
        return write()

    db.write = recorded  # type: ignore[method-assign]
    pdf = make_pdf(tmp_path / "manual.pdf", ["The drain valve is on the left."])
    with serve_app(create_app(store, warm=False, mcp=False)) as url:
        headers = {"Authorization": f"Bearer {keys['acme']}"}

        def call(method: str, path: str, **options: Any) -> httpx.Response:
            response = httpx.request(method, url + path, headers=headers, timeout=60, **options)
            assert response.status_code < 300, response.text
            return response

        job = call(
            "POST",
            "/v1/documents",
            data={"workspace_id": "acme"},
            files=[("files", ("manual.pdf", pdf.read_bytes(), "application/pdf"))],
        )
        assert wait_for_job(call_as(url, keys["acme"]), job.json()["job"]["id"])["status"] == (
            "succeeded")  # fmt: skip
        call(
            "POST",
            "/v1/documents",
            data={"session_id": "acme-chat", "workspace_id": "acme", "wait": "true"},
            files=[("files", ("n.md", b"# N\n\nSeal 4471.\n", "text/markdown"))],
        )
        added = call("POST", "/v1/documents/text", json={"text": "Draft note.", "title": "D",
                     "workspace_id": "acme"}).json()["result"]  # fmt: skip
        call("POST", f"/v1/documents/{added['document_id']}/approve")
        call("DELETE", f"/v1/documents/{added['document_id']}")
    assert len(threads) >= 6  # the two uploads' placements and groups, text, approve, delete
    assert set(threads) == {"tether-writer_0"}, threads
    assert store._index().writer is None
    store.add(text="Written in place again.", title="After")
    assert threads[-1] == threading.current_thread().name


def call_as(url: str, key: str) -> Any:
    def call(method: str, path: str, _: str = "", **options: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.request(method, url + path, headers=headers, timeout=60, **options)

    return call
