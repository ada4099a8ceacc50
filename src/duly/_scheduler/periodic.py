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
``"skip"`` runs none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from duly._errors import BackendUnavailable
from duly._ids import encode_ulid, ulid_time
from duly._records import JobFilter, NewJob
from duly._serialization import encode

if TYPE_CHECKING:
    from duly._app import App
    from duly.backends.base import Backend

__all__ = ["MAX_CATCH_UP", "CatchUp", "Schedule", "Scheduler", "tick_job_id"]

CatchUp = Literal["skip", "one", "all"]
#: The most missed ticks ``catch_up="all"`` runs after downtime.
MAX_CATCH_UP = 1000
#: A tick seen this late by a live scheduler is a normal tick, not a missed one.
ON_TIME = 5.0
_EMPTY_CALL = encode({"args": [], "kwargs": {}})

log = logging.getLogger("duly.scheduler")


def tick_job_id(task: str, tick: float) -> str:
    """The id of ``task``'s job for ``tick``: time-ordered by the tick, the same everywhere."""
    ms = round(tick * 1000)
    digest = hashlib.sha256(f"{task}\0{ms}".encode()).digest()[:10]
    return encode_ulid(ms, int.from_bytes(digest, "big"))


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a periodic task fires: ``every`` seconds (ticks at multiples of it since the epoch)
    or a ``cron`` expression evaluated in ``tz``."""

    task: str
    every: float | None = None
    cron: str | None = None
    tz: str = "UTC"
    catch_up: CatchUp = "one"

    def __post_init__(self) -> None:
        if (self.every is None) == (self.cron is None):
            raise ValueError("a periodic task needs exactly one of every= or cron=")
        if self.every is not None and not self.every >= 1:
            raise ValueError(f"every= must be at least 1 second, got {self.every!r}")
        if self.cron is not None and not croniter.is_valid(self.cron):
            raise ValueError(f"invalid cron expression {self.cron!r}")
        if self.catch_up not in ("skip", "one", "all"):
            raise ValueError(f"catch_up must be 'skip', 'one' or 'all', got {self.catch_up!r}")
        self.zone()  # validate tz

    @property
    def key(self) -> str:
        """The key indexing this schedule's jobs."""
        return f"periodic:{self.task}"

    def zone(self) -> tzinfo:
        """The time zone of ``cron``."""
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {self.tz!r}") from exc

    def next_tick(self, after: float) -> float:
        """The first tick strictly after ``after``."""
        if self.every is not None:
            return (math.floor(after / self.every) + 1) * self.every
        assert self.cron is not None
        start = datetime.fromtimestamp(after, self.zone())
        return float(croniter(self.cron, start).get_next(float))

    def ticks(self, after: float, until: float, limit: int) -> list[float]:
        """Ticks in ``(after, until]``, the latest ``limit`` of them."""
        found: list[float] = []
        if self.every is not None:
            first = math.floor(after / self.every) + 1
            last = math.floor(until / self.every)
            start = max(first, last - limit + 1)
            return [k * self.every for k in range(start, last + 1)]
        tick = self.next_tick(after)
        while tick <= until:
            found.append(tick)
            if len(found) > limit:
                found.pop(0)
            tick = self.next_tick(tick)
        return found

    def period(self, around: float) -> float:
        """Seconds between two ticks near ``around``."""
        first = self.next_tick(around)
        return self.next_tick(first) - first

    def due(self, last: float | None, now: float) -> list[float]:
        """The ticks to enqueue at ``now`` when ``last`` was the last tick enqueued."""
        if last is None:
            # Never ran: start with a tick that is due right now, if there is one.
            latest = self.ticks(now - ON_TIME, now, 1)
            return latest
        missed = self.ticks(last, now, MAX_CATCH_UP)
        if not missed:
            return []
        on_time = [t for t in missed if now - t <= ON_TIME]
        late = [t for t in missed if now - t > ON_TIME]
        if self.catch_up == "all":
            return missed
        if self.catch_up == "one" and late and not on_time:
            return [late[-1]]
        return on_time


class Scheduler:
    """Enqueues the due ticks of an App's periodic tasks (one lap per ``run_once``)."""

    def __init__(self, app: App, schedules: Sequence[Schedule] | None = None) -> None:
        self.app = app
        self.schedules = list(app.schedules.values() if schedules is None else schedules)
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


def every_seconds(every: float | timedelta) -> float:
    """``every`` as seconds."""
    return every.total_seconds() if isinstance(every, timedelta) else float(every)
