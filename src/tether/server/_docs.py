"""The API's documentation pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served
without a request leaving this machine.

FastAPI's own pages load their script and style from a CDN, so offline they are blank.
The ``fastapi-offline`` package (in the ``server`` extra) ships both UIs' files; they are
served from :data:`ASSETS_URL` and the pages point there, and their
Content-Security-Policy keeps what the UIs fetch by themselves (ReDoc's footer logo, say)
on this origin. Without that package each page answers 503 and says what to install, and
where the schema is, rather than reaching for a CDN.

Like ``/openapi.json``, the pages and their files answer without an API key (the key wall
is for ``/v1``, ``/mcp`` and ``/metrics``); the host and origin checks apply to them as to
every path.
"""

from __future__ import annotations

import html
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

#: Where the UIs' files are served.
ASSETS_URL = "/docs/assets"
SWAGGER_JS = "swagger-ui-bundle.js"
SWAGGER_CSS = "swagger-ui.css"
REDOC_JS = "redoc.standalone.js"
FAVICON = "favicon.png"
#: The files the pages load, all shipped by fastapi-offline.
ASSET_FILES = (SWAGGER_JS, SWAGGER_CSS, REDOC_JS, FAVICON)
#: Swagger UI's own check of the schema posts it to validator.swagger.io: never.
SWAGGER_PARAMETERS = {"validatorUrl": None}
#: What the pages may fetch by themselves (the schema, "Try it out", images, fonts): from
#: this origin only. Scripts and styles are left alone: the pages name only this origin's,
#: and the UIs need inline ones.
POLICY = (
    "connect-src 'self'; img-src 'self' data:; font-src 'self' data:; object-src 'none';"
    " base-uri 'none'; frame-ancestors 'none'"
)

MISSING_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title></head>
<body>
<h1>{title}</h1>
<p>This page is not available: the <code>fastapi-offline</code> package, which holds the
{ui} files this server serves itself (nothing is loaded from the internet), is not
installed. Install the server extra, <code>pip install 'tether[server]'</code>, and
restart <code>tether serve</code>.</p>
<p>The API's OpenAPI schema is at <a href="{schema}">{schema}</a>.</p>
</body>
</html>
"""


def asset_dir() -> Path | None:
    """The folder of the UIs' files that fastapi-offline ships, or None when it is not
    installed (or no longer holds every file the pages load)."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    folder = Path(fastapi_offline.__file__).parent / "static"
    return folder if all((folder / name).is_file() for name in ASSET_FILES) else None


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` from this machine (``app`` made with
    ``docs_url=None, redoc_url=None``)."""
    folder = asset_dir()
    if folder is not None:
        app.mount(ASSETS_URL, StaticFiles(directory=folder), name="docs-assets")
    schema_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = _root_path(request)
        if folder is None:
            return _missing(f"{app.title} - Swagger UI", "Swagger UI", root + schema_url)
        page = get_swagger_ui_html(
            openapi_url=root + schema_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/{SWAGGER_JS}",
            swagger_css_url=f"{root}{ASSETS_URL}/{SWAGGER_CSS}",
            swagger_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}",
            swagger_ui_parameters=SWAGGER_PARAMETERS,
        )
        return _with_policy(page)

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = _root_path(request)
        if folder is None:
            return _missing(f"{app.title} - ReDoc", "ReDoc", root + schema_url)
        page = get_redoc_html(
            openapi_url=root + schema_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/{REDOC_JS}",
            redoc_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}",
            with_google_fonts=False,
        )
        return _with_policy(page)


def _root_path(request: Request) -> str:
    """The prefix a proxy serves the app under (``--root-path``), as FastAPI's own pages
    read it."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _with_policy(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    page.headers["X-Content-Type-Options"] = "nosniff"
    return page


def _missing(title: str, ui: str, schema_url: str) -> HTMLResponse:
    page = MISSING_PAGE.format(
        title=html.escape(title), ui=html.escape(ui), schema=html.escape(schema_url)
    )
    return _with_policy(HTMLResponse(page, status_code=503))
