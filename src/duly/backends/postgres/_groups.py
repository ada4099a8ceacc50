"""Groups and events on PostgreSQL: the group's enqueue transaction and the reads.

The writing that must be atomic with the job changes (one event per status change, a member's
outcome counted once, the callback queued by the last one) is done by the triggers of
``migrations/0005_groups_events.sql`` (as ``0007_lean_event_triggers.sql`` replaced them: they
notify the events channel only while a reader waits, see ``wait_for_events``).

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
import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Final

import psycopg

from duly._errors import EventsTrimmed
from duly._records import EventRecord, GroupRecord, NewGroup, NewJob
from duly.backends.postgres._enqueue import Enqueuing, _enqueue_plan, _run_plan_async
from duly.backends.postgres._listen import Listener

__all__ = ["Grouping"]

#: Events kept at most (purge deletes older ones, and those older than its ``keep``).
EVENTS_KEPT: Final = 100_000
#: Most events one purge deletes.
_TRIM_BATCH: Final = 10_000
#: Seconds between two looks at whether the transactions at a horizon have ended.
_SETTLE_POLL: Final = 0.005
#: Longest wait for them before a read returns nothing (and is tried again).
_SETTLE_WAIT: Final = 2.0
#: Seconds a waiting reader's mark outlasts its wait (two readers marking at once may leave
#: the other's, slightly earlier, mark: see events_wait_mark in queries.sql).
_MARK_MARGIN: Final = 2.0


def _event_id(value: str) -> int:
    try:
        position = int(value)
    except ValueError:
        raise ValueError(f"not an event id of this backend: {value!r}") from None
    if position < 0:
        raise ValueError(f"not an event id of this backend: {value!r}")
    return position


class Grouping(Enqueuing):
    """``enqueue_group``, ``get_group``, ``read_events`` and ``wait_for_events``."""

    _events_listener: Listener | None = None

    async def enqueue_group(self, group: NewGroup, members: Sequence[NewJob]) -> None:
        jobs = list(members)
        if group.callback is not None:
            # Stored `scheduled` (its one event says so), then its due time is taken away.
            jobs.append(dataclasses.replace(group.callback, scheduled_for=math.inf))
        params = {
            "id": group.id,
            "key": group.key,
            "created_at": float(group.created_at),
            "total": len(members),
            "retention": float(group.retention),
            "has_callback": group.callback is not None,
            "members": [job.id for job in members],
        }

        async def run(conn: psycopg.AsyncConnection[Any]) -> None:
            results = await _run_plan_async(
                conn, self._q, _enqueue_plan(jobs, self.channel, fresh=False)
            )
            if any(result.deduplicated for result in results):
                raise ValueError(f"group {group.id!r}: a job id of it is already stored")
            await conn.execute(self._q["group_store"], params)

        await self._transaction(run)

    async def get_group(self, group_id: str) -> GroupRecord | None:
        row = await self._one("get_group", {"id": group_id}, retry=True)
        if row is None:
            return None
        gid, key, created_at, total, succeeded, failed, cancelled, completed_at, callback = row
        return GroupRecord(
            gid, key, created_at, total, succeeded, failed, cancelled, completed_at, callback
        )

    async def read_events(
        self, after: str | None, key: str | None, limit: int
    ) -> tuple[list[EventRecord], str]:
        async with self._conn() as conn:
            cur = await conn.execute(self._q["events_allocated"])
            [(bound,)] = await cur.fetchall()
            if after is None:
                return [], str(bound)
            position = _event_id(after)
            if bound <= position:
                return [], after
            cur = await conn.execute(self._q["events_writers"])
            [(writers,)] = await cur.fetchall()
            loop = asyncio.get_running_loop()
            give_up = loop.time() + _SETTLE_WAIT
            while writers:
                cur = await conn.execute(self._q["events_settled"], {"writers": writers})
                [(settled,)] = await cur.fetchall()
                if settled:
                    break
                if loop.time() >= give_up:
                    return [], after
                await asyncio.sleep(_SETTLE_POLL)
            params = {"after": position, "bound": bound, "limit": limit, "key": key}
            name = "events_after" if key is None else "key_events_after"
            cur = await conn.execute(self._q[name], params)
            rows = await cur.fetchall()
        trimmed = rows[0][0]
        if trimmed > position:
            raise EventsTrimmed(f"events after {after} up to {trimmed} were trimmed (retention)")
        events = [
            EventRecord(str(eid), job_id, task, queue, k, status, at)
            for _, eid, job_id, task, queue, k, status, at in rows
            if eid is not None
        ]
        # Fewer than asked: every event up to the bound was read (or is not of this key).
        return events, events[-1].id if len(events) == limit else str(bound)

    async def wait_for_events(self, after: str, key: str | None, timeout: float) -> None:
        position = _event_id(after)
        # Writers notify only while a reader's mark is in the future: mark first, then look
        # (the order the triggers' proof needs, migrations/0007_lean_event_triggers.sql).
        ms = round((max(timeout, 0.0) + _MARK_MARGIN) * 1000)
        await self._one("events_wait_mark", {"ms": ms}, retry=True)
        row = await self._one("events_allocated", retry=True)
        if row is not None and row[0] > position:
            return
        if self._events_listener is None:
            channel = f"duly_ev_{self.schema}".encode()[:63].decode(errors="ignore")
            self._events_listener = Listener(self._connect, channel)
        await self._events_listener.wait_for_work([""], timeout)

    async def close(self) -> None:
        """Close the events LISTEN connection too."""
        listener, self._events_listener = self._events_listener, None
        if listener is not None:
            await listener.stop()
        await super().close()

    async def _purge_groups_events(
        self, conn: psycopg.AsyncConnection[Any], now: float, keep: float
    ) -> None:
        """In purge's transaction: expired groups and events beyond retention."""
        params = {
            "now": float(now),
            "keep_count": EVENTS_KEPT,
            "keep_age": float(keep),
            "limit": _TRIM_BATCH,
        }
        await conn.execute(self._q["purge_groups_events"], params)
