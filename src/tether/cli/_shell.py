"""What every command shares: the consoles, the common options, opening the store, and
the one place where library errors become a line on stderr with the command to run next."""

from __future__ import annotations

import inspect
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from tether import (
    DocumentNotFound,
    LocalEmbedder,
    SessionNotFound,
    Settings,
    StoredVectorsInvalid,
    Tether,
    TetherError,
    WorkspaceNotFound,
)
from tether.store import is_postgres_url

_SURROGATE = re.compile("[\ud800-\udfff]")


def displayable(text: str) -> str:
    """``text`` that any terminal can print: a lone surrogate (a file name byte that is
    not UTF-8, as Python decodes it) shown as its escape, ``\\udcff``."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _Console(Console):
    """A console that prints any str, even one holding a lone surrogate."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(displayable(o) if isinstance(o, str) else o for o in objects), **kwargs)


out = _Console(soft_wrap=True)
err = _Console(stderr=True, soft_wrap=True)


class _HelpWithoutType:
    """``--help`` takes no value, so its help shows no type beside it (Typer would print
    ``<bool>``)."""

    def get_help_option(self, ctx: typer.Context) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class Command(_HelpWithoutType, TyperCommand):
    """A command of the ``tether`` CLI. Its line in ``tether --help`` is its help's first
    paragraph as one line (Typer would keep the docstring's line breaks there)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.short_help is None and self.help:
            first = inspect.cleandoc(self.help).split("\n\n", 1)[0]
            self.short_help = " ".join(first.split())


class Group(_HelpWithoutType, TyperGroup):
    """A group of commands of the ``tether`` CLI."""


def flag(*names: str, **options: Any) -> Any:
    """A boolean flag's option. A flag takes no value, so its help shows no type (Typer
    would print ``<bool>`` beside it)."""
    return typer.Option(*names, metavar="", **options)


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="The store: a SQLite file, or a PostgreSQL URL (postgresql://user@host/dbname;"
        " the postgres extra). Default: $TETHER_DB, then `db` in tether.toml, then tether.db.",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML settings file (default: $TETHER_CONFIG or ./tether.toml).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, flag("--json", help="Print JSON (stable keys, see docs/cli.md).")]
WorkspaceOption = Annotated[
    str | None, typer.Option("--workspace", "-w", help="Workspace id.", show_default=False)
]
ScopeOption = Annotated[
    Literal["session", "workspace", "global"] | None,
    typer.Option(
        "--scope",
        help="Where to look (default: the scope --session or --workspace names, else"
        " rag.scope); a scope they contradict is an error.",
        show_default=False,
    ),
]
SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Session id.", show_default=False)
]

T = TypeVar("T")

# The library says what went wrong; the shell adds which command puts it right.
_COMMAND_HINTS: dict[type[TetherError], str] = {
    DocumentNotFound: "list them with `tether docs list`",
    SessionNotFound: (
        "create it with `tether sessions create`, or pass --session when adding a document"
    ),
    WorkspaceNotFound: "create it by adding a document with --workspace",
    StoredVectorsInvalid: "run `tether reembed` after deleting the model's vectors",
}


def error_message(exc: TetherError) -> str:
    """The library's message; or, for an error class with a command hint, what was
    wrong followed by the command that puts it right (instead of the library's advice)."""
    hint = next((_COMMAND_HINTS[c] for c in type(exc).__mro__ if c in _COMMAND_HINTS), None)
    return str(exc) if hint is None else f"{exc.problem}; {hint}"


def say(text: str) -> None:
    """Print data as text: never as markup, never highlighted (titles may hold ``[/]``)."""
    out.print(text, highlight=False, markup=False)


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code) from None


@contextmanager
def open_tether(
    db: str | None, config: Path | None, *, must_exist: bool = False, **overrides: Any
) -> Iterator[Tether]:
    """Open the store; map library errors to a one-line message and exit code 1.

    A command that only reads passes ``must_exist``: opening a missing file would create
    an empty store, and a typo in ``--db`` would then look like a store with nothing in it.
    """
    try:
        if db is not None:
            overrides["db"] = str(db)
        settings = Settings.load(config, **overrides)
        if must_exist:
            _refuse_a_missing_store(settings.db)
        with Tether(settings=settings) as tether:
            yield tether
    except TetherError as exc:
        fail(error_message(exc))


