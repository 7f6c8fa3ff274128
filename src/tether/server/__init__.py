"""tether as a service: the HTTP API (``tether serve``) and the MCP server (``tether mcp``).

Needs the ``server`` extra: ``pip install 'tether[server]'``.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    from tether.errors import ConfigurationError

    raise ConfigurationError(
        "the HTTP API needs the server extra: pip install 'tether[server]'"
    ) from exc

from tether.server._app import Service, create_app

__all__ = ["Service", "create_app"]
