"""The resource routes under ``/v1``: documents, background indexing jobs, sessions,
workspaces and the library folder.

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
import json
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from tether import Access, IndexJob, PathSource, Tether
from tether.models import Document as DocumentRecord
from tether.models import DocumentStatus
from tether.server._auth import (
    readable_document,
    require_admin,
    session_workspace,
    writable_document,
    writable_placement,
)
from tether.server._errors import ApiError, not_found
from tether.server._schemas import (
    ERRORS,
    AttachedOut,
    CancelledOut,
    DeletedOut,
    DetachedOut,
    DocumentOneOut,
    DocumentShownOut,
    DocumentsOut,
    IndexedOut,
    JobOneOut,
    JobsOut,
    LibraryOut,
    MeOut,
    SessionOneOut,
    SessionsOut,
    UploadResultsOut,
    WorkspacesOut,
)
from tether.server._service import AccessDep, Service, ServiceDep
from tether.server._uploads import Upload, clean_after, named, parse_tags, upload_body
from tether.tags import validate_tags

router = APIRouter()

#: The longest text ``POST /documents/text`` takes (characters).
MAX_TEXT_CHARS = 5_000_000
#: How often a job's event stream looks at its progress (seconds).
EVENT_INTERVAL = 0.2
#: The most files one upload may carry, and the most bytes of each of its other fields.
MAX_UPLOAD_FILES = 1000
MAX_FIELD_BYTES = 64 << 10
_UNSAFE = re.compile(r"[^\w.\- ]+")


# -- request bodies ---------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


# -- what a key may see of a record ---------------------------------------------------------


def _document_out(tether: Tether, access: Access, document: DocumentRecord) -> dict[str, Any]:
    """A document as this caller may see it: a global document's attachments to
    sessions of workspaces the caller cannot read are left out."""
    out = document.to_dict()
    if access.readable is not None and document.session_ids:
        workspaces = {s.id: s.workspace_id for s in tether.sessions()}
        out["session_ids"] = [
            s for s in document.session_ids if access.can_read(workspaces.get(s, ""))
        ]
    return out


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
            _document_out(tether, caller, d)
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
        out: dict[str, Any] = {"document": _document_out(tether, caller, document)}
        if chunks:
            out["chunks"] = [
                {"chunk_id": c.id, "ordinal": c.ordinal, "section_title": c.section_title,
                 "page": c.page, "page_label": c.page_label, "char_start": c.char_start,
                 "char_end": c.char_end, "token_count": c.token_count, "text": c.content}
                for c in tether.chunks(document_id)
            ]  # fmt: skip
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
    return {"document": _document_out(tether, caller, document)}


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
    [result] = await svc.index(
        tether.add, text=body.text, title=body.title, document_id=body.document_id,
        workspace_id=workspace_id, session_id=session_id, tags=body.tags, on_error="collect",
    )  # fmt: skip
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
    tether = svc.tether
    folder = Path(tempfile.mkdtemp(prefix="tether-upload-"))
    try:
        upload = Upload(folder, tether.settings.rag.max_file_bytes)
        await upload.receive(request)
        form = upload.form()
        workspace_id, session_id = await svc.read(
            writable_placement, tether, caller, form.workspace_id, form.session_id
        )
        tags = parse_tags(form.tags)
        if tags is not None:  # bad tags fail the upload now, not each file of its job
            validate_tags("upload", tags, tether.settings.policy)
        # Each file is known by the name it was uploaded under, not its temporary path:
        # the same upload again is the same document, skipped when unchanged.
        paths = [PathSource(path, tags=tags, source=f"upload:{name}")
                 for path, name in upload.files.items()]  # fmt: skip
        # A job either way: files load, chunk and embed on the indexing threads.
        job = await svc.index(
            tether.submit, paths, workspace_id=workspace_id, session_id=session_id,
            kind="upload",
        )  # fmt: skip
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _remember(svc, job, workspace_id, upload.files)
    # The files go when the job ends, even when a waiting client goes away before it.
    task = asyncio.create_task(clean_after(job, folder))
    svc.background.add(task)
    task.add_done_callback(svc.background.discard)
    if form.wait:
        results = await job
        shutil.rmtree(folder, ignore_errors=True)  # gone before the answer, not after
        response.status_code = 200
        return {"results": [named(r, upload.files) for r in results]}
    return {"job": _job_out(job, svc)}


# -- jobs ----------------------------------------------------------------------------------


def _remember(svc: Service, job: IndexJob, workspace_id: str, names: dict[Path, str]) -> None:
    """Record the workspace an upload job writes to (it decides who may see the job),
    forgetting jobs the library has forgotten."""
    known = {j.id for j in svc.tether.jobs()}
    for stale in [i for i in svc.jobs if i not in known]:
        del svc.jobs[stale]
    svc.jobs[job.id] = (workspace_id, names)


def _job_workspace(svc: Service, job: IndexJob) -> str | None:
    recorded = svc.jobs.get(job.id)
    return None if recorded is None else recorded[0]


def _may_see(caller: Access, workspace_id: str | None) -> bool:
    """A job is seen by those who may read its workspace; one not submitted over HTTP
    (its workspace unrecorded) by admins only."""
    return caller.admin if workspace_id is None else caller.can_read(workspace_id)


def _job_out(job: IndexJob, svc: Service) -> dict[str, Any]:
    names = svc.jobs.get(job.id, (None, {}))[1]
    progress = job.progress
    current = progress.current
    if current is not None:
        current = next((n for p, n in names.items() if str(p) == current), current)
    return {
        "id": job.id,
        "kind": job.kind,
        "status": job.status,
        "workspace_id": _job_workspace(svc, job),
        "progress": {"done": progress.done, "total": progress.total, "current": current,
                     "description": progress.description},
        "results": [named(r, names) for r in job.results],
    }  # fmt: skip


def _visible_job(svc: Service, caller: Access, job_id: str) -> IndexJob:
    job = next((j for j in svc.tether.jobs() if j.id == job_id), None)
    if job is None or not _may_see(caller, _job_workspace(svc, job)):
        raise not_found("job", job_id)
    return job


@router.get(
    "/jobs",
    tags=["jobs"],
    summary="Indexing jobs this key may see, oldest first",
    response_model=JobsOut,
    responses=ERRORS,
)
async def list_jobs(svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    jobs = [j for j in svc.tether.jobs() if _may_see(caller, _job_workspace(svc, j))]
    return {"jobs": [_job_out(j, svc) for j in jobs]}


@router.get(
    "/jobs/{job_id}",
    tags=["jobs"],
    summary="A job's status, progress and results",
    response_model=JobOneOut,
    responses=ERRORS,
)
async def show_job(job_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    return {"job": _job_out(_visible_job(svc, caller, job_id), svc)}


@router.post(
    "/jobs/{job_id}/cancel",
    tags=["jobs"],
    summary="Stop a job before its next file (a document is never stored half-way)",
    response_model=CancelledOut,
    responses=ERRORS,
)
async def cancel_job(job_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    job = _visible_job(svc, caller, job_id)
    workspace_id = _job_workspace(svc, job)
    if not (caller.admin if workspace_id is None else caller.can_write(workspace_id)):
        raise ApiError(403, "Forbidden", f"this key may not cancel jobs of {workspace_id!r}")
    cancelled = job.cancel()
    return {"cancelled": cancelled, "job": _job_out(job, svc)}


@router.get(
    "/jobs/{job_id}/events",
    tags=["jobs"],
    summary="A job's progress as Server-Sent Events: `progress` on each change, then `done`",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            "description": "Events whose data is the job, as GET /jobs/{job_id} gives it",
        },
        **ERRORS,
    },
)
async def job_events(
    job_id: str, request: Request, svc: ServiceDep, caller: AccessDep
) -> StreamingResponse:
    job = _visible_job(svc, caller, job_id)

    async def events() -> AsyncIterator[str]:
        last = None
        while True:
            finished = job.done()  # read first: the state read next is then the final one
            out = _job_out(job, svc)
            state = (out["status"], out["progress"]["done"], out["progress"]["current"])
            if state != last:
                last = state
                yield _event("progress", out)
            if finished:
                yield _event("done", out)
                return
            if await request.is_disconnected():
                return
            await asyncio.sleep(EVENT_INTERVAL)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


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
    status_code=201,
    response_model=SessionOneOut,
    responses=ERRORS,
)
async def create_session(body: SessionIn, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    tether = svc.tether
    await svc.read(writable_placement, tether, caller, body.workspace_id, None)
    existing = await svc.read(tether.store.find_session, body.session_id)
    if existing is not None and not caller.can_read(existing.workspace_id):
        raise ApiError(409, "Conflict", f"session id {body.session_id!r} is taken")
    session = await svc.write(
        tether.create_session, body.session_id, workspace_id=body.workspace_id
    )
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