def load_model_visibly(tether: Tether, *, vectors: bool, console: Console | None = None) -> None:
    """On a terminal, load the local embedding model now (and, with ``vectors``, the
    stored vectors beside it) under a status line: the seconds it takes then say what
    they are, rather than a silent search or an "Indexing 0/1" bar. A model that cannot
    load is left to the command, which runs lexical-only and says why."""
    console = console or err
    if not console.is_terminal:
        return
    embedder = tether.embedder  # None without embeddings
    if embedder is None:
        return
    if isinstance(embedder, LocalEmbedder) and tether.settings.rag.embeddings.runtime == "auto":
        console.print(
            "[yellow]note:[/] this store's vectors come from the torch runtime, slow to"
            " load; `TETHER_RAG__EMBEDDINGS__RUNTIME=onnx-int8 tether reembed` moves it to"
            " onnx-int8, which starts in about a second",
            highlight=False,
        )
    if embedder.loaded:
        return
    with console.status(f"Loading the embedding model ({embedder.model})…"):
        if vectors:
            tether.warmup()
        else:
            with suppress(TetherError):
                embedder.warm()


@contextmanager
def log_warnings_to_stderr() -> Iterator[None]:
    """While a long-running shell (``serve``, ``mcp``) runs, show the library's warnings
    on stderr: the library itself prints nothing unless its application configures
    logging, and here the shell is the application. The handler goes when the command
    ends (a command run in-process, as tests run them, leaves no trace)."""
    logger = logging.getLogger("tether")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("tether: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _refuse_a_missing_store(db: str) -> None:
    if is_postgres_url(db):
        return  # a server's database is made on first use, like a new file by `tether add`
    if db not in ("", ":memory:") and not Path(db).expanduser().exists():
        fail(
            f"no store at {db}: the file does not exist; `tether add` creates one,"
            " or name an existing one with --db"
        )


def call_tether(
    db: str | None, config: Path | None, call: Callable[[Tether], T], *, must_exist: bool = False
) -> T:
    with open_tether(db, config, must_exist=must_exist) as tether:
        return call(tether)


def _json(data: Any, **options: Any) -> str:
    """JSON that is valid UTF-8: a lone surrogate (a file name that is not UTF-8) is
    written as its JSON escape, which a JSON reader gives back as the same str."""
    return displayable(json.dumps(data, ensure_ascii=False, **options))


def print_json(data: Any) -> None:
    sys.stdout.write(_json(data, indent=2) + "\n")


def print_json_line(data: Any) -> None:
    """One object on one line, flushed: a stream (``watch``) that a reader follows as it
    comes, one line per event."""
    sys.stdout.write(_json(data) + "\n")
    sys.stdout.flush()


def print_listing(
    key: str,
    records: Sequence[Any],
    table: Callable[[Any], Table],
    *,
    empty: str,
    as_json: bool,
) -> None:
    """Records as ``{key: [record.to_dict(), ...]}``, else as a table, else ``empty``."""
    if as_json:
        print_json({key: [record.to_dict() for record in records]})
    elif records:
        out.print(table(records))
    else:
        out.print(empty)


def folded_table(*columns: str) -> Table:
    """A table whose long cells wrap inside their column instead of being cut."""
    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def cells(*values: str) -> list[Text]:
    """Table cells shown as they are: a title like ``[red] notes`` is text, not markup."""
    return [Text(value) for value in values]


def place(*parts: str | int | None) -> str:
    """Where something is (section · page · file), leaving out the parts it lacks."""
    return " · ".join(str(part) for part in parts if part)


def short_time(iso: str) -> str:
    return iso[:19].replace("T", " ")


def progress_bar(text: str = "{task.description}", *, disable: bool = False) -> Progress:
    """A transient bar on stderr, shown only on a terminal."""
    return Progress(
        TextColumn(text),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=disable or not err.is_terminal,
    )


def print_degradations(debug: dict[str, Any]) -> None:
    for degradation in debug["degradations"]:
        err.print(f"[yellow]note:[/] {escape(str(degradation))}", highlight=False)
