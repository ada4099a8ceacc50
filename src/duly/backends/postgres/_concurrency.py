"""Gates and rate slots on PostgreSQL (PRODUCT §4): the slots a gated job gives back when it
leaves ``running``, and ``reserve_rate`` (the GCRA maths in Python, ``duly._limits``, on rows
locked in key order). A claim takes a gate's slot in its one statement (``_claim``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from duly._limits import gcra_slots
from duly._records import RateRequest
from duly.backends.postgres._connection import Connection

__all__ = ["free_gates", "reserve_rate"]


async def free_gates(
    db: Connection,
    conn: psycopg.AsyncConnection[Any],
    released: Sequence[str],
    passed_on: Sequence[str] = (),
) -> None:
    """In the caller's transaction, once gated jobs left ``running`` (``released``: a gate
    per job) or a woken job was cancelled before it ran (``passed_on``): give the slots
    back, then wake one parked job per entry in a statement of its own (fresh snapshot)."""
    if released:
        await conn.execute(db.q["gate_release"], {"gates": list(released)})
    gates = [*released, *passed_on]
    await conn.execute(db.q["gate_unpark"], {"gates": gates, "channel": db.channel})


async def reserve_rate(db: Connection, requests: Sequence[RateRequest], now: float) -> list[float]:
    """``Backend.reserve_rate``: lock the keys' rows, compute the slots, store the new state."""
    if not requests:
        return []

    async def run(conn: psycopg.AsyncConnection[Any]) -> list[float]:
        keys = [r.key for r in requests]
        cur = await conn.execute(db.q["rate_lock"], {"keys": keys, "now": float(now)})
        state = {key: (tat, not_before) for key, tat, not_before in await cur.fetchall()}
        starts = gcra_slots(requests, float(now), state)
        params = {
            "keys": list(state),
            "tats": [tat for tat, _ in state.values()],
            "not_before": [not_before for _, not_before in state.values()],
        }
        await conn.execute(db.q["rate_store"], params)
        return starts

    return await db.transaction(run)
