"""``tether mcp``: the MCP server on stdin/stdout, bound to one scope."""

from __future__ import annotations

import contextlib
from typing import Annotated

import typer

from tether.cli._shell import (
    ConfigOption,
    DbOption,
    fail,
    flag,
    log_warnings_to_stderr,
    open_tether,
)

_WorkspaceOption = Annotated[
    str | None,
    typer.Option("--workspace", "-w", help="Serve this workspace.", show_default=False),
]
_SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session", "-s", help="Serve the documents of this session.", show_default=False
    ),
]
_GlobalOption = Annotated[
    bool, flag("--global", help="Serve the global library.", show_default=False)
]
_KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key",
        envvar="TETHER_API_KEY",
        help="An API key (better: $TETHER_API_KEY). The scope must be one it may read, and"
        " add_text is offered only where it may write. Without one: the local operator.",
        show_default=False,
    ),
]
_GuardedOption = Annotated[
    bool,
    flag(
        "--guarded/--unguarded",
        help="Guard retrieve by the agent team's rules: nothing grounded returns the block"
        " and its advisory, never context. --unguarded: grounded=false with guidance.",
    ),
]
_ReadOnlyOption = Annotated[
    bool, flag("--read-only", help="Offer no add_text, whatever the key may do.")
]


def mcp(
    workspace: _WorkspaceOption = None,
    session: _SessionOption = None,
    global_: _GlobalOption = False,
    key: _KeyOption = None,
    guarded: _GuardedOption = True,
    read_only: _ReadOnlyOption = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Serve MCP on stdin/stdout for an agent host, bound to one scope (a key bound to one
    workspace needs none). No tool takes a scope: what the model reads cannot widen it."""
    try:
        from tether.server import serve_mcp_stdio
    except ImportError:
        fail("tether mcp needs the server extra: pip install 'tether[server]'")
    named = [
        flag
        for flag, given in (
            ("--workspace", workspace),
            ("--session", session),
            ("--global", global_),
        )
        if given
    ]
    if len(named) > 1:
        fail(f"name one scope, not {' and '.join(named)}")
    # Ctrl-C (SIGINT) is one way an agent host stops its server: not an error. Warnings go
    # to stderr, which the host keeps as a log (stdout is the protocol's).
    with (
        contextlib.suppress(KeyboardInterrupt),
        log_warnings_to_stderr(),
        open_tether(db, config, must_exist=True) as t,
    ):
        serve_mcp_stdio(
            t,
            key=key,
            scope="global" if global_ else None,
            session_id=session,
            workspace_id=workspace,
            guarded=guarded,
            read_only=read_only,
        )
