"""Watches on Redis: move an active watch's next check (``lua/move_watch.lua``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisWatches"]


class RedisWatches:
    """``duly.backends.watches.WatchStore`` on Redis (``backend.watches``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def move(self, unique_key: str, run_at: float, now: float) -> tuple[str, bool] | None:
        """See ``WatchStore.move``: one script call."""
        c = self._conn
        k = c.keys
        with c.guard("move_watch"):
            reply = await c.call(
                c.scripts.move_watch,
                (k.due, k.queue_counts, k.unique),
                [k.prefix, unique_key, float(run_at), float(now)],
            )
        if not reply:
            return None
        job_id, moved = reply
        return job_id.decode(), moved == 1
