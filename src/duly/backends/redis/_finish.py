"""Finishing on Redis: ``heartbeat.lua`` extends the leases of a worker's running jobs (and
names those it must stop), ``finish.lua`` applies a batch of run outcomes (succeeded, failed,
retry, release, again), each atomically with its gate, unique hold, group, freshness scope,
event and counters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from duly._records import Outcome
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._scripts import Value, opt

__all__ = ["COUNTER_TTL", "finish", "heartbeat"]

#: Seconds a per-minute counter bucket lives in Redis (24 h of history + slack).
COUNTER_TTL: Final = 25 * 3600
_OUTCOME_KINDS: Final = frozenset({"succeeded", "failed", "retry", "release", "again"})


async def heartbeat(
    conn: RedisConnection, worker: str, job_ids: Sequence[str], now: float, lease_until: float
) -> list[str]:
    """See ``Backend.heartbeat``."""
    k = conn.keys
    with conn.guard("heartbeat"):
        gone: list[bytes] = await conn.call(
            conn.scripts.heartbeat,
            (k.running, k.workers),
            [k.prefix, worker, float(now), float(lease_until), 0, *job_ids],
        )
    return [job_id.decode() for job_id in gone]


async def finish(
    conn: RedisConnection, worker: str, outcomes: Sequence[Outcome], now: float
) -> list[bool]:
    """See ``Backend.finish``."""
    if not outcomes:
        return []
    for outcome in outcomes:
        if outcome.kind not in _OUTCOME_KINDS:
            raise ValueError(f"unknown outcome kind {outcome.kind!r}")
    k = conn.keys
    minute = int(now // 60)
    args: list[Value] = [k.prefix, worker, float(now), minute, COUNTER_TTL, k.wake]
    for o in outcomes:
        args += (
            o.job_id,
            o.kind,
            o.result or b"",
            o.errors or b"",
            opt(o.run_at),
            opt(o.expire_at),
            opt(o.rate_slot),
        )
    keys = (
        k.running,
        k.due,
        k.expiry,
        k.queue_counts,
        k.counter_minutes,
        k.counters(minute),
        k.unique,
    )
    with conn.guard("finish"):
        reply = await conn.call(conn.scripts.finish, keys, args)
    return [flag == 1 for flag in reply]
