"""Freshness (PRODUCT §7) in SQLite: the request transaction (each request decided by
``duly._freshness_state.apply_request``, the rule PostgreSQL applies too, on the row read under
the write lock), and the update of a scope when its sync job ends, run inside the finish /
recover / cancel transactions (``ended``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from duly._freshness_state import (
    NEVER,
    FreshnessRequest,
    ScopeState,
    apply_request,
    backoff,
    next_baseline,
)
from duly._records import NewJob
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._enqueue import enqueue_tx
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["SqliteFreshness", "ended"]

_ENDED: Final = frozenset({"succeeded", "failed", "retrying", "cancelled"})


def sync_tx(
    requests: Sequence[FreshnessRequest], now: float
) -> Callable[[sqlite3.Connection], list[ScopeState]]:
    """The transaction's body: apply each request to its scope (``Backend.freshness_sync``)."""

    def sync(conn: sqlite3.Connection) -> list[ScopeState]:
        return [_apply(conn, request, now) for request in requests]

    return sync


def _apply(conn: sqlite3.Connection, r: FreshnessRequest, now: float) -> ScopeState:
    """One request, by the rule every backend applies (``apply_request``), on the scope's row
    read under the transaction's write lock."""
    key = {"name": r.name, "scope": r.scope}
    row = conn.execute(QUERIES["fresh_read"], key).fetchone()
    state, jitter = None, None
    if row is not None:
        ls, la, nf, le, nd, rb, job_id, jitter, running, follow_up = row
        state = ScopeState(r.name, r.scope, r.max_staleness, ls, la, nf, le, nd, rb, job_id)
        state.running, state.follow_up = bool(running), follow_up
    after, jitter, job, follow = apply_request(r, now, state, jitter)
    if job is not None:
        enqueue_tx([job])(conn)
    ls = after.last_success
    params: dict[str, Any] = {
        **key,
        "max_staleness": r.max_staleness,
        "full_every": r.full_every,
        "max_backoff": r.max_backoff,
        "offset": r.offset,
        "jitter": jitter,
        "next_due": after.next_due,
        "requested_by": after.requested_by,
        "job_id": after.job_id,
        "stale_at": NEVER if ls is None else ls + r.max_staleness,
        "follow_up": None if follow is None else follow.id,
        "follow_up_payload": None if follow is None else follow.payload,
        "follow_up_priority": None if follow is None else follow.priority,
    }
    conn.execute(QUERIES["fresh_write"], params)
    return after


def _last_error(errors: str | None) -> str | None:
    try:
        history = json.loads(errors or "[]")
        last = history[-1]
        return f"{last.get('type', 'Error')}: {last.get('message', '')}"
    except (ValueError, LookupError, TypeError, AttributeError):
        return None


def ended(conn: sqlite3.Connection, job_ids: Iterable[str], now: float) -> None:
    """In the caller's transaction, after jobs changed state: each scope whose sync is among
    ``job_ids`` and reached an outcome (succeeded, failed, retrying, cancelled) is updated."""
    ids = json.dumps(list(job_ids))
    rows = conn.execute(QUERIES["fresh_policy"], {"ids": ids}).fetchall()
    follow_ups: list[NewJob] = []
    for row in rows:
        job_id, failures, max_backoff, jitter, offset, full_every, started, status, errors = row[:9]
        follow_up, payload, priority, task, queue, max_attempts, key = row[9:]
        if status not in _ENDED:
            continue
        if status == "succeeded" and follow_up is not None:
            # The delta sync a touch queued while this one ran: the scope's next sync.
            follow_ups.append(
                NewJob(follow_up, task, queue, payload, max_attempts, key, priority, now, now)
            )
        conn.execute(
            QUERIES["fresh_ended"],
            {
                "id": job_id,
                "status": status,
                "now": now,
                "started": started,
                "error": _last_error(errors),
                "next_baseline": next_baseline(now, offset, full_every),
                "backoff": backoff(failures + 1, max_backoff, jitter),
            },
        )
    if follow_ups:
        enqueue_tx(follow_ups)(conn)
        for job in follow_ups:
            conn.execute(QUERIES["fresh_follow"], {"follow_up": job.id})


