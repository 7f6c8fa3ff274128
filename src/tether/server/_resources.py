"""The resource routes under ``/v1``: documents, background indexing jobs, sessions,
workspaces and the library folder.

Each route checks the caller's key first (:mod:`tether.server._auth`), makes one library
call and returns its ``to_dict()``. Writes go through the one writer thread; uploads are
streamed to a private folder (each file held to ``rag.max_file_bytes``) and indexed from
there, in the background as a job unless the caller waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Query, Request, Response, UploadFile
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from tether import Access, IndexJob, IndexResult, Tether
from tether.ingest.loaders import byte_size
from tether.models import GLOBAL_WORKSPACE, Document
from tether.server._auth import (
    readable_document,
    require_admin,
    session_workspace,
    writable_document,
    writable_placement,
)
from tether.server._errors import ApiError, not_found
from tether.server._schemas import ERRORS
from tether.server._service import AccessDep, Service, ServiceDep

router = APIRouter()

#: The longest text ``POST /documents/text`` takes (characters).
MAX_TEXT_CHARS = 5_000_000
#: How often a job's event stream looks at its progress (seconds).
EVENT_INTERVAL = 0.2
_UNSAFE = re.compile(r"[^\w.\- ]+")


class TextIn(BaseModel):
    model_config = {"extra": "forbid"}
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    title: str | None = Field(default=None, max_length=1000)
    document_id: str | None = Field(default=None, max_length=512)
    workspace_id: str | None = Field(default=None, max_length=512)
    session_id: str | None = Field(default=None, max_length=512)
    tags: dict[str, Any] | None = None


class SessionIn(BaseModel):
    model_config = {"extra": "forbid"}
    session_id: str = Field(min_length=1, max_length=512)
    workspace_id: str = Field(min_length=1, max_length=512)


class AttachIn(BaseModel):
    model_config = {"extra": "forbid"}
    document_id: str = Field(min_length=1, max_length=512)


# -- what a key may see of a record ---------------------------------------------------------


def _document_out(tether: Tether, access: Access, document: Document) -> dict[str, Any]:
    """A document as this caller may see it: a global document's attachments to
    sessions of workspaces the caller cannot read are left out."""
    out = document.to_dict()
    if access.readable is not None and document.session_ids:
        workspaces = {s.id: s.workspace_id for s in tether.sessions()}
        out["session_ids"] = [
            s for s in document.session_ids if access.can_read(workspaces.get(s, ""))
        ]
    return out


def _readable_workspaces(tether: Tether, access: Access, workspace_id: str | None) -> list[str]:
    """The workspaces a listing covers: the one named (if readable), else all this caller
    may read (None: everything, for an admin)."""
    if workspace_id is not None:
        if not access.can_read(workspace_id):
            raise not_found("workspace", workspace_id)
        return [workspace_id]
    readable = access.readable
    return list(readable) if readable is not None else []


# -- documents ---------------------------------------------------------------------------------


@router.get("/documents", tags=["documents"], summary="List documents", responses=ERRORS)
async def list_documents(
    svc: ServiceDep,
    caller: AccessDep,
    workspace_id: Annotated[str | None, Query(max_length=512)] = None,
    session_id: Annotated[str | None, Query(max_length=512)] = None,
    status: Literal["active", "draft", "pending"] | None = None,
) -> dict[str, Any]:
    tether = svc.tether

    def listing() -> list[dict[str, Any]]:
        if session_id is not None:
            session_workspace(tether, caller, session_id)
        if workspace_id is None and caller.readable is None:
            documents = tether.documents(session_id=session_id)
        else:
            documents = [
                d
                for w in _readable_workspaces(tether, caller, workspace_id)
                for d in tether.documents(workspace_id=w, session_id=session_id)
            ]
        return [
            _document_out(tether, caller, d)
            for d in documents
            if status is None or d.status == status
        ]

    return {"documents": await svc.read(listing)}


@router.get(
    "/documents/{document_id}",
    tags=["documents"],
    summary="One document, with its chunks on request",
    responses=ERRORS,
)
async def show_document(
    document_id: str, svc: ServiceDep, caller: AccessDep, chunks: bool = False
) -> dict[str, Any]:
    tether = svc.tether

    def show() -> dict[str, Any]:
        document = readable_document(tether, caller, document_id)
        out = {"document": _document_out(tether, caller, document)}
        if chunks:
            out["chunks"] = [
                {"id": c.id, "ordinal": c.ordinal, "section_title": c.section_title,
                 "page": c.page, "page_label": c.page_label, "token_count": c.token_count,
                 "char_start": c.char_start, "char_end": c.char_end, "text": c.content}
                for c in tether.chunks(document_id)
            ]  # fmt: skip
        return out

    return await svc.read(show)


@router.delete(
    "/documents/{document_id}",
    tags=["documents"],
    summary="Delete a document with its chunks, vectors and attachments",
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
    responses=ERRORS,
)
async def add_text(body: TextIn, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    tether = svc.tether
    workspace_id, session_id = await svc.read(
        writable_placement, tether, caller, body.workspace_id, body.session_id
    )
    [result] = await svc.write(
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
    responses={200: {"description": "wait=true: the results"}, **ERRORS},
)
async def upload_documents(
    request: Request,
    response: Response,
    svc: ServiceDep,
    caller: AccessDep,
    files: Annotated[list[UploadFile], File(description="One or more files")],
    workspace_id: Annotated[str | None, Form(max_length=512)] = None,
    session_id: Annotated[str | None, Form(max_length=512)] = None,
    tags: Annotated[str | None, Form(description="Tags as a JSON object")] = None,
    wait: Annotated[bool, Form(description="Index before answering")] = False,
) -> dict[str, Any]:
    tether = svc.tether
    workspace_id, session_id = await svc.read(
        writable_placement, tether, caller, workspace_id, session_id
    )
    parsed_tags = _tags(tags)
    folder = Path(tempfile.mkdtemp(prefix="tether-upload-"))
    try:
        names = await _save_uploads(files, folder, tether.settings.rag.max_file_bytes)
        paths = list(names)
        if wait:
            results = await svc.write(
                tether.add, paths, workspace_id=workspace_id, session_id=session_id,
                tags=parsed_tags, on_error="collect",
            )  # fmt: skip
            shutil.rmtree(folder, ignore_errors=True)
            response.status_code = 200
            return {"results": [_named(r, names) for r in results]}
        job = await svc.read(
            tether.submit, paths, workspace_id=workspace_id, session_id=session_id,
            tags=parsed_tags, kind="upload",
        )  # fmt: skip
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    svc.jobs[job.id] = (workspace_id, names)
    task = asyncio.create_task(_clean_after(job, folder))
    svc.background.add(task)
    task.add_done_callback(svc.background.discard)
    return {"job": _job_out(job, svc)}


def _tags(raw: str | None) -> dict[str, Any] | None:
    if raw is None or not raw.strip():
        return None
    try:
        tags = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ApiError(422, "ValidationError", f"tags must be a JSON object: {exc}") from None
    if not isinstance(tags, dict):
        raise ApiError(422, "ValidationError", "tags must be a JSON object")
    return tags


def _safe_name(name: str | None, used: set[str]) -> str:
    """A file name of our own for an upload: its base name, plain characters only, its
    suffix kept (it picks the loader), unique in the folder."""
    base = Path((name or "").replace("\\", "/")).name
    stem, suffix = Path(base).stem, Path(base).suffix.lower()
    stem = _UNSAFE.sub("_", stem).strip(" .")[:100] or "upload"
    suffix = _UNSAFE.sub("", suffix)[:10]
    candidate, n = f"{stem}{suffix}", 1
    while candidate in used:
        n += 1
        candidate = f"{stem}-{n}{suffix}"
    used.add(candidate)
    return candidate


async def _save_uploads(files: list[UploadFile], folder: Path, max_bytes: int) -> dict[Path, str]:
    """Stream each upload to ``folder``; a file over ``max_bytes`` is a 413 before more
    of it is read. The saved paths, each with the name the client gave it."""
    if not files:
        raise ApiError(422, "ValidationError", "no files in the upload")
    saved: dict[Path, str] = {}
    used: set[str] = set()
    for upload in files:
        path = folder / _safe_name(upload.filename, used)
        size = 0
        with path.open("wb") as out:
            while chunk := await upload.read(1 << 20):
                size += len(chunk)
                if size > max_bytes:
                    raise ApiError(
                        413, "LoadLimitExceeded",
                        f"{upload.filename}: is over rag.max_file_bytes"
                        f" ({byte_size(max_bytes)}); raise it or split the file",
                    )  # fmt: skip
                out.write(chunk)
        saved[path] = upload.filename or path.name
    return saved


def _named(result: IndexResult, names: dict[Path, str]) -> dict[str, Any]:
    """A result under the name the client uploaded, never the server's temporary path."""
    out = result.to_dict()
    name = next((n for p, n in names.items() if str(p) == result.source), None)
    if name is not None:
        out["source"] = name
        if out["error"]:
            out["error"] = out["error"].replace(result.source, name)
    return out


