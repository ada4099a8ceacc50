"""Concurrency primitives of SqliteBackend (PRODUCT §4): unique holds, gate slots, rate slots.

Each function but ``reserve_rate`` (the backend's method, which opens its own) runs inside the
caller's ``BEGIN IMMEDIATE`` transaction, so what it reads cannot change before the transaction
commits: a key found free stays free until the job holding it is inserted, and a running count
is exact. Schema: migrations/0002_concurrency.sql.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence

from duly._limits import gcra_slots
from duly._records import RateRequest
from duly.backends.sqlite._connection import QUERIES, SqliteConnection

__all__ = ["free_gate_slots", "reserve_rate", "reserve_rate_tx", "unique_holder"]


def unique_holder(conn: sqlite3.Connection, unique_key: str, at: float) -> str | None:
    """The id of the active job holding ``unique_key`` at time ``at``, or None if it is free.

    A hold past its ``unique_expires_at`` is taken over here: its job runs on without the key,
    so the caller may store a new holder.
    """
    row = conn.execute(QUERIES["unique_holder"], {"unique_key": unique_key}).fetchone()
    if row is None:
        return None
    holder, expires_at = row
    if expires_at is None or expires_at > at:
        return str(holder)
    conn.execute(QUERIES["drop_unique_hold"], {"id": holder})
    return None


def free_gate_slots(conn: sqlite3.Connection, gates: Mapping[str, int]) -> set[str]:
    """Unpark the best parked jobs of each gate that just lost a running (or queued) job.

    ``gates`` maps a gate to the limit its leaving jobs carried. Call it after the
    transaction's other changes, so the running counts are final. Returns the queues that got a
    job back (to wake their workers).
    """
    queues: set[str] = set()
    for gate, limit in gates.items():
        rows = conn.execute(QUERIES["unpark"], {"gate": gate, "gate_limit": limit}).fetchall()
        queues.update(row[0] for row in rows)
    return queues


async def reserve_rate(
    db: SqliteConnection, requests: Sequence[RateRequest], now: float
) -> list[float]:
    """``Backend.reserve_rate``: one GCRA slot per request, in order, in one transaction."""
    if not requests:
        return []
    return await db.transaction(lambda conn: reserve_rate_tx(conn, requests, now), "reserve_rate")


def reserve_rate_tx(
    conn: sqlite3.Connection, requests: Sequence[RateRequest], now: float
) -> list[float]:
    """Reserve the batch's rate slots inside the caller's write transaction (the GCRA itself
    is ``duly._limits.gcra_slots``); each request's slot start."""
    keys = json.dumps(sorted({request.key for request in requests}))
    state: dict[str, tuple[float, float]] = {
        key: (tat, not_before)
        for key, tat, not_before in conn.execute(QUERIES["rate_states"], {"keys": keys})
    }
    starts = gcra_slots(requests, now, state)
    conn.executemany(
        QUERIES["rate_store"],
        [
            {"key": key, "tat": tat, "not_before": not_before}
            for key, (tat, not_before) in state.items()
        ],
    )
    return starts
