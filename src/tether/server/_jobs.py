"""The job routes under ``/v1``: indexing jobs, uploads' first (spooled, durable: see
:mod:`tether.server._spool`), then the library's own (the library folder's, admins
only), each seen by the keys that may read its workspace; and how an upload's job is
started and its end recorded."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from tether import Access, IndexJob, IndexResult, TetherError
from tether.server._errors import ApiError, not_found
from tether.server._schemas import ERRORS, CancelledOut, JobOneOut, JobsOut
from tether.server._service import AccessDep, Service, ServiceDep
from tether.server._spool import SpooledJob
from tether.server._uploads import named

router = APIRouter()

#: How often a job's event stream looks at its progress (seconds).
EVENT_INTERVAL = 0.2


async def start_job(svc: Service, entry: SpooledJob) -> None:
    """Index a spooled upload on the indexing threads, recording its end in the spool
    when it ends; one that cannot start (its session deleted meanwhile) ends failed."""
    tether = svc.tether
    try:
        entry.job = await svc.index(
            tether.submit,
            entry.sources(),
            workspace_id=entry.workspace_id,
            session_id=entry.session_id,
            kind="upload",
        )
    except TetherError as exc:
        results = [IndexResult(n, "failed", error=exc).to_dict() for n in entry.names.values()]
        await svc.read(svc.spool.end, entry, "failed", results)
        return
    task = asyncio.create_task(_finish(svc, entry))
    svc.background.add(task)
    task.add_done_callback(svc.background.discard)


async def _finish(svc: Service, entry: SpooledJob) -> None:
    job = entry.job
    assert job is not None
    with contextlib.suppress(Exception):  # a crashed job is in its own status
        await job.async_wait()
    if svc.spool.closing and job.status == "cancelled":
        return  # stopped by a shutdown, not by a client: the next start resumes it
    await _record_end(svc, entry)


async def _record_end(svc: Service, entry: SpooledJob) -> None:
    """Record in the spool how ``entry``'s indexing job ended (its manifest written, its
    files deleted): until then the job reads ``running``."""
    job = entry.job
    assert job is not None
    if entry.ended is not None:
        return  # a cancel of the queued job recorded it already
    results = [named(r, entry.paths()) for r in job.results]
    await svc.read(svc.spool.end, entry, job.status, results)


# -- jobs ----------------------------------------------------------------------------------

Job = SpooledJob | IndexJob


def _all_jobs(svc: Service) -> list[Job]:
    """Upload jobs (spooled, in the order they were accepted), then jobs submitted to
    the library otherwise (the library folder's, admins only)."""
    spooled = sorted(svc.spool.jobs.values(), key=lambda j: j.created_at)
    owned = {id(j.job) for j in spooled if j.job is not None}
    return [*spooled, *(j for j in svc.tether.jobs() if id(j) not in owned)]


def _job_workspace(job: Job) -> str | None:
    return job.workspace_id if isinstance(job, SpooledJob) else None


def _may_see(caller: Access, workspace_id: str | None) -> bool:
    """A job is seen by those who may read its workspace; one not submitted over HTTP
    (its workspace unrecorded) by admins only."""
    return caller.admin if workspace_id is None else caller.can_read(workspace_id)


def job_out(job: Job) -> dict[str, Any]:
    progress = job.progress
    current = progress.current
    if isinstance(job, SpooledJob):
        names = job.paths()
        current = next((n for p, n in names.items() if str(p) == current), current)
        if job.ended is not None:
            results = job.ended["results"]
        else:
            results = [named(r, names) for r in (job.job.results if job.job else [])]
        ident, kind = job.id, "upload"
    else:
        results = [r.to_dict() for r in job.results]
        ident, kind = job.id, job.kind
    return {
        "id": ident,
        "kind": kind,
        "status": job.status,
        "workspace_id": _job_workspace(job),
        "progress": {
            "done": progress.done,
            "total": progress.total,
            "current": current,
            "description": progress.description,
        },
        "results": results,
    }


def _visible_job(svc: Service, caller: Access, job_id: str) -> Job:
    job = next((j for j in _all_jobs(svc) if j.id == job_id), None)
    if job is None or not _may_see(caller, _job_workspace(job)):
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
    jobs = [j for j in _all_jobs(svc) if _may_see(caller, _job_workspace(j))]
    return {"jobs": [job_out(j) for j in jobs]}


@router.get(
    "/jobs/{job_id}",
    tags=["jobs"],
    summary="A job's status, progress and results",
    response_model=JobOneOut,
    responses=ERRORS,
)
async def show_job(job_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    return {"job": job_out(_visible_job(svc, caller, job_id))}


@router.post(
    "/jobs/{job_id}/cancel",
    tags=["jobs"],
    summary="Stop a job before its next file (a document is never stored half-way)",
    response_model=CancelledOut,
    responses=ERRORS,
)
async def cancel_job(job_id: str, svc: ServiceDep, caller: AccessDep) -> dict[str, Any]:
    job = _visible_job(svc, caller, job_id)
    workspace_id = _job_workspace(job)
    if not (caller.admin if workspace_id is None else caller.can_write(workspace_id)):
        raise ApiError(403, "Forbidden", f"this key may not cancel jobs of {workspace_id!r}")
    running = job.job if isinstance(job, SpooledJob) else job
    cancelled = running.cancel() if running is not None and not job.done() else False
    stopped = running is not None and running.status == "cancelled"
    if isinstance(job, SpooledJob) and stopped and job.ended is None:
        await _record_end(svc, job)  # a queued job stops at once: record it now
    return {"cancelled": cancelled, "job": job_out(job)}


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
            out = job_out(job)
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
