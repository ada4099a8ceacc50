"""Freshness replies of the Redis backend (freshness.lua, freshness_scopes.lua) as records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duly._freshness_state import FreshnessRequest, ScopeState

__all__ = ["due_scopes", "scope_row", "scope_rows", "sync_states"]


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
