"""``tether serve`` (the HTTP API) and ``tether keys`` (its API keys)."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer
from rich.table import Table

from tether import ApiKey
from tether.cli._shell import (
    ConfigOption,
    DbOption,
    JsonOption,
    call_tether,
    cells,
    err,
    fail,
    flag,
    log_warnings_to_stderr,
    open_tether,
    out,
    print_json,
    say,
)

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Address to bind (default 127.0.0.1). Anything but loopback needs API keys.",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int, typer.Option("--port", help="Port to listen on.", min=0, max=65535)
    ] = 8000,
    db: DbOption = None,
    config: ConfigOption = None,
    no_mcp: Annotated[bool, flag("--no-mcp", help="Do not mount the MCP server at /mcp.")] = False,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn's log level.")] = "info",
) -> None:
    """Serve the HTTP API (/v1, OpenAPI at /openapi.json, docs at /docs) and MCP at /mcp."""
    try:
        import uvicorn

        from tether.server import create_app
    except ImportError:
        fail("tether serve needs the server extra: pip install 'tether[server]'")
    with open_tether(db, config) as tether:
        keys = tether.keys.any_active()
        bind = host or LOOPBACK
        if not keys and not is_loopback(bind):
            fail(
                f"refusing to serve on {bind} without API keys: anyone who can reach it could"
                " read and change every workspace. Create one with `tether keys create"
                " --workspace W` (or --admin), or bind to 127.0.0.1"
            )
        if not keys:
            err.print(
                f"No API keys: serving on {bind} only, and every request acts as the local"
                " operator. Create keys with `tether keys create` to require them.",
                highlight=False,
            )
        app = create_app(tether, open_access=not keys, mcp=not no_mcp)
        err.print(
            f"tether serving {tether.store.location} on http://{bind}:{port}"
            f" (console: http://{bind}:{port}/console/)",
            highlight=False,
        )
        with log_warnings_to_stderr():
            uvicorn.run(app, host=bind, port=port, log_level=log_level)


WorkspacesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--workspace",
        "-w",
        help="A workspace the key is bound to (repeat for more).",
        show_default=False,
        metavar="<str>",
    ),
]


def keys_create(
    workspace: WorkspacesOption = None,
    global_write: Annotated[
        bool, flag("--global-write", help="May also change the global library.")
    ] = False,
    read_only: Annotated[bool, flag("--read-only", help="May only read.")] = False,
    admin: Annotated[bool, flag("--admin", help="May do everything, keys included.")] = False,
    name: Annotated[
        str | None, typer.Option("--name", help="A label for the key.", show_default=False)
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API key. Its secret is printed once: keep it, it cannot be shown again."""
    if not workspace and not admin and not global_write:
        fail("a key needs --workspace W (repeat for more), --global-write or --admin")
    key, secret = call_tether(
        db,
        config,
        lambda t: t.keys.create(
            workspaces=workspace or (),
            global_write=global_write,
            read_only=read_only,
            admin=admin,
            name=name,
        ),
    )
    if as_json:
        print_json({"key": secret, "api_key": key.to_dict()})
        return
    say(secret)
    err.print(
        f"key {key.id} ({_rights(key)}): the secret above is shown once; send it as"
        " 'Authorization: Bearer <key>'",
        highlight=False,
    )


def keys_list(
    db: DbOption = None, config: ConfigOption = None, as_json: JsonOption = False
) -> None:
    """List API keys (never their secrets)."""
    keys = call_tether(db, config, lambda t: t.keys.list(), must_exist=True)
    if as_json:
        print_json({"keys": [k.to_dict() for k in keys]})
        return
    table = Table("id", "name", "rights", "created", "revoked")
    for k in keys:
        table.add_row(
            *cells(k.id, k.name or "", _rights(k), k.created_at[:19], (k.revoked_at or "")[:19])
        )
    out.print(table if keys else "No API keys.")


def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `tether keys list`).")],
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke an API key: it stops working at once."""
    key = call_tether(db, config, lambda t: t.keys.revoke(key_id), must_exist=True)
    if as_json:
        print_json({"api_key": key.to_dict()})
    else:
        say(f"revoked {key.id}")


def _rights(key: ApiKey) -> str:
    if key.admin:
        return "admin"
    parts = [f"workspaces {', '.join(key.workspaces)}" if key.workspaces else "no workspace"]
    parts.append("reads GLOBAL")
    if key.global_write:
        parts.append("writes GLOBAL")
    if key.read_only:
        parts.append("read-only")
    return "; ".join(parts)
