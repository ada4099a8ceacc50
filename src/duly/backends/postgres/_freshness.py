"""Freshness (PRODUCT §7) in PostgreSQL: parameters and rows of ``freshness.sql``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from duly._freshness_state import FreshnessRequest, ScopeState

if TYPE_CHECKING:
    from duly.backends.postgres import PostgresBackend

__all__ = ["PostgresFreshness"]


def sync_params(
    requests: Sequence[FreshnessRequest], now: float, channel: str
) -> dict[str, object]:
    """The parameters of ``fresh_sync``: one array per request field."""
    return {
        "now": float(now),
        "channel": channel,
        "names": [r.name for r in requests],
        "scopes": [r.scope for r in requests],
        "reasons": [r.reason for r in requests],
        "active": [r.active for r in requests],
        "ms": [float(r.max_staleness) for r in requests],
        "fe": [float(r.full_every) for r in requests],
        "mb": [float(r.max_backoff) for r in requests],
        "off": [float(r.offset) for r in requests],
        "jitter": [float(r.jitter) for r in requests],
        "ids": [r.job.id for r in requests],
        "tasks": [r.job.task for r in requests],
        "queues": [r.job.queue for r in requests],
        "max_attempts": [r.job.max_attempts for r in requests],
        "keys": [r.job.key for r in requests],
        "priorities": [r.job.priority for r in requests],
        "full": [r.job.payload for r in requests],
        "delta": [r.delta_payload for r in requests],
    }


def sync_states(requests: Sequence[FreshnessRequest], rows: list[Any]) -> list[ScopeState]:
    """``fresh_sync``'s rows, one ScopeState per request."""
    return [
        ScopeState(
            name=r.name,
            scope=r.scope,
            max_staleness=r.max_staleness,
            last_success=row[0],
            last_attempt=row[1],
            failures=row[2],
            last_error=row[3],
            next_due=row[4],
            requested_by=row[5],
            job_id=row[6],
            enqueued=bool(row[7]),
        )
        for r, row in zip(requests, rows, strict=True)
    ]


class PostgresFreshness:
    """``duly.backends.freshness.FreshnessStore`` on PostgreSQL (``backend.freshness``): the
    statements of ``freshness.sql`` over the functions of ``migrations/0004_freshness.sql``."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend

    async def sync(self, requests: Sequence[FreshnessRequest], now: float) -> list[ScopeState]:
        if not requests:
            return []
        row = await self._rows("fresh_sync", sync_params(requests, now, self._backend.channel))
        return sync_states(requests, row)

    async def due(self, name: str, now: float, limit: int) -> list[str]:
        params: dict[str, object] = {"name": name, "now": float(now), "limit": max(int(limit), 0)}
        rows = await self._rows("fresh_due", params)
        return [scope for (scope,) in rows]

    async def stale_count(self, name: str, now: float) -> int:
        [(count,)] = await self._rows("fresh_stale_count", {"name": name, "now": float(now)})
        return int(count)

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
            cur = await conn.execute(self._backend._q[name], params)
            return await cur.fetchall()

        return await self._backend._transaction(run, atomic=False)
