"""The events capability (PRODUCT §8): one event per job state change, in the same step.

Every job state change (a new job, and every change of its status) appends one event in the
same atomic step, with increasing ids. Retention trims the oldest (bounded count and age, see
``Backend.purge``); a reader asking for events after a trimmed id gets ``EventsTrimmed``.
"""

from __future__ import annotations

from typing import Final, Protocol

from duly._records import EventRecord
from duly.backends.capability import Capability

__all__ = ["EVENTS", "EventStore"]


class EventStore(Protocol):
    """The durable stream of job state changes."""

    async def read(
        self, after: str | None, key: str | None, limit: int
    ) -> tuple[list[EventRecord], str]:
        """Up to ``limit`` events after cursor ``after`` (an event id, or a cursor this method
        returned), oldest first, only ``key``'s with ``key`` (read through that key's own
        index), and the cursor to read on from. ``after=None`` reads nothing and returns the
        cursor after the newest event. Every event returned is final: no event with a smaller
        id can appear later. Raises ``EventsTrimmed`` when events after ``after`` were deleted
        by retention."""
        ...

    async def wait(self, after: str, key: str | None, timeout: float) -> None:
        """Return soon after an event after cursor ``after`` may exist, or after ``timeout``
        (best effort, like ``Backend.wait_for_work``)."""


#: ``backend.events``.
EVENTS: Final = Capability[EventStore]("events", "app.events()")
