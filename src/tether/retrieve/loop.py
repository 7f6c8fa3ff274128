"""A private event-loop thread, so the synchronous API can run the async pipeline even
where the caller already has a loop running. Started on first use only."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """One daemon thread running an event loop (with an 8-thread default executor)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure()).result()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                loop.set_default_executor(
                    concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="tether-io")
                )
                threading.Thread(
                    target=loop.run_forever, name="tether-retrieve", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
