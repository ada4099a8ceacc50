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
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar

from duly._errors import BackendUnavailable, DulyError
from duly._hooks import settle
from duly._job import JobInfo
from duly._records import JobRecord, Outcome
from duly._worker.outcomes import BATCH_LIMIT
from duly._worker.progress import PROGRESS_INTERVAL

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly._hooks import Hooks
    from duly._scheduler import Scheduler
    from duly._worker.progress import ProgressWriter
    from duly._worker.reporting import Reporter
    from duly.backends.base import Backend

__all__ = ["Maintenance", "Retention", "logged"]

log = logging.getLogger("duly.worker")

PROMOTE_INTERVAL = 0.25
#: The longest pause between two purges; shorter when the retention is short (a quarter of it,
#: at least 1 s), so the store holds about ``rate x retention`` jobs, not ``rate x 30 s`` more.
PURGE_INTERVAL = 30.0
#: Seconds one purge round may spend deleting batches before the loop's other duties run
#: again; a backlog left over is taken up at the next turn, not after a whole interval.
PURGE_BUDGET = 2.0
SCHEDULER_INTERVAL = 0.5

T = TypeVar("T")


async def logged(call: Awaitable[T], what: str) -> T | None:
    """Await a backend call; on BackendUnavailable log and return None (the caller retries
    at its next turn)."""
    try:
        return await call
    except BackendUnavailable as exc:
        log.warning("%s: backend unavailable: %s", what, exc)
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class Retention:
    """The App's settings the recovery and purge apply (see ``duly.App``)."""

    max_lost: int
    failed_retention: float
    stats_retention: float
    #: How long a succeeded job is kept (``App(retention=)``): paces the purge.
    retention: float = 86_400.0

    @property
    def purge_interval(self) -> float:
        """Seconds between two purge rounds."""
        shortest = min(self.retention, self.failed_retention)
        return min(PURGE_INTERVAL, max(1.0, shortest / 4))


