"""Groups on PostgreSQL: the group's enqueue transaction and the reads.

The writing that must be atomic with the job changes (a member's current outcome counted once,
the callback queued by the first completion) is done by the triggers of
``migrations/0005_groups_events.sql`` (as ``0007_lean_event_triggers.sql`` and
``0011_group_names_current_outcomes.sql`` replaced them).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import psycopg

from duly._records import GroupRecord, NewGroup, NewJob, StoredGroup
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._enqueue import enqueue_plan, run_plan_async

__all__ = ["PostgresGroups"]


class PostgresGroups:
    """``duly.backends.groups.GroupStore`` on PostgreSQL (``backend.groups``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def store(self, group: NewGroup, members: Sequence[NewJob]) -> StoredGroup:
        """The group's transaction: its jobs as ``enqueue`` stores them, then its row; a named
        group's row first, so that a stored name stores nothing (``group_name_take``)."""
        db = self._db
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

        stored = StoredGroup(group.id, [job.id for job in members])

        async def run(conn: psycopg.AsyncConnection[Any]) -> StoredGroup:
            if group.name is not None:
                taken = await conn.execute(db.q["group_name_take"], {**params, "name": group.name})
                if await taken.fetchone() is None:  # stored by another: read after its commit
                    found = await conn.execute(db.q["group_named"], {"name": group.name})
                    row = await found.fetchone()
                    if row is None:  # purged in between: nothing to answer, nothing stored
                        raise ValueError(f"group {group.name!r} was removed while stored again")
                    return StoredGroup(row[0], list(row[1] or []), deduplicated=True)
            plan = enqueue_plan(jobs, db.channel, fresh=False)
            results = await run_plan_async(conn, db.q, plan)
            if any(result.deduplicated for result in results):
                raise ValueError(f"group {group.id!r}: a job id of it is already stored")
            if group.name is None:
                await conn.execute(db.q["group_store"], params)
            else:
                marked = await conn.execute(db.q["group_mark"], params)
                if marked.rowcount != len(members):
                    raise ValueError(f"group {group.id!r}: its members were not all stored")
            return stored

        return await db.transaction(run)

    async def get(self, group_id: str) -> GroupRecord | None:
        """One group's row, or None."""
        row = await self._db.one("get_group", {"id": group_id}, retry=True)
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
            callback,
            first_completed_at=row[9],
            name=row[10],
        )