def due(name: str, now: float, limit: int) -> Callable[[sqlite3.Connection], list[str]]:
    """Read: up to ``limit`` scopes of freshness ``name`` due at ``now``."""
    params = {"name": name, "now": now, "limit": limit}

    def read(conn: sqlite3.Connection) -> list[str]:
        return [scope for (scope,) in conn.execute(QUERIES["fresh_due"], params)]

    return read


def scopes(
    name: str, now: float, stale_only: bool, limit: int
) -> Callable[[sqlite3.Connection], list[ScopeState]]:
    """Read: the scopes of ``name``, earliest stale first (only stale ones with stale_only)."""
    top = now if stale_only else 1e300
    params = {"name": name, "top": top, "limit": limit}

    def read(conn: sqlite3.Connection) -> list[ScopeState]:
        return [ScopeState.from_row(row) for row in conn.execute(QUERIES["fresh_scopes"], params)]

    return read


def scope_row(name: str, scope: str) -> Callable[[sqlite3.Connection], ScopeState | None]:
    """Read: one scope's row, or None."""

    def read(conn: sqlite3.Connection) -> ScopeState | None:
        row = conn.execute(QUERIES["fresh_scope"], {"name": name, "scope": scope}).fetchone()
        return None if row is None else ScopeState.from_row(row)

    return read


def stale_count(name: str, now: float) -> Callable[[sqlite3.Connection], int]:
    """Read: how many scopes of ``name`` are stale at ``now``."""
    params = {"name": name, "now": now}

    def read(conn: sqlite3.Connection) -> int:
        return int(conn.execute(QUERIES["fresh_stale_count"], params).fetchone()[0])

    return read


def forget(name: str, scope: str) -> Callable[[sqlite3.Connection], bool]:
    """The forget transaction's body: delete the scope's row; whether there was one."""
    params = {"name": name, "scope": scope}

    def delete(conn: sqlite3.Connection) -> bool:
        return conn.execute(QUERIES["fresh_forget"], params).rowcount > 0

    return delete


def drop(conn: sqlite3.Connection) -> None:
    """Delete every scope (with the backend's drop)."""
    conn.execute(QUERIES["fresh_drop"])


class SqliteFreshness:
    """``duly.backends.freshness.FreshnessStore`` on SQLite (``backend.freshness``)."""

    def __init__(self, db: SqliteConnection, signal: WorkSignal) -> None:
        self._db = db
        self._signal = signal

    async def sync(self, requests: Sequence[FreshnessRequest], now: float) -> list[ScopeState]:
        """Apply freshness requests to their scopes in one transaction (see the protocol)."""
        if not requests:
            return []
        states = await self._db.transaction(sync_tx(requests, now), "freshness")
        if any(state.enqueued for state in states):
            self._signal.note_local_change()
        return states

    async def due(self, name: str, now: float, limit: int) -> list[str]:
        """Up to ``limit`` scopes of ``name`` due at ``now``, earliest first."""
        return await self._db.run(due(name, now, max(int(limit), 0)), "freshness")

    async def scope(self, name: str, scope: str) -> ScopeState | None:
        """One scope's row, or None."""
        return await self._db.run(scope_row(name, scope), "freshness")

    async def stale_count(self, name: str, now: float) -> int:
        """How many scopes of ``name`` are stale at ``now``."""
        return await self._db.run(stale_count(name, now), "freshness")

    async def forget(self, name: str, scope: str) -> bool:
        """Delete one scope's row (its due entry with it); whether it existed."""
        return await self._db.transaction(forget(name, scope), "freshness")

    async def scopes(self, name: str, now: float, stale_only: bool, limit: int) -> list[ScopeState]:
        """The scopes of ``name``, earliest stale first."""
        read = scopes(name, now, stale_only, max(int(limit), 0))
        return await self._db.run(read, "freshness")
