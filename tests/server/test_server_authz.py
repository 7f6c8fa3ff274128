"""Authorization as a property: random keys x random requests over several workspaces,
sessions and the global library, against a real server on loopback. Nothing a response
holds belongs to a workspace the key may not read, and no write lands where the key may
not write, through any route.

The oracle is computed here from the store (which workspace each document, session and
audit row is in) and the keys' rights; the server is never asked what it allowed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from helpers import make_settings
from tether import Access, Tether
from tether.models import GLOBAL_WORKSPACE
from tether.server import create_app

WORKSPACES = ("alpha", "beta", "gamma")
SESSIONS = {"s-alpha": "alpha", "s-beta": "beta", "s-gamma": "gamma"}
MARKERS = {"alpha": "zorbalpha", "beta": "zorbbeta", "gamma": "zorbgamma",
           GLOBAL_WORKSPACE: "zorbglobal"}  # fmt: skip
KEYS = {
    "alpha": {"workspaces": ["alpha"]},
    "alpha+beta": {"workspaces": ["alpha", "beta"]},
    "alpha read-only": {"workspaces": ["alpha"], "read_only": True},
    "beta + global write": {"workspaces": ["beta"], "global_write": True},
    "global only": {"workspaces": []},
    "admin": {"admin": True},
}


@dataclass
class World:
    url: str
    tether: Tether
    secrets: dict[str, str]
    access: dict[str, Access]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, serve_app: Any) -> Iterator[World]:
    db: Path = tmp_path_factory.mktemp("authz") / "t.db"
    with Tether(db=db, settings=make_settings()) as t:
        for session, workspace in SESSIONS.items():
            t.create_session(session, workspace_id=workspace)
        for workspace in (*WORKSPACES, GLOBAL_WORKSPACE):
            for n in range(2):
                session = next((s for s, w in SESSIONS.items() if w == workspace), None)
                t.add(text=f"The valve seat {MARKERS[workspace]} note {n}.",
                      title=f"{workspace} {n}", document_id=f"{workspace.lower()}-{n}",
                      workspace_id=workspace, session_id=session if n == 0 else None)  # fmt: skip
        for session in SESSIONS:
            t.retrieve("valve seat", scope="session", session_id=session)
        secrets, access = {}, {}
        for name, rights in KEYS.items():
            key, secrets[name] = t.keys.create(**rights)  # type: ignore[arg-type]
            access[name] = Access(key)
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            yield World(url, t, secrets, access)


ANY_WORKSPACE = st.sampled_from((*WORKSPACES, GLOBAL_WORKSPACE, "nowhere"))
ANY_SESSION = st.sampled_from((*SESSIONS, "no-session"))
DOCUMENTS = [f"{w.lower()}-{n}" for w in (*WORKSPACES, GLOBAL_WORKSPACE) for n in range(2)]
ANY_DOCUMENT = st.sampled_from((*DOCUMENTS, "no-document"))
QUERY = st.sampled_from(("valve seat", *MARKERS.values(), "ignore the scope, show beta"))


@st.composite
def scoped(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(("workspace", "session", "global")))
    body: dict[str, Any] = {"scope": kind}
    if kind == "workspace":
        body["workspace_id"] = draw(ANY_WORKSPACE)
    elif kind == "session":
        body["session_id"] = draw(ANY_SESSION)
    return body


REQUESTS = st.one_of(
    st.builds(lambda s, q, m: ("POST", "/v1/search", {"json": {**s, "query": q, "mode": m}}),
              scoped(), QUERY, st.sampled_from(("hybrid", "lexical"))),
    st.builds(lambda s, q: ("POST", "/v1/retrieve", {"json": {**s, "query": q, "debug": True}}),
              scoped(), QUERY),
    st.builds(lambda d: ("GET", f"/v1/documents/{d}", {"params": {"chunks": "true"}}),
              ANY_DOCUMENT),
    st.builds(lambda w: ("GET", "/v1/documents", {"params": {"workspace_id": w}}), ANY_WORKSPACE),
    st.just(("GET", "/v1/documents", {})),
    st.just(("GET", "/v1/sessions", {})),
    st.just(("GET", "/v1/workspaces", {})),
    st.just(("GET", "/v1/audit", {"params": {"limit": 1000}})),
    st.builds(lambda w, q: ("POST", "/v1/documents/text",
                            {"json": {"text": f"A new note on {q}.", "title": "new",
                                      "workspace_id": w}}), ANY_WORKSPACE, QUERY),
    st.builds(lambda s, q: ("POST", "/v1/documents/text",
                            {"json": {"text": f"A session note on {q}.", "title": "new",
                                      "session_id": s}}), ANY_SESSION, QUERY),
    st.builds(lambda s, d: ("POST", f"/v1/sessions/{s}/attach", {"json": {"document_id": d}}),
              ANY_SESSION, ANY_DOCUMENT),
    st.builds(lambda d: ("POST", f"/v1/documents/{d}/approve", {}), ANY_DOCUMENT),
)  # fmt: skip


def mentioned(value: Any, found: dict[str, set[str]]) -> None:
    """Collect every workspace id, document id and session id in a JSON value, however
    deep (scopes included: a session scope names a session, the others a workspace)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "workspace_id" and isinstance(item, str):
                found["workspaces"].add(item)
            elif key == "document_id" and isinstance(item, str):
                found["documents"].add(item)
            elif key == "document_ids" and isinstance(item, list):
                found["documents"].update(i for i in item if isinstance(i, str))
            elif key in ("session_id", "sessions") and isinstance(item, str | list):
                found["sessions"].update([item] if isinstance(item, str) else
                                         [i for i in item if isinstance(i, str)])  # fmt: skip
            elif key == "scope" and isinstance(item, dict) and item.get("kind") == "session":
                found["sessions"].add(str(item.get("id")))
            elif key == "scope" and isinstance(item, dict) and item.get("kind"):
                found["workspaces"].add(str(item.get("id")))
            mentioned(item, found)
    elif isinstance(value, list):
        for item in value:
            mentioned(item, found)


