"""Recovery on Redis: ``recover.lua`` requeues (or, past ``max_lost``, fails) the running jobs
whose lease expired, each with its gate, unique hold, group, freshness scope and event."""

from __future__ import annotations

from duly._records import Recovered
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._finish import COUNTER_TTL
from duly.backends.redis._scripts import Value

__all__ = ["recover"]


async def recover(
    conn: RedisConnection, now: float, max_lost: int, limit: int, failed_expire_at: float
) -> list[Recovered]:
    """See ``Backend.recover``."""
    if limit <= 0:
        return []
    k = conn.keys
    minute = int(now // 60)
    keys = (k.running, k.expiry, k.queue_counts, k.counter_minutes, k.counters(minute), k.unique)
    args: list[Value] = [
        k.prefix,
        float(now),
        max_lost,
        limit,
        float(failed_expire_at),
        minute,
        COUNTER_TTL,
        k.wake,
    ]
    with conn.guard("recover"):
        reply = await conn.call(conn.scripts.recover, keys, args)
    rows = zip(reply[::2], reply[1::2], strict=True)
    return [Recovered(job_id.decode(), int(flag) == 1, int(flag) == 2) for job_id, flag in rows]
