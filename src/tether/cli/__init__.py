"""The ``tether`` command: a thin shell. Parse, make one library call, print, map errors.

The commands live by concern (``_index``, ``_search``, ``_docs``, ``_sessions``, ``_log``,
``_eval``) and share ``_shell``; this module registers them in the order ``--help``
lists them.
"""

from __future__ import annotations

import importlib.metadata
import logging
from typing import Annotated

import typer

import tether
from tether.cli import _docs, _eval, _index, _log, _search, _serve, _serve_mcp, _sessions
from tether.cli._shell import Command, Group, flag, say

__all__ = ["app", "main"]

app = typer.Typer(
    cls=Group,
    help="tether: scoped, cited retrieval over your documents, in one SQLite file.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
docs_app = typer.Typer(cls=Group, help="List, inspect and remove documents.", no_args_is_help=True)
sessions_app = typer.Typer(
    cls=Group, help="Create and close sessions; attach and detach documents.", no_args_is_help=True
)
keys_app = typer.Typer(
    cls=Group,
    help="API keys of `tether serve` and `tether mcp`, bound to workspaces.",
    no_args_is_help=True,
)
app.add_typer(docs_app, name="docs")
app.add_typer(sessions_app, name="sessions")
app.add_typer(keys_app, name="keys")

app.command(cls=Command)(_index.add)
app.command(cls=Command)(_search.search)
app.command(cls=Command)(_search.context)
app.command(cls=Command)(_index.cleanup)
app.command(cls=Command)(_index.compact)
app.command(cls=Command)(_index.scan)
app.command(cls=Command)(_index.watch)
app.command(cls=Command)(_index.status)
app.command(cls=Command)(_index.formats)
app.command("log", cls=Command)(_log.log_)
app.command(cls=Command)(_index.reembed)
app.command("eval", cls=Command)(_eval.eval_)
app.command(cls=Command)(_serve.serve)
app.command(cls=Command)(_serve_mcp.mcp)

docs_app.command("list", cls=Command)(_docs.docs_list)
docs_app.command("show", cls=Command)(_docs.docs_show)
docs_app.command("rm", cls=Command)(_docs.docs_rm)
docs_app.command("approve", cls=Command)(_docs.docs_approve)

sessions_app.command("list", cls=Command)(_sessions.sessions_list)
sessions_app.command("create", cls=Command)(_sessions.sessions_create)
sessions_app.command("close", cls=Command)(_sessions.sessions_close)
sessions_app.command("attach", cls=Command)(_sessions.sessions_attach)
sessions_app.command("detach", cls=Command)(_sessions.sessions_detach)

keys_app.command("create", cls=Command)(_serve.keys_create)
keys_app.command("list", cls=Command)(_serve.keys_list)
keys_app.command("revoke", cls=Command)(_serve.keys_revoke)


def _print_version(asked: bool) -> None:
    if asked:
        say(f"tether {_version()}")
        raise typer.Exit()


def _version() -> str:
    try:
        return importlib.metadata.version("tether")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return tether.__version__


@app.callback()
def _root(
    version: Annotated[
        bool,
        flag(
            "--version",
            help="Print tether's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    # pypdf logs each defect of a malformed PDF; the file's typed error already says it.
    logging.getLogger("pypdf").setLevel(logging.ERROR)


def main() -> None:
    app()
