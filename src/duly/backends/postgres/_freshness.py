"""Freshness (PRODUCT §7) in PostgreSQL: parameters and rows of ``freshness.sql``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duly._freshness_state import FreshnessRequest, ScopeState

__all__ = ["sync_params", "sync_states"]


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
