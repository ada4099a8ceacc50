"""``/api/v1/workflows/{id}`` (a chain's steps) and ``/api/v1/jobs/{id}/dependents``."""

from __future__ import annotations

from typing import Final

import msgspec

from duly._http.api import ApiError, Call, Endpoint
from duly._http.views import job_out
from duly._workflows import WorkflowInfo

__all__ = ["ENDPOINTS"]


class Dependents(msgspec.Struct):
    """The ids of the jobs that wait (or waited) for a job (``options(after=...)``)."""

    id: str
    dependents: list[str]


async def workflow(call: Call) -> WorkflowInfo:
    """A workflow's status and its steps, in order."""
    app = call.app
    info = await app.get_workflow_async(call.path["id"])
    if info is None:
        raise ApiError(404, f"no workflow {call.path['id']!r} (unknown, or removed by retention)")
    return WorkflowInfo(info.id, info.status, [job_out(app, job) for job in info.jobs])


async def dependents(call: Call) -> Dependents:
    """The jobs that wait for this one."""
    job_id = call.path["id"]
    if await call.app.get_job_async(job_id) is None:
        raise ApiError(404, f"no job {job_id!r} (unknown, or removed by retention)")
    return Dependents(job_id, await call.app.dependents_async(job_id))


ENDPOINTS: Final = (
    Endpoint(
        "GET",
        "/api/v1/workflows/{id}",
        workflow,
        WorkflowInfo,
        "Get a workflow",
        errors=(404,),
        tags=("workflows",),
    ),
    Endpoint(
        "GET",
        "/api/v1/jobs/{id}/dependents",
        dependents,
        Dependents,
        "List the jobs waiting for a job",
        errors=(404,),
        tags=("jobs",),
    ),
)
