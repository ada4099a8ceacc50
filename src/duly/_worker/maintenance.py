"""A worker's background duties: heartbeats, promotion of due jobs, recovery, purge, and the
periodic scheduler.

- **heartbeat**: every ``lease / 3`` the leases of all held jobs are extended; the runs of jobs
  the backend says this worker no longer holds (a cancel was requested, or they were recovered
  elsewhere) are asked to stop;
- **maintenance**: promote due delayed/retrying jobs, recover the jobs of dead workers (whose
  leases lapsed; the ``recovered`` and ``quarantined`` hooks hear of each), and purge expired
  finished jobs;
- **scheduler**: enqueue the due ticks of the App's periodic tasks.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING

from duly._errors import DulyError
from duly._freshness import sweep
from duly._hooks import settle
from duly._job import JobInfo
from duly._records import Outcome
from duly._worker.outcomes import BATCH_LIMIT

if TYPE_CHECKING:
    from duly._worker.worker import Worker

__all__ = ["Maintenance"]

PROMOTE_INTERVAL = 0.25
PURGE_INTERVAL = 30.0
SCHEDULER_INTERVAL = 0.5


class Maintenance:
    """The background loops of one worker."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        #: The earliest scheduled/retrying job not yet due (None: none), from the last promote.
        self.next_due: float | None = None

    async def heartbeat_loop(self) -> None:
        """Renew the leases of the jobs held here; stop the runs the backend took back."""
        worker = self.worker
        backend = worker._backend
        assert backend is not None
        interval = worker.lease / 3
        while not worker._closing:
            await asyncio.sleep(interval)
            held = [*worker._running, *worker._outcomes.unacked]
            now = worker.app.clock.now()
            gone = await worker._call(
                backend.heartbeat(worker.id, held, now, now + worker.lease), "heartbeat"
            )
            for job_id in gone or ():
                if (entry := worker._running.get(job_id)) is not None:
                    task = worker.app.tasks.get(entry[0].record.task)
                    worker._stops.request(*entry, is_async=task is not None and task.is_async)

    async def maintenance_loop(self) -> None:
        """Promote due jobs often, recover orphans every ``lease / 4``, purge every 30 s."""
        worker = self.worker
        backend = worker._backend
        assert backend is not None
        recover_every = max(worker.lease / 4, 0.5)
        next_recover = 0.0
        next_purge = time.monotonic() + random.uniform(0, PURGE_INTERVAL)
        while not worker._closing:
            await self.freshness()
            await self.promote()
            if time.monotonic() >= next_recover:
                await self.recover()
                next_recover = time.monotonic() + recover_every
            if time.monotonic() >= next_purge:
                now = worker.app.clock.now()
                purge = backend.purge(now, BATCH_LIMIT, worker.app.stats_retention)
                await worker._call(purge, "purge")
                next_purge = time.monotonic() + PURGE_INTERVAL
            await asyncio.sleep(PROMOTE_INTERVAL)

    async def scheduler_loop(self) -> None:
        """Enqueue due periodic ticks (each tick is stored once however many workers run)."""
        worker = self.worker
        assert worker._backend is not None and worker.scheduler is not None
        while not worker._closing:
            await worker._call(worker.scheduler.run_once(worker._backend), "scheduler")
            await asyncio.sleep(SCHEDULER_INTERVAL)

    async def freshness(self) -> None:
        """Enqueue the baseline syncs of due freshness scopes (PRODUCT §7; cost: the due)."""
        worker = self.worker
        if not worker.app.mirrors:
            return
        assert worker._backend is not None
        await worker._call(sweep(worker.app, worker._backend, worker.app.clock.now()), "freshness")

    async def promote(self) -> None:
        """Move every due scheduled/retrying job to its queue (in batches)."""
        worker = self.worker
        assert worker._backend is not None
        while True:
            result = await worker._call(
                worker._backend.promote_due(worker.app.clock.now(), BATCH_LIMIT), "promote"
            )
            if result is None:
                return
            moved, self.next_due = result
            if moved < BATCH_LIMIT:
                return

    async def recover(self) -> None:
        """Take back the jobs of dead workers (lapsed leases), once each across the fleet."""
        worker = self.worker
        backend = worker._backend
        assert backend is not None
        app = worker.app
        now = app.clock.now()
        recovered = await worker._call(
            backend.recover(now, app.max_lost, BATCH_LIMIT, now + app.failed_retention),
            "recover",
        )
        if not recovered:
            return
        if app.hooks.watching("recovered"):
            # Called before anything else is awaited: no run of a requeued job claimed by this
            # worker meanwhile is announced before its recovery.
            pending = [p for e in recovered for p in app.hooks.call("recovered", e.id, e.requeued)]
            await settle("recovered", pending)
        for entry in recovered:
            record = await worker._call(backend.get_job(entry.id), "get_job")
            worker._report.recovered(entry, record)
            if record is None or entry.requeued or entry.cancelled:
                continue
            error = DulyError(f"lost its worker {record.lost} times")
            if app.hooks.watching("quarantined"):
                await app.hooks.emit("quarantined", JobInfo.from_record(record), error)
            await worker._outcomes.report_failure(record, Outcome(entry.id, "failed"), error)
