"""The HTTP API: a thin shell over one :class:`~tether.Tether`.

Each route checks the caller's key (:mod:`tether.server._auth`), makes one library call
and returns its ``to_dict()``. Reads run on the thread pool, many at once; every write
goes through one writer thread, so writers queue behind each other instead of contending
for SQLite's lock, and readers (WAL) are never blocked by them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query, Response
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Route

from tether import (
    Access,
    AuditEntry,
    Filters,
    GenerationBlocked,
    RetrievalResult,
    Scope,
    Tether,
)
from tether.policy import require_grounding
from tether.server import _docs, _errors
from tether.server._auth import KeyPolicy, audit_view, readable_scope, require_admin
from tether.server._edges import (
    CLIENT_HEADERS,
    Authenticate,
    EdgeRule,
    GuardOrigin,
    RateLimits,
)
from tether.server._metrics import CONTENT_TYPE, LimitBody, ObserveRequests, outcome_of
from tether.server._schemas import (
    ERRORS,
    ErrorOut,
    RetrieveIn,
    RetrieveOut,
    ScopedIn,
    SearchIn,
    SearchOut,
)
from tether.server._service import AccessDep, Service, ServiceDep
from tether.server._spool import Spool

logger = logging.getLogger("tether.server")

#: JSON bodies larger than this are refused (a query is at most 100k characters).
JSON_BODY_BYTES = 1 << 20
#: Multipart uploads larger than this are refused (each file also meets rag.max_file_bytes).
UPLOAD_BODY_BYTES = 256 << 20


def create_app(
    tether: Tether,
    *,
    open_access: bool | None = None,
    warm: bool = True,
    json_body_bytes: int = JSON_BODY_BYTES,
    upload_body_bytes: int = UPLOAD_BODY_BYTES,
    mcp: bool = True,
) -> FastAPI:
    """The HTTP API over ``tether``.

    ``open_access`` lets callers without a key in as the local operator (only for a
    server bound to loopback; ``tether serve`` decides it): by default, when the store
    has no active key. ``warm`` loads the embedding model and the stored vectors at
    start-up (``/readyz`` says when that is done). ``mcp`` mounts the MCP server
    (streamable HTTP) at ``/mcp``.
    """
    if open_access is None:
        open_access = not tether.keys.any_active()
    svc = Service(
        tether=tether,
        key_policy=KeyPolicy(tether, open_at_start=open_access),
        spool=Spool.of(tether),
    )
    mcp_app = _mcp_app(svc) if mcp else None

    app = FastAPI(
        title="tether",
        version=_version(),
        summary="Scoped, cited retrieval over your documents.",
        lifespan=partial(_lifespan, svc, mcp_app, warm),
        docs_url=None,  # /docs and /redoc are served from this machine (_docs), not a CDN
        redoc_url=None,
    )
    app.state.service = svc
    app.state.key_policy = svc.key_policy
    _errors.install(app)
    _docs.install(app)
    _edges(app, svc, json_body_bytes=json_body_bytes, upload_body_bytes=upload_body_bytes)
    _core_routes(app)
    _retrieval_routes(app)
    _audit_route(app)
    from tether.server import _jobs, _resources

    app.include_router(_resources.router, prefix="/v1")
    app.include_router(_jobs.router, prefix="/v1")
    from tether.server import _console

    _console.install(app)
    if mcp_app is not None:
        # A route, not a mount: a mount answers ``/mcp`` with a redirect to ``/mcp/``.
        app.router.routes.append(
            Route(
                "/mcp",
                _AsgiEndpoint(mcp_app.asgi()),
                methods=["GET", "POST", "DELETE"],
                include_in_schema=False,
            )
        )
    return app


@asynccontextmanager
async def _lifespan(svc: Service, mcp_app: Any, warm: bool, _: FastAPI) -> AsyncIterator[None]:
    """The app's life: MCP's session manager, the warm-up, indexing's writes on the one
    writer thread, uploads a previous run accepted resumed; on the way out, running
    uploads drained and the writer stopped."""
    tether = svc.tether
    async with contextlib.AsyncExitStack() as stack:
        if mcp_app is not None:
            await stack.enter_async_context(mcp_app.lifespan_context())
        warming = asyncio.create_task(_warm(svc)) if warm else None
        if not warm:
            svc.ready = True
        tether.set_writer(svc.run_write)  # indexing writes on the one writer, too
        await _resume_uploads(svc)
        try:
            yield
        finally:
            if warming is not None:
                warming.cancel()
            await _drain_uploads(svc)
            tether.set_writer(None)
            svc.writer.shutdown(wait=True)
            svc.spool.close()


def _edges(app: FastAPI, svc: Service, *, json_body_bytes: int, upload_body_bytes: int) -> None:
    """The middleware every request meets, outermost first: counted and timed; its host
    and origin checked; (CORS for allowed origins); its caller known and held to its
    rate; its body held to its route's limit."""
    settings = svc.tether.settings.server
    app.add_middleware(LimitBody, json_bytes=json_body_bytes, upload_bytes=upload_body_bytes)
    limits = RateLimits(settings.requests_per_second, settings.request_burst)
    app.add_middleware(Authenticate, policy=svc.key_policy, limits=limits, touch=svc.touch_key)
    if settings.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type", *CLIENT_HEADERS],
        )
    app.add_middleware(GuardOrigin, rule=EdgeRule.of(settings, svc.key_policy))
    app.add_middleware(ObserveRequests, metrics=svc.metrics, router=app.router)


