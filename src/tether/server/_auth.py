"""The outer wall: the caller's key is checked before any SQL runs.

Every route takes the caller's :class:`~tether.Access` from :func:`access`, then asks
here whether it may see the scope, session, document or job it names. What a key may not
see is answered exactly like what does not exist (:func:`~tether.server._errors.not_found`).
Scopes in SQL stay the inner wall underneath.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from tether import Access, DocumentNotFound, Scope, Tether
from tether.models import GLOBAL_WORKSPACE, Document
from tether.server._errors import ApiError, not_found

#: How long the answer to "are there any keys?" is reused by a server started without
#: keys (a key made meanwhile closes it to anonymous callers within this many seconds).
KEYS_RECHECK_SECONDS = 2.0


@dataclass
class KeyPolicy:
    """Whether callers must send a key. A server started with keys always requires one;
    one started without keys (bound to loopback) lets anonymous callers in as the local
    operator until the first key is made."""

    tether: Tether
    open_at_start: bool
    _checked_at: float = 0.0
    _any_keys: bool = False

    def keys_required(self) -> bool:
        if not self.open_at_start:
            return True
        now = time.monotonic()
        if now - self._checked_at > KEYS_RECHECK_SECONDS:
            self._any_keys = self.tether.keys.any_active()
            self._checked_at = now
        return self._any_keys


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "Unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


async def access(request: Request) -> Access:
    """The caller's access, from ``Authorization: Bearer <key>`` (FastAPI dependency)."""
    policy: KeyPolicy = request.app.state.key_policy
    header = request.headers.get("authorization")
    if header is None:
        if await run_in_threadpool(policy.keys_required):
            raise _unauthorized("an API key is required: send 'Authorization: Bearer <key>'")
        return Access()
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise _unauthorized("send the API key as 'Authorization: Bearer <key>'")
    key = await run_in_threadpool(policy.tether.keys.authenticate, secret.strip())
    if key is None:
        raise _unauthorized("unknown or revoked API key")
    request.state.key_id = key.id
    if policy.tether.keys.use_is_due(key):  # most requests write nothing, and queue on nothing
        await request.app.state.service.write(policy.tether.keys.mark_used, key)
    return Access(key)


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
