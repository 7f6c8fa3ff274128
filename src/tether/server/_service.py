"""What every route shares: the library, its one writer thread, the key policy, the
metrics and the upload jobs (:class:`Service`), and the FastAPI dependencies that hand a
route the service and the caller's access."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from tether import Access, ApiKey, Tether
from tether.server._auth import KeyPolicy, access
from tether.server._metrics import Metrics
from tether.server._spool import Spool

T = TypeVar("T")

logger = logging.getLogger("tether.server")

_on_writer = threading.local()


def _mark_writer() -> None:
    _on_writer.active = True


def _writer() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(
        1, thread_name_prefix="tether-writer", initializer=_mark_writer
    )


@dataclass
class Service:
    """What the routes share: the library, its one writer thread, the key policy and
    the metrics.

    Writes run on the writer thread: the routes' own (:meth:`write`) and, while
    the app is being served, the write transactions of indexing (uploads and their
    background jobs load, chunk and embed on the thread pool and the indexing threads,
    then hand their transaction to the writer: :meth:`tether.Tether.set_writer`). Reads
    run on the thread pool beside it, on SQLite's WAL snapshots, never waiting for it;
    a retrieval appends its audit row itself, under the store's write lock."""

    tether: Tether
    key_policy: KeyPolicy
    metrics: Metrics = field(default_factory=Metrics)
    writer: concurrent.futures.ThreadPoolExecutor = field(default_factory=_writer)
    ready: bool = False
    #: Accepted uploads, durable until indexed (set by the app: the store decides where).
    spool: Spool = field(default_factory=lambda: Spool(Path(), 0))
    #: Tasks that record how upload jobs ended (kept referenced until they end).
    background: set[asyncio.Task[None]] = field(default_factory=set)

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` on the thread pool (many reads run at once)."""
        return await run_in_threadpool(fn, *args, **kwargs)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` on the one writer thread, with the caller's trace context."""
        context = contextvars.copy_context()
        future = self.writer.submit(context.run, fn, *args, **kwargs)
        return await asyncio.wrap_future(future)

    async def index(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Indexing (``tether.add``, ``tether.submit``) on the thread pool: loading,
        chunking and embedding run beside the reads, and only its write transactions
        queue on the writer (through :meth:`run_write`)."""
        return await run_in_threadpool(fn, *args, **kwargs)

    async def touch_key(self, key: ApiKey) -> None:
        """Record a key's use (once a minute), best-effort: a store that cannot be written
        (full, read-only) still answers reads."""
        keys = self.tether.keys
        if not keys.use_is_due(key):  # most requests write nothing, and queue on nothing
            return
        try:
            await self.write(keys.mark_used, key)
        except Exception as exc:
            logger.debug("could not record the use of key %s: %s", key.id, exc)

    def run_write(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the writer thread, waited for (from any thread; on the writer
        itself it runs at once): the library's :meth:`~tether.Tether.set_writer` hook."""
        if getattr(_on_writer, "active", False):
            return fn()
        context = contextvars.copy_context()
        return self.writer.submit(context.run, fn).result()


def service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]
AccessDep = Annotated[Access, Depends(access)]
