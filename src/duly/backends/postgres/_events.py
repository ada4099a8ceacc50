"""The event stream on PostgreSQL: reads, the waiting reader, and the trim.

Events are written by the triggers of ``migrations/0005_groups_events.sql`` (as
``0007_lean_event_triggers.sql`` replaced them: they notify the events channel only while a
reader waits, see ``wait``).

Event ids come from a sequence: allocated in order, committed in any order. So a reader first
reads the highest id handed out (``events_allocated``), then the transactions writing to the
events table at that moment (``events_writers``: the holders of its RowExclusiveLock, taken
before an id is drawn), and reads up to that id only once each of them has ended
(``events_settled``): an event it returns can never be followed by one with a smaller id. A
long transaction that wrote events (a transactional enqueue left open) holds readers back
until it ends; other transactions, in this database or another, do not.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import psycopg

from duly._errors import EventsTrimmed
from duly._records import EventRecord
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._wake import Listener

__all__ = ["PostgresEvents", "purge_groups_events"]

#: Events kept at most (purge deletes older ones, and those older than its ``keep``).
EVENTS_KEPT: Final = 100_000
#: Most events one purge deletes.
_TRIM_BATCH: Final = 10_000
#: Seconds between two looks at whether the transactions at a horizon have ended.
_SETTLE_POLL: Final = 0.005
#: Longest wait for them before a read returns nothing (and is tried again).
_SETTLE_WAIT: Final = 2.0
#: Seconds a waiting reader's mark outlasts its wait (two readers marking at once may leave
#: the other's, slightly earlier, mark: see events_wait_mark in queries/events.sql).
_MARK_MARGIN: Final = 2.0


def _event_id(value: str) -> int:
    try:
        position = int(value)
    except ValueError:
        raise ValueError(f"not an event id of this backend: {value!r}") from None
    if position < 0:
        raise ValueError(f"not an event id of this backend: {value!r}")
    return position


async def purge_groups_events(
    db: Connection, conn: psycopg.AsyncConnection[Any], now: float, keep: float
) -> None:
    """In purge's transaction: expired groups and events beyond retention."""
    params = {
        "now": float(now),
        "keep_count": EVENTS_KEPT,
        "keep_age": float(keep),
        "limit": _TRIM_BATCH,
    }
    await conn.execute(db.q["purge_groups_events"], params)


class PostgresEvents:
    """``duly.backends.events.EventStore`` on PostgreSQL (``backend.events``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db
        self._listener: Listener | None = None

    async def read(
        self, after: str | None, key: str | None, limit: int
    ) -> tuple[list[EventRecord], str]:
        async with self._db.conn() as conn:
            cur = await conn.execute(self._db.q["events_allocated"])
            [(bound,)] = await cur.fetchall()
            if after is None:
                return [], str(bound)
            position = _event_id(after)
            if bound <= position:
                return [], after
            cur = await conn.execute(self._db.q["events_writers"])
            [(writers,)] = await cur.fetchall()
            loop = asyncio.get_running_loop()
            give_up = loop.time() + _SETTLE_WAIT
            while writers:
                cur = await conn.execute(self._db.q["events_settled"], {"writers": writers})
                [(settled,)] = await cur.fetchall()
                if settled:
                    break
                if loop.time() >= give_up:
                    return [], after
                await asyncio.sleep(_SETTLE_POLL)
            params = {"after": position, "bound": bound, "limit": limit, "key": key}
            name = "events_after" if key is None else "key_events_after"
            cur = await conn.execute(self._db.q[name], params)
            rows = await cur.fetchall()
        trimmed = rows[0][0]
        if trimmed > position:
            raise EventsTrimmed(f"events after {after} up to {trimmed} were trimmed (retention)")
        events = [
            EventRecord(str(eid), job_id, task, queue, k, status, at, progress)
            for _, eid, job_id, task, queue, k, status, at, progress in rows
            if eid is not None
        ]
        # Fewer than asked: every event up to the bound was read (or is not of this key).
        return events, events[-1].id if len(events) == limit else str(bound)

    async def wait(self, after: str, key: str | None, timeout: float) -> None:
        position = _event_id(after)
        # Writers notify only while a reader's mark is in the future: mark first, then look
        # (the order the triggers' proof needs, migrations/0007_lean_event_triggers.sql).
        ms = round((max(timeout, 0.0) + _MARK_MARGIN) * 1000)
        await self._db.one("events_wait_mark", {"ms": ms}, retry=True)
        row = await self._db.one("events_allocated", retry=True)
        if row is not None and row[0] > position:
            return
        if self._listener is None:
            channel = f"duly_ev_{self._db.schema}".encode()[:63].decode(errors="ignore")
            self._listener = Listener(self._db.connect, channel)
        await self._listener.wait_for_work([""], timeout)

    async def close(self) -> None:
        """Close the events LISTEN connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.stop()
