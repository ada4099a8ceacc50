"""Retention on PostgreSQL: ``purge`` deletes expired finished jobs (a batch, skipping rows
someone holds), old counters, long-gone workers, idle rate and gate rows, then expired groups
and events beyond retention (``_events.purge_groups_events``)."""

from __future__ import annotations

from duly._records import STATS_RETENTION
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._events import purge_groups_events

__all__ = ["purge"]


async def purge(db: Connection, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
    """``Backend.purge``: the number of jobs deleted."""
    params: dict[str, object] = {
        "now": float(now),
        "limit": max(int(limit), 0),
        "oldest_minute": int((now - keep) // 60),
        "worker_cutoff": float(now - keep),
    }
    row = await db.one("purge", params, retry=True)
    assert row is not None
    async with db.conn() as conn:
        await purge_groups_events(db, conn, now, keep)
    return int(row[0])
