"""The freshness capability (PRODUCT §7): one row per (freshness, scope), kept by the backend.

The rules themselves are ``duly._freshness_state`` (pure Python); a backend applies them
atomically per scope and keeps each scope's row in step with its sync job's outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from duly._freshness_state import FreshnessRequest, ScopeState
from duly.backends.capability import Capability

__all__ = ["FRESHNESS", "FreshnessStore"]


class FreshnessStore(Protocol):
    """Freshness scopes: their state, their one active sync job, their due index."""

    async def sync(self, requests: Sequence[FreshnessRequest], now: float) -> list[ScopeState]:
        """Apply each request to its scope's row in one atomic step per request, all in one
        round trip: create the row if missing, store the request's policy, decide by
        ``_freshness_state.decide`` and, if a sync is due, store ``job`` (its payload the
        ``delta_payload`` for a delta; its priority ``sync_priority``; no unique hold, no gate,
        whatever ``job`` carries: the row is the scope's one-at-a-time guard) as the scope's one
        active sync. A baseline request whose ``next_due`` has come moves it to
        ``next_baseline(now)``.
        Returns each scope's row afterwards, ``enqueued`` set when this call stored the job.

        When a scope's sync job ends, the backend's finish / recover / cancel step updates the
        row in the same step: succeeded -> last_success = the run's start, failures 0, error
        cleared, next_due = next_baseline(now); a failed run (retry, failed, quarantined) ->
        failures + 1, last_error = ``"<type>: <message>"``; failed for good -> next_due = now +
        ``backoff(failures, max_backoff, jitter)``; cancelled -> last_error ``"cancelled"``.
        Every outcome records last_attempt = the run's start; an ending one frees the scope
        (job_id None).

        A touch while the scope's sync job is running (``decide``'s ``follow``) records one
        follow-up on the row (``follow_up``: the request's job id, delta payload and priority;
        ``enqueued`` set); further touches find it and coalesce. The step that records that
        sync's success stores the follow-up as the scope's sync (requested_by ``touch``, its
        ``queued`` event emitted); a failure for good or a cancel drops it.
        """
        ...

    async def due(self, name: str, now: float, limit: int) -> list[str]:
        """Up to ``limit`` scopes of freshness ``name`` whose ``next_due <= now``, earliest
        first. Cost depends on the number due, never on the number of scopes."""
        ...

    async def scopes(self, name: str, now: float, stale_only: bool, limit: int) -> list[ScopeState]:
        """The scopes of freshness ``name``, those that became stale earliest first (never
        synced first); with ``stale_only``, only those with score >= 1 at ``now``."""
        ...

    async def scope(self, name: str, scope: str) -> ScopeState | None:
        """The row of one scope of freshness ``name``, or None if it was never seen (one
        lookup; changes nothing)."""
        ...

    async def forget(self, name: str, scope: str) -> bool:
        """Remove the scope of freshness ``name``: its row, its due entry (no more baselines)
        and its place among the scopes, in one atomic step; True if it existed. A sync job of
        the scope still active is left alone: when it ends, no row is there to update."""
        ...

    async def stale_count(self, name: str, now: float) -> int:
        """How many scopes of ``name`` are stale at ``now`` (score >= 1, or never synced):
        the SLA breaches a metrics scrape reports. Never reads the other scopes."""
        ...


#: ``backend.freshness``.
FRESHNESS: Final = Capability[FreshnessStore]("freshness", "app.freshness(...)")