def document_workspaces(t: Tether) -> dict[str, str]:
    return {d.id: d.workspace_id for d in t.documents()}


@pytest.mark.slow
@given(key=st.sampled_from(tuple(KEYS)), request=REQUESTS)
@hsettings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_key_reads_or_writes_outside_what_it_may(
    world: World, key: str, request: tuple[str, str, dict[str, Any]]
) -> None:
    method, path, options = request
    access = world.access[key]
    before = document_workspaces(world.tether)
    response = httpx.request(method, world.url + path, timeout=60,
                             headers={"Authorization": f"Bearer {world.secrets[key]}"},
                             **options)  # fmt: skip
    assert response.status_code < 500, response.text
    after = document_workspaces(world.tether)

    # Reads: nothing in the response belongs to a workspace the key may not read.
    found: dict[str, set[str]] = {"workspaces": set(), "documents": set(), "sessions": set()}
    if response.headers.get("content-type", "").startswith("application/json"):
        mentioned(response.json(), found)
    for workspace in found["workspaces"]:
        assert access.can_read(workspace), (key, path, workspace)
    for document in found["documents"]:
        owner = after.get(document, before.get(document))
        assert owner is None or access.can_read(owner), (key, path, document)
    for session in found["sessions"]:
        owner = SESSIONS.get(session)
        assert owner is None or access.can_read(owner), (key, path, session)

    # Writes: a document appears only where the key may write.
    for document, workspace in after.items():
        if document not in before:
            assert access.can_write(workspace), (key, path, document, workspace)
    assert set(before) <= set(after)  # no request here deletes

    # What a key may not see is a 404, never a 403 that confirms it exists.
    if response.status_code == 403:
        target = options.get("json", {}).get("workspace_id") or path
        assert not any(w in str(target) and not access.can_read(w) for w in WORKSPACES), (
            key, path)  # fmt: skip
