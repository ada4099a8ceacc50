"""Orphans on PostgreSQL: running jobs whose lease lapsed go back to their queue, or fail after
``max_lost`` losses, or end cancelled when a cancel was requested (``recover`` in
``queries/maintenance.sql``). Plain jobs take one autocommit statement, gated ones a transaction
that also gives their slots back (as ``_finish``)."""

from __future__ import annotations

from typing import Any

import psycopg

from duly._records import Recovered
from duly.backends.postgres._concurrency import free_gates
from duly.backends.postgres._connection import Connection

__all__ = ["recover"]


async def recover(
    db: Connection, now: float, max_lost: int, limit: int, failed_expire_at: float
) -> list[Recovered]:
    """``Backend.recover``."""
    limit = max(int(limit), 0)
    params: dict[str, object] = {
        "now": float(now),
        "max_lost": int(max_lost),
        "limit": limit,
        "failed_expire_at": float(failed_expire_at),
        "minute": int(now // 60),
        "channel": db.channel,
        "with_gates": False,
    }
    # Plain jobs: one autocommit statement, which leaves gated jobs alone (see finish).
    row = await db.one("recover", params)
    assert row is not None
    rows = [row]
    left = limit - len(row[0]) - len(row[1]) - len(row[5])
    if row[3] and left > 0:

        async def gated(conn: psycopg.AsyncConnection[Any]) -> Any:
            cur = await conn.execute(db.q["recover"], {**params, "limit": left, "with_gates": True})
            row = await cur.fetchone()
            assert row is not None
            if row[2]:
                await free_gates(db, conn, row[2])
            return row

        rows.append(await db.transaction(gated))
    # requeued, quarantined, cancelled (columns 0, 1, 5)
    kinds = ((0, True, False), (1, False, False), (5, False, True))
    return [Recovered(i, q, c) for r in rows for n, q, c in kinds for i in r[n]]
