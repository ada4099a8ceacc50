"""Recovering: SqliteBackend's transaction for running jobs whose lease lapsed (their worker
is gone): requeued, failed once they lost ``max_lost`` workers, or cancelled if asked."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from duly._records import Recovered
from duly.backends.sqlite import _concurrency, _freshness
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._maintenance import bump_stats
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["recover", "recover_tx"]


async def recover(
    db: SqliteConnection,
    signal: WorkSignal,
    now: float,
    max_lost: int,
    limit: int,
    failed_expire_at: float,
) -> list[Recovered]:
    """``Backend.recover``: each lapsed job exactly once, in one transaction."""
    if limit <= 0:
        return []
    recover = recover_tx(now, max_lost, limit, failed_expire_at)
    recovered, unparked = await db.transaction(recover, "recover")
    if unparked or any(item.requeued for item in recovered):
        signal.note_local_change()
    return recovered


def recover_tx(
    now: float, max_lost: int, limit: int, failed_expire_at: float
) -> Callable[[sqlite3.Connection], tuple[list[Recovered], bool]]:
    """The recover transaction's body: requeue (or fail, at ``max_lost``) up to ``limit``
    running jobs whose lease lapsed; (what happened to each, whether a gate slot unparked
    a job)."""
    minute = int(now // 60)

    def recover(conn: sqlite3.Connection) -> tuple[list[Recovered], bool]:
        rows = conn.execute(QUERIES["lapsed"], {"now": now, "limit": limit}).fetchall()
        requeue, quarantine, cancel, recovered = [], [], [], []
        counters: dict[tuple[str, str], list[int]] = {}
        gates: dict[str, int] = {}
        for job_id, task, queue, lost, gate, gate_limit, cancelling in rows:
            if gate is not None:
                gates[gate] = max(gates.get(gate, 0), gate_limit)
            if cancelling is not None:  # its cancel was requested: never run again
                cancel.append({"id": job_id, "now": now})
                recovered.append(Recovered(job_id, requeued=False, cancelled=True))
            elif lost + 1 < max_lost:
                requeue.append({"id": job_id})
                recovered.append(Recovered(job_id, requeued=True))
            else:
                quarantine.append(
                    {
                        "id": job_id,
                        "now": now,
                        "expire_at": failed_expire_at,
                        "message": f"lost its worker {lost + 1} times",
                    }
                )
                recovered.append(Recovered(job_id, requeued=False))
                counters.setdefault((task, queue), [0, 0, 0])[1] += 1
        conn.executemany(QUERIES["requeue_lost"], requeue)
        conn.executemany(QUERIES["quarantine_lost"], quarantine)
        conn.executemany(QUERIES["cancel_lost"], cancel)
        bump_stats(conn, minute, counters)
        unparked = _concurrency.free_gate_slots(conn, gates)
        _freshness.ended(conn, [r.id for r in recovered], now)  # their scopes, if syncs
        return recovered, bool(unparked)

    return recover
