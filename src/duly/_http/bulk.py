"""``POST /api/v1/jobs/retry``: retry every failed (or cancelled) job matching a filter.

The dashboard's "retry all matching" button (issue 16). Admin only (a cookie session also sends
``X-Duly-CSRF``, as for every POST). The jobs are read a page at a time, newest first, with the
same filters as ``GET /api/v1/jobs``, and each is retried with ``app.retry`` — one atomic step
per job, so a job that changed state meanwhile (retried by someone else, removed by retention)
is skipped, never run twice. At most ``MAX_RETRIED`` jobs per call: ``more`` says whether to
call again.
"""

from __future__ import annotations

from typing import Final

import msgspec

from duly._http.api import Call, Endpoint, Param
from duly._records import JobFilter

__all__ = ["ENDPOINTS", "MAX_RETRIED", "BulkRetried", "retry_matching"]

#: Most jobs one call retries.
MAX_RETRIED: Final = 1000
#: Jobs read per backend call.
_PAGE: Final = 200


class BulkRetried(msgspec.Struct):
    """How many matching jobs were retried; ``more``: others may match (call again)."""

    retried: int
    more: bool


async def retry_matching(call: Call) -> BulkRetried:
    """Retry the jobs in state ``status`` matching ``task`` / ``queue`` / ``key``."""
    q = call.query
    backend = await call.app.backend()
    retried = 0
    before: str | None = None
    while True:
        where = JobFilter(
            status=q["status"], task=q["task"], queue=q["queue"], key=q["key"], before=before
        )
        records = await backend.list_jobs(where, _PAGE)
        for record in records:
            if retried >= MAX_RETRIED:
                return BulkRetried(retried=retried, more=True)
            if await call.app.retry_async(record.id):
                retried += 1
        if len(records) < _PAGE:
            return BulkRetried(retried=retried, more=False)
        before = records[-1].id


ENDPOINTS: Final = (
    Endpoint(
        "POST",
        "/api/v1/jobs/retry",
        retry_matching,
        BulkRetried,
        "Retry every failed job matching a filter",
        access="admin",
        params=(
            Param(
                "status",
                choices=("failed", "cancelled"),
                default="failed",
                description="Which jobs: failed (default) or cancelled.",
            ),
            Param("task", description="Only jobs of this task."),
            Param("queue", description="Only jobs of this queue."),
            Param("key", description="Only jobs of this key."),
        ),
        errors=(400,),
        tags=("jobs",),
    ),
)
