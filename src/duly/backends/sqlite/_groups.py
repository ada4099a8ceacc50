"""Groups of SqliteBackend: the group's enqueue transaction and the reads.

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

from duly._records import GroupRecord, NewGroup, NewJob
from duly.backends.sqlite._connection import QUERIES, SqliteConnection, statements
from duly.backends.sqlite._enqueue import enqueue_tx
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["SqliteGroups", "purge_groups"]


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


def purge_groups(conn: sqlite3.Connection, now: float) -> None:
    """In purge's transaction: groups past their retention."""
    for statement in statements(QUERIES["purge_groups"]):
        conn.execute(statement, {"now": now})


class SqliteGroups:
    """``duly.backends.groups.GroupStore`` on SQLite (``backend.groups``)."""

    def __init__(self, db: SqliteConnection, signal: WorkSignal) -> None:
        self._db = db
        self._signal = signal

    async def store(self, group: NewGroup, members: Sequence[NewJob]) -> None:
        """Store a group, its members and its waiting callback in one transaction."""
        await self._db.transaction(enqueue_group_tx(group, members), "enqueue_group")
        self._signal.note_local_change()

    async def get(self, group_id: str) -> GroupRecord | None:
        """One group by id, or None."""
        return await self._db.run(get_group(group_id), "get_group")
