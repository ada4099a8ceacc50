"""Maintenance on Redis: ``purge.lua`` deletes expired finished jobs (and their index entries),
counter buckets and worker entries past retention, and trims the event stream by age."""

from __future__ import annotations

from duly._records import STATS_RETENTION
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._scripts import Value

__all__ = ["purge"]


async def purge(
    conn: RedisConnection, now: float, limit: int, keep: float = STATS_RETENTION
) -> int:
    """See ``Backend.purge``."""
    k = conn.keys
    counter_cutoff = (now - keep) / 60  # counter buckets of minutes before this are deleted
    args: list[Value] = [
        k.prefix,
        float(now),
        max(limit, 0),
        float(counter_cutoff),
        float(now - keep),
        float(keep),
    ]
    with conn.guard("purge"):
        reply = await conn.call(
            conn.scripts.purge,
            (k.expiry, k.all, k.counter_minutes, k.workers, k.worker_info),
            args,
        )
    return int(reply)
