"""The web console in a real browser: Debian's chromium, headless, driven by Playwright,
against ``tether serve``'s app on loopback with the real local model.

Every page is screenshotted into ``test-artifacts/console/`` (kept out of git) so that a
person can look at what the tests saw.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from helpers import REPO_ROOT, make_pdf, make_settings
from openai_fake import FakeOpenAI
from tether import DocumentNotFound, LocalEmbedder, Settings, Tether

pytestmark = [pytest.mark.slow, pytest.mark.browser]

playwright_api = pytest.importorskip("playwright.sync_api", reason="needs the dev extra")
ARTIFACTS = REPO_ROOT / "test-artifacts" / "console"
PUMP = (
    "Coolant pump P-7 service guide. The valve seat of the coolant pump is replaced every"
    " 500 operating hours. Before opening the pump casing, close both isolation valves and"
    " drain the casing through the bottom plug."
)
ROADMAP = (
    "Rival roadmap, confidential. The rival team plans to launch the hydrogen turbine in"
    " the third quarter, priced below every competitor."
)


def chromium_path() -> str | None:
    return os.environ.get("TETHER_CHROMIUM") or shutil.which("chromium")


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder, serve_app: Any
) -> Iterator[dict[str, Any]]:
    """A served store: acme (a session with a PDF manual), rival (its own document), the
    global library, and keys bound to acme, to rival, and admin."""
    from tether.server import create_app

    folder = tmp_path_factory.mktemp("console")
    tether = Tether(db=folder / "console.db", settings=make_settings(), embedder=local_embedder)
    tether.create_session("acme-chat", workspace_id="acme")
    tether.create_session("rival-chat", workspace_id="rival")
    tether.add(text=PUMP, title="Coolant pump P-7 guide", workspace_id="acme",
               tags={"domain": "futurehub", "source_type": "guide"})  # fmt: skip
    (rival,) = tether.add(text=ROADMAP, title="Rival roadmap", workspace_id="rival")
    tether.add(text="Draft: the pump's new maintenance schedule, not yet approved.",
               title="Draft schedule", workspace_id="acme", status="draft")  # fmt: skip
    tether.add(text="Office hours are 9 to 17 on weekdays.", title="Office hours",
               workspace_id="GLOBAL")  # fmt: skip
    (hostile,) = tether.add(
        text="A title that tries to run a script in the console.",
        title='<img src=x onerror="window.__pwned=1">Hostile',
        workspace_id="acme",
    )
    keys = {
        "acme": tether.keys.create(workspaces=["acme"], name="acme-app")[1],
        "rival": tether.keys.create(workspaces=["rival"], name="rival-app")[1],
        "admin": tether.keys.create(admin=True, name="ops")[1],
    }
    safety = " ".join(f"Safety rule {n}: wear gloves and goggles near the coolant loop."
                      for n in range(1, 30))  # fmt: skip
    impeller = " ".join(
        f"Impeller note {n}: the impeller of pump P-7 is inspected every 2000 hours for"
        " cavitation damage, and a pitted impeller is replaced, never repaired."
        for n in range(1, 15)
    )
    pdf = make_pdf(
        folder / "pump-manual.pdf",
        [f"Pump manual, page one. {safety}", f"Page two. {impeller}"],
        title="Pump manual",
    )
    library = folder / "library"
    library.mkdir()
    (library / "handbook.md").write_text("# Handbook\n\nBadges are renewed every year.\n")
    (library / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a PDF")
    tether.library(library, settle=0).scan()
    chromium = chromium_path()
    if chromium is None:
        pytest.skip("no chromium: make test installs Debian's (scripts/install-debian-packages.sh)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (
        serve_app(create_app(tether, open_access=False, warm=False)) as url,
        playwright_api.sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield {"url": url, "keys": keys, "pdf": pdf, "browser": browser, "tether": tether,
                   "rival_id": rival.document_id, "hostile_id": hostile.document_id}  # fmt: skip
        finally:
            browser.close()
            tether.close()


@pytest.fixture
def page(world: dict[str, Any]) -> Iterator[Any]:
    """A fresh browser tab. The console works without a network: any request that is
    not to the server is refused and fails the test."""
    context = world["browser"].new_context(viewport={"width": 1440, "height": 900})
    elsewhere: list[str] = []

    def only_the_server(route: Any) -> None:
        if route.request.url.startswith(world["url"]):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_server)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(20_000)
    yield page
    context.close()
    assert errors == [], f"the console threw: {errors}"
    assert elsewhere == [], f"the console reached beyond its server: {elsewhere}"


def shot(page: Any, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header stays at the top
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def sign_in(page: Any, world: dict[str, Any], who: str) -> None:
    page.goto(f"{world['url']}/console/")
    page.get_by_label("API key").fill(world["keys"][who])
    page.get_by_role("button", name="Sign in").click()
    page.locator("#signed-in").wait_for()


def expect() -> Any:
    # Assertions keep their own 5 s default, which ``set_default_timeout`` does not move:
    # each waits on real retrievals behind uvicorn while Chromium renders, on 2 cores.
    playwright_api.expect.set_options(timeout=30_000)
    return playwright_api.expect


def test_sign_in_refuses_a_wrong_key_then_shows_the_library(
    page: Any, world: dict[str, Any]
) -> None:
    page.goto(f"{world['url']}/")  # the root sends the browser to the console
    expect()(page).to_have_url(re.compile(r"/console/#/signin$"))
    page.get_by_label("API key").fill("not-a-key")
    page.get_by_role("button", name="Sign in").click()
    expect()(page.get_by_role("alert")).to_contain_text("unknown or revoked")
    shot(page, "01-sign-in")
    page.get_by_label("API key").fill(world["keys"]["acme"])
    page.get_by_role("button", name="Sign in").click()
    expect()(page.locator("#signed-in")).to_contain_text("acme-app")
    table = page.locator("#documents")
    expect()(table).to_contain_text("Coolant pump P-7 guide")
    expect()(table).to_contain_text("domain: futurehub")
    # A hostile title is text on the page, never markup that runs.
    expect()(table).to_contain_text('<img src=x onerror="window.__pwned=1">Hostile')
    assert page.evaluate("window.__pwned") is None
    shot(page, "02-library")
    draft = page.locator("#documents tr", has_text="Draft schedule")
    expect()(draft).to_contain_text("draft")
    draft.get_by_role("button", name="Approve").click()
    expect()(page.locator("#documents tr", has_text="Draft schedule")).to_contain_text("active")
    # The console is only this origin: the CSP says so on every console response.
    response = page.request.get(f"{world['url']}/console/console.js")
    assert "default-src 'self'" in response.headers["content-security-policy"]


def test_upload_a_pdf_and_see_it_indexed_then_open_its_chunks(
    page: Any, world: dict[str, Any]
) -> None:
    sign_in(page, world, "acme")
    page.get_by_role("link", name="Session acme-chat").click()
    expect()(page.get_by_role("heading", level=1)).to_contain_text("Session acme-chat")
    page.locator("#upload-files").set_input_files(str(world["pdf"]))
    page.get_by_role("button", name="Upload and index").click()
    status = page.locator("#upload-status")
    expect()(status).to_contain_text("Job succeeded", timeout=60_000)
    expect()(status).to_contain_text("pump-manual.pdf: indexed")
    row = page.locator("#documents tr", has_text="Pump manual")
    expect()(row).to_contain_text("active")
    shot(page, "03-upload")
    chunks = int(row.locator("td").nth(3).inner_text())
    assert chunks >= 1
    row.get_by_role("link").click()
    expect()(page.locator("#chunks tbody tr")).to_have_count(chunks)
    expect()(page.locator("#chunks")).to_contain_text("p. 2")
    shot(page, "04-document")


def test_a_retrieval_step_by_step_and_a_citation_opens_its_chunk_and_page(
    page: Any, world: dict[str, Any]
) -> None:
    sign_in(page, world, "acme")
    page.get_by_role("link", name="Retrieval debugger").click()
    page.get_by_label("Question").fill("How often is the valve seat of the coolant pump replaced?")
    page.locator("#scope-a-kind").select_option("workspace")
    page.locator("#scope-a-workspace").select_option("acme")
    page.get_by_label("Compare with a second scope").check()
    page.locator("#scope-b-kind").select_option("global")
    page.get_by_role("button", name="Retrieve").click()
    panels = page.locator("section.retrieval")
    expect()(panels).to_have_count(2)
    acme, global_ = panels.nth(0), panels.nth(1)
    expect()(acme.locator("#verdict")).to_contain_text("Grounded")
    expect()(acme).to_contain_text("Decision")
    expect()(acme.locator(".candidate-table")).to_contain_text("Coolant pump P-7 guide")
    expect()(acme.locator("svg.rank-chart circle").first).to_be_visible()
    expect()(acme.locator("#ranked")).to_contain_text("evidence")
    expect()(acme.locator("pre.context")).to_contain_text("500 operating hours")
    # The same question in the global library: nothing there answers it.
    expect()(global_.locator("#verdict")).to_contain_text("Not grounded")
    shot(page, "05-debugger")
    acme.locator("a.citation").first.click()
    expect()(page.locator("#cited-text")).to_contain_text("valve seat")
    expect()(page.locator("#chunks tr.hl")).to_have_count(1)
    shot(page, "06-citation")


def test_a_cited_pdf_chunk_opens_with_its_page(page: Any, world: dict[str, Any]) -> None:
    tether: Tether = world["tether"]
    if not tether.documents(workspace_id="acme", session_id="acme-chat"):
        pdf = world["pdf"]
        tether.add(pdf, workspace_id="acme", session_id="acme-chat")
    sign_in(page, world, "acme")
    page.goto(f"{world['url']}/console/#/debug")
    page.get_by_label("Question").fill("How often is the impeller of pump P-7 inspected?")
    page.locator("#scope-a-kind").select_option("session")
    page.get_by_role("button", name="Retrieve").click()
    panel = page.locator("section.retrieval")
    expect()(panel.locator("#verdict")).to_contain_text("Grounded")
    panel.locator("a.citation", has_text="p. 2").first.click()
    expect()(page.locator("#cited-h")).to_contain_text("p. 2")
    expect()(page.locator("#page")).to_contain_text("impeller")
    shot(page, "07-citation-page")


def test_query_rewrites_show_each_query_s_candidates(
    page: Any, world: dict[str, Any], local_embedder: LocalEmbedder, serve_app: Any
) -> None:
    """With rag.enable_query_rewrite and a chat model (a fake of the OpenAI API on
    loopback, through the real client), the debugger shows every query and its lists."""
    from tether.server import create_app

    rewrite = "How many operating hours between valve seat replacements on pump P-7?"
    with FakeOpenAI() as fake:
        fake.script_chat(json.dumps({"queries": [rewrite]}))
        settings = Settings.load(
            llm={"base_url": fake.base_url, "api_key": fake.api_key, "model": "gpt-test"},
            rag={"enable_query_rewrite": True, "rewrite_count": 1},
        )
        db = world["tether"].store.location
        with (
            Tether(db=db, settings=settings, embedder=local_embedder) as rewriting,
            serve_app(create_app(rewriting, open_access=False, warm=False, mcp=False)) as url,
        ):
            page.context.unroute("**/*")  # this test's server is another one
            page.context.route("**/*", lambda route: route.continue_()
                               if route.request.url.startswith(url) else route.abort())  # fmt: skip
            sign_in(page, {**world, "url": url}, "acme")
            page.goto(f"{url}/console/#/debug")
            page.get_by_label("Question").fill("When is the valve seat of the pump replaced?")
            page.locator("#scope-a-kind").select_option("workspace")
            page.get_by_role("button", name="Retrieve").click()
            panel = page.locator("section.retrieval")
            expect()(panel).to_contain_text("Queries (2: the question and its rewrites)")
            expect()(panel).to_contain_text(rewrite)
            expect()(panel.locator("section.candidates")).to_have_count(2)
            expect()(panel.locator("#fused-across")).to_contain_text("Coolant pump P-7 guide")
            expect()(panel.locator("#verdict")).to_contain_text("Grounded")
            shot(page, "12-rewrites")
        assert len(fake.requests_to("/v1/chat/completions")) == 1


def test_an_ungrounded_answer_says_so_and_offers_a_wider_scope(
    page: Any, world: dict[str, Any]
) -> None:
    sign_in(page, world, "acme")
    page.goto(f"{world['url']}/console/#/debug")
    page.get_by_label("Question").fill("What are the office hours on weekdays?")
    page.locator("#scope-a-kind").select_option("workspace")
    page.locator("#scope-a-workspace").select_option("acme")
    page.get_by_role("button", name="Retrieve").click()
    verdict = page.locator("section.retrieval #verdict")
    expect()(verdict).to_contain_text("Not grounded")
    expect()(verdict.locator(".guidance")).not_to_be_empty()
    shot(page, "08-ungrounded")
    widen = verdict.locator("button.widen")
    expect()(widen).to_contain_text("global library")
    widen.click()  # asks again in the scope it suggests, where the answer is
    expect()(page.locator("section.retrieval #verdict")).to_contain_text("Grounded")
    expect()(page.locator("section.retrieval pre.context")).to_contain_text("9 to 17")


def test_the_audit_log_filters_by_outcome(page: Any, world: dict[str, Any]) -> None:
    tether: Tether = world["tether"]
    tether.retrieve("How often is the valve seat replaced?", workspace_id="acme")
    tether.retrieve("Who won the chess tournament in 1972?", workspace_id="acme")
    sign_in(page, world, "acme")
    page.get_by_role("link", name="Audit log").click()
    table = page.locator("#audit")
    expect()(table).to_contain_text("grounded")
    expect()(table).to_contain_text("Who won the chess tournament in 1972?")
    shot(page, "09-audit")
    page.get_by_label("Outcome").select_option("ungrounded")
    page.get_by_role("button", name="Show").click()
    expect()(page).to_have_url(re.compile(r"outcome=ungrounded"))
    ungrounded = tether.retrieval_log(100, "ungrounded", workspace_ids=["acme", "GLOBAL"])
    assert ungrounded  # the chess question, at least
    expect()(page.locator("#audit-count")).to_have_text(f"{len(ungrounded)} retrieval(s)")
    expect()(page.locator("#audit tbody tr")).to_have_count(len(ungrounded))
    expect()(page.locator("#audit tbody tr:not([data-outcome='ungrounded'])")).to_have_count(0)
    # A window that ended before any retrieval shows none.
    page.goto(f"{world['url']}/console/#/audit?until=2000-01-01T00:00")
    expect()(page.locator("main")).to_contain_text("No retrievals match.")


def test_a_key_of_one_workspace_cannot_see_another_s_documents(
    page: Any, world: dict[str, Any]
) -> None:
    sign_in(page, world, "rival")
    table = page.locator("#documents")
    expect()(table).to_contain_text("Rival roadmap")
    expect()(page.locator("nav.card")).not_to_contain_text("acme")
    page.get_by_role("link", name="Global library").click()
    expect()(page.locator("#documents")).to_contain_text("Office hours")
    # The acme manual by its id: the same "no document" as an id that does not exist.
    acme_id = world["tether"].documents(workspace_id="acme")[0].id
    page.goto(f"{world['url']}/console/#/document/{acme_id}")
    expect()(page.get_by_role("alert")).to_contain_text("no document")
    shot(page, "10-other-workspace")
    page.goto(f"{world['url']}/console/#/debug")
    expect()(page.locator("#scope-a-workspace option")).to_have_text(["rival"])
    page.get_by_label("Question").fill("How often is the valve seat of the coolant pump replaced?")
    page.locator("#scope-a-kind").select_option("workspace")
    page.get_by_role("button", name="Retrieve").click()
    panel = page.locator("section.retrieval")
    expect()(panel.locator("#verdict")).to_contain_text("Not grounded")
    expect()(panel).not_to_contain_text("Coolant pump")
    # ... and the admin key sees every workspace's documents.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, world, "admin")
    expect()(page.locator("nav.card")).to_contain_text("Workspace acme")
    expect()(page.locator("nav.card")).to_contain_text("Workspace rival")
    # A key revoked while it is signed in: the next request brings the sign-in back.
    short, secret = world["tether"].keys.create(workspaces=["acme"], name="short-lived")
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, {**world, "keys": {"short": secret}}, "short")
    world["tether"].keys.revoke(short.id)
    page.get_by_role("link", name="Audit log").click()
    expect()(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect()(page.locator(".notice")).to_contain_text("sign in again")
    sign_in(page, world, "admin")
    registry = page.locator("#registry")
    expect()(registry.locator("tr", has_text="handbook.md")).to_contain_text("indexed")
    expect()(registry.locator("tr", has_text="broken.pdf")).to_contain_text("error")
    shot(page, "11-admin-registry")


def test_delete_a_document_and_fit_a_laptop_screen(page: Any, world: dict[str, Any]) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    sign_in(page, world, "acme")
    for view in ("#/library", "#/debug", "#/audit"):
        page.goto(f"{world['url']}/console/{view}")
        page.locator("main h1").wait_for()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{view} is {overflow}px wider than a 1366px screen"
    page.goto(f"{world['url']}/console/#/library")
    page.once("dialog", lambda dialog: dialog.accept())
    row = page.locator("#documents tr", has_text="Hostile")
    row.get_by_role("button", name="Delete").click()
    expect()(page.locator("#documents")).not_to_contain_text("Hostile")
    expect()(page.locator("#documents")).to_contain_text("Coolant pump P-7 guide")
    with pytest.raises(DocumentNotFound):
        world["tether"].get_document(world["hostile_id"])
    # Keyboard only: the sections are reachable by Tab, and Enter follows a link.
    page.reload()
    page.locator("#documents").wait_for()
    page.keyboard.press("Tab")  # the skip link
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Library"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect()(page.get_by_role("heading", level=1)).to_have_text("Retrieval debugger")