async def _clean_after(job: IndexJob, folder: Path) -> None:
    """Remove an upload's files once its job has ended, however it ended."""
    try:
        with contextlib.suppress(Exception):  # a crashed job is in its own status
            await job.async_wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- jobs ----------------------------------------------------------------------------------


def _job_out(job: IndexJob, svc: Service) -> dict[str, Any]:
    _, names = svc.jobs.get(job.id, (None, {}))
    progress = job.progress
    current = progress.current
    if current is not None:
        current = next((n for p, n in names.items() if str(p) == current), current)
    return {
        "id": job.id,
        "kind": job.kind,
        "status": job.status,
        "workspace_id": svc.jobs.get(job.id, (GLOBAL_WORKSPACE, {}))[0],
        "progress": {"done": progress.done, "total": progress.total, "current": current,
                     "description": progress.description},
        "results": [_named(r, names) for r in job.results],
    }  # fmt: skip


def _visible_job(svc: Service, caller: Access, job_id: str) -> IndexJob:
    job = next((j for j in svc.tether.jobs() if j.id == job_id), None)
    if job is None or job.id not in svc.jobs or not caller.can_read(svc.jobs[job.id][0]):
        raise not_found("job", job_id)
    return job


@router.get("/jobs", tags=["jobs"], summary="Indexing jobs this key may see", responses=ERRORS)
async def list_jobs(svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    jobs = [j for j in svc.tether.jobs() if j.id in svc.jobs and caller.can_read(svc.jobs[j.id][0])]
    return {"jobs": [_job_out(j, svc) for j in jobs]}


@router.get("/jobs/{job_id}", tags=["jobs"], summary="A job's status, progress and results",
            responses=ERRORS)  # fmt: skip
async def show_job(job_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    return {"job": _job_out(_visible_job(svc, caller, job_id), svc)}


@router.post("/jobs/{job_id}/cancel", tags=["jobs"],
             summary="Stop a job before its next file", responses=ERRORS)  # fmt: skip
async def cancel_job(job_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    job = _visible_job(svc, caller, job_id)
    if not caller.can_write(svc.jobs[job.id][0]):
        raise ApiError(403, "Forbidden", "this key may not cancel jobs of this workspace")
    cancelled = job.cancel()
    return {"cancelled": cancelled, "job": _job_out(job, svc)}


@router.get(
    "/jobs/{job_id}/events",
    tags=["jobs"],
    summary="A job's progress as Server-Sent Events (progress, then done)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERRORS},
)
async def job_events(
    job_id: str, request: Request, svc: ServiceDep, caller: AccessDep
) -> StreamingResponse:
    job = _visible_job(svc, caller, job_id)

    async def events() -> Any:
        last = None
        while True:
            out = _job_out(job, svc)
            state = (out["status"], out["progress"]["done"], out["progress"]["current"])
            if state != last:
                last = state
                yield f"event: progress\ndata: {json.dumps(out)}\n\n"
            if job.done():
                yield f"event: done\ndata: {json.dumps(_job_out(job, svc))}\n\n"
                return
            if await request.is_disconnected():
                return
            await asyncio.sleep(EVENT_INTERVAL)

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


# -- sessions and workspaces ----------------------------------------------------------------


@router.get("/sessions", tags=["sessions"], summary="Sessions this key may see", responses=ERRORS)
async def list_sessions(
    svc: ServiceDep, caller: AccessDep,
    workspace_id: Annotated[str | None, Query(max_length=512)] = None,
) -> dict[str, Any]:  # fmt: skip
    def listing() -> list[dict[str, Any]]:
        workspaces = _readable_workspaces(svc.tether, caller, workspace_id)
        sessions = svc.tether.sessions(workspace_id=workspace_id)
        return [
            dataclasses.asdict(s)
            for s in sessions
            if not workspaces or s.workspace_id in workspaces
        ]

    return {"sessions": await svc.read(listing)}


@router.post("/sessions", tags=["sessions"], summary="Create a session in a workspace",
             status_code=201, responses=ERRORS)  # fmt: skip
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


@router.post("/sessions/{session_id}/close", tags=["sessions"], summary="Close a session",
             responses=ERRORS)  # fmt: skip
async def close_session(session_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    await _writable_session(svc, caller, session_id)
    s = await svc.write(svc.tether.close_session, session_id)
    return {"session": dataclasses.asdict(s)}


@router.post("/sessions/{session_id}/attach", tags=["sessions"],
             summary="Attach a document to a session", responses=ERRORS)  # fmt: skip
async def attach(
    session_id: str, body: AttachIn, svc: ServiceDep, caller: AccessDep
) -> dict[str, Any]:
    await _writable_session(svc, caller, session_id)
    await svc.read(readable_document, svc.tether, caller, body.document_id)
    changed = await svc.write(svc.tether.attach, body.document_id, session_id)
    return {"attached": changed, "document_id": body.document_id, "session_id": session_id}


@router.post("/sessions/{session_id}/detach", tags=["sessions"],
             summary="Detach a document from a session (the document stays)",
             responses=ERRORS)  # fmt: skip
async def detach(
    session_id: str, body: AttachIn, svc: ServiceDep, caller: AccessDep
) -> dict[str, Any]:
    await _writable_session(svc, caller, session_id)
    await svc.read(readable_document, svc.tether, caller, body.document_id)
    changed = await svc.write(svc.tether.detach, body.document_id, session_id)
    return {"detached": changed, "document_id": body.document_id, "session_id": session_id}


@router.get("/workspaces", tags=["sessions"], summary="Workspaces this key may see",
            responses=ERRORS)  # fmt: skip
async def list_workspaces(svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    workspaces = await svc.read(svc.tether.workspaces)
    return {"workspaces": [dataclasses.asdict(w) for w in workspaces if caller.can_read(w.id)]}


# -- the library folder ----------------------------------------------------------------------


@router.get("/library", tags=["library"],
            summary="The library folder's registry: status, retries, last error (admin)",
            responses=ERRORS)  # fmt: skip
async def library(svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    require_admin(caller)
    rows = await svc.read(svc.tether.registry)
    return {"files": [row.to_dict() for row in rows]}
