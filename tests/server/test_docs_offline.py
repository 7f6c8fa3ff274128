"""`tether serve`'s API docs, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), on a machine
with no internet: the pages name only this server's files, every file answers with its
type, the pages answer keys and strangers exactly as ``/openapi.json`` does, a missing
``fastapi-offline`` is a page that says so, and a real browser that may reach nothing but
the server renders both.

Over real HTTP on loopback (uvicorn in a thread); the browser case in Debian's chromium
driven by Playwright, screenshotted into ``test-artifacts/docs/``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import REPO_ROOT, as_key, make_settings
from tether import Tether
from tether.server import create_app

Serve = Callable[[Any], AbstractContextManager[str]]

PAGES = ("/docs", "/redoc")
#: The type each kind of file a page loads must be served with.
TYPES = {
    ".js": {"text/javascript", "application/javascript"},
    ".css": {"text/css"},
    ".png": {"image/png"},
    ".json": {"application/json"},
}
#: ``src="..."``, ``href="..."``, ReDoc's ``spec-url="..."`` and Swagger UI's ``url: '...'``.
REFERENCE = re.compile(r"""(?:\b(?:src|href|spec-url)=|\burl:\s*)["']([^"']+)["']""")


def references(page: str) -> list[str]:
    """The URLs a docs page loads."""
    return REFERENCE.findall(page)


def media_type(response: httpx.Response) -> str:
    return response.headers["content-type"].split(";")[0].strip()


@pytest.fixture
def keyed(tmp_path: Path, serve_app: Serve) -> Iterator[tuple[str, str]]:
    """A server whose store has a key (the key wall is up): its URL and the key."""
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        secret = t.keys.create(workspaces=["acme"])[1]
        with serve_app(create_app(t, warm=False, mcp=False)) as url:
            yield url, secret


@pytest.fixture
def keyless(tmp_path: Path, serve_app: Serve) -> Iterator[str]:
    """A server without keys (the local operator's, on loopback): it answers loopback
    host names only."""
    with (
        Tether(db=tmp_path / "t.db", settings=make_settings()) as t,
        serve_app(create_app(t, warm=False, mcp=False)) as url,
    ):
        yield url


# -- the pages and their files ------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_a_docs_page_names_only_this_servers_files_and_each_answers_with_its_type(
    keyed: tuple[str, str], page: str
) -> None:
    url, _ = keyed
    response = httpx.get(url + page)
    assert response.status_code == 200
    assert media_type(response) == "text/html"
    assert "http://" not in response.text and "https://" not in response.text
    found = references(response.text)
    assert "/openapi.json" in found
    assert {Path(ref).suffix for ref in found} >= {".js", ".png", ".json"}
    for ref in found:
        assert ref.startswith("/") and not ref.startswith("//"), ref  # this server's
        asset = httpx.get(url + ref)
        assert asset.status_code == 200, ref
        assert media_type(asset) in TYPES[Path(ref).suffix], (ref, asset.headers)
        assert asset.content, ref
    # What the UIs fetch by themselves stays on this origin, too.
    policy = response.headers["content-security-policy"]
    assert "connect-src 'self'" in policy and "img-src 'self' data:" in policy


def test_swagger_ui_loads_its_script_and_style_and_never_asks_the_validator(
    keyed: tuple[str, str],
) -> None:
    url, _ = keyed
    page = httpx.get(url + "/docs").text
    found = references(page)
    assert any(ref.endswith("swagger-ui-bundle.js") for ref in found)
    assert any(ref.endswith("swagger-ui.css") for ref in found)
    assert '"validatorUrl": null' in page  # no schema posted to validator.swagger.io
    script = httpx.get(url + next(r for r in found if r.endswith(".js"))).text
    assert "SwaggerUIBundle" in script


def test_a_file_the_pages_do_not_ship_is_a_404_and_the_folder_no_listing(
    keyed: tuple[str, str],
) -> None:
    url, _ = keyed
    for path in ("/docs/assets/nothing.js", "/docs/assets/", "/docs/assets/../_docs.py"):
        assert httpx.get(url + path).status_code == 404, path


# -- keys, hosts and origins: as /openapi.json ------------------------------------------------

DOC_PATHS = ("/openapi.json", "/docs", "/redoc", "/docs/assets/swagger-ui.css")


def test_the_docs_answer_without_a_key_as_the_schema_does(keyed: tuple[str, str]) -> None:
    url, secret = keyed
    assert httpx.get(url + "/v1/me").status_code == 401  # the key wall is up ...
    for path in DOC_PATHS:  # ... and, like the schema, the docs are not behind it
        assert httpx.get(url + path).status_code == 200, path
        assert httpx.get(url + path, headers=as_key(secret)).status_code == 200, path
        assert httpx.get(url + path, headers=as_key("tether_wrong")).status_code == 200, path


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example:8000"}, 421),  # a page that rebinds its DNS name
        ({"Origin": "http://evil.example"}, 403),  # another site's page
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({}, 200),
    ],
    ids=["rebound-host", "cross-site-origin", "cross-site-fetch", "loopback"],
)
def test_the_docs_meet_the_host_and_origin_checks_as_the_schema_does(
    keyless: str, headers: dict[str, str], status: int
) -> None:
    for path in DOC_PATHS:
        assert httpx.get(keyless + path, headers=headers).status_code == status, path


# -- without fastapi-offline -------------------------------------------------------------------


def test_without_fastapi_offline_each_page_says_what_to_install(
    tmp_path: Path, serve_app: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "fastapi_offline", None)  # `import` raises ImportError
    with (
        Tether(db=tmp_path / "t.db", settings=make_settings()) as t,
        serve_app(create_app(t, warm=False, mcp=False)) as url,
    ):
        for page in PAGES:
            response = httpx.get(url + page)
            assert response.status_code == 503
            assert media_type(response) == "text/html"
            assert "fastapi-offline" in response.text
            assert "pip install 'tether[server]'" in response.text
            assert 'href="/openapi.json"' in response.text
            assert "http://" not in response.text and "https://" not in response.text
        assert httpx.get(url + "/docs/assets/swagger-ui.css").status_code == 404
        assert httpx.get(url + "/openapi.json").status_code == 200  # the API itself is whole


# -- in a browser that can reach nothing but the server --------------------------------------


@pytest.mark.slow
@pytest.mark.browser
def test_a_browser_offline_renders_both_pages(keyed: tuple[str, str]) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api", reason="needs the dev extra")
    chromium = os.environ.get("TETHER_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        pytest.skip("no chromium: make test installs Debian's (scripts/install-debian-packages.sh)")
    url, _ = keyed
    artifacts = REPO_ROOT / "test-artifacts" / "docs"
    artifacts.mkdir(parents=True, exist_ok=True)
    elsewhere: list[str] = []
    errors: list[str] = []

    def only_the_server(route: Any) -> None:
        if route.request.url.startswith(url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.route("**/*", only_the_server)
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url + "/docs")
            page.locator(".opblock-summary-path", has_text="/v1/search").first.wait_for()
            page.screenshot(path=str(artifacts / "swagger-ui.png"))
            page.goto(url + "/redoc")
            page.locator("h2", has_text="Search chunks inside a scope").first.wait_for()
            page.screenshot(path=str(artifacts / "redoc.png"))
        finally:
            browser.close()
    assert errors == [], f"the docs threw: {errors}"
    assert elsewhere == [], f"the docs reached beyond the server: {elsewhere}"
