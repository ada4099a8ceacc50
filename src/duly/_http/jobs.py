"""``/api/v1/jobs``: look jobs up, list them a page at a time, retry and cancel them."""

from __future__ import annotations

from typing import Any, Final

from duly._http.api import LIMIT, ApiError, Call, Endpoint, Param, encode_cursor
from duly._http.models import JobAction, JobList
from duly._http.views import job_out
from duly._job import JobInfo
from duly._records import STATUSES

__all__ = ["ENDPOINTS"]

_LIST_PARAMS: Final = (
    Param("status", choices=STATUSES, description="Only jobs in this state."),
    Param("task", description="Only jobs of this task (its full name)."),
    Param("key", description="Only jobs of this key (read through the key's own index)."),
    Param("queue", description="Only jobs of this queue."),
    LIMIT,
    Param("before", "cursor", "The `next` of the previous page."),
)


async def _job(call: Call) -> JobInfo[Any]:
    info = await call.app.get_job_async(call.path["id"])
    if info is None:
        raise ApiError(404, f"no job {call.path['id']!r} (unknown, or removed by retention)")
    return info


async def get_job(call: Call) -> JobInfo[Any]:
    """The job with this id."""
    return job_out(call.app, await _job(call))


async def list_jobs(call: Call) -> JobList:
    """Jobs matching every filter, newest first, a page at a time."""
    q = call.query
    limit: int = q["limit"]
    found = await call.app.jobs_async(
        key=q["key"],
        status=q["status"],
        task=q["task"],
        queue=q["queue"],
        limit=limit + 1,
        before=q["before"],
    )
    more = len(found) > limit
    jobs = [job_out(call.app, info) for info in found[:limit]]
    return JobList(jobs=jobs, next=encode_cursor(jobs[-1].id) if more else None)


async def _act(call: Call, done: bool, refusal: str) -> JobAction:
    """The job after an action; 404 if unknown, 409 (``refusal``) if its state refused it."""
    info = await _job(call)
    if not done:
        raise ApiError(409, f"job is {info.status}: {refusal}")
    return JobAction(job=job_out(call.app, info))


async def retry_job(call: Call) -> JobAction:
    """Run a failed or cancelled job again."""
    done = await call.app.retry_async(call.path["id"])
    return await _act(call, done, "only failed or cancelled jobs are retried")


async def cancel_job(call: Call) -> JobAction:
    """Cancel a job that has not finished (a running one stops at its next check)."""
    done = await call.app.cancel_async(call.path["id"])
    return await _act(call, done, "a finished job cannot be cancelled")


ENDPOINTS: Final = (
    Endpoint(
        "GET",
        "/api/v1/jobs",
        list_jobs,
        JobList,
        "List jobs",
        params=_LIST_PARAMS,
        errors=(400,),
        tags=("jobs",),
    ),
    Endpoint(
        "GET", "/api/v1/jobs/{id}", get_job, JobInfo, "Get a job", errors=(404,), tags=("jobs",)
    ),
    Endpoint(
        "POST",
        "/api/v1/jobs/{id}/retry",
        retry_job,
        JobAction,
        "Retry a job",
        access="admin",
        errors=(404, 409),
        tags=("jobs",),
    ),
    Endpoint(
        "POST",
        "/api/v1/jobs/{id}/cancel",
        cancel_job,
        JobAction,
        "Cancel a job",
        access="admin",
        errors=(404, 409),
        tags=("jobs",),
    ),
)
