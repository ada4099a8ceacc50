"""The schedules capability (PRODUCT §15, §17): runtime periodic schedules, and skipped ticks.

- **Stored schedules** (``app.schedule(name, sig, every=|cron=)``): one record per name,
  replaced whole by a later ``put`` of that name (an upsert in one atomic step), read by
  every scheduler on each lap, so a change takes effect by the next tick. Their ticks are
  stored like a decorated schedule's: a job id derived from (schedule, tick), stored once
  however many schedulers run (``duly._scheduler.periodic``).
- **Skipped ticks** (``overlap="skip"``, the default): a tick whose schedule's previous job
  still waits or runs is not enqueued (the enqueue's unique hold decides that atomically);
  ``skip`` records it, once however many schedulers saw it, so no scheduler tries that tick
  again and the count is exact. Keyed by the schedule's job key (``periodic:<task>`` for a
  decorated schedule, ``schedule:<name>`` for a stored one).

(The feature itself: ``duly._schedules``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from duly.backends.capability import Capability

__all__ = ["SCHEDULES", "ScheduleRecord", "ScheduleStore", "SkippedTicks"]


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """A stored schedule: its ``name``, the job each tick enqueues (``task``, ``queue``,
    ``payload`` already encoded, ``priority``), when it ticks (``every`` seconds or ``cron``
    in ``tz``), ``catch_up`` and ``overlap``, and when it was last stored."""

    name: str
    task: str
    queue: str
    payload: bytes
    priority: int
    every: float | None
    cron: str | None
    tz: str
    catch_up: str
    overlap: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class SkippedTicks:
    """The ticks of one schedule skipped so far: how many, and the latest one."""

    count: int
    last: float


class ScheduleStore(Protocol):
    """Stored schedules by name, and the skipped ticks of every schedule by its job key."""

    async def put(self, schedule: ScheduleRecord) -> bool:
        """Store ``schedule``, replacing the one of its name, in one atomic step; True if no
        schedule had that name."""
        ...

    async def delete(self, name: str) -> bool:
        """Delete the schedule named ``name``; False if there was none."""
        ...

    async def all(self) -> list[ScheduleRecord]:
        """Every stored schedule, by name."""
        ...

    async def skip(self, key: str, tick: float) -> bool:
        """Record that the schedule of ``key`` skipped ``tick``, atomically: True (counted)
        unless a tick as late or later was recorded already (another scheduler's)."""
        ...

    async def skipped(self) -> dict[str, SkippedTicks]:
        """The skipped ticks of every schedule that skipped one, by its job key."""
        ...


#: ``backend.schedules``.
SCHEDULES: Final = Capability[ScheduleStore]("schedules", "app.schedule(...)")
