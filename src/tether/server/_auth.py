"""The outer wall: the caller's key is checked before any SQL runs.

Every route takes the caller's :class:`~tether.Access` from :func:`access`, then asks
here whether it may see the scope, session, document or job it names. What a key may not
see is answered exactly like what does not exist (:func:`~tether.server._errors.not_found`).
Scopes in SQL stay the inner wall underneath.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from tether import Access, DocumentNotFound, Scope, Tether
from tether.models import GLOBAL_WORKSPACE, Document
from tether.server._errors import ApiError, not_found

#: Where :class:`~tether.server._edges.Authenticate` leaves the caller's access in the
#: request's state, for :func:`access` to read.
ACCESS_STATE = "tether_access"


@dataclass
class KeyPolicy:
    """Whether callers must send a key. A server started with keys always requires one;
    one started without keys (bound to loopback) lets anonymous callers in as the local
    operator until the first key is made: asked on each anonymous request, so a key made
    by another process closes the server at once."""

    tether: Tether
    open_at_start: bool

    def keys_required(self) -> bool:
        return not self.open_at_start or self.tether.keys.any_active()


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "Unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def authenticate(policy: KeyPolicy, header: str | None) -> Access:
    """The access of a caller sending ``Authorization: header`` (blocking: a key lookup).
    ApiError 401 for a missing key where one is required, or an unknown one."""
    if header is None:
        if policy.keys_required():
            raise _unauthorized("an API key is required: send 'Authorization: Bearer <key>'")
        return Access()
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise _unauthorized("send the API key as 'Authorization: Bearer <key>'")
    key = policy.tether.keys.authenticate(secret.strip())
    if key is None:
        raise _unauthorized("unknown or revoked API key")
    return Access(key)


async def access(request: Request) -> Access:
    """The caller's access (FastAPI dependency): as the edge middleware found it, or
    (an app without it) from ``Authorization: Bearer <key>``."""
    found = request.scope.get("state", {}).get(ACCESS_STATE)
    if isinstance(found, Access):
        return found
    policy: KeyPolicy = request.app.state.key_policy
    return await run_in_threadpool(authenticate, policy, request.headers.get("authorization"))


def own_id(access: Access, workspace_id: str, chosen: str) -> str:
    """The id a caller's chosen document or session id is stored under.

    Ids are global keys of the store. A key bound to workspaces chooses ids in its
    workspace's own namespace (``plan`` in ``acme`` is ``acme:plan``; an id it got back,
    already ``acme:plan``, stays as it is), so no choice of id can meet another tenant's
    and tell a taken id from a free one. Admins and the local operator, who see every
    workspace, choose ids as they are."""
    if access.readable is None or not chosen.strip():  # a blank id: the library's error
        return chosen
    prefix = quote(workspace_id, safe="") + ":"
    return chosen if chosen.startswith(prefix) else prefix + chosen


def document_view(tether: Tether, access: Access, document: Document) -> dict[str, Any]:
    """A document as this caller may see it (both shells show documents through it): a
    global document's attachments to sessions of workspaces the caller cannot read are
    left out."""
    out = document.to_dict()
    if access.readable is not None and document.session_ids:
        workspaces = {s.id: s.workspace_id for s in tether.sessions()}
        out["session_ids"] = [
            s for s in document.session_ids if access.can_read(workspaces.get(s, ""))
        ]
    return out


def audit_view(tether: Tether, access: Access) -> dict[str, Any]:
    """The audit rows ``access`` may read, as :meth:`~tether.Tether.retrieval_log`
    arguments: an admin (or the local operator) every row; a key the rows of its own
    workspaces, and of the global library only those that keys of its workspaces asked
    (itself included) — another tenant's global questions are not for it."""
    key = access.key
    if access.readable is None or key is None:
        return {"workspace_ids": None}
    own = set(key.workspaces)
    askers = [k.id for k in tether.keys.list() if k.id == key.id or own & set(k.workspaces)]
    return {"workspace_ids": list(key.workspaces), "global_askers": askers}


def require_admin(access: Access) -> None:
    if not access.admin:
        raise ApiError(403, "Forbidden", "this needs an admin key")


def session_workspace(tether: Tether, access: Access, session_id: str) -> str:
    """The workspace of a session this caller may read; 404 otherwise."""
    session = tether.store.find_session(session_id)
    if session is None or not access.can_read(session.workspace_id):
        raise not_found("session", session_id)
    return session.workspace_id


def readable_scope(
    tether: Tether,
    access: Access,
    scope: str | None,
    session_id: str | None,
    workspace_id: str | None,
) -> Scope:
    """The scope a search or retrieval names, resolved as the library does, if this
    caller may read it."""
    resolved = tether.resolve_scope(scope, session_id=session_id, workspace_id=workspace_id)
    if resolved.kind == "session":
        session_workspace(tether, access, resolved.id)
    elif resolved.kind == "workspace" and not access.can_read(resolved.id):
        raise not_found("workspace", resolved.id)
    return resolved


def readable_document(tether: Tether, access: Access, document_id: str) -> Document:
    try:
        document = tether.get_document(document_id)
    except DocumentNotFound:
        raise not_found("document", document_id) from None
    if not access.can_read(document.workspace_id):
        raise not_found("document", document_id)
    return document


def writable_document(tether: Tether, access: Access, document_id: str) -> Document:
    document = readable_document(tether, access, document_id)
    if not access.can_write(document.workspace_id):
        raise ApiError(
            403, "Forbidden", f"this key may not change the documents of {document.workspace_id!r}"
        )
    return document


def writable_placement(
    tether: Tether, access: Access, workspace_id: str | None, session_id: str | None
) -> tuple[str, str | None]:
    """Where a write goes (the workspace named, else the session's, else the key's only
    workspace, else the global library), if this caller may write there."""
    if session_id is not None:
        own = session_workspace(tether, access, session_id)
        workspace_id = workspace_id or own
    if workspace_id is None:
        workspace_id = access.default_workspace()
    if workspace_id != GLOBAL_WORKSPACE and not access.can_read(workspace_id):
        raise not_found("workspace", workspace_id)
    if not access.can_write(workspace_id):
        raise ApiError(403, "Forbidden", f"this key may not write to {workspace_id!r}")
    return workspace_id, session_id
