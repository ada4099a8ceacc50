"""Paused queues on PostgreSQL (``duly.backends.pausing``): ``queues.paused_at``
(0012_paused_queues.sql).

The claim statement reads each queue's row FOR SHARE and skips a paused one. A pause is an
upsert of that row: it waits for the claims holding it, and a claim that meets the pause's
lock waits for it and reads the row it committed (READ COMMITTED re-reads a locked row). So a
claim committed after ``pause`` returned never starts a job of that queue.
"""

from __future__ import annotations

from duly.backends.postgres._connection import Connection

__all__ = ["PostgresPausing"]


class PostgresPausing:
    """``duly.backends.pausing.PauseStore`` on PostgreSQL (``backend.pausing``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def pause(self, queue: str, now: float) -> bool:
        """Set the queue's ``paused_at``; False if it was set already (idempotent: resent
        after a dead connection)."""
        row = await self._db.one("pause_queue", {"queue": queue, "now": float(now)}, retry=True)
        return row is not None

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
