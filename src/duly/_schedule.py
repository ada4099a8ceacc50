"""Schedule maths: when a periodic task ticks, and which ticks are due after a pause.

Pure rules beside ``duly._limits`` and ``duly._retry``: no backend, no clock of its own (every
time is given). ``@app.periodic`` builds a ``Schedule`` at registration; the scheduler engine
(``duly._scheduler``) asks it which ticks to enqueue and names each tick's job with
``tick_job_id``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from duly._errors import ConfigurationError
from duly._ids import encode_ulid

__all__ = ["MAX_CATCH_UP", "ON_TIME", "CatchUp", "Overlap", "Schedule", "tick_job_id"]

CatchUp = Literal["skip", "one", "all"]


def _croniter() -> Any:  # croniter has no type hints
    """croniter, imported with the first cron schedule: it and dateutil cost a worker whose app
    has none ~15 ms of start-up."""
    from croniter import croniter

    return croniter


#: What a tick does while its schedule's previous job still waits or runs: ``"skip"`` it
#: (the default) or ``"queue"`` it anyway.
Overlap = Literal["skip", "queue"]
#: The most missed ticks ``catch_up="all"`` runs after downtime.
MAX_CATCH_UP = 1000
#: The longest ``every`` (ten years, in seconds).
MAX_EVERY = 10 * 365 * 86400.0
#: A tick seen this late by a live scheduler is a normal tick, not a missed one.
ON_TIME = 5.0


def tick_job_id(task: str, tick: float) -> str:
    """The id of ``task``'s job for ``tick``: time-ordered by the tick, the same everywhere."""
    ms = round(tick * 1000)
    digest = hashlib.sha256(f"{task}\0{ms}".encode()).digest()[:10]
    return encode_ulid(ms, int.from_bytes(digest, "big"))


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a periodic task fires: ``every`` seconds (ticks at multiples of it since the epoch)
    or a ``cron`` expression evaluated in ``tz``; ``overlap``: what a tick does while the
    previous tick's job still waits or runs. ``name``: a stored schedule's (``app.schedule``);
    a decorated one (``@app.periodic``) has none and goes by its task's name."""

    task: str
    every: float | None = None
    cron: str | None = None
    tz: str = "UTC"
    catch_up: CatchUp = "one"
    overlap: Overlap = "skip"
    name: str = ""

    def __post_init__(self) -> None:
        if (self.every is None) == (self.cron is None):
            raise ConfigurationError("a periodic task needs exactly one of every= or cron=")
        if self.every is not None and not self.every >= 1:
            raise ConfigurationError(f"every= must be at least 1 second, got {self.every!r}")
        if self.every is not None and not self.every <= MAX_EVERY:
            raise ConfigurationError(
                f"every= must be at most {MAX_EVERY:g} seconds (ten years), got {self.every!r}"
            )
        if self.cron is not None and not _croniter().is_valid(self.cron):
            raise ConfigurationError(f"invalid cron expression {self.cron!r}")
        if self.catch_up not in ("skip", "one", "all"):
            raise ConfigurationError(
                f"catch_up must be 'skip', 'one' or 'all', got {self.catch_up!r}"
            )
        if self.overlap not in ("skip", "queue"):
            raise ConfigurationError(f"overlap must be 'skip' or 'queue', got {self.overlap!r}")
        self.zone()  # validate tz

    @property
    def label(self) -> str:
        """The schedule's name: a stored one's own, a decorated one's task's."""
        return self.name or self.task

    @property
    def key(self) -> str:
        """The key indexing this schedule's jobs (and holding, with ``overlap="skip"``, the
        unique hold of its active tick job)."""
        return f"schedule:{self.name}" if self.name else f"periodic:{self.task}"

    def tick_id(self, tick: float) -> str:
        """The id of this schedule's job for ``tick`` (a decorated schedule's ids are its
        task's, as before stored schedules existed)."""
        return tick_job_id(self.key if self.name else self.task, tick)

    def zone(self) -> tzinfo:
        """The time zone of ``cron``."""
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigurationError(f"unknown time zone {self.tz!r}") from exc

    def next_tick(self, after: float) -> float:
        """The first tick strictly after ``after``."""
        if self.every is not None:
            return (math.floor(after / self.every) + 1) * self.every
        assert self.cron is not None
        start = datetime.fromtimestamp(after, self.zone())
        return float(_croniter()(self.cron, start).get_next(float))

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
