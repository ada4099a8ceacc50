"""Freshness on Redis: ``freshness.lua`` applies requests (storing a scope's sync job and its
``queued`` event, ``lua/_freshness.lua``), ``freshness_scopes.lua`` reads the due index and the
scopes; their replies become records here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from duly._freshness_state import FreshnessRequest, ScopeState
from duly.backends.redis._scripts import Value

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisFreshness"]


def _text(value: Any) -> str | None:
    if value is None or value in (b"", ""):
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _float(value: Any) -> float | None:
    text = _text(value)
    return None if text is None else float(text)


def _state(name: str, scope: str, max_staleness: float, row: Sequence[Any]) -> ScopeState:
    """A ScopeState from ``ls, la, nf, le, nd, rb, j`` as the scripts return them."""
    ls, la, nf, le, nd, rb, j = row
    return ScopeState(
        name=name,
        scope=scope,
        max_staleness=max_staleness,
        last_success=_float(ls),
        last_attempt=_float(la),
        failures=int(_text(nf) or 0),
        last_error=_text(le),
        next_due=_float(nd),
        requested_by=_text(rb),
        job_id=_text(j),
    )


def sync_states(requests: Sequence[FreshnessRequest], reply: list[list[Any]]) -> list[ScopeState]:
    """freshness.lua's reply, one ScopeState per request."""
    states = []
    for request, row in zip(requests, reply, strict=True):
        state = _state(request.name, request.scope, request.max_staleness, row[:7])
        state.enqueued = int(row[7]) == 1
        state.follow_up = _text(row[8])
        states.append(state)
    return states


def scope_rows(name: str, reply: list[list[Any]]) -> list[ScopeState]:
    """freshness_scopes.lua's reply in ``scopes`` mode."""
    return [_state(name, _text(row[0]) or "", float(row[1]), row[2:]) for row in reply]


def scope_row(name: str, scope: str, row: Sequence[Any]) -> ScopeState | None:
    """One scope's ``ms, ls, la, nf, le, nd, rb, j`` fields (HMGET), or None if absent."""
    if row[0] is None:
        return None
    nf = row[3] if row[3] is not None else b"0"
    return _state(name, scope, float(row[0]), [row[1], row[2], nf, *row[4:]])


def due_scopes(reply: list[Any]) -> list[str]:
    """freshness_scopes.lua's reply in ``due`` mode: the scopes."""
    return [_text(scope) or "" for scope in reply]


def _sync_args(
    conn: RedisConnection, requests: Sequence[FreshnessRequest], now: float
) -> list[Value]:
    """freshness.lua's ARGV (see its header)."""
    k = conn.keys
    args: list[Value] = [k.prefix, k.wake, float(now)]
    for r in requests:
        job = r.job
        args += (
            r.name,
            r.scope,
            r.reason,
            "1" if r.active else "0",
            float(r.max_staleness),
            float(r.full_every),
            float(r.max_backoff),
            float(r.offset),
            float(r.jitter),
            job.id,
            job.task,
            job.queue,
            job.max_attempts,
            job.key or "",
            job.priority,
            job.payload,
            r.delta_payload,
        )
    return args


class RedisFreshness:
    """``duly.backends.freshness.FreshnessStore`` on Redis (``backend.freshness``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def _scopes(self, mode: str, name: str, now: float, stale_only: bool, limit: int) -> Any:
        """freshness_scopes.lua's reply: scope rows (``scopes``), due scopes (``due``) or the
        stale count (``count``)."""
        c = self._conn
        args: list[Value] = [
            c.keys.prefix,
            mode,
            name,
            float(now),
            "1" if stale_only else "0",
            limit,
        ]
        # KEYS[1] only routes the call to the namespace's slot (on a cluster).
        route = (c.keys.fresh_index(name),)
        with c.guard("freshness"):
            return await c.call(c.scripts.freshness_scopes, route, args)

    async def sync(self, requests: Sequence[FreshnessRequest], now: float) -> list[ScopeState]:
        """Apply the requests in one script call."""
        if not requests:
            return []
        c = self._conn
        keys = (c.keys.all, c.keys.queues)
        with c.guard("freshness"):
            reply = await c.call(c.scripts.freshness, keys, _sync_args(c, requests, now))
        return sync_states(requests, reply)

    async def due(self, name: str, now: float, limit: int) -> list[str]:
        """The due scopes, from the due index."""
        return due_scopes(await self._scopes("due", name, now, False, max(int(limit), 0)))

    async def scope(self, name: str, scope: str) -> ScopeState | None:
        """One scope's hash (HMGET), or None."""
        c = self._conn
        fields = ("ms", "ls", "la", "nf", "le", "nd", "rb", "j")
        with c.guard("freshness"):
            row = await c.client.hmget(c.keys.fresh(name, scope), fields)
        return scope_row(name, scope, row)

    async def forget(self, name: str, scope: str) -> bool:
        """Delete the scope's hash and its index entries in one script call."""
        c = self._conn
        keys = (c.keys.fresh(name, scope), c.keys.fresh_due(name), c.keys.fresh_index(name))
        with c.guard("freshness"):
            return int(await c.call(c.scripts.freshness_forget, keys, [scope])) == 1

    async def stale_count(self, name: str, now: float) -> int:
        """The stale scopes, counted by the script."""
        return int(cast(int, await self._scopes("count", name, now, True, 0)))

    async def scopes(self, name: str, now: float, stale_only: bool, limit: int) -> list[ScopeState]:
        """The scopes, earliest stale first."""
        reply = await self._scopes("scopes", name, now, stale_only, max(int(limit), 0))
        return scope_rows(name, reply)
