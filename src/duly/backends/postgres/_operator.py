"""Operator actions on PostgreSQL: ``cancel`` (a waiting job at once, a running one by
request) and ``retry`` (a failed or cancelled job claimable again, its unique key taken
again when free). Each is one transaction."""

from __future__ import annotations

from typing import Any

import psycopg

from duly.backends.postgres._concurrency import free_gates
from duly.backends.postgres._connection import Connection

__all__ = ["cancel", "retry"]


async def cancel(db: Connection, job_id: str, now: float, expire_at: float) -> bool:
    """``Backend.cancel``."""
    params: dict[str, object] = {"id": job_id, "now": float(now), "expire_at": float(expire_at)}

    async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(db.q["cancel"], params)
        row = await cur.fetchone()
        if row is None:
            return False
        gate, _was_running, was_waiting = row  # a running job keeps its slot for now
        if gate is not None and was_waiting:
            await free_gates(db, conn, [], [gate])
        await conn.execute(db.q["fresh_cancelled"], params)  # its scope, if a sync
        return True

    return await db.transaction(run)


async def retry(db: Connection, job_id: str, now: float) -> bool:
    """``Backend.retry``."""
    params: dict[str, object] = {"id": job_id, "now": float(now), "channel": db.channel}

    async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
        await conn.execute(db.q["retry_take_over"], params)
        cur = await conn.execute(db.q["retry"], params)
        row = await cur.fetchone()
        assert row is not None
        return bool(row[0])

    try:
        return await db.transaction(run)
    except psycopg.errors.UniqueViolation:
        return False  # a holder of its key committed meanwhile: rolled back, unchanged
