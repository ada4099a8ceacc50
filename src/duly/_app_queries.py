"""The App's lookups and operator actions: jobs, watches, queues, workers, stats, retry, cancel,
pause and resume."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from duly._bulk import CANCELLABLE, RETRYABLE, cancel_matching, check_filter, retry_matching
from duly._job import JobInfo
from duly._pausing import mark_paused, pause_queue, resume_queue
from duly._records import STATUSES, JobFilter, QueueStats, StatRow, WorkerRecord
from duly._watch import Watch, WatchRecord

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly._registry import Registry
    from duly._task import Task
    from duly.backends import Backend

__all__ = ["AppQueries"]

T = TypeVar("T")


class AppQueries(ABC):
    """Read what the backend holds and act on single jobs; ``duly.App`` inherits these and
    gives the two ways in they need: its backend, and running a coroutine from sync code."""

    tasks: dict[str, Task[Any, Any]]
    registry: Registry
    clock: Clock
    failed_retention: float
    stats_retention: float

    @abstractmethod
    async def backend(self) -> Backend:
        """The opened backend of the running event loop."""

    @abstractmethod
    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` from sync code and return its result."""

    def watch_history(
        self, watch: str | Watch[..., Any] | None = None, *, active: bool = False, limit: int = 50
    ) -> list[WatchRecord]:
        """Ended watches (or, with ``active``, the ones still watching), newest first."""
        return self.run_sync(self.watch_history_async(watch, active=active, limit=limit))

    async def watch_history_async(
        self, watch: str | Watch[..., Any] | None = None, *, active: bool = False, limit: int = 50
    ) -> list[WatchRecord]:
        """Async twin of ``watch_history``."""
        if watch is None:
            names = self.registry.watches()
        else:
            names = [watch if isinstance(watch, str) else watch.name]
        statuses = (
            ("scheduled", "queued", "running", "retrying")
            if active
            else ("succeeded", "failed", "cancelled")
        )
        backend = await self.backend()
        records = [
            record
            for name in names
            for status in statuses
            for record in await backend.list_jobs(JobFilter(task=name, status=status), limit)
        ]
        records.sort(key=lambda r: r.id, reverse=True)
        return [WatchRecord.from_record(r) for r in records[:limit]]

    def get_job(self, job_id: str) -> JobInfo[Any] | None:
        """The job with this id, or None (unknown, or removed by retention)."""
        return self.run_sync(self.get_job_async(job_id))

    async def get_job_async(self, job_id: str) -> JobInfo[Any] | None:
        """Async twin of ``get_job``."""
        if not _storable_id(job_id):
            return None
        record = await (await self.backend()).get_job(job_id)
        return None if record is None else JobInfo.from_record(record, self.tasks.get(record.task))

    def jobs(
        self,
        *,
        key: str | None = None,
        status: str | None = None,
        task: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobInfo[Any]]:
        """Jobs matching every given filter, newest first, ``limit`` at most.

        ``before`` pages: give the ``id`` of the last job of the previous page to get the
        jobs after it (older ones), e.g. ``app.jobs(limit=50, before=page[-1].id)``."""
        return self.run_sync(
            self.jobs_async(
                key=key, status=status, task=task, queue=queue, limit=limit, before=before
            )
        )

    async def jobs_async(
        self,
        *,
        key: str | None = None,
        status: str | None = None,
        task: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobInfo[Any]]:
        """Async twin of ``jobs``."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; expected one of {', '.join(STATUSES)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ValueError(f"limit must be an int from 1 to 10000, got {limit!r}")
        if before is not None and (not isinstance(before, str) or "\x00" in before):
            raise ValueError(f"before must be a job id (a str), got {before!r}")
        where = JobFilter(key=key, status=status, task=task, queue=queue, before=before)
        records = await (await self.backend()).list_jobs(where, limit)
        return [JobInfo.from_record(r, self.tasks.get(r.task)) for r in records]

    def retry(self, job_id: str) -> bool:
        """Re-run a failed or cancelled job; False if it is in another state or unknown."""
        return self.run_sync(self.retry_async(job_id))

    async def retry_async(self, job_id: str) -> bool:
        """Async twin of ``retry``."""
        if not _storable_id(job_id):
            return False
        return await (await self.backend()).retry(job_id, self.clock.now())

    def cancel(self, job_id: str) -> bool:
        """Cancel a job that has not finished; False if it already finished or is unknown.

        A waiting job is ``cancelled`` at once. A running one is asked to stop: it stays
        ``running`` until its run returns (an async job is interrupted at its worker's next
        heartbeat; a sync job may check ``duly.current_job().cancel_requested``), then ends
        ``cancelled`` whatever the run returned."""
        return self.run_sync(self.cancel_async(job_id))

    async def cancel_async(self, job_id: str) -> bool:
        """Async twin of ``cancel``."""
        if not _storable_id(job_id):
            return False
        now = self.clock.now()
        return await (await self.backend()).cancel(job_id, now, now + self.failed_retention)

    def cancel_many(
        self,
        status: str = "queued",
        task: str | None = None,
        queue: str | None = None,
        key: str | None = None,
    ) -> int:
        """Cancel every job in ``status`` (scheduled, queued, running or retrying) matching
        ``task`` / ``queue`` / ``key``, a batch of up to 1,000 per atomic step; how many. A
        running job's cancel is requested (see ``cancel``); one that moved on is skipped."""
        return self.run_sync(self.cancel_many_async(status, task, queue, key))

    async def cancel_many_async(
        self,
        status: str = "queued",
        task: str | None = None,
        queue: str | None = None,
        key: str | None = None,
    ) -> int:
        """Async twin of ``cancel_many``."""
        where = check_filter(status, CANCELLABLE, task, queue, key)
        now = self.clock.now()
        return await cancel_matching(await self.backend(), where, now, now + self.failed_retention)

    def retry_many(
        self,
        status: str = "failed",
        task: str | None = None,
        queue: str | None = None,
        key: str | None = None,
    ) -> int:
        """Re-run every job in ``status`` (failed or cancelled) matching ``task`` / ``queue`` /
        ``key``, a batch of up to 1,000 per atomic step; how many (one whose unique key another
        active job holds is skipped, as with ``retry``)."""
        return self.run_sync(self.retry_many_async(status, task, queue, key))

    async def retry_many_async(
        self,
        status: str = "failed",
        task: str | None = None,
        queue: str | None = None,
        key: str | None = None,
    ) -> int:
        """Async twin of ``retry_many``."""
        where = check_filter(status, RETRYABLE, task, queue, key)
        return await retry_matching(await self.backend(), where, self.clock.now())

    def stats(self, minutes: int = 60) -> list[StatRow]:
        """Per-minute success/failure/retry counters of the last ``minutes`` (at most 1440)."""
        return self.run_sync(self.stats_async(minutes))

    async def stats_async(self, minutes: int = 60) -> list[StatRow]:
        """Async twin of ``stats``."""
        kept = int(self.stats_retention // 60)
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= kept:
            raise ValueError(
                f"minutes must be an int from 1 to {kept} (counters are kept "
                f"{self.stats_retention:g}s: App(stats_retention=))"
            )
        since = (int(self.clock.now() // 60) - minutes + 1) * 60
        return await (await self.backend()).stats(since)

    def queues(self) -> list[QueueStats]:
        """Every queue with its queued / scheduled / running counts."""
        return self.run_sync(self.queues_async())

    async def queues_async(self) -> list[QueueStats]:
        """Async twin of ``queues``."""
        backend = await self.backend()
        return await mark_paused(backend, await backend.queue_stats())

    def pause(self, queue: str) -> bool:
        """Pause ``queue``: once this returns, no worker starts a job of it (running ones
        finish; enqueue still stores, delayed jobs still come due); False if already paused."""
        return self.run_sync(self.pause_async(queue))

    async def pause_async(self, queue: str) -> bool:
        """Async twin of ``pause``."""
        return await pause_queue(await self.backend(), self.clock, queue)

    def resume(self, queue: str) -> bool:
        """Let workers take the jobs of ``queue`` again; False if it was not paused."""
        return self.run_sync(self.resume_async(queue))

    async def resume_async(self, queue: str) -> bool:
        """Async twin of ``resume``."""
        return await resume_queue(await self.backend(), queue)

    def workers(self) -> list[WorkerRecord]:
        """Registered worker processes and when each was last seen."""
        return self.run_sync(self.workers_async())

    async def workers_async(self) -> list[WorkerRecord]:
        """Async twin of ``workers``."""
        return await (await self.backend()).workers()


def _storable_id(job_id: object) -> bool:
    """Whether ``job_id`` could name a stored job: a ``TypeError`` if it is no str; False for a
    str no backend can store (a NUL character: PostgreSQL would refuse the query itself)."""
    if not isinstance(job_id, str):
        raise TypeError(f"a job id is a str, got {job_id!r}")
    return "\x00" not in job_id
