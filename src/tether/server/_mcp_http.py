"""MCP over streamable HTTP, mounted at ``/mcp`` of ``tether serve``: each request is
authenticated and bound to its scope (see :mod:`tether.server._mcp`) before the SDK sees it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from tether import Access, InvalidArgument, Tether
from tether.server._auth import KeyPolicy, access
from tether.server._mcp import (
    BINDING,
    GUARDED_HEADER,
    SCOPE_HEADER,
    SESSION_HEADER,
    WORKSPACE_HEADER,
    Backend,
    Binding,
    Context,
    McpServer,
    bind,
)


class HttpBackend(Backend, Protocol):
    key_policy: KeyPolicy


class McpMount:
    """MCP over streamable HTTP, mounted at ``/mcp`` of the HTTP API. Each request is
    bound by its own key and scope headers before the MCP server sees it; it runs
    stateless (no MCP session to hijack), answering in JSON."""

    def __init__(self, svc: HttpBackend) -> None:
        self.svc = svc
        self.mcp = McpServer(svc, _request_binding)
        self._sessions: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def lifespan_context(self) -> AsyncIterator[None]:
        # A manager runs once; a fresh one for each start of the app.
        self._sessions = StreamableHTTPSessionManager(
            self.mcp.server,
            stateless=True,
            json_response=True,
            security_settings=_loopback_only() if self.svc.key_policy.open_at_start else None,
        )
        try:
            async with self._sessions.run():
                yield
        finally:
            self._sessions = None

    def asgi(self) -> Callable[[Scope, Receive, Send], Any]:
        return self._handle

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate and bind, then hand over to the SDK. A refusal (401, or a scope
        the key may not read) raises here and the API's error handlers answer it."""
        sessions = self._sessions
        if sessions is None:
            raise RuntimeError("the MCP mount is used outside the app's lifespan")
        if scope["type"] == "http":
            request = Request(scope, receive)
            caller = await access(request)
            scope[BINDING] = await self.svc.read(
                _bind_headers, self.svc.tether, caller, request.headers
            )
        await sessions.handle_request(scope, receive, send)


def _bind_headers(tether: Tether, caller: Access, headers: Mapping[str, str]) -> Binding:
    guarded = headers.get(GUARDED_HEADER, "true").strip().lower()
    if guarded not in ("true", "false", "1", "0"):
        raise InvalidArgument(f"X-Tether-Guarded must be true or false, not {guarded!r}")
    return bind(
        tether,
        caller,
        scope=headers.get(SCOPE_HEADER),
        session_id=headers.get(SESSION_HEADER),
        workspace_id=headers.get(WORKSPACE_HEADER),
        guarded=guarded in ("true", "1"),
    )


def _request_binding(ctx: Context) -> Binding:
    request = ctx.request
    binding = None if request is None else request.scope.get(BINDING)
    if not isinstance(binding, Binding):  # only McpMount reaches this server
        raise MCPError(INVALID_PARAMS, "this request was not bound to a scope")
    return binding


def _loopback_only() -> TransportSecuritySettings:
    """A server without keys answers loopback only: refuse a request whose Host or
    Origin is another site (DNS rebinding would let a web page call it)."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, "127.0.0.1", "localhost", "[::1]"],
        allowed_origins=[f"http://{host}" for host in hosts],
    )
