"""Bulk cancel and retry (PRODUCT §15): ``app.cancel_many(...)`` / ``app.retry_many(...)``.

The matching jobs are read a page of ``MAX_BATCH`` at a time (newest first, the filters of
``app.jobs``), and each page is cancelled or retried by the backend in one atomic step
(``duly.backends.bulk``): never a round trip per job, and a job that changed state meanwhile
is skipped, never cancelled or run twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from duly._errors import ConfigurationError
from duly._records import JobFilter
from duly.backends.bulk import BULK, MAX_BATCH

if TYPE_CHECKING:
    from duly.backends import Backend

__all__ = ["CANCELLABLE", "RETRYABLE", "cancel_matching", "check_filter", "retry_matching"]

#: The statuses ``cancel_many`` takes (``running``: each one's cancel is requested).
CANCELLABLE: Final = ("scheduled", "queued", "running", "retrying")
#: The statuses ``retry_many`` takes.
RETRYABLE: Final = ("failed", "cancelled")


def check_filter(
    status: object, allowed: tuple[str, ...], task: object, queue: object, key: object
) -> JobFilter:
    """The filter of a bulk action; ``ConfigurationError`` for a status it does not take,
    ``TypeError`` for a filter that is not a str (or None)."""
    if not isinstance(status, str):
        raise TypeError(f"status must be a str, got {status!r}")
    if status not in allowed:
        raise ConfigurationError(f"status must be one of {', '.join(allowed)}, got {status!r}")
    return JobFilter(
        status=status, task=_text("task", task), queue=_text("queue", queue), key=_text("key", key)
    )


def _text(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, got {value!r}")
    return value


async def cancel_matching(backend: Backend, where: JobFilter, now: float, expire_at: float) -> int:
    """Cancel every job matching ``where``, a batch per atomic step; how many."""
    bulk, done, before = BULK.of(backend), 0, None
    while True:
        page = await backend.list_jobs(_page(where, before), MAX_BATCH)
        assert where.status is not None
        done += await bulk.cancel([r.id for r in page], where.status, now, expire_at)
        if len(page) < MAX_BATCH:
            return done
        before = page[-1].id


async def retry_matching(backend: Backend, where: JobFilter, now: float) -> int:
    """Retry every job matching ``where``, a batch per atomic step; how many."""
    bulk, done, before = BULK.of(backend), 0, None
    while True:
        page = await backend.list_jobs(_page(where, before), MAX_BATCH)
        assert where.status is not None
        done += await bulk.retry([r.id for r in page], where.status, now)
        if len(page) < MAX_BATCH:
            return done
        before = page[-1].id


def _page(where: JobFilter, before: str | None) -> JobFilter:
    return JobFilter(
        status=where.status, task=where.task, queue=where.queue, key=where.key, before=before
    )
