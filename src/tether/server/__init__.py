"""tether as a service: the HTTP API (``tether serve``) and the MCP server (``tether mcp``).

Needs the ``server`` extra (``pip install 'tether[server]'``): importing this package
without it is an ImportError, which the commands turn into that advice.
"""

from __future__ import annotations

from tether.server._app import create_app
from tether.server._mcp import serve_mcp_stdio
from tether.server._service import Service

__all__ = ["Service", "create_app", "serve_mcp_stdio"]
