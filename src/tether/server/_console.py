"""The web console: static files in this package, served at ``/console/``.

The console is a client of the HTTP API and nothing else: its script signs in with an API
key (kept in the tab's ``sessionStorage``) and calls ``/v1/...`` with it, so a key sees
in the console exactly what it may see over the API. Nothing is fetched from elsewhere:
the Content-Security-Policy allows this origin only.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.responses import RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Where the console's files are (shipped in the package).
CONSOLE_DIR = Path(__file__).parent / "console"
#: This origin only: no script, style, font or request elsewhere, no framing.
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none';"
    " form-action 'self'"
)


class _ConsoleHeaders:
    """Security headers on the console's responses (pure ASGI: the API's own requests,
    streams included, pass through untouched)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/console"):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = POLICY
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "no-referrer"
                headers["Cache-Control"] = "no-cache"
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install(app: FastAPI) -> None:
    """Serve the console at ``/console/`` (and send ``/`` there)."""
    app.mount("/console", StaticFiles(directory=CONSOLE_DIR, html=True), name="console")
    app.add_middleware(_ConsoleHeaders)

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/console/")
