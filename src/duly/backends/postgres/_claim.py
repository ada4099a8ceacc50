"""Claiming on PostgreSQL: ``claim`` (one statement per round: SKIP LOCKED, gates taken or
parked, priority order; see ``claim`` in ``queries/claim.sql``) and ``promote_due`` (scheduled and
retrying jobs that came due become claimable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from duly._errors import BackendUnavailable
from duly._records import EXPIRED_KEEP, EXPIRED_MESSAGE, JobRecord
from duly.backends.postgres import _rows
from duly.backends.postgres._concurrency import free_gates
from duly.backends.postgres._connection import Connection

__all__ = ["claim", "promote_due"]


async def claim(
    db: Connection,
    worker: str,
    queues: Sequence[str],
    limit: int,
    now: float,
    lease_until: float,
) -> list[JobRecord]:
    """``Backend.claim``."""
    if limit <= 0 or not queues:
        return []
    taken: list[JobRecord] = []
    expired: dict[str, None] = {}  # ids, in the order met
    try:
        async with db.conn() as conn:
            # Each round is a claim of its own: one round trip, in pipeline mode, so its two
            # statements (the queues' shared advisory locks against a pause, then the claim,
            # with a snapshot taken after them; see claim_lock) are one implicit transaction
            # up to the pipeline's Sync: no BEGIN/COMMIT. Another round follows only when the
            # last one met gated jobs and there is room left: each such round takes a gated
            # job or parks one, so this ends; plain jobs take one round.
            while len(taken) < limit:
                params: dict[str, object] = {
                    "queues": list(queues),
                    "limit": limit - len(taken),
                    "first": not taken,
                    "now": float(now),
                    "worker": worker,
                    "lease_until": float(lease_until),
                    "schema": db.schema,
                }
                async with conn.pipeline():
                    await conn.execute(db.q["claim_lock"], params)
                    cur = await conn.execute(db.q["claim"], params)
                    rows = await cur.fetchall()
                columns = _rows.CLAIM(cur)
                claimed, full, gated = columns.read(rows)
                expired.update(dict.fromkeys(columns.expired(rows)))
                taken.extend(claimed)
                if full:
                    await conn.execute(
                        db.q["gate_park"],
                        {"gates": list(full), "limits": list(full.values())},
                    )
                if not gated:
                    break  # no gated job met: nothing left behind one
                if any(record.lost for record in claimed):
                    break  # a job that lost a worker runs alone
    except BackendUnavailable:
        if not taken:
            raise
        # The jobs of the first rounds are committed as running under this worker: hand
        # them out (the next call meets the outage) rather than let their leases lapse.
        return taken
    if expired:
        taken.extend(await _end_expired(db, list(expired), float(now)))
    return taken


async def _end_expired(db: Connection, ids: list[str], now: float) -> list[JobRecord]:
    """End the jobs a claim found expired (it started none of them), as ``cancel`` does,
    with a ``JobExpired`` error: one transaction of set-based statements (as many round
    trips however many jobs); their records, ``cancelled``, in the order met. One another
    claimer ended first is left alone; should this one die first, the next claim finds them."""
    params: dict[str, object] = {
        "ids": ids,
        "now": now,
        "expire_at": now + EXPIRED_KEEP,
        "message": EXPIRED_MESSAGE,
    }

    async def run(conn: psycopg.AsyncConnection[Any]) -> list[JobRecord]:
        cur = await conn.execute(db.q["expire_jobs"], params)
        rows = await cur.fetchall()
        passed_on = [gate for gate, was_waiting, *_ in rows if gate is not None and was_waiting]
        if passed_on:
            await free_gates(db, conn, [], passed_on)
        if rows:
            await conn.execute(db.q["fresh_cancelled_many"], params)
        ended = {record.id: record for record in (JobRecord(*columns) for _, _, *columns in rows)}
        return [ended[job_id] for job_id in ids if job_id in ended]

    try:
        return await db.transaction(run)
    except BackendUnavailable:
        return []  # still queued and expired: the next claim ends them


async def promote_due(db: Connection, now: float, limit: int) -> tuple[int, float | None]:
    """``Backend.promote_due``: one idempotent statement (resent after a dead connection)."""
    params: dict[str, object] = {
        "now": float(now),
        "limit": max(int(limit), 0),
        "channel": db.channel,
    }
    row = await db.one("promote_due", params, retry=True)
    assert row is not None
    return int(row[0]), row[1]
