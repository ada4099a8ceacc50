"""Operator actions of SqliteBackend: cancel, retry, and drop (delete everything)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from duly.backends.sqlite import _concurrency, _freshness
from duly.backends.sqlite._connection import QUERIES, SqliteConnection, statements
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["cancel", "cancel_tx", "drop", "retry", "retry_tx"]


async def cancel(
    db: SqliteConnection, signal: WorkSignal, job_id: str, now: float, expire_at: float
) -> bool:
    """``Backend.cancel``; wakes this instance's waiters if a parked job took the freed slot."""
    cancelled, unparked = await db.transaction(cancel_tx(job_id, now, expire_at), "cancel")
    if unparked:
        signal.note_local_change()
    return cancelled


async def retry(db: SqliteConnection, signal: WorkSignal, job_id: str, now: float) -> bool:
    """``Backend.retry``; wakes this instance's waiters when the job is queued again."""
    retried = await db.transaction(retry_tx(job_id, now), "retry")
    if retried:
        signal.note_local_change()
    return retried


def cancel_tx(
    job_id: str, now: float, expire_at: float
) -> Callable[[sqlite3.Connection], tuple[bool, bool]]:
    """The cancel transaction's body: cancel an active job (parked or not); (whether it was
    cancelled, whether its gate slot unparked a job). A gated job frees its slot (or its turn,
    if queued) for the best parked job of its gate."""
    params = {"id": job_id, "now": now, "expire_at": expire_at}

    def cancel(conn: sqlite3.Connection) -> tuple[bool, bool]:
        rows = conn.execute(QUERIES["cancel"], params).fetchall()
        if not rows:
            return False, False
        _freshness.ended(conn, [job_id], now)  # its scope, if a sync
        [(gate, gate_limit, running)] = rows
        if gate is None or running:  # a running job keeps its slot until its run ends
            return True, False
        return True, bool(_concurrency.free_gate_slots(conn, {gate: gate_limit}))

    return cancel


def retry_tx(job_id: str, now: float) -> Callable[[sqlite3.Connection], bool]:
    """The retry transaction's body: re-queue a failed or cancelled job with fresh attempts;
    it takes its unique key again, or stays as it is (False) if another active job holds
    that key."""

    def retry(conn: sqlite3.Connection) -> bool:
        row = conn.execute(QUERIES["retry_candidate"], {"id": job_id}).fetchone()
        if row is None:
            return False
        unique_key = row[0]  # the key it takes again, if any
        holder = None if unique_key is None else _concurrency.unique_holder(conn, unique_key, now)
        if holder is not None:  # another active job holds the key
            return False
        params = {"id": job_id, "now": now, "unique_key": unique_key}
        return conn.execute(QUERIES["retry"], params).rowcount > 0

    return retry


def drop(conn: sqlite3.Connection) -> None:
    """The drop transaction's body (``Backend.drop``): delete every job, counter, worker,
    queue name and rate-limit state (the schema stays)."""
    for statement in statements(QUERIES["drop"]):
        conn.execute(statement)
    _freshness.drop(conn)
