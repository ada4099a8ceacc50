"""The durable event stream (PRODUCT §8): ``async for ev in app.events(since=, key=)``.

Every job state change (a job stored, and each change of its status) is one event, written by
the backend in the same atomic step as the change, so workers on other machines produce them
and nothing is written for a change that did not happen. Ids increase; an event once read is
final (no event with a smaller id appears later). ``since=None`` starts after the newest event
at the first iteration; ``since=<an event id>`` resumes after it and misses nothing retained.
If events after ``since`` were trimmed by retention, the iterator raises ``EventsTrimmed``
(resume with ``since=None`` and re-read the state you need). ``key=`` reads that key's own
index. A job's progress (``duly.current_job().set_progress``, written with the heartbeat) is an
event too, but not a change of state: ``app.events(progress=True)`` includes these ``progress``
events (``status="running"``, ``progress`` set); the default stream leaves them out, so it
holds exactly one event per state change. Retention: the worker's purge drops events older
than ``App(stats_retention=)`` (24 h, by the storage server's clock), whatever their number,
and SQL backends keep at most the last 100 000 (Redis: ~100 000, trimmed by whole stream
nodes); a Redis key's own stream lives 7 days after its last event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from duly._progress import Progress, decode_progress
from duly._records import EventRecord
from duly.backends.events import EVENTS

if TYPE_CHECKING:
    from duly._ports import AppPort

__all__ = ["Event", "check_events_args", "stream_events"]

#: Events read per backend call.
_BATCH: Final = 500
#: Longest wait for a wake-up before reading again (a missed wake-up costs at most this).
_WAIT: Final = 1.0


@dataclass(frozen=True, slots=True)
class Event:
    """One job state change: ``status`` is the job's new state; ``at`` (aware UTC) is when
    the backend stored it, by the storage server's clock. A ``progress`` event (only with
    ``app.events(progress=True)``) is not a change of state: its job is ``running`` and
    ``progress`` holds what its run reported; None for every other event."""

    id: str
    job_id: str
    task: str
    queue: str
    key: str | None
    status: str
    at: datetime
    progress: Progress | None = None

    @classmethod
    def from_record(cls, record: EventRecord) -> Event:
        """The public view of a stored event."""
        return cls(
            id=record.id,
            job_id=record.job_id,
            task=record.task,
            queue=record.queue,
            key=record.key,
            status=record.status,
            at=datetime.fromtimestamp(record.at, UTC),
            progress=decode_progress(record.progress),
        )


def check_events_args(since: object, key: object, progress: object = False) -> None:
    """Raise TypeError for a ``since``, ``key`` or ``progress`` of the wrong type (at the
    call, not later)."""
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be a bool, got {progress!r}")
    if since is not None and not isinstance(since, str):
        raise TypeError(f"since must be an event id (str) or None, got {since!r}")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str or None, got {key!r}")


async def stream_events(
    app: AppPort, since: str | None, key: str | None, wait: float = _WAIT, progress: bool = False
) -> AsyncIterator[Event]:
    """Yield events after ``since`` (see the module docstring), forever; ``progress`` events
    too if ``progress``."""
    backend = EVENTS.of(await app.backend())
    cursor = since
    if cursor is None:
        _, cursor = await backend.read(None, key, _BATCH)
    while True:
        records, cursor = await backend.read(cursor, key, _BATCH)
        for record in records:
            if progress or record.progress is None:
                yield Event.from_record(record)
        if len(records) < _BATCH:
            await backend.wait(cursor, key, wait)
