"""Maintenance: the promote, recover and purge transactions of SqliteBackend."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable

from duly._records import Recovered
from duly.backends.sqlite import _concurrency, _events, _freshness, _groups
from duly.backends.sqlite._connection import statements
from duly.backends.sqlite._outcomes import bump_stats
from duly.backends.sqlite._tx import QUERIES

__all__ = ["drop", "promote_tx", "purge_tx", "recover_tx"]


def promote_tx(now: float, limit: int) -> Callable[[sqlite3.Connection], tuple[int, float | None]]:
    """The promote transaction's body: queue up to ``limit`` due scheduled/retrying jobs;
    (moved, next due time)."""

    def promote(conn: sqlite3.Connection) -> tuple[int, float | None]:
        moved = 0
        if limit > 0:
            moved = conn.execute(QUERIES["promote_due"], {"now": now, "limit": limit}).rowcount
        earliest = conn.execute(QUERIES["next_due"]).fetchone()[0]
        return moved, earliest

    return promote


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


def purge_tx(now: float, limit: int, keep: float) -> Callable[[sqlite3.Connection], int]:
    """The purge transaction's body: delete up to ``limit`` expired finished jobs, stats
    buckets older than ``keep`` seconds, workers not seen for as long and rate-limit state
    whose tat has passed; the jobs deleted."""
    old_minute = math.floor((now - keep) / 60)

    def purge(conn: sqlite3.Connection) -> int:
        deleted = 0
        if limit > 0:
            deleted = conn.execute(QUERIES["purge_jobs"], {"now": now, "limit": limit}).rowcount
        conn.execute(QUERIES["purge_stats"], {"minute": old_minute})
        conn.execute(QUERIES["purge_workers"], {"cutoff": now - keep})
        conn.execute(QUERIES["purge_rates"], {"now": now})
        _groups.purge_groups(conn, now)
        _events.purge_events(conn, keep)
        return deleted

    return purge


def drop(conn: sqlite3.Connection) -> None:
    """The drop transaction's body: delete every job, counter, worker, queue name and
    rate-limit state (the schema stays)."""
    for statement in statements(QUERIES["drop"]):
        conn.execute(statement)
    _freshness.drop(conn)
