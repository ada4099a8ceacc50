"""Paused queues on PostgreSQL (``duly.backends.pausing``): ``queues.paused_at``
(0012_paused_queues.sql).

Each queue has an advisory lock (``claim_lock`` / ``pause_lock`` in ``queries/``; in memory,
no row lock, no WAL). A claim's transaction takes it shared before its claim statement, a pause
takes it exclusive before its upsert: the pause waits for the claims under way, and a claim
that comes later waits for the pause to commit, then its claim statement (a snapshot taken
after the lock) sees ``paused_at``. So a claim committed after ``pause`` returned never starts
a job of that queue.
"""

from __future__ import annotations

from typing import Any

import psycopg

from duly.backends.postgres._connection import Connection

__all__ = ["PostgresPausing"]


class PostgresPausing:
    """``duly.backends.pausing.PauseStore`` on PostgreSQL (``backend.pausing``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def pause(self, queue: str, now: float) -> bool:
        """Set the queue's ``paused_at``; False if it was set already (idempotent: resent
        after a dead connection)."""
        db = self._db
        params: dict[str, object] = {"queue": queue, "now": float(now), "schema": db.schema}

        async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
            await conn.execute(db.q["pause_lock"], params)
            cur = await conn.execute(db.q["pause_queue"], params)
            return await cur.fetchone() is not None

        return await db.transaction(run, retry=True, pipeline=True)

    async def resume(self, queue: str) -> bool:
        """Clear it and notify the queue's waiting workers; False if it was not set."""
        params: dict[str, object] = {"queue": queue, "channel": self._db.channel}
        row = await self._db.one("resume_queue", params, retry=True)
        return row is not None and int(row[0]) > 0

    async def paused(self) -> dict[str, float]:
        """The paused queues and when each was paused."""
        async with self._db.conn() as conn:
            cur = await conn.execute(self._db.q["paused_queues"])
            return {name: float(at) for name, at in await cur.fetchall()}
