"""Freshness (PRODUCT §7) on PostgreSQL: a sync is one pipelined transaction that locks its
scopes' rows (``fresh_lock``), applies each request in Python
(``duly._freshness_state.apply_request``, the rule SQLite applies too), stores the sync jobs
due (the enqueue plan) and the rows (``fresh_store``). A sync job's end updates its scope in
the statement that ends it (``fresh_after`` in ``finish``, ``recover``, ``fresh_cancelled``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from duly._freshness_state import (
    NEVER,
    FreshnessRequest,
    ScopeState,
    apply_request,
    next_baseline,
)
from duly._records import NewJob
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._enqueue import enqueue_plan, run_plan_async

__all__ = ["PostgresFreshness"]


def _policy(requests: Sequence[FreshnessRequest]) -> dict[str, list[Any]]:
    """The policy columns of ``fresh_lock`` / ``fresh_store``: one entry per request."""
    return {
        "names": [r.name for r in requests],
        "scopes": [r.scope for r in requests],
        "ms": [float(r.max_staleness) for r in requests],
        "fe": [float(r.full_every) for r in requests],
        "mb": [float(r.max_backoff) for r in requests],
        "off": [float(r.offset) for r in requests],
    }


async def _sync(
    db: Connection,
    conn: psycopg.AsyncConnection[Any],
    requests: Sequence[FreshnessRequest],
    now: float,
) -> list[ScopeState]:
    """The sync transaction's body (see the module docstring)."""
    first: dict[tuple[str, str], FreshnessRequest] = {}
    for r in requests:
        first.setdefault((r.name, r.scope), r)
    asked = list(first.values())
    lock = {
        **_policy(asked),
        "jitter": [float(r.jitter) for r in asked],
        "next_due": [next_baseline(now, r.offset, r.full_every) for r in asked],
    }
    cur = await conn.execute(db.q["fresh_lock"], lock)
    rows: dict[tuple[str, str], tuple[ScopeState, float]] = {}
    for row in await cur.fetchall():
        name, scope, ls, la, failures, le, nd, rb, job_id, jitter, running, follow_up = row
        state = ScopeState(name, scope, 0.0, ls, la, failures, le, nd, rb, job_id)
        state.running, state.follow_up = bool(running), follow_up
        rows[name, scope] = (state, jitter)
    # In request order: a later request on a scope sees what an earlier one did to it.
    states: list[ScopeState] = []
    last: dict[tuple[str, str], FreshnessRequest] = {}
    jobs: list[NewJob] = []
    follow_ups: dict[tuple[str, str], NewJob] = {}
    for r in requests:
        key = (r.name, r.scope)
        state, jitter = rows[key]
        after, jitter, job, follow = apply_request(r, now, state, jitter)
        rows[key], last[key] = (after, jitter), r
        states.append(after)
        if job is not None:
            jobs.append(job)
        if follow is not None:
            follow_ups[key] = follow
    if jobs:
        await run_plan_async(conn, db.q, enqueue_plan(jobs, db.channel, fresh=False))
    stored = [rows[key][0] for key in last]
    store = {
        **_policy(list(last.values())),
        "jitter": [rows[key][1] for key in last],
        "next_due": [s.next_due for s in stored],
        "requested_by": [s.requested_by for s in stored],
        "job_ids": [s.job_id for s in stored],
        "stale_at": [
            NEVER if s.last_success is None else s.last_success + s.max_staleness for s in stored
        ],
        "fu": [None if (f := follow_ups.get(key)) is None else f.id for key in last],
        "fu_payload": [None if (f := follow_ups.get(key)) is None else f.payload for key in last],
        "fu_priority": [None if (f := follow_ups.get(key)) is None else f.priority for key in last],
    }
    await conn.execute(db.q["fresh_store"], store)
    return states


class PostgresFreshness:
    """``duly.backends.freshness.FreshnessStore`` on PostgreSQL (``backend.freshness``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def sync(self, requests: Sequence[FreshnessRequest], now: float) -> list[ScopeState]:
        if not requests:
            return []

        async def run(conn: psycopg.AsyncConnection[Any]) -> list[ScopeState]:
            return await _sync(self._db, conn, requests, now)

        # Pipelined (issue 31.6b): BEGIN + fresh_lock are one round trip, fresh_store + COMMIT
        # another (plus one for the enqueue when a sync is due): 2-3 instead of 4-5.
        return await self._db.transaction(run, pipeline=True)

    async def due(self, name: str, now: float, limit: int) -> list[str]:
        params: dict[str, object] = {"name": name, "now": float(now), "limit": max(int(limit), 0)}
        rows = await self._rows("fresh_due", params)
        return [scope for (scope,) in rows]

    async def stale_count(self, name: str, now: float) -> int:
        [(count,)] = await self._rows("fresh_stale_count", {"name": name, "now": float(now)})
        return int(count)

    async def forget(self, name: str, scope: str) -> bool:
        return bool(await self._rows("fresh_forget", {"name": name, "scope": scope}))

    async def scope(self, name: str, scope: str) -> ScopeState | None:
        rows = await self._rows("fresh_scope", {"name": name, "scope": scope})
        return ScopeState.from_row(rows[0]) if rows else None

    async def scopes(self, name: str, now: float, stale_only: bool, limit: int) -> list[ScopeState]:
        params: dict[str, object] = {
            "name": name,
            "top": float(now) if stale_only else 1e300,
            "limit": max(int(limit), 0),
        }
        rows = await self._rows("fresh_scopes", params)
        return [ScopeState.from_row(row) for row in rows]

    async def _rows(self, name: str, params: dict[str, object]) -> list[Any]:
        """Every row of one statement, as tuples (autocommit; run again after a deadlock)."""

        async def run(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(self._db.q[name], params)
            return await cur.fetchall()

        return await self._db.transaction(run, atomic=False)