class _AsgiEndpoint:
    """An ASGI callable as a route's endpoint (Starlette wraps plain functions and bound
    methods as request handlers; an object it runs as an ASGI app)."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


#: How long a stopping server lets its upload jobs run on (seconds); what is left then
#: is resumed by the next start.
DRAIN_SECONDS = 10.0


async def _resume_uploads(svc: Service) -> None:
    """Resubmit the uploads a previous run accepted and did not finish (see ``_spool``)."""
    from tether.server._jobs import start_job

    pending = await svc.read(svc.spool.recover)
    for entry in pending:
        logger.info("resuming upload job %s (%d files)", entry.id, len(entry.names))
        await start_job(svc, entry)


async def _drain_uploads(svc: Service) -> None:
    """Let running upload jobs finish for :data:`DRAIN_SECONDS`, then stop them before
    their next file; their manifests stay, so the next start resumes them."""
    svc.spool.closing = True
    running = [e.job for e in svc.spool.jobs.values() if e.job is not None and not e.job.done()]
    if not running:
        return
    logger.info("waiting up to %gs for %d upload jobs", DRAIN_SECONDS, len(running))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            await asyncio.gather(*(j.async_wait() for j in running), return_exceptions=True)
    for job in running:
        job.cancel()
    await asyncio.gather(*(j.async_wait() for j in running), return_exceptions=True)


async def _warm(svc: Service) -> None:
    try:
        timings = await svc.read(svc.tether.warmup)
        logger.info("warmed up: %s", timings)
    except Exception as exc:  # a failed warm-up degrades each search; it never stops serving
        logger.warning("warm-up failed (%s); searches degrade and say why", exc)
    svc.ready = True


def _mcp_app(svc: Service) -> Any:
    from tether.server import _mcp_http

    return _mcp_http.McpMount(svc)


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("tether")
    except importlib.metadata.PackageNotFoundError:
        return "0"


async def _scope_and_filters(
    svc: Service, caller: Access, body: ScopedIn
) -> tuple[Scope, Filters | None]:
    """The scope a request names, if the caller may read it, and its tag filters."""
    scope = await svc.read(
        readable_scope, svc.tether, caller, body.scope, body.session_id, body.workspace_id
    )
    return scope, body.filters.to_filters() if body.filters is not None else None


def _core_routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["service"], summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["service"],
        summary="The store answers and the model is warm",
        responses={503: {"model": ErrorOut}},
    )
    async def readyz(svc: ServiceDep, response: Response) -> dict[str, Any]:
        # No counts: this answers without a key, and a store's size is not for strangers.
        await svc.read(svc.tether.store.counts)  # the store answers
        status = "ready" if svc.ready else "warming"
        if not svc.ready:
            response.status_code = 503
        return {"status": status, "embeddings": svc.tether.embeddings_unavailable or "available"}

    @app.get(
        "/metrics",
        tags=["service"],
        summary="Prometheus metrics (admin keys, unless server.metrics = 'open')",
        response_class=Response,
        responses=ERRORS,
    )
    async def metrics(svc: ServiceDep, caller: AccessDep) -> Response:
        if svc.tether.settings.server.metrics == "admin":
            require_admin(caller)
        return Response(svc.metrics.render(), media_type=CONTENT_TYPE)


def _retrieval_routes(app: FastAPI) -> None:
    @app.post(
        "/v1/search",
        tags=["retrieval"],
        summary="Search chunks inside a scope (as `tether search --json`)",
        response_model=SearchOut,
        response_model_exclude_unset=True,  # a hit's evidence only when judged
        responses=ERRORS,
    )
    async def search(body: SearchIn, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
        tether = svc.tether
        scope, filters = await _scope_and_filters(svc, caller, body)
        hits = await svc.read(
            tether.search,
            body.query,
            scope=scope,
            k=body.k,
            mode=body.mode,
            filters=filters,
            judge=body.judge,
        )
        return hits.to_dict()

    @app.post(
        "/v1/retrieve",
        tags=["retrieval"],
        summary="The cited context for a question, or an honest 'not grounded'",
        response_model=RetrieveOut,
        response_model_exclude_none=False,
        responses=ERRORS,
    )
    async def retrieve(body: RetrieveIn, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
        tether = svc.tether
        scope, filters = await _scope_and_filters(svc, caller, body)
        history = [turn.model_dump() for turn in body.history] if body.history else None
        if body.guarded:  # the agent team's rules: the policy's limits, blocked if ungrounded
            result = await _guarded(svc, body, scope, filters, history)
        else:
            result = await tether.aretrieve(
                body.query,
                scope=scope,
                filters=filters,
                max_chunks=body.max_chunks,
                min_relevance=body.min_relevance,
                timeout=body.timeout,
                history=history,
                explain=body.explain,
            )
        svc.metrics.retrievals.labels(outcome_of(result)).inc()
        out = result.to_dict()
        if not (body.debug or body.explain):
            out["debug"] = None
        return out


async def _guarded(
    svc: Service,
    body: RetrieveIn,
    scope: Scope,
    filters: Filters | None,
    history: list[dict[str, str]] | None,
) -> RetrievalResult:
    """The agent team's guard (:class:`~tether.policy.require_grounding`); a blocked
    retrieval counted as such, then raised (a 409)."""
    guard = require_grounding(
        svc.tether,
        scope=scope,
        filters=filters,
        min_relevance=body.min_relevance,
        history=history,
    )
    try:
        return (await guard.arun(body.query)).result
    except GenerationBlocked:
        svc.metrics.retrievals.labels("blocked").inc()
        raise


def _audit_route(app: FastAPI) -> None:
    @app.get(
        "/v1/audit",
        tags=["audit"],
        summary="The audit log of retrievals this key may see, newest first",
        response_model=list[AuditEntry],
        responses=ERRORS,
    )
    async def audit(
        svc: ServiceDep,
        caller: AccessDep,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        outcome: Literal["grounded", "ungrounded", "skipped", "blocked", "error"] | None = None,
        retrieval_id: Annotated[str | None, Query(max_length=128)] = None,
        since: Annotated[
            datetime | None, Query(description="rows written at or after this time (ISO-8601)")
        ] = None,
        until: Annotated[
            datetime | None, Query(description="rows written before this time (ISO-8601)")
        ] = None,
    ) -> list[dict[str, Any]]:
        view = await svc.read(audit_view, svc.tether, caller)
        entries = await svc.read(
            svc.tether.retrieval_log,
            limit,
            outcome,
            retrieval_id=retrieval_id,
            since=since,
            until=until,
            **view,
        )
        return [entry.to_dict() for entry in entries]
