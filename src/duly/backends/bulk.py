"""The bulk actions capability (PRODUCT §15): cancel or retry a batch of jobs in one step.

``app.cancel_many`` / ``app.retry_many`` select the ids of the matching jobs a page at a time
(``matching``: ids only, by cursor, until the cursor is exhausted) and hand each page (at most
``MAX_BATCH`` ids) to one call here, which applies the per-job action (the same
as ``Backend.cancel`` / ``Backend.retry``, with everything that changes with it: gate slots,
unique holds, groups, dependents, events) to every id in one atomic step: one transaction on
SQLite and PostgreSQL, one script on Redis, never a round trip per job. A job that is no
longer in the given status when that step runs (it changed state meanwhile) is skipped, so
none is cancelled or re-run twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from duly._records import JobFilter
from duly.backends.capability import Capability

__all__ = ["BULK", "MAX_BATCH", "BulkActions"]

#: The most ids one call takes.
MAX_BATCH: Final = 1000


class BulkActions(Protocol):
    """Cancel or retry many jobs, one atomic step per call."""

    async def matching(self, where: JobFilter, cursor: str | None) -> tuple[list[str], str | None]:
        """The ids of some jobs matching ``where`` (its status set), from ``cursor`` (None: the
        start) on, and the cursor to go on from (None: no more). A page may hold fewer ids
        than match, even none, while the cursor is not None; a job enqueued meanwhile may be
        missed."""
        ...

    async def cancel(
        self, job_ids: Sequence[str], status: str, now: float, expire_at: float
    ) -> int:
        """Cancel each job still in ``status`` (an active one) as ``Backend.cancel`` does (a
        running one gets its cancel requested); how many."""
        ...

    async def retry(self, job_ids: Sequence[str], status: str, now: float) -> int:
        """Re-queue each job still in ``status`` (failed or cancelled) as ``Backend.retry``
        does (skipped if another active job holds its unique key); how many."""
        ...


#: ``backend.bulk``.
BULK: Final = Capability[BulkActions]("bulk", "bulk cancel and retry")
