"""The resource routes under ``/v1``: documents, sessions, workspaces and the library
folder (the jobs' routes are in :mod:`tether.server._jobs`).

Each route checks the caller's key first (:mod:`tether.server._auth`), makes one library
call and returns its ``to_dict()`` (the JSON of ``tether ... --json``). Writes go through
the one writer thread. An upload is read only after its key is checked: its body is
streamed part by part straight into a private folder, each file held to
``rag.max_file_bytes`` as it arrives, then indexed from there, in the background as a job
unless the caller waits, and the folder is removed when the indexing ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from tether import Access
from tether.ingest.formats import FORMATS, format_of
from tether.models import DocumentStatus
from tether.server._auth import (
    document_view,
    own_id,
    readable_document,
    require_admin,
    session_workspace,
    writable_document,
    writable_placement,
)
from tether.server._errors import ApiError, not_found
from tether.server._jobs import EVENT_INTERVAL, job_out, start_job
from tether.server._schemas import (
    ERRORS,
    AttachedOut,
    DeletedOut,
    DetachedOut,
    DocumentOneOut,
    DocumentShownOut,
    DocumentsOut,
    FormatsOut,
    IndexedOut,
    JobOneOut,
    LibraryOut,
    MeOut,
    SessionOneOut,
    SessionsOut,
    UploadResultsOut,
    WorkspacesOut,
)
from tether.server._service import AccessDep, Service, ServiceDep
from tether.server._spool import SpooledJob, spool_failures
from tether.server._uploads import Upload, _Strict, parse_tags, upload_body
from tether.tags import validate_tags

router = APIRouter()

#: The longest text ``POST /documents/text`` takes (characters).
MAX_TEXT_CHARS = 5_000_000


# -- request bodies ---------------------------------------------------------------------


class TextIn(_Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    title: str | None = Field(default=None, max_length=1000)
    document_id: str | None = Field(default=None, max_length=512)
    workspace_id: str | None = Field(default=None, max_length=512)
    session_id: str | None = Field(default=None, max_length=512)
    tags: dict[str, Any] | None = None


class SessionIn(_Strict):
    session_id: str = Field(min_length=1, max_length=512)
    workspace_id: str = Field(min_length=1, max_length=512)


class AttachIn(_Strict):
    document_id: str = Field(min_length=1, max_length=512)


# -- what a key may see -------------------------------------------------------------------


def _listed_workspaces(access: Access, workspace_id: str | None) -> list[str] | None:
    """The workspaces a listing covers: the one named (if readable), else each one this
    caller may read; None: every workspace (an admin naming none)."""
    if workspace_id is not None:
        if not access.can_read(workspace_id):
            raise not_found("workspace", workspace_id)
        return [workspace_id]
    readable = access.readable
    return None if readable is None else list(readable)


# -- documents ---------------------------------------------------------------------------------


@router.get(
    "/documents",
    tags=["documents"],
    summary="List documents (as `tether docs list --json`)",
    response_model=DocumentsOut,
    responses=ERRORS,
)
async def list_documents(
    svc: ServiceDep,
    caller: AccessDep,
    workspace_id: Annotated[str | None, Query(max_length=512)] = None,
    session_id: Annotated[str | None, Query(max_length=512)] = None,
    status: DocumentStatus | None = None,
    domain: Annotated[str | None, Query(max_length=512)] = None,
    source_type: Annotated[str | None, Query(max_length=512)] = None,
) -> dict[str, Any]:
    tether = svc.tether

    def listing() -> list[dict[str, Any]]:
        workspaces = _listed_workspaces(caller, workspace_id)
        if session_id is not None:
            session_workspace(tether, caller, session_id)
        # The workspace and the session are the library's arguments, so in its SQL; the
        # tag filters narrow what those give (every document there is readable already).
        if workspaces is None:
            documents = tether.documents(session_id=session_id)
        else:
            documents = [
                d
                for w in workspaces
                for d in tether.documents(workspace_id=w, session_id=session_id)
            ]
        return [
            document_view(tether, caller, d)
            for d in documents
            if (status is None or d.status == status)
            and (domain is None or (d.tags is not None and d.tags.domain == domain))
            and (source_type is None or d.source_type == source_type)
        ]

    return {"documents": await svc.read(listing)}


@router.get(
    "/documents/{document_id}",
    tags=["documents"],
    summary="One document, with its chunks on request (as `tether docs show --json`)",
    response_model=DocumentShownOut,
    response_model_exclude_unset=True,
    responses=ERRORS,
)
async def show_document(
    document_id: str, svc: ServiceDep, caller: AccessDep, chunks: bool = False
) -> dict[str, Any]:
    tether = svc.tether

    def show() -> dict[str, Any]:
        document = readable_document(tether, caller, document_id)
        out: dict[str, Any] = {"document": document_view(tether, caller, document)}
        if chunks:
            out["chunks"] = [
                {
                    "chunk_id": c.id,
                    "ordinal": c.ordinal,
                    "section_title": c.section_title,
                    "page": c.page,
                    "page_label": c.page_label,
                    "char_start": c.char_start,
                    "char_end": c.char_end,
                    "token_count": c.token_count,
                    "text": c.content,
                }
                for c in tether.chunks(document_id)
            ]
        return out

    return await svc.read(show)


@router.delete(
    "/documents/{document_id}",
    tags=["documents"],
    summary="Delete a document with its chunks, vectors and attachments",
    response_model=DeletedOut,
    responses=ERRORS,
)
async def delete_document(document_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    tether = svc.tether
    await svc.read(writable_document, tether, caller, document_id)
    await svc.write(tether.delete_document, document_id)
    return {"deleted": document_id}


@router.post(
    "/documents/{document_id}/approve",
    tags=["documents"],
    summary="Make a draft or pending document active (searchable)",
    response_model=DocumentOneOut,
    responses=ERRORS,
)
async def approve_document(document_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    tether = svc.tether
    await svc.read(writable_document, tether, caller, document_id)
    document = await svc.write(tether.approve, document_id)
    return {"document": document_view(tether, caller, document)}


@router.post(
    "/documents/text",
    tags=["documents"],
    summary="Add a text as a document (indexed before the answer)",
    response_model=IndexedOut,
    responses=ERRORS,
)
async def add_text(body: TextIn, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    tether = svc.tether
    workspace_id, session_id = await svc.read(
        writable_placement, tether, caller, body.workspace_id, body.session_id
    )
    document_id = body.document_id
    if document_id is not None:  # the caller's namespace: a foreign id reads as a free one
        document_id = own_id(caller, workspace_id, document_id)
    [result] = await svc.index(
        tether.add,
        text=body.text,
        title=body.title,
        document_id=document_id,
        workspace_id=workspace_id,
        session_id=session_id,
        tags=body.tags,
        on_error="collect",
    )
    if result.error is not None:
        raise result.error
    return {"result": result.to_dict()}


@router.post(
    "/documents",
    tags=["documents"],
    summary="Upload files (multipart) and index them: a background job, or wait=true",
    status_code=202,
    response_model=None,
    responses={
        202: {"model": JobOneOut, "description": "The indexing job (follow it at /jobs)"},
        200: {"model": UploadResultsOut, "description": "wait=true: one result per file"},
        **ERRORS,
    },
    openapi_extra={"requestBody": upload_body()},
)
async def upload_documents(
    request: Request, response: Response, svc: ServiceDep, caller: AccessDep
) -> dict[str, Any]:
    tether, spool = svc.tether, svc.spool
    key_id = caller.key.id if caller.key is not None else None
    limit = tether.settings.server.uploads_per_key
    if key_id is not None and spool.pending_of(key_id) >= limit:
        raise ApiError(
            429,
            "TooManyRequests",
            f"this key has {limit} upload jobs waiting or running"
            " (server.uploads_per_key); retry when one has ended",
            headers={"Retry-After": "5"},
        )
    with spool_failures(spool.root):
        partial = await svc.read(spool.receiving)
    upload = Upload(partial, tether.settings.rag.max_file_bytes, reserve=spool.reserve)
    try:
        with spool_failures(spool.root):
            await upload.receive(request)
        await svc.read(_check_formats, upload.files)  # 415 before anything is indexed
        form = upload.form()
        workspace_id, session_id = await svc.read(
            writable_placement, tether, caller, form.workspace_id, form.session_id
        )
        tags = parse_tags(form.tags)
        if tags is not None:  # bad tags fail the upload now, not each file of its job
            validate_tags("upload", tags, tether.settings.policy)
        entry = SpooledJob(
            uuid.uuid4().hex[:12],
            partial,
            workspace_id,
            session_id,
            tags,
            {path.name: name for path, name in upload.files.items()},
            key_id,
        )
        # Durable before the answer: from here on, a crash or a restart loses nothing.
        with spool_failures(spool.root):
            await svc.read(spool.accept, partial, entry, upload.received)
    except BaseException:
        spool.release(upload.received)
        shutil.rmtree(partial, ignore_errors=True)
        raise
    await start_job(svc, entry)
    if form.wait:
        while not entry.done():
            await asyncio.sleep(EVENT_INTERVAL / 4)
        response.status_code = 200
        return {"results": job_out(entry)["results"]}
    return {"job": job_out(entry)}


def _check_formats(files: dict[Path, str]) -> None:
    """:class:`UnsupportedFileType` (415) for the first uploaded file of no format tether
    reads, by its name or else its first bytes."""
    for path, name in files.items():
        with path.open("rb") as fh:
            head = fh.read(4096)
        format_of(name, head)


# -- sessions and workspaces ----------------------------------------------------------------


@router.get(
    "/sessions",
    tags=["sessions"],
    summary="Sessions this key may see (as `tether sessions list --json`)",
    response_model=SessionsOut,
    responses=ERRORS,
)
async def list_sessions(
    svc: ServiceDep,
    caller: AccessDep,
    workspace_id: Annotated[str | None, Query(max_length=512)] = None,
) -> dict[str, Any]:
    tether = svc.tether

    def listing() -> list[dict[str, Any]]:
        workspaces = _listed_workspaces(caller, workspace_id)
        if workspaces is None:
            sessions = tether.sessions()
        else:
            sessions = [s for w in workspaces for s in tether.sessions(workspace_id=w)]
        return [dataclasses.asdict(s) for s in sessions]

    return {"sessions": await svc.read(listing)}


@router.post(
    "/sessions",
    tags=["sessions"],
    summary="Create a session in a workspace (an existing one is returned as it is)",
    description=(
        "A key bound to workspaces names sessions in its workspace's namespace: `s1` in"
        " `acme` is stored and returned as `acme:s1`."
    ),
    status_code=201,
    response_model=SessionOneOut,
    responses=ERRORS,
)
async def create_session(body: SessionIn, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    tether = svc.tether
    await svc.read(writable_placement, tether, caller, body.workspace_id, None)
    session_id = own_id(caller, body.workspace_id, body.session_id)
    # A key bound to workspaces names ids in its own namespace, so only an admin can meet
    # a session of another workspace here (the library's ScopeError, 400).
    session = await svc.write(tether.create_session, session_id, workspace_id=body.workspace_id)
    return {"session": dataclasses.asdict(session)}


async def _writable_session(svc: Service, caller: Access, session_id: str) -> str:
    workspace = await svc.read(session_workspace, svc.tether, caller, session_id)
    if not caller.can_write(workspace):
        raise ApiError(403, "Forbidden", f"this key may not change sessions of {workspace!r}")
    return workspace


@router.post(
    "/sessions/{session_id}/close",
    tags=["sessions"],
    summary="Close a session",
    response_model=SessionOneOut,
    responses=ERRORS,
)
async def close_session(session_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    await _writable_session(svc, caller, session_id)
    session = await svc.write(svc.tether.close_session, session_id)
    return {"session": dataclasses.asdict(session)}


async def _change_attachment(
    svc: Service,
    caller: Access,
    session_id: str,
    body: AttachIn,
    change: Callable[[str, str], bool],
) -> bool:
    """Attach or detach (``change``) a document this caller may read, in a session whose
    workspace it may write."""
    await _writable_session(svc, caller, session_id)
    await svc.read(readable_document, svc.tether, caller, body.document_id)
    return await svc.write(change, body.document_id, session_id)


@router.post(
    "/sessions/{session_id}/attach",
    tags=["sessions"],
    summary="Attach a document to a session (of its workspace, or a global one)",
    response_model=AttachedOut,
    responses=ERRORS,
)
async def attach(
    session_id: str, body: AttachIn, svc: ServiceDep, caller: AccessDep
) -> dict[str, Any]:
    changed = await _change_attachment(svc, caller, session_id, body, svc.tether.attach)
    return {"attached": changed, "document_id": body.document_id, "session_id": session_id}


@router.post(
    "/sessions/{session_id}/detach",
    tags=["sessions"],
    summary="Detach a document from a session (the document stays)",
    response_model=DetachedOut,
    responses=ERRORS,
)
async def detach(
    session_id: str, body: AttachIn, svc: ServiceDep, caller: AccessDep
) -> dict[str, Any]:
    changed = await _change_attachment(svc, caller, session_id, body, svc.tether.detach)
    return {"detached": changed, "document_id": body.document_id, "session_id": session_id}


@router.get(
    "/workspaces",
    tags=["sessions"],
    summary="Workspaces this key may see",
    response_model=WorkspacesOut,
    responses=ERRORS,
)
async def list_workspaces(svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    workspaces = await svc.read(svc.tether.workspaces)
    return {"workspaces": [dataclasses.asdict(w) for w in workspaces if caller.can_read(w.id)]}


@router.get(
    "/me",
    tags=["sessions"],
    summary="What the caller's key may read and write (the console signs in with it)",
    response_model=MeOut,
    responses=ERRORS,
)
async def me(caller: AccessDep) -> dict[str, Any]:
    key = caller.key
    return {
        "key_id": key.id if key else None,
        "name": key.name if key else None,
        "admin": caller.admin,
        "read_only": bool(key and key.read_only),
        "global_write": caller.admin or bool(key and key.global_write),
        "may_write": caller.may_write,
        "workspaces": None if caller.admin or key is None else list(key.workspaces),
    }


@router.get(
    "/formats",
    tags=["documents"],
    summary="The kinds of file an upload may hold (any other is refused with 415)",
    response_model=FormatsOut,
    responses=ERRORS,
)
async def formats(caller: AccessDep) -> dict[str, Any]:
    return {
        "formats": [
            {"name": f.name, "extensions": list(f.extensions), "mime": f.mime, "cites": f.cites}
            for f in FORMATS
        ]
    }


# -- the library folder ----------------------------------------------------------------------


@router.get(
    "/library",
    tags=["library"],
    summary="The library folder's registry: status, retries, last error (admin keys)",
    response_model=LibraryOut,
    responses=ERRORS,
)
async def library(svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    require_admin(caller)
    rows = await svc.read(svc.tether.registry)
    return {"files": [row.to_dict() for row in rows]}
