"""The freshness records that cross the backend boundary (PRODUCT §7), and the rules they obey.

A *scope* (``name`` of a freshness, ``scope`` string) has one row of state in the backend: when
its last successful sync started, its last attempt, consecutive failures and last error, when
it is next due (baseline or backoff), who asked for the current sync, and the id of the one
sync job that may be active for it. ``Backend.freshness_sync`` applies a ``FreshnessRequest``
to that row in one atomic step (deciding by ``decide`` below, and enqueueing the sync job when
it decides to); the finish / recover / cancel paths update the row when its sync job ends, in
the same step as the job's own change (``ended_update`` states what they do).

``decide`` is the rule every backend implements (Python for SQLite and PostgreSQL, whose
transactions read the scope's row under a lock and apply ``apply_request``; Lua for Redis); the
conformance suite checks they agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, NamedTuple

from duly._records import NewJob

__all__ = [
    "BACKOFF_BASE",
    "NEVER",
    "Applied",
    "FreshnessRequest",
    "Reason",
    "ScopeState",
    "apply_request",
    "backoff",
    "decide",
    "next_baseline",
    "sync_priority",
]

#: Who asked for a sync: a ``check()``, ``request()``, ``touch()`` or the baseline sweep.
Reason = Literal["check", "request", "touch", "baseline"]

#: The first backoff after a failure, in seconds; it doubles per consecutive failure.
BACKOFF_BASE: Final = 1.0
#: ``stale_at`` of a scope never synced (sorts before every real time).
NEVER: Final = -1e18
#: The most a sync's priority rises above its task's (at score 10, never synced, or request).
PRIORITY_BOOST: Final = 100


@dataclass(slots=True)
class FreshnessRequest:
    """One call on a scope: its policy (seconds) and the sync job to store if one is due.

    ``job`` carries the full sync's payload and the id the new job gets; ``delta_payload``
    replaces it when the decision is a delta (``full=False``) sync. ``jitter`` in [0, 1) is
    kept by the scope when a sync is enqueued and scales its next failure backoff.
    """

    name: str
    scope: str
    reason: Reason
    active: bool
    max_staleness: float
    full_every: float
    max_backoff: float
    offset: float
    jitter: float
    job: NewJob
    delta_payload: bytes


@dataclass(slots=True)
class ScopeState:
    """A scope's row after a call (``enqueued``: this call stored ``job_id``, or queued the
    ``follow_up``)."""

    name: str
    scope: str
    max_staleness: float
    last_success: float | None = None
    last_attempt: float | None = None
    failures: int = 0
    last_error: str | None = None
    next_due: float | None = None
    requested_by: str | None = None
    job_id: str | None = None
    enqueued: bool = False
    #: The active sync job (``job_id``) is running now (read with the row, under its lock).
    running: bool = False
    #: The id of the delta sync a ``touch`` queued while the sync ran: stored when that sync
    #: succeeds (PRODUCT §17), dropped if it fails or is cancelled.
    follow_up: str | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ScopeState:
        """A scope as the SQL backends read it: ``name, scope, max_staleness, last_success,
        last_attempt, failures, last_error, next_due, requested_by, job_id``."""
        name, scope, max_staleness, ls, la, failures, le, nd, rb, job_id = row
        return cls(name, scope, max_staleness, ls, la, failures, le, nd, rb, job_id)

    def score(self, now: float) -> float:
        """Staleness over max_staleness (inf when never synced)."""
        if self.last_success is None:
            return math.inf
        return max(now - self.last_success, 0.0) / self.max_staleness


def decide(
    reason: Reason,
    active: bool,
    now: float,
    last_success: float | None,
    max_staleness: float,
    failures: int,
    next_due: float | None,
    busy: bool,
    *,
    running: bool = False,
    follow_up: bool = False,
) -> Literal["full", "delta", "follow", ""]:
    """The sync a call enqueues: ``full``, ``delta``, ``follow`` or none (``""``).

    An active sync job (``busy``) absorbs every call but one: a touch while it runs (your
    change may have come after it read the upstream) queues one ``follow`` delta sync, stored
    when it succeeds; touches while a follow-up is queued coalesce into it. A check or touch
    during a failure backoff (``failures > 0`` and ``next_due > now``) waits for it; a request
    never does. A
    check enqueues a full sync at score >= 1 (or never synced), a delta at 0.5 <= score < 1
    when ``active``; a request a full sync; a touch a delta (full when never synced); the
    baseline sweep a full sync once ``next_due`` has come.
    """
    if busy:
        return "follow" if reason == "touch" and running and not follow_up else ""
    backing_off = failures > 0 and next_due is not None and next_due > now
    if reason == "request":
        return "full"
    if reason == "baseline":
        return "full" if next_due is None or next_due <= now else ""
    if backing_off:
        return ""
    if last_success is None:
        return "full"
    if reason == "touch":
        return "delta"
    score = max(now - last_success, 0.0) / max_staleness
    if score >= 1:
        return "full"
    if score >= 0.5 and active:
        return "delta"
    return ""


def sync_priority(
    base: int, reason: Reason, now: float, last_success: float | None, max_staleness: float
) -> int:
    """The priority of a sync: its task's, raised by ``10 * score`` (at most PRIORITY_BOOST;
    the most for a scope never synced and for a request), within -1000..1000."""
    if reason == "request" or last_success is None:
        boost = PRIORITY_BOOST
    else:
        score = max(now - last_success, 0.0) / max_staleness
        boost = min(PRIORITY_BOOST, math.floor(10 * score))
    return max(-1000, min(1000, base + boost))


def next_baseline(now: float, offset: float, full_every: float) -> float:
    """The first baseline time after ``now``: ``offset`` plus a multiple of ``full_every``."""
    return offset + (math.floor((now - offset) / full_every) + 1) * full_every


def backoff(failures: int, max_backoff: float, jitter: float) -> float:
    """Seconds to wait after ``failures`` consecutive failures: ``BACKOFF_BASE * 2**(n-1)``,
    capped at ``max_backoff``, times ``0.5 + 0.5 * jitter`` (never over the cap)."""
    raw = min(max_backoff, BACKOFF_BASE * 2.0 ** min(failures - 1, 60))
    return raw * (0.5 + 0.5 * jitter)


class Applied(NamedTuple):
    """What ``apply_request`` decided: the row afterwards, the jitter it keeps, the sync job to
    store now, and the follow-up to record on the row (stored when the running sync succeeds:
    its id, delta payload and priority)."""

    state: ScopeState
    jitter: float
    job: NewJob | None
    follow_up: NewJob | None


def apply_request(
    r: FreshnessRequest, now: float, row: ScopeState | None, jitter: float | None
) -> Applied:
    """One request on a scope, as every backend applies it to the scope's row read under its
    lock (``row`` None: no row yet; ``jitter`` the row's): the row afterwards (``enqueued``
    when this request stores a sync or queues a follow-up), the jitter it keeps, and the sync
    job to store (its priority raised by ``sync_priority``, its payload the delta one for a
    delta sync, without unique hold or gate) or the follow-up to record."""
    if row is None:
        row = ScopeState(r.name, r.scope, r.max_staleness)
    ls, failures = row.last_success, row.failures
    nd = next_baseline(now, r.offset, r.full_every) if row.next_due is None else row.next_due
    busy = row.job_id is not None
    want = decide(
        r.reason,
        r.active,
        now,
        ls,
        r.max_staleness,
        failures,
        nd,
        busy,
        running=busy and row.running,
        follow_up=row.follow_up is not None,
    )
    if r.reason == "baseline" and nd <= now:
        nd = next_baseline(now, r.offset, r.full_every)
    after = ScopeState(
        name=r.name,
        scope=r.scope,
        max_staleness=r.max_staleness,
        last_success=ls,
        last_attempt=row.last_attempt,
        failures=failures,
        last_error=row.last_error,
        next_due=nd,
        requested_by=row.requested_by,
        job_id=row.job_id,
        running=row.running,
        follow_up=row.follow_up,
    )
    kept = r.jitter if jitter is None else jitter
    if not want:
        return Applied(after, kept, None, None)
    # Stored as the scope's one active sync: the scope's row is its one-at-a-time guard, so
    # no unique hold or gate may leave it out (the row would name a job never stored) or park
    # it (issue 31.6c; the app refuses unique/mutex/concurrency settings on a freshness).
    job = replace(
        r.job,
        priority=sync_priority(r.job.priority, r.reason, now, ls, r.max_staleness),
        payload=r.job.payload if want == "full" else r.delta_payload,
        unique_key=None,
        unique_expires_at=None,
        gate=None,
        gate_limit=0,
    )
    if want == "follow":
        after.follow_up, after.enqueued = job.id, True
        return Applied(after, kept, None, job)
    after.job_id, after.requested_by, after.enqueued = job.id, r.reason, True
    return Applied(after, r.jitter, job, None)