class Maintenance:
    """The background loops of one worker (``worker``: its id; ``lease``: seconds).

    ``held()`` names the jobs whose leases the heartbeat renews (running or not yet reported),
    and ``share(ids)``, if any, is told them at each heartbeat (a supervisor renews them too);
    ``stop_runs(ids)`` is told of the ones the backend took back; a job recovered from a dead
    worker and quarantined is reported through ``report_failure``; ``freshness(now)`` enqueues
    the due syncs of the App's mirrors; ``scheduler``, if any, is run every 0.5 s; ``runs``,
    if any, has the runs' progress and checkpoints, sent with the heartbeat (which then beats
    early: at most once per ``PROGRESS_INTERVAL``)."""

    def __init__(
        self,
        backend: Backend,
        clock: Clock,
        *,
        worker: str,
        lease: float,
        retention: Retention,
        hooks: Hooks,
        reporter: Reporter,
        held: Callable[[], Collection[str]],
        share: Callable[[list[str]], None] | None,
        stop_runs: Callable[[list[str]], None],
        report_failure: Callable[[JobRecord, Outcome, BaseException | None], Awaitable[None]],
        freshness: Callable[[float], Awaitable[Any]],
        scheduler: Scheduler | None = None,
        runs: ProgressWriter | None = None,
    ) -> None:
        self.backend = backend
        self.runs = runs
        self.clock = clock
        self.worker = worker
        self.lease = lease
        self.retention = retention
        self.hooks = hooks
        self.reporter = reporter
        self.held = held
        self.share = share
        self.stop_runs = stop_runs
        self.report_failure = report_failure
        self.sweep = freshness
        self.scheduler = scheduler
        #: The earliest scheduled/retrying job not yet due (None: none), from the last promote.
        self.next_due: float | None = None

    async def heartbeat_loop(self) -> None:
        """Renew the leases of the jobs held here; stop the runs the backend took back."""
        interval = self.lease / 3
        runs = self.runs
        step = interval if runs is None else min(interval, PROGRESS_INTERVAL)
        next_beat = time.monotonic() + interval
        while True:
            await asyncio.sleep(min(step, max(next_beat - time.monotonic(), 0.0)))
            if time.monotonic() < next_beat and (runs is None or not runs.pending()):
                continue  # a look for progress to send: none
            next_beat = time.monotonic() + interval
            held = [*self.held()]
            if self.share is not None:
                self.share(held)
            now = self.clock.now()
            if runs is None:
                beat = self.backend.heartbeat(self.worker, held, now, now + self.lease)
            else:
                beat = runs.heartbeat(held, now, now + self.lease)
            if gone := await logged(beat, "heartbeat"):
                self.stop_runs(gone)

    async def maintenance_loop(self) -> None:
        """Promote due jobs often, recover orphans every ``lease / 4``, purge every
        ``purge_interval`` (sooner while a backlog is left). The first recovery is the
        worker's own, before its first claim (``Worker.run``), so this loop's comes later."""
        recover_every = max(self.lease / 4, 0.5)
        next_recover = time.monotonic() + recover_every
        purge_every = self.retention.purge_interval
        next_purge = time.monotonic() + random.uniform(0, purge_every)
        while True:
            await self.freshness()
            await self.promote()
            if time.monotonic() >= next_recover:
                await self.recover()
                next_recover = time.monotonic() + recover_every
            if time.monotonic() >= next_purge:
                backlog = await self.purge()
                next_purge = time.monotonic() + (0.0 if backlog else purge_every)
            await asyncio.sleep(PROMOTE_INTERVAL)

    async def purge(self) -> bool:
        """Delete expired jobs a batch at a time until a batch comes back short (nothing
        expired is left) or ``PURGE_BUDGET`` seconds pass; whether a backlog is left.

        One batch per interval cannot keep pace with a steady load: 1,000 jobs per 30 s is
        33 jobs/s, so a store under 200 jobs/s grew without bound (issue 28.1). Each batch is
        one short atomic step of its own, so other workers and producers interleave."""
        deadline = time.monotonic() + PURGE_BUDGET
        while True:
            call = self.backend.purge(self.clock.now(), BATCH_LIMIT, self.retention.stats_retention)
            deleted = await logged(call, "purge")
            if deleted is None or deleted < BATCH_LIMIT:
                return False
            if time.monotonic() >= deadline:
                return True
            await asyncio.sleep(0)  # let heartbeats and runs go between batches

    async def scheduler_loop(self) -> None:
        """Enqueue due periodic ticks (each tick is stored once however many workers run)."""
        assert self.scheduler is not None
        while True:
            await logged(self.scheduler.run_once(self.backend), "scheduler")
            await asyncio.sleep(SCHEDULER_INTERVAL)

    async def freshness(self) -> None:
        """Enqueue the baseline syncs of due freshness scopes (PRODUCT §7; cost: the due)."""
        await logged(self.sweep(self.clock.now()), "freshness")

    async def promote(self) -> None:
        """Move every due scheduled/retrying job to its queue (in batches)."""
        while True:
            promote = self.backend.promote_due(self.clock.now(), BATCH_LIMIT)
            result = await logged(promote, "promote")
            if result is None:
                return
            moved, self.next_due = result
            if moved < BATCH_LIMIT:
                return

    async def recover(self) -> None:
        """Take back the jobs of dead workers (lapsed leases), once each across the fleet."""
        backend, hooks, retention = self.backend, self.hooks, self.retention
        now = self.clock.now()
        recovered = await logged(
            backend.recover(now, retention.max_lost, BATCH_LIMIT, now + retention.failed_retention),
            "recover",
        )
        if not recovered:
            return
        if hooks.watching("recovered"):
            # Called before anything else is awaited: no run of a requeued job claimed by this
            # worker meanwhile is announced before its recovery.
            pending = [p for e in recovered for p in hooks.call("recovered", e.id, e.requeued)]
            await settle("recovered", pending)
        for entry in recovered:
            record = await logged(backend.get_job(entry.id), "get_job")
            self.reporter.recovered(entry, record)
            if record is None or entry.requeued or entry.cancelled:
                continue
            error = DulyError(f"lost its worker {record.lost} times")
            if hooks.watching("quarantined"):
                await hooks.emit("quarantined", JobInfo.from_record(record), error)
            await self.report_failure(record, Outcome(entry.id, "failed"), error)
