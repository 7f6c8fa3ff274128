"""``tether sessions``: create, list and close sessions; attach and detach documents."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from rich.table import Table

from tether.cli._shell import (
    ConfigOption,
    DbOption,
    JsonOption,
    WorkspaceOption,
    call_tether,
    cells,
    out,
    print_json,
    say,
)

DocumentArgument = Annotated[str, typer.Argument(help="Document id.")]
SessionArgument = Annotated[str, typer.Argument(help="Session id.")]


def sessions_list(
    workspace: WorkspaceOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions (optionally of one workspace)."""
    sessions = call_tether(
        db, config, lambda t: t.sessions(workspace_id=workspace), must_exist=True
    )
    if as_json:
        print_json({"sessions": [dataclasses.asdict(s) for s in sessions]})
        return
    table = Table("id", "workspace", "created", "closed")
    for s in sessions:
        table.add_row(*cells(s.id, s.workspace_id, s.created_at[:19], (s.closed_at or "")[:19]))
    out.print(table if sessions else "No sessions.")


def sessions_create(
    session_id: Annotated[str, typer.Argument(help="New session id.")],
    workspace: Annotated[str, typer.Option("--workspace", "-w", help="Its workspace.")],
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a session in a workspace."""
    s = call_tether(db, config, lambda t: t.create_session(session_id, workspace_id=workspace))
    if as_json:
        print_json({"session": dataclasses.asdict(s)})
    else:
        say(f"session {s.id} in workspace {s.workspace_id}")


def sessions_close(
    session_id: SessionArgument,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mark a session closed."""
    s = call_tether(db, config, lambda t: t.close_session(session_id))
    if as_json:
        print_json({"session": dataclasses.asdict(s)})
    else:
        say(f"session {s.id} closed at {s.closed_at}")


def sessions_attach(
    document_id: DocumentArgument,
    session_id: SessionArgument,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Attach a document to a session (its workspace's or a global document)."""
    new = call_tether(db, config, lambda t: t.attach(document_id, session_id))
    if as_json:
        print_json({"document_id": document_id, "session_id": session_id, "attached": new})
    else:
        say(f"{'attached' if new else 'already attached'}: {document_id} -> {session_id}")


def sessions_detach(
    document_id: DocumentArgument,
    session_id: SessionArgument,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Detach a document from a session; the document itself stays."""
    was = call_tether(db, config, lambda t: t.detach(document_id, session_id))
    if as_json:
        print_json({"document_id": document_id, "session_id": session_id, "detached": was})
    else:
        say(f"{'detached' if was else 'was not attached'}: {document_id} -/- {session_id}")
