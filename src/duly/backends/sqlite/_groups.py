"""Groups and events of SqliteBackend: the group's enqueue transaction and the reads.

The writing that must be atomic with job changes (an event per status change, a member's outcome
counted once, the callback queued by the last one) is done by the triggers of
``migrations/0004_groups_events.sql``; this module stores groups and reads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from typing import Final

from duly._errors import EventsTrimmed
from duly._records import EventRecord, GroupRecord, NewGroup, NewJob
from duly.backends.sqlite._connection import statements
from duly.backends.sqlite._enqueue import enqueue_tx
from duly.backends.sqlite._tx import QUERIES

__all__ = [
    "enqueue_group_tx",
    "get_group",
    "newest_event",
    "parse_event_id",
    "purge_groups_events",
    "read_events",
]

#: Events kept at most (purge deletes older ones, and those older than its ``keep``).
EVENTS_KEPT: Final = 100_000
#: Most events one purge deletes.
_TRIM_BATCH: Final = 10_000


def parse_event_id(event_id: str) -> int:
    """The integer id of an event id of this backend; ValueError naming it otherwise."""
    try:
        value = int(event_id)
    except ValueError:
        raise ValueError(f"not an event id of this backend: {event_id!r}") from None
    if value < 0:
        raise ValueError(f"not an event id of this backend: {event_id!r}")
    return value


def enqueue_group_tx(
    group: NewGroup, members: Sequence[NewJob]
) -> Callable[[sqlite3.Connection], None]:
    """The group's transaction: its jobs as ``enqueue`` stores them, the members marked, the
    callback waiting with no due time, and the group row; ValueError (nothing stored) if an id
    exists already."""
    jobs = list(members)
    if group.callback is not None:
        # Inserted `scheduled` (so its one event says so), then its due time removed.
        jobs.append(dataclasses.replace(group.callback, scheduled_for=math.inf))
    store = enqueue_tx(jobs)
    ids = json.dumps([job.id for job in members])
    row = {
        "id": group.id,
        "key": group.key,
        "created_at": group.created_at,
        "total": len(members),
        "retention": group.retention,
        "has_callback": int(group.callback is not None),
    }

    def enqueue_group(conn: sqlite3.Connection) -> None:
        if any(result.deduplicated for result in store(conn)):
            raise ValueError(f"group {group.id!r}: a job id of it is already stored")
        conn.execute(QUERIES["group_members"], {"group": group.id, "ids": ids})
        if group.callback is not None:
            conn.execute(QUERIES["group_callback_waits"], {"group": group.id})
        conn.execute(QUERIES["insert_group"], row)

    return enqueue_group


def get_group(group_id: str) -> Callable[[sqlite3.Connection], GroupRecord | None]:
    """Reads one group by id, or None."""

    def read(conn: sqlite3.Connection) -> GroupRecord | None:
        row = conn.execute(QUERIES["get_group"], {"id": group_id}).fetchone()
        if row is None:
            return None
        gid, key, created_at, total, succeeded, failed, cancelled, completed_at, callback = row
        return GroupRecord(
            gid, key, created_at, total, succeeded, failed, cancelled, completed_at, bool(callback)
        )

    return read


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
            EventRecord(str(eid), job_id, task, queue, k, status, at)
            for eid, job_id, task, queue, k, status, at in rows
        ]

    return read


def purge_groups_events(conn: sqlite3.Connection, now: float, keep: float) -> None:
    """In purge's transaction: groups past their retention, and events beyond the bounds."""
    for statement in statements(QUERIES["purge_groups"]):
        conn.execute(statement, {"now": now})
    params = {"keep_count": EVENTS_KEPT, "keep_age": keep, "limit": _TRIM_BATCH}
    [(upto,)] = conn.execute(QUERIES["events_trim_bound"], params)
    if upto > 0:
        conn.execute(QUERIES["events_trim"], {"upto": upto})
        conn.execute(QUERIES["events_trim_mark"], {"upto": upto})
