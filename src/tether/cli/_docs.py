"""``tether docs``: list, show, remove and approve documents."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli._shell import (
    ConfigOption,
    DbOption,
    JsonOption,
    SessionOption,
    WorkspaceOption,
    cells,
    open_tether,
    out,
    place,
    print_json,
    print_listing,
    say,
)

if TYPE_CHECKING:
    from tether import Document, StoredChunk, Tether

_KINDS = {"text/markdown": "md", "text/plain": "txt", "application/pdf": "pdf", "text/html": "html"}


def docs_list(
    workspace: WorkspaceOption = None,
    session: SessionOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List documents (optionally of one workspace or session)."""
    with open_tether(db, config, must_exist=True) as tether:
        documents = tether.documents(workspace_id=workspace, session_id=session)
    print_listing("documents", documents, _documents_table, empty="No documents.", as_json=as_json)


def _documents_table(documents: list[Document]) -> Table:
    table = Table("title", "kind", "chunks", "workspace", "sessions")
    table.columns[0].ratio = 3
    table.add_column("id", no_wrap=True, min_width=16)
    for d in documents:
        kind = _KINDS.get(d.mime, d.mime)
        sessions = ", ".join(d.session_ids)
        table.add_row(*cells(d.title, kind, str(d.chunk_count), d.workspace_id, sessions, d.id))
    return table


def docs_show(
    document_id: Annotated[str, typer.Argument(help="Document id.")],
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one document and its chunks."""
    with open_tether(db, config, must_exist=True) as tether:
        document = tether.get_document(document_id)
        chunks = tether.chunks(document_id)
    if as_json:
        print_json({"document": document.to_dict(), "chunks": [_chunk_json(c) for c in chunks]})
    else:
        _print_document(document, chunks)


def _chunk_json(chunk: StoredChunk) -> dict[str, Any]:
    return {
        "chunk_id": chunk.id,
        "ordinal": chunk.ordinal,
        "section_title": chunk.section_title,
        "page": chunk.page,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "token_count": chunk.token_count,
        "text": chunk.content,
    }


def _print_document(document: Document, chunks: list[StoredChunk]) -> None:
    out.print(_documents_table([document]))
    if document.tags is not None:
        tags = " · ".join(f"{k} {v}" for k, v in document.tags.to_dict().items() if v)
        say(f"tags: {tags}")
    if document.status != "active":
        out.print(f"status: {document.status} (not searched until approved)", highlight=False)
    for c in chunks:
        where = place(c.section_title, c.page and f"page {c.page}")
        out.print(
            f"[bold]#{c.id}[/] [dim]{c.char_start}-{c.char_end} {escape(where)}[/]", highlight=False
        )


def docs_rm(
    document_ids: Annotated[list[str], typer.Argument(help="Document ids to delete.")],
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete documents with their chunks, embeddings and session attachments."""
    _each_document(
        db, config, document_ids, "deleted", lambda t, d: t.delete_document(d), as_json=as_json
    )


def docs_approve(
    document_ids: Annotated[list[str], typer.Argument(help="Document ids to approve.")],
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make draft or pending (user-submitted) documents active, i.e. searchable."""
    _each_document(db, config, document_ids, "approved", lambda t, d: t.approve(d), as_json=as_json)


def _each_document(
    db: str | None,
    config: Path | None,
    document_ids: list[str],
    verb: str,
    action: Callable[[Tether, str], object],
    *,
    as_json: bool,
) -> None:
    """``action`` on each document, once each; as JSON, ``{verb: [ids]}``."""
    unique_ids = list(dict.fromkeys(document_ids))  # `rm A A` deletes A, then finds it gone
    with open_tether(db, config) as tether:
        for document_id in unique_ids:  # all of them exist, or nothing is done
            tether.get_document(document_id)
        for document_id in unique_ids:
            action(tether, document_id)
            if not as_json:
                say(f"{verb} {document_id}")
    if as_json:
        print_json({verb: unique_ids})
