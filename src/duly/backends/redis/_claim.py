"""Claim on Redis: ``claim.lua`` takes the best ready jobs of the queues for a worker (gates
park a job over its limit; priority, then FIFO), in idle mode registering the worker for the
hand-off (``_handoff.py``); ``promote_due.lua`` moves due scheduled and retrying jobs to their
ready queues."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duly._records import JobRecord
from duly.backends.redis import _codec
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._scripts import Value

__all__ = ["claim", "claim_rows", "claimed_records", "promote_due"]


async def claim_rows(
    conn: RedisConnection,
    worker: str,
    queues: Sequence[str],
    limit: int,
    now: float,
    lease_until: float,
    idle: tuple[float, float, bool] | None = None,
) -> tuple[list[bytes], list[tuple[bytes, list[Any]]]]:
    """The rows in the worker's inbox (``_codec.handed``; only with ``idle``), then per
    claimed job its id and its row, in claim.lua's order (``_codec.ClaimRow``).

    ``idle`` = (seconds, lease_until, withdraw): claim in idle mode (claim.lua), first
    withdrawing the worker's registration if ``withdraw``, and registering the worker idle
    for that long when nothing is claimed; a job handed to it gets that lease.
    """
    k = conn.keys
    idle_args: tuple[Value, Value, Value] = ("", "", "")
    if idle is not None:
        seconds, handed_lease, withdraw = idle
        idle_args = (max(1, round(seconds * 1000)), float(handed_lease), "1" if withdraw else "")
    reply = await conn.call(
        conn.scripts.claim,
        (k.running, k.queue_counts, k.unique),
        [k.prefix, worker, limit, float(now), float(lease_until), *idle_args, *queues],
    )
    handed: list[bytes] = []
    if idle is not None:
        handed, reply = reply
    return handed, list(zip(reply[::2], reply[1::2], strict=True))


async def claim(
    conn: RedisConnection,
    worker: str,
    queues: Sequence[str],
    limit: int,
    now: float,
    lease_until: float,
) -> list[JobRecord]:
    """See ``Backend.claim``."""
    if limit <= 0 or not queues:
        return []
    with conn.guard("claim"):
        _, rows = await claim_rows(conn, worker, queues, limit, now, lease_until)
        return await claimed_records(conn, rows, worker, now, lease_until)


async def claimed_records(
    conn: RedisConnection,
    rows: list[tuple[bytes, Any]],
    worker: str,
    now: float,
    lease_until: float,
) -> list[JobRecord]:
    """The records of claim.lua's rows: the jobs taken, then those it found expired and
    ended, ``cancelled`` (built from the script's reply, never read back: by then another
    client may have retried one, which this worker must not take for its own)."""
    now, lease_until = float(now), float(lease_until)
    return [
        _codec.expired(job_id, row, now)
        if _codec.is_expired_row(row)
        else _codec.claimed(job_id, row, worker, now, lease_until)
        for job_id, row in rows
    ]


async def promote_due(conn: RedisConnection, now: float, limit: int) -> tuple[int, float | None]:
    """See ``Backend.promote_due``."""
    k = conn.keys
    with conn.guard("promote_due"):
        moved, first = await conn.call(
            conn.scripts.promote_due,
            (k.due, k.queue_counts),
            [k.prefix, float(now), max(limit, 0), k.wake],
        )
    return int(moved), _codec.float_or_none(first)
