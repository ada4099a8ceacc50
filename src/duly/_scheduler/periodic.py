"""Periodic tasks that fire exactly once per tick, however many schedulers run.

Every worker runs a scheduler (and ``duly scheduler`` runs one alone). Each lap, for each
schedule, it enqueues the ticks that are due. Exactly-once does not hope for a single
scheduler: a tick's job id is *derived* from (task, tick) — a ULID whose time part is the tick
and whose random part is a hash — and every backend stores an id at most once (a second
enqueue of it is reported ``deduplicated`` and changes nothing). So three schedulers racing on
one tick store one job, and a scheduler that dies costs nothing while another one runs.

The last tick enqueued is read back from the backend (the time part of the id of the newest
job of the key ``periodic:<task>``), so catching up after downtime needs no state of its own:
``catch_up`` decides what happens to ticks missed while no scheduler ran: ``"one"`` (default)
runs the latest missed tick once, ``"all"`` runs every missed tick (at most ``MAX_CATCH_UP``),
``"skip"`` runs none of them. The maths (``Schedule``: which ticks, which are due) is the
pure module ``duly._schedule``; this module is the engine that stores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from duly._errors import BackendUnavailable
from duly._ids import ulid_time
from duly._records import JobFilter, NewJob
from duly._schedule import MAX_CATCH_UP, CatchUp, Schedule, tick_job_id
from duly._serialization import encode

if TYPE_CHECKING:
    from duly._ports import AppPort
    from duly.backends.base import Backend

__all__ = ["MAX_CATCH_UP", "CatchUp", "Schedule", "Scheduler", "tick_job_id"]  # maths re-exported

_EMPTY_CALL = encode({"args": [], "kwargs": {}})

log = logging.getLogger("duly.scheduler")


class Scheduler:
    """Enqueues the due ticks of an App's periodic tasks (one lap per ``run_once``)."""

    def __init__(self, app: AppPort, schedules: Sequence[Schedule] | None = None) -> None:
        self.app = app
        self.schedules = list(app.registry.schedules.values() if schedules is None else schedules)
        self.enqueued = 0  # ticks this scheduler stored (duplicates of other schedulers excluded)

    async def run_once(self, backend: Backend) -> int:
        """Enqueue every due tick; how many new jobs this call stored."""
        now = self.app.clock.now()
        jobs: list[NewJob] = []
        for schedule in self.schedules:
            newest = await backend.list_jobs(JobFilter(key=schedule.key), 1)
            last = ulid_time(newest[0].id) if newest else None  # a tick job's id holds its tick
            for tick in schedule.due(last, now):
                jobs.append(self._job(schedule, tick, now))
        if not jobs:
            return 0
        hooks = self.app.hooks
        if hooks.watching("enqueuing"):
            hooks.enqueuing(jobs)
        results = await backend.enqueue(jobs)
        if hooks.watching("enqueued"):
            await hooks.emit("enqueued", jobs, results)
        stored = sum(1 for r in results if not r.deduplicated)
        self.enqueued += stored
        return stored

    async def run(self, stop: asyncio.Event, interval: float = 0.5) -> None:
        """Run laps until ``stop`` is set (``duly scheduler``); an unreachable backend is
        retried with backoff, never fatal."""
        delay = interval
        while not stop.is_set():
            try:
                await self.run_once(await self.app.backend())
                delay = interval
            except BackendUnavailable as exc:
                log.warning("scheduler: backend unavailable (%s); retrying in %.1fs", exc, delay)
                delay = min(delay * 2, 10.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)

    def _job(self, schedule: Schedule, tick: float, now: float) -> NewJob:
        config = self.app.tasks[schedule.task].config  # mutex= etc. apply to tick jobs too
        return config.new_job(
            _EMPTY_CALL,
            (),
            {},
            now,
            scheduled_for=tick,
            id=tick_job_id(schedule.task, tick),
            key=schedule.key,
        )
