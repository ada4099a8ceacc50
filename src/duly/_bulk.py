"""Bulk cancel and retry (PRODUCT §15): ``app.cancel_many(...)`` / ``app.retry_many(...)``.

The ids of the matching jobs (the filters of ``app.jobs``) are selected by the backend a page
at a time by cursor, until the cursor is exhausted (never by reading whole records), and each
batch of at most ``MAX_BATCH`` is cancelled or retried in one atomic step
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
    bulk, done, cursor = BULK.of(backend), 0, None
    status = where.status
    assert status is not None
    while True:
        ids, cursor = await bulk.matching(where, cursor)
        for batch in _batches(ids):
            done += await bulk.cancel(batch, status, now, expire_at)
        if cursor is None:
            return done


async def retry_matching(backend: Backend, where: JobFilter, now: float) -> int:
    """Retry every job matching ``where``, a batch per atomic step; how many."""
    bulk, done, cursor = BULK.of(backend), 0, None
    status = where.status
    assert status is not None
    while True:
        ids, cursor = await bulk.matching(where, cursor)
        for batch in _batches(ids):
            done += await bulk.retry(batch, status, now)
        if cursor is None:
            return done


def _batches(ids: list[str]) -> list[list[str]]:
    return [ids[i : i + MAX_BATCH] for i in range(0, len(ids), MAX_BATCH)]
