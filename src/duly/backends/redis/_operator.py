"""Operator actions on Redis: ``cancel.lua`` (a waiting job ends at once, a running one gets
the request its worker sees) and ``retry.lua`` (a failed or cancelled job runs again)."""

from __future__ import annotations

from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._scripts import opt

__all__ = ["cancel", "retry"]


async def cancel(conn: RedisConnection, job_id: str, now: float, expire_at: float | None) -> bool:
    """See ``Backend.cancel``."""
    k = conn.keys
    with conn.guard("cancel"):
        reply = await conn.call(
            conn.scripts.cancel,
            (k.running, k.due, k.expiry, k.queue_counts, k.unique),
            [k.prefix, job_id, float(now), opt(expire_at), k.wake],
        )
    return bool(reply == 1)


async def retry(conn: RedisConnection, job_id: str, now: float) -> bool:
    """See ``Backend.retry``."""
    k = conn.keys
    with conn.guard("retry"):
        reply = await conn.call(
            conn.scripts.retry, (k.expiry, k.unique), [k.prefix, job_id, k.wake, float(now)]
        )
    return bool(reply == 1)
