"""Dependencies on PostgreSQL: storing dependents, and the reads.

Releasing and cancelling dependents must be atomic with the change of the job they wait for:
the trigger of ``migrations/0015_dependencies.sql`` does it in the statement that makes that
change. This module stores dependents: one transaction that locks their stored dependencies
(FOR SHARE: none can end before it commits, or its trigger would not see the new rows), stores
the jobs as ``enqueue`` does (dependents ``scheduled`` for +inf, so their first event says
so), then all dependents' rows and first states in one statement (``dependency_wait``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import psycopg

from duly._records import EnqueueResult, NewJob
from duly.backends.dependencies import dependency_depths
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._enqueue import enqueue_plan, run_plan_async

__all__ = ["PostgresDependencies"]


class PostgresDependencies:
    """``duly.backends.dependencies.DependencyStore`` on PostgreSQL (``backend.dependencies``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def enqueue(self, jobs: Sequence[NewJob], retention: float) -> list[EnqueueResult]:
        """Store ``jobs`` and their waits in one transaction."""
        if not jobs:
            return []
        db = self._db
        now = float(max(job.enqueued_at for job in jobs))
        held = [dataclasses.replace(j, scheduled_for=math.inf) if j.after else j for j in jobs]
        wanted = sorted({dependency for job in jobs for dependency in job.after})

        async def run(conn: psycopg.AsyncConnection[Any]) -> list[EnqueueResult]:
            cur = await conn.execute(db.q["dependency_lock"], {"ids": wanted})
            depths = dependency_depths(jobs, {row[0]: row[1] for row in await cur.fetchall()})
            results = await run_plan_async(conn, db.q, enqueue_plan(held, db.channel, fresh=False))
            waiting = [
                job
                for job, result in zip(jobs, results, strict=True)
                if job.after and not result.deduplicated
            ]
            if waiting:
                links = [(d, job.id) for job in waiting for d in job.after]
                params = {
                    "link_after": [after for after, _ in links],
                    "link_job": [dependent for _, dependent in links],
                    "ids": [job.id for job in waiting],
                    "pipes": [job.pipe_from for job in waiting],
                    "depths": [depths[job.id] for job in waiting],
                    "retention": float(retention),
                    "now": now,
                }
                cur = await conn.execute(db.q["dependency_wait"], params)
                woken = {queue for status, queue in await cur.fetchall() if status == "queued"}
                for queue in sorted(woken):
                    wake = {"channel": db.channel, "queue": queue}
                    await conn.execute(db.q["dependency_wake"], wake)
            return results

        return await db.transaction(run)

    async def dependents(self, job_id: str) -> list[str]:
        """The jobs that wait (or waited) for ``job_id``."""

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(self._db.q["dependents"], {"id": job_id})
            return [row[0] for row in await cur.fetchall()]

        return await self._db.transaction(read, retry=True, atomic=False)

    async def input(self, job_id: str) -> bytes | None:
        """A chain step's input (its dependency's result), or None."""
        row = await self._db.one("dependency_input", {"id": job_id}, retry=True)
        return None if row is None or row[0] is None else bytes(row[0])
