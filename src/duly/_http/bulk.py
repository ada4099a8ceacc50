"""``POST /api/v1/jobs/retry`` and ``POST /api/v1/jobs/cancel``: retry or cancel every job
matching a filter (PRODUCT §15).

The dashboard's "retry all matching" and "cancel all matching" buttons. Admin only (a cookie
session also sends ``X-Duly-CSRF``, as for every POST). Both call ``app.retry_many`` /
``app.cancel_many``: the jobs are read a page at a time with the filters of ``GET
/api/v1/jobs``, and each page of up to 1,000 is retried or cancelled by the backend in one
atomic step, so a job that changed state meanwhile is skipped, never run twice.
"""

from __future__ import annotations

from typing import Final

import msgspec

from duly._bulk import CANCELLABLE, RETRYABLE
from duly._http.api import Call, Endpoint, Param

__all__ = ["ENDPOINTS", "BulkCancelled", "BulkRetried", "cancel_matching", "retry_matching"]


class BulkRetried(msgspec.Struct):
    """How many matching jobs were retried (``more`` is always False now: every matching job
    is handled in one call; kept for clients written before)."""

    retried: int
    more: bool = False


class BulkCancelled(msgspec.Struct):
    """How many matching jobs were cancelled (running ones: their cancel requested)."""

    cancelled: int


async def retry_matching(call: Call) -> BulkRetried:
    """Retry the jobs in state ``status`` matching ``task`` / ``queue`` / ``key``."""
    q = call.query
    n = await call.app.retry_many_async(q["status"], q["task"], q["queue"], q["key"])
    return BulkRetried(retried=n)


async def cancel_matching(call: Call) -> BulkCancelled:
    """Cancel the jobs in state ``status`` matching ``task`` / ``queue`` / ``key``."""
    q = call.query
    n = await call.app.cancel_many_async(q["status"], q["task"], q["queue"], q["key"])
    return BulkCancelled(cancelled=n)


def _filters() -> tuple[Param, ...]:
    return (
        Param("task", description="Only jobs of this task."),
        Param("queue", description="Only jobs of this queue."),
        Param("key", description="Only jobs of this key."),
    )


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
                choices=RETRYABLE,
                default="failed",
                description="Which jobs: failed (default) or cancelled.",
            ),
            *_filters(),
        ),
        errors=(400,),
        tags=("jobs",),
    ),
    Endpoint(
        "POST",
        "/api/v1/jobs/cancel",
        cancel_matching,
        BulkCancelled,
        "Cancel every job matching a filter",
        access="admin",
        params=(
            Param(
                "status",
                choices=CANCELLABLE,
                default="queued",
                description="Which jobs: queued (default), scheduled, retrying, or running "
                "(their cancel is requested).",
            ),
            *_filters(),
        ),
        errors=(400,),
        tags=("jobs",),
    ),
)
