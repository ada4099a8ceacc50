"""Bulk actions on PostgreSQL (``duly.backends.bulk``): ``cancel_many`` and ``retry_many``
(``queries/operator.sql``) apply ``cancel`` / ``retry`` to a whole batch in one transaction of a
few statements, whatever its size; the triggers keep events, groups and dependents as for one."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any

import psycopg

from duly._records import ID_CEILING, JobFilter
from duly.backends.bulk import MAX_BATCH
from duly.backends.postgres._concurrency import free_gates
from duly.backends.postgres._connection import Connection

__all__ = ["PostgresBulk"]


class PostgresBulk:
    """``duly.backends.bulk.BulkActions`` on PostgreSQL (``backend.bulk``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def matching(self, where: JobFilter, cursor: str | None) -> tuple[list[str], str | None]:
        """A page of matching ids, keyset by id (the cursor: the last one)."""
        params: dict[str, object] = {
            "status": where.status,
            "task": where.task,
            "queue": where.queue,
            "key": where.key,
            "before": ID_CEILING if cursor is None else cursor,
            "limit": MAX_BATCH,
        }
        db = self._db

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(db.q["bulk_ids"], params)
            return [str(row[0]) for row in await cur.fetchall()]

        ids = await db.transaction(read, retry=True, atomic=False)
        return ids, (ids[-1] if len(ids) == MAX_BATCH else None)

    async def cancel(
        self, job_ids: Sequence[str], status: str, now: float, expire_at: float
    ) -> int:
        """One transaction: cancel_many, the gate turns passed on, the scopes of syncs."""
        if not job_ids:
            return 0
        db = self._db
        params: dict[str, object] = {
            "ids": list(job_ids[:MAX_BATCH]),
            "status": status,
            "now": float(now),
            "expire_at": float(expire_at),
        }

        async def run(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(db.q["cancel_many"], params)
            rows = await cur.fetchall()
            passed_on = [gate for gate, was_waiting in rows if gate is not None and was_waiting]
            if passed_on:
                await free_gates(db, conn, [], passed_on)
            if rows:
                await conn.execute(db.q["fresh_cancelled_many"], params)
            return len(rows)

        return await db.transaction(run)

    async def retry(self, job_ids: Sequence[str], status: str, now: float) -> int:
        """One transaction: retry_take_over_many then retry_many; if two jobs of the batch
        take the same unique key (rolled back), one transaction per job instead."""
        if not job_ids:
            return 0
        db = self._db
        ids = list(job_ids[:MAX_BATCH])
        params: dict[str, object] = {
            "ids": ids,
            "status": status,
            "now": float(now),
            "channel": db.channel,
        }

        async def run(conn: psycopg.AsyncConnection[Any], params: dict[str, object]) -> int:
            await conn.execute(db.q["retry_take_over_many"], params)
            cur = await conn.execute(db.q["retry_many"], params)
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])

        try:
            return await db.transaction(functools.partial(run, params=params))
        except psycopg.errors.UniqueViolation:
            pass  # rare (see above): the same statements, a job per transaction
        retried = 0
        for job_id in ids:
            one = {**params, "ids": [job_id]}  # still checks the status, as the batch does
            # A holder of its key committed meanwhile: rolled back, unchanged.
            with contextlib.suppress(psycopg.errors.UniqueViolation):
                retried += await db.transaction(functools.partial(run, params=one))
        return retried
