"""Groups of SqliteBackend: the group's enqueue transaction and the reads.

The writing that must be atomic with job changes (an event per status change, a member's current
outcome counted once, the callback queued by the first completion) is done by the triggers of
``migrations/0004_groups_events.sql`` (as ``0007_group_names_current_outcomes.sql`` replaced
them); this module stores groups and reads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections.abc import Callable, Sequence

from duly._records import GroupRecord, NewGroup, NewJob, StoredGroup
from duly.backends.sqlite._connection import QUERIES, SqliteConnection, statements
from duly.backends.sqlite._enqueue import enqueue_tx
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["SqliteGroups", "purge_groups"]


def enqueue_group_tx(
    group: NewGroup, members: Sequence[NewJob]
) -> Callable[[sqlite3.Connection], StoredGroup]:
    """The group's transaction: its jobs as ``enqueue`` stores them, the members marked, the
    callback waiting with no due time, and the group row; ValueError (nothing stored) if an id
    exists already. A named group whose name is stored already stores nothing: the stored
    group answers (one writer at a time: the look-up and the insert cannot interleave)."""
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
        "name": group.name,
        "members": None if group.name is None else ids,
    }

    def enqueue_group(conn: sqlite3.Connection) -> StoredGroup:
        if group.name is not None:
            found = conn.execute(QUERIES["group_named"], {"name": group.name}).fetchone()
            if found is not None:
                return StoredGroup(found[0], json.loads(found[1] or "[]"), deduplicated=True)
        if any(result.deduplicated for result in store(conn)):
            raise ValueError(f"group {group.id!r}: a job id of it is already stored")
        conn.execute(QUERIES["group_members"], {"group": group.id, "ids": ids})
        if group.callback is not None:
            conn.execute(QUERIES["group_callback_waits"], {"group": group.id})
        conn.execute(QUERIES["insert_group"], row)
        return StoredGroup(group.id, [job.id for job in members])

    return enqueue_group


def get_group(group_id: str) -> Callable[[sqlite3.Connection], GroupRecord | None]:
    """Reads one group by id, or None."""

    def read(conn: sqlite3.Connection) -> GroupRecord | None:
        row = conn.execute(QUERIES["get_group"], {"id": group_id}).fetchone()
        if row is None:
            return None
        gid, key, created_at, total, succeeded, failed, cancelled, completed_at, callback = row[:9]
        return GroupRecord(
            gid,
            key,
            created_at,
            total,
            succeeded,
            failed,
            cancelled,
            completed_at,
            bool(callback),
            first_completed_at=row[9],
            name=row[10],
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

    async def store(self, group: NewGroup, members: Sequence[NewJob]) -> StoredGroup:
        """Store a group, its members and its waiting callback in one transaction."""
        stored = await self._db.transaction(enqueue_group_tx(group, members), "enqueue_group")
        if not stored.deduplicated:
            self._signal.note_local_change()
        return stored

    async def get(self, group_id: str) -> GroupRecord | None:
        """One group by id, or None."""
        return await self._db.run(get_group(group_id), "get_group")
