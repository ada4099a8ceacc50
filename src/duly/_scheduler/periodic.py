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

Schedules are the App's decorated ones (``@app.periodic``) and the stored ones
(``app.schedule``, ``duly.backends.schedules``), read again on every lap: a stored schedule
changed or removed takes effect by its next tick. ``overlap="skip"`` (the default) gives a
tick job the unique hold of its schedule's key, so the enqueue itself decides, atomically,
that a tick whose previous job still waits or runs stores nothing (it is deduplicated to that
job); the scheduler then records the tick as skipped (``ScheduleStore.skip``, counted once
however many schedulers saw it), and reads the latest skipped tick back with the newest job,
so no scheduler tries that tick again once the previous job ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from duly._errors import BackendUnavailable, ConfigurationError
from duly._ids import ulid_time
from duly._payload import decode_payload
from duly._records import JobFilter, NewJob
from duly._schedule import MAX_CATCH_UP, CatchUp, Schedule, tick_job_id
from duly._serialization import encode
from duly.backends.schedules import SCHEDULES, ScheduleRecord, ScheduleStore

if TYPE_CHECKING:
    from duly._ports import AppPort
    from duly.backends.base import Backend

__all__ = [  # the maths re-exported
    "MAX_CATCH_UP",
    "CatchUp",
    "Schedule",
    "Scheduler",
    "Ticking",
    "stored_schedule",
    "tick_job_id",
]

_EMPTY_CALL = encode({"args": [], "kwargs": {}})

log = logging.getLogger("duly.scheduler")


@dataclasses.dataclass(frozen=True, slots=True)
class Ticking:
    """A schedule and the call each of its ticks enqueues."""

    schedule: Schedule
    payload: bytes = _EMPTY_CALL
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None


def stored_schedule(record: ScheduleRecord) -> Ticking:
    """The schedule of a stored record (``ConfigurationError`` if this host cannot evaluate
    it, e.g. an unknown time zone)."""
    schedule = Schedule(
        record.task,
        every=record.every,
        cron=record.cron,
        tz=record.tz,
        catch_up=record.catch_up,  # type: ignore[arg-type]  # checked by Schedule
        overlap=record.overlap,  # type: ignore[arg-type]
        name=record.name,
    )
    try:
        args, kwargs = decode_payload(record.payload)
    except ValueError:
        args, kwargs = [], {}
    return Ticking(schedule, record.payload, tuple(args), kwargs, record.queue, record.priority)


class Scheduler:
    """Enqueues the due ticks of an App's periodic tasks and stored schedules (one lap per
    ``run_once``)."""

    def __init__(self, app: AppPort, schedules: Sequence[Schedule] | None = None) -> None:
        self.app = app
        #: The decorated schedules (the App's, unless given).
        self.schedules = list(app.registry.schedules.values() if schedules is None else schedules)
        self.enqueued = 0  # ticks this scheduler stored (duplicates of other schedulers excluded)
        self.skipped = 0  # ticks this scheduler recorded skipped (overlap="skip")
        self._warned: set[str] = set()  # stored schedules this process cannot tick (told once)

    async def run_once(self, backend: Backend) -> int:
        """Enqueue every due tick; how many new jobs this call stored."""
        now = self.app.clock.now()
        store = SCHEDULES.of(backend) if SCHEDULES.offered_by(backend) else None
        entries = [Ticking(s) for s in self.schedules]
        if store is not None:
            entries += self._tickable(await store.all())
        if not entries:
            return 0
        skipped = {} if store is None else await store.skipped()
        jobs: list[NewJob] = []
        ticks: list[tuple[Schedule, float]] = []
        for entry in entries:
            schedule = entry.schedule
            newest = await backend.list_jobs(JobFilter(key=schedule.key), 1)
            last = ulid_time(newest[0].id) if newest else None  # a tick job's id holds its tick
            gone = skipped.get(schedule.key)
            if gone is not None and (last is None or gone.last > last):
                last = gone.last
            for tick in schedule.due(last, now):
                jobs.append(self._job(entry, tick, now))
                ticks.append((schedule, tick))
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
        for job, result, (schedule, tick) in zip(jobs, results, ticks, strict=True):
            if result.deduplicated and result.id != job.id and store is not None:
                await self._skip(store, schedule, tick, result.id)
        return stored

    async def _skip(self, store: ScheduleStore, schedule: Schedule, tick: float, by: str) -> None:
        """Record ``tick`` skipped: its schedule's job ``by`` still waits or runs."""
        if await store.skip(schedule.key, tick):
            self.skipped += 1
            log.info(
                "periodic %s: tick %s skipped, its previous job %s still waits or runs",
                schedule.label,
                datetime.fromtimestamp(tick, UTC).isoformat(),
                by,
            )

    def _tickable(self, records: Sequence[ScheduleRecord]) -> list[Ticking]:
        """The stored schedules this process can tick (it knows their task)."""
        found = []
        for record in records:
            if record.task not in self.app.tasks:
                self._warn(record.name, f"its task {record.task!r} is not registered here")
                continue
            try:
                found.append(stored_schedule(record))
            except ConfigurationError as exc:
                self._warn(record.name, str(exc))
        return found

    def _warn(self, name: str, why: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            log.warning("schedule %s: not ticked by this process: %s", name, why)

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
                async with asyncio.timeout(delay):
                    await stop.wait()

    def _job(self, entry: Ticking, tick: float, now: float) -> NewJob:
        schedule = entry.schedule
        config = self.app.tasks[schedule.task].config  # mutex= etc. apply to tick jobs too
        job = config.new_job(
            entry.payload,
            entry.args,
            entry.kwargs,
            now,
            scheduled_for=tick,
            id=schedule.tick_id(tick),
            key=schedule.key,
            queue=entry.queue,
            priority=entry.priority,
        )
        if schedule.overlap == "skip" and job.unique_key is None:
            # One active job per schedule: the enqueue deduplicates a tick to the job still
            # holding the schedule's key (decided atomically, however many schedulers run).
            # A task with a unique key of its own keeps it: that key dedupes its ticks.
            job = dataclasses.replace(
                job, unique_key=schedule.key, unique_until="finish", unique_expires_at=None
            )
        return job
