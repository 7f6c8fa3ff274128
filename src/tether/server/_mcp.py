"""The MCP server (placeholder until the MCP work lands)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any


class McpMount:
    def __init__(self, svc: Any) -> None:
        self.svc = svc

    @contextlib.asynccontextmanager
    async def lifespan_context(self) -> AsyncIterator[None]:
        yield

    def asgi(self) -> Any:
        from starlette.responses import PlainTextResponse

        return PlainTextResponse("MCP is not mounted yet", status_code=404)
