"""``tether log``: the retrieval audit log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tether.cli._shell import (
    ConfigOption,
    DbOption,
    JsonOption,
    cells,
    folded_table,
    open_tether,
    print_listing,
    short_time,
)

if TYPE_CHECKING:
    from tether import AuditEntry


def log_(
    limit: Annotated[int, typer.Option(help="How many rows, newest first.", min=1)] = 20,
    outcome: Annotated[
        str | None,
        typer.Option(help="Only this outcome: grounded | ungrounded | skipped | blocked | error."),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the retrieval audit log (ids, sanitized queries and outcomes; never text)."""
    with open_tether(db, config, must_exist=True) as tether:
        entries = tether.retrieval_log(limit, outcome)
    print_listing(
        "entries", entries, _audit_table, empty="The audit log is empty.", as_json=as_json
    )


def _audit_table(entries: list[AuditEntry]) -> Table:
    table = folded_table("time", "outcome", "scope", "query", "chunks", "retrieval id")
    for entry in entries:
        outcome = entry.outcome + (f" ({entry.reason})" if entry.reason else "")
        table.add_row(
            *cells(
                short_time(entry.created_at),
                outcome,
                f"{entry.scope['kind']}:{entry.scope['id']}",
                entry.query,
                ",".join(str(c) for c in entry.chunk_ids) or "-",
                entry.retrieval_id,
            )
        )
    return table
