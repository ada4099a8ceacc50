"""Outcomes on PostgreSQL: ``finish`` (succeeded, failed, retry, release, again; a cancel
request honoured) and ``heartbeat`` (leases extended, cancel requests reported).

Plain jobs take one autocommit statement; gated jobs (whose slot must be given back and a
parked job woken in the same transaction) take a transaction of their own. The scope of a
freshness sync changes in the same statement (the ``fresh`` CTE of ``finish``), and group
members are counted by the trigger on ``jobs`` (``migrations/0007_lean_event_triggers.sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from duly._records import Outcome
from duly.backends.postgres._concurrency import free_gates
from duly.backends.postgres._connection import Connection

__all__ = ["finish", "heartbeat", "heartbeat_params"]


def heartbeat_params(
    worker: str, job_ids: Sequence[str], now: float, lease_until: float
) -> dict[str, object]:
    """The parameters of the ``heartbeat`` statement."""
    return {
        "worker": worker,
        "ids": list(job_ids),
        "now": float(now),
        "lease_until": float(lease_until),
    }


async def heartbeat(
    db: Connection, worker: str, job_ids: Sequence[str], now: float, lease_until: float
) -> list[str]:
    """``Backend.heartbeat``: the ids among ``job_ids`` the worker must stop."""
    params = heartbeat_params(worker, job_ids, now, lease_until)
    row = await db.one("heartbeat", params, retry=True)
    assert row is not None
    alive = set(row[0])
    return [job_id for job_id in job_ids if job_id not in alive]


def _params(
    db: Connection, worker: str, now: float, batch: Sequence[Outcome], with_gates: bool
) -> dict[str, object]:
    return {
        "worker": worker,
        "now": float(now),
        "minute": int(now // 60),
        "channel": db.channel,
        "with_gates": with_gates,
        "ids": [o.job_id for o in batch],
        "kinds": [o.kind for o in batch],
        "results": [o.result for o in batch],
        "errors": [o.errors for o in batch],
        "run_at": [None if o.run_at is None else float(o.run_at) for o in batch],
        "expire_at": [None if o.expire_at is None else float(o.expire_at) for o in batch],
        # Empty when no outcome has one: unnest pads it with NULLs (see _enqueue_params).
        "rate_slots": [None if o.rate_slot is None else float(o.rate_slot) for o in batch]
        if any(o.rate_slot is not None for o in batch)
        else [],
    }


async def finish(
    db: Connection, worker: str, outcomes: Sequence[Outcome], now: float
) -> list[bool]:
    """``Backend.finish``: whether each outcome applied."""
    if not outcomes:
        return []
    # Plain jobs: one autocommit statement, which leaves gated jobs alone.
    row = await db.one("finish", _params(db, worker, now, outcomes, False))
    assert row is not None
    applied = set(row[0])
    rest = [o for o in outcomes if o.job_id not in applied]
    if rest:  # gated jobs (or outcomes to drop): the outcome and its freed slot together

        async def gated(conn: psycopg.AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(db.q["finish"], _params(db, worker, now, rest, True))
            row = await cur.fetchone()
            assert row is not None
            if row[1]:
                await free_gates(db, conn, row[1])
            return list(row[0])

        applied.update(await db.transaction(gated))
    return [o.job_id in applied for o in outcomes]
