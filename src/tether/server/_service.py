"""What every route shares: the library, its one writer thread, the key policy, the
metrics and the upload jobs (:class:`Service`), and the FastAPI dependencies that hand a
route the service and the caller's access."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from tether import Access, Tether
from tether.server._auth import KeyPolicy, access
from tether.server._metrics import Metrics

T = TypeVar("T")


@dataclass
class Service:
    """What the routes share: the library, its one writer thread, the key policy and
    the metrics."""

    tether: Tether
    key_policy: KeyPolicy
    metrics: Metrics = field(default_factory=Metrics)
    writer: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="tether-writer"
        )
    )
    ready: bool = False
    #: Upload jobs: id -> (the workspace they write to, their files' upload names).
    jobs: dict[str, tuple[str, dict[Any, str]]] = field(default_factory=dict)
    #: Tasks that clean up after upload jobs (kept referenced until they end).
    background: set[asyncio.Task[None]] = field(default_factory=set)

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` on the thread pool (many reads run at once)."""
        return await run_in_threadpool(fn, *args, **kwargs)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` on the one writer thread, with the caller's trace context."""
        context = contextvars.copy_context()
        future = self.writer.submit(context.run, fn, *args, **kwargs)
        return await asyncio.wrap_future(future)


def service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]
AccessDep = Annotated[Access, Depends(access)]
