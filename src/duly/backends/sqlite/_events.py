"""The event stream of SqliteBackend: reads, the waiting reader's poll, and the trim.

Events are written by the triggers of ``migrations/0004_groups_events.sql``, in the transaction
of the change they record.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Final

from duly._errors import EventsTrimmed
from duly._records import EventRecord
from duly.backends.sqlite._connection import QUERIES, SqliteConnection

__all__ = ["SqliteEvents", "purge_events"]

#: Events kept at most (purge deletes older ones, and those older than its ``keep``).
EVENTS_KEPT: Final = 100_000
#: Most events one purge deletes.
_TRIM_BATCH: Final = 10_000
#: Seconds between two looks for new events of a waiting events reader.
_EVENTS_POLL: Final = 0.05


def parse_event_id(event_id: str) -> int:
    """The integer id of an event id of this backend; ValueError naming it otherwise."""
    try:
        value = int(event_id)
    except ValueError:
        raise ValueError(f"not an event id of this backend: {event_id!r}") from None
    if value < 0:
        raise ValueError(f"not an event id of this backend: {event_id!r}")
    return value


def newest_event(key: str | None) -> Callable[[sqlite3.Connection], int]:
    """Reads the id of the newest event (of ``key``), 0 if none."""

    def read(conn: sqlite3.Connection) -> int:
        if key is None:
            return int(conn.execute(QUERIES["events_head"]).fetchone()[0])
        return int(conn.execute(QUERIES["key_events_newest"], {"key": key}).fetchone()[0])

    return read


def read_events(
    after: int, key: str | None, limit: int
) -> Callable[[sqlite3.Connection], list[EventRecord]]:
    """Reads up to ``limit`` events after ``after``; EventsTrimmed if purge deleted some."""

    def read(conn: sqlite3.Connection) -> list[EventRecord]:
        [(upto,)] = conn.execute(QUERIES["events_trimmed_upto"])
        if upto > after:
            raise EventsTrimmed(f"events after {after} up to {upto} were trimmed (retention)")
        if key is None:
            rows = conn.execute(QUERIES["events_after"], {"after": after, "limit": limit})
        else:
            params = {"key": key, "after": after, "limit": limit}
            rows = conn.execute(QUERIES["key_events_after"], params)
        return [
            EventRecord(str(eid), job_id, task, queue, k, status, at, progress)
            for eid, job_id, task, queue, k, status, at, progress in rows
        ]

    return read


def purge_events(conn: sqlite3.Connection, keep: float) -> None:
    """In purge's transaction: events beyond the bounds (count and age)."""
    params = {"keep_count": EVENTS_KEPT, "keep_age": keep, "limit": _TRIM_BATCH}
    [(upto,)] = conn.execute(QUERIES["events_trim_bound"], params)
    if upto > 0:
        conn.execute(QUERIES["events_trim"], {"upto": upto})
        conn.execute(QUERIES["events_trim_mark"], {"upto": upto})


class SqliteEvents:
    """``duly.backends.events.EventStore`` on SQLite (``backend.events``)."""

    def __init__(self, db: SqliteConnection) -> None:
        self._db = db

    async def read(
        self, after: str | None, key: str | None, limit: int
    ) -> tuple[list[EventRecord], str]:
        """Events after ``after`` in id order (one key's through events_key)."""
        if after is None:
            return [], str(await self._db.run(newest_event(None), "read_events"))
        position = parse_event_id(after)
        events = await self._db.run(read_events(position, key, limit), "read_events")
        return events, events[-1].id if events else str(position)

    async def wait(self, after: str, key: str | None, timeout: float) -> None:
        """Poll the newest event id (cheap: the end of an index) until it passes ``after``."""
        position = parse_event_id(after)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            if await self._db.run(newest_event(key), "wait_for_events") > position:
                return
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(_EVENTS_POLL, left))
