"""The service's edges, before any route runs: which hosts and web pages it answers
(:class:`GuardOrigin`), who the caller is and how often it may ask (:class:`Authenticate`).

Both are ASGI middleware, so they decide on the request line and headers alone: a
request refused here costs no body read and no SQL beyond the key lookup.

- **Hosts.** A server without keys acts for anyone who reaches it as the local operator,
  so it answers loopback host names only (``localhost``, ``127.0.0.1``, ``[::1]``): a web
  page that rebinds its own DNS name to 127.0.0.1 sends its own name as ``Host`` and is
  refused. ``server.allowed_hosts`` adds names; a server with keys answers any name
  unless that list is set (a key is needed anyway).
- **Origins.** A browser names the page that sent a request in ``Origin`` (and
  ``Sec-Fetch-Site``). A request from another site's page is refused whatever its
  method or key, unless ``server.allowed_origins`` lists that origin (then it also gets
  CORS headers); the console, served by the server itself, is same-origin.
- **Keys first.** ``/v1``, ``/mcp`` and ``/metrics`` authenticate before the body is
  read: a keyless 200 MiB request is a 401 after its headers.
- **Rates.** Each key has a token bucket (``server.requests_per_second``,
  ``server.request_burst``); a request beyond it is a 429 with ``Retry-After``. The
  local operator of a keyless server has no limit.
"""

from __future__ import annotations

import fnmatch
import json
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from tether import ApiKey
from tether.access import asked_by
from tether.server._auth import ACCESS_STATE, KeyPolicy, authenticate
from tether.server._errors import ApiError, error_body
from tether.settings import ServerSettings

#: Host names that always reach a server: the machine's own loopback.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: Paths whose callers are authenticated before their body is read.
KEYED_PREFIXES = ("/v1/", "/mcp", "/metrics")
#: The request headers a page of an allowed origin may send (CORS), MCP's included.
CLIENT_HEADERS = (
    "X-Tether-Scope",
    "X-Tether-Workspace",
    "X-Tether-Session",
    "X-Tether-Guarded",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
)


def host_name(host: str) -> str:
    """``host`` without its port (``[::1]:8000`` -> ``[::1]``), lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@dataclass(frozen=True)
class EdgeRule:
    """The allowed hosts and origins of one server."""

    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    key_policy: KeyPolicy

    @classmethod
    def of(cls, settings: ServerSettings, key_policy: KeyPolicy) -> EdgeRule:
        origins = tuple(o.strip().rstrip("/").lower() for o in settings.allowed_origins)
        hosts = tuple(h.strip().lower() for h in settings.allowed_hosts)
        return cls(hosts, origins, key_policy)

    def host_allowed(self, host: str) -> bool:
        name = host_name(host)
        if name in LOOPBACK_HOSTS or name.startswith("127."):
            return True
        if not self.allowed_hosts:
            return not self.key_policy.open_at_start  # keyed from the start: any name
        host = host.strip().lower()
        return any(fnmatch.fnmatchcase(name, p) or host == p for p in self.allowed_hosts)

    def origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.allowed_origins or "*" in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == host.strip().lower()


async def _refuse(send: Send, status: int, kind: str, message: str, **headers: str) -> None:
    body = json.dumps(error_body(status, kind, message)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


class GuardOrigin:
    """ASGI middleware: requests to an unknown host name, or from another site's web
    page, are refused (421 and 403) before anything else runs."""

    def __init__(self, app: ASGIApp, rule: EdgeRule) -> None:
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "")
        if not self.rule.host_allowed(host):
            await _refuse(
                send,
                421,
                "MisdirectedRequest",
                f"this server does not answer for host {host_name(host)!r}; add it"
                " to server.allowed_hosts to allow it",
            )
            return
        origin = headers.get("origin")
        cross_site = headers.get("sec-fetch-site") == "cross-site"
        if (origin is not None and not self.rule.origin_allowed(origin, host)) or (
            origin is None and cross_site
        ):
            await _refuse(
                send,
                403,
                "Forbidden",
                f"requests from the web page origin {origin or 'of another site'!r}"
                " are refused; add it to server.allowed_origins to allow it",
            )
            return
        await self.app(scope, receive, send)


@dataclass
class Bucket:
    """A token bucket: ``rate`` tokens a second, at most ``burst`` held."""

    rate: float
    burst: int
    tokens: float = 0.0
    at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def take(self) -> float:
        """0 if a token was taken, else the seconds until one is there."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class RateLimits:
    """One bucket per API key (``rate`` 0: no limit)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()

    def wait_for(self, key_id: str) -> float:
        """0 if ``key_id`` may send a request now, else the seconds to wait."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            bucket = self._buckets.get(key_id)
            if bucket is None:
                bucket = self._buckets[key_id] = Bucket(self.rate, self.burst)
            return bucket.take()


class Authenticate:
    """ASGI middleware: the caller of ``/v1``, ``/mcp`` and ``/metrics`` is known (or
    refused, 401) before its body is read, and held to its key's request rate (429). The
    routes' :func:`~tether.server._auth.access` dependency reads what was found here."""

    def __init__(
        self,
        app: ASGIApp,
        policy: KeyPolicy,
        limits: RateLimits,
        touch: Callable[[ApiKey], Awaitable[None]],
    ) -> None:
        self.app = app
        self.policy = policy
        self.limits = limits
        self.touch = touch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(KEYED_PREFIXES) or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        try:
            caller = await run_in_threadpool(
                authenticate, self.policy, _headers(scope).get("authorization")
            )
        except ApiError as exc:
            await _refuse(send, exc.status, exc.kind, exc.message, **(exc.headers or {}))
            return
        if caller.key is not None:
            wait = math.ceil(self.limits.wait_for(caller.key.id))
            if wait > 0:
                await _refuse(
                    send,
                    429,
                    "TooManyRequests",
                    f"this key is over its request rate; retry in {wait}s",
                    **{"Retry-After": str(wait)},
                )
                return
            await self.touch(caller.key)
        scope.setdefault("state", {})[ACCESS_STATE] = caller
        with asked_by(None if caller.key is None else caller.key.id):  # audited as its asker
            await self.app(scope, receive, send)
