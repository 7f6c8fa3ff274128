"""Prometheus metrics of one server (its own registry: two apps in one process never
share counters): requests and their latencies per route, retrievals by outcome."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.exceptions import HTTPException
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "tether_http_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "tether_http_request_duration_seconds",
            "HTTP request latency by route",
            ["route", "method"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.retrievals = Counter(
            "tether_retrievals",
            "Retrievals by outcome (grounded, ungrounded, skipped, blocked)",
            ["outcome"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _route(scope: Scope, router: Router | None) -> str:
    """The route template (``/v1/documents/{document_id}``), never the raw path: ids
    would make a metric per document. A request refused before routing (no key, a
    foreign origin) is matched here."""
    route = scope.get("route")
    if route is None and router is not None:
        route = next((r for r in router.routes if r.matches(scope)[0] == Match.FULL), None)
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class ObserveRequests:
    """ASGI middleware: each HTTP request counted and timed per route. (The request's
    server span, the parent of the library's spans such as ``rag.retrieve``, is
    FastAPI's own telemetry.)"""

    def __init__(self, app: ASGIApp, metrics: Metrics, router: Router | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        status = {"code": 500}
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = _route(scope, self.router)
            self.metrics.requests.labels(route, method, str(status["code"])).inc()
            self.metrics.latency.labels(route, method).observe(time.perf_counter() - started)


#: The one route whose body may be large: file uploads.
UPLOAD_PATH = "/v1/documents"


class LimitBody:
    """ASGI middleware: a request body over its route's limit is a 413 before it is all
    read (``Content-Length`` checked first; a chunked body is counted as it arrives)."""

    def __init__(self, app: ASGIApp, *, json_bytes: int, upload_bytes: int) -> None:
        self.app = app
        self.json_bytes = json_bytes
        self.upload_bytes = upload_bytes

    def _limit(self, scope: Scope) -> int:
        """The route decides, never the client's Content-Type: only the upload route
        takes files."""
        upload = scope.get("method") == "POST" and scope.get("path") == UPLOAD_PATH
        return self.upload_bytes if upload else self.json_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        seen = {"bytes": 0, "over": False}

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen["bytes"] += len(message.get("body", b""))
                if seen["bytes"] > limit:
                    seen["over"] = True
                    raise _BodyTooLarge(limit)
            return message

        started = {"sent": False}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                started["sent"] = True
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        except _BodyTooLarge:
            if not started["sent"]:
                await _too_large(send, limit)


class _BodyTooLarge(HTTPException):
    """Raised from ``receive``: an HTTPException, so that FastAPI's body parsing passes it
    on (it turns any other exception into a 400) and the error handler shapes it."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over this server's limit of {limit:,} bytes")


async def _too_large(send: Send, limit: int) -> None:
    import json

    body = json.dumps(
        {
            "error": {
                "type": "RequestTooLarge",
                "status": 413,
                "message": f"the request body is over this server's limit of {limit:,} bytes",
            }
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def outcome_of(result: Any) -> str:
    """A retrieval's outcome, as the audit log names it."""
    if not result.retrieved:
        return "skipped"
    return "grounded" if result.grounded else "ungrounded"
