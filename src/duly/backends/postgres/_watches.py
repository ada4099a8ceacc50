"""Watches on PostgreSQL: move an active watch's next check in one statement."""

from __future__ import annotations

from duly.backends.postgres._connection import Connection

__all__ = ["PostgresWatches"]


class PostgresWatches:
    """``duly.backends.watches.WatchStore`` on PostgreSQL (``backend.watches``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def move(self, unique_key: str, run_at: float, now: float) -> tuple[str, bool] | None:
        """See ``WatchStore.move`` (the holder's row locked, as a claim would lock it)."""
        params = {"key": unique_key, "at": float(run_at), "now": float(now)}
        row = await self._db.one("watch_move", params)
        if row is None:
            return None
        job_id, status, parked, _ = row
        return job_id, not (status == "running" or parked)
