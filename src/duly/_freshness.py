"""Freshness (PRODUCT §7): keep a mirror of an upstream fresh against a staleness SLA.

``app.freshness(name, sync=fn, max_staleness=..., full_every=..., max_backoff=...)`` returns a
``Mirror``. Its sync function ``fn(scope, full)`` is an ordinary duly task (retries,
``rate_limit``, ``timeout``, ``queue`` apply), run by workers; nothing here calls the upstream.

Per scope the backend keeps one row (``duly._freshness_state``): the start of the last
successful sync (staleness counts from it), the last attempt, consecutive failures and last
error, when it is next due, who asked for the current sync, and the one sync job that may be
active for it. ``check`` / ``request`` / ``touch`` are one backend round trip each: the backend
reads the row, decides, and enqueues the sync only if none is active, so 100 concurrent checks
make one job (the other 99 get it back, ``f.job.deduplicated``). When the sync job ends
(succeeded, failed, recovered after its worker died, cancelled) the backend updates the row in
the same atomic step.

Rules (a check): score = staleness / max_staleness; score >= 1 or never synced -> a full sync;
0.5 <= score < 1 with ``active=True`` -> a delta sync (``full=False``); else nothing. Priority
rises with the score. A failing sync sets the next attempt by exponential backoff with jitter
(1 s doubling, capped at ``max_backoff``); checks do not enqueue before it. Every known scope
gets a baseline full sync every ``full_every``, at an offset derived from its name (so scopes
spread over the interval); workers sweep the due index (``sweep``), which costs nothing per
scope that is not due. ``forget(scope)`` removes a scope and its baselines.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from duly._errors import ConfigurationError
from duly._freshness_state import FreshnessRequest, Reason, ScopeState
from duly._job import Job
from duly._limits import refuse_nul
from duly._serialization import canonical
from duly._task import Task, seconds
from duly.backends.freshness import FRESHNESS

if TYPE_CHECKING:
    from duly._ports import AppPort
    from duly.backends.base import Backend

__all__ = [
    "Freshness",
    "FreshnessGauges",
    "FreshnessState",
    "Mirror",
    "fingerprint",
    "forget_scope",
    "scopes_of",
    "sweep",
]

FreshnessState = Literal["current", "stale", "never"]
#: Scopes handled per backend call of a sweep.
SWEEP_BATCH: Final = 500
_MAX_SCOPE: Final = 400
#: ``max_staleness`` as a timedelta, or a function of the scope returning one (tiers).
Staleness = timedelta | float | Callable[[str], timedelta | float]


def fingerprint(obj: Any) -> str:
    """Hex SHA-256 of ``obj`` as canonical JSON (sorted keys): equal data, equal fingerprint,
    in every process. Store it beside a mirrored row and write the row only when it changed."""
    return hashlib.sha256(canonical(obj)).hexdigest()


def _check_scope(scope: str) -> None:
    """Refuse what cannot be a scope (not a str, empty, too long, a separator or NUL in it)."""
    if not isinstance(scope, str) or not scope or len(scope) > _MAX_SCOPE:
        raise ValueError(f"a scope is a non-empty str of at most {_MAX_SCOPE} chars")
    if "\x1f" in scope:
        raise ValueError("a scope may not contain the unit separator \\x1f")
    refuse_nul(scope, "a freshness scope")


def _utc(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


@dataclass(frozen=True, slots=True)
class Freshness:
    """How fresh one scope is (times aware UTC).

    ``state``: ``"never"`` (never synced), ``"stale"`` (score >= 1) or ``"current"``; ``score``
    staleness / max_staleness (inf when never synced); ``last_synced_at`` the start of the last
    successful sync; ``syncing``: a sync job of the scope is scheduled, queued or running;
    ``job``: that job (from ``check``: the one this call enqueued, or found with
    ``job.deduplicated``; the follow-up a touch queued while the sync runs, once there is
    one), or None. ``failures``, ``last_error``, ``next_due`` (the next
    baseline, or the end of a failure backoff) and ``requested_by`` (check, request, touch or
    baseline) come from the scope's row.
    """

    scope: str
    state: FreshnessState
    score: float
    last_synced_at: datetime | None
    syncing: bool
    job: Job | None
    failures: int = 0
    last_error: str | None = None
    last_attempt_at: datetime | None = None
    next_due: datetime | None = None
    requested_by: str | None = None

    @classmethod
    def from_state(cls, app: AppPort, row: ScopeState, now: float) -> Freshness:
        """The Freshness of a scope's row at ``now``."""
        score = row.score(now)
        state: FreshnessState = (
            "never" if row.last_success is None else "stale" if score >= 1 else "current"
        )
        # A follow-up a touch queued while the sync ran is the sync the scope waits for (its
        # job is stored when the running one succeeds: ``job.wait()`` waits for it).
        job_id = row.follow_up or row.job_id
        job = None if job_id is None else Job(app, job_id, not row.enqueued)
        return cls(
            scope=row.scope,
            state=state,
            score=score,
            last_synced_at=_utc(row.last_success),
            syncing=row.job_id is not None,
            job=job,
            failures=row.failures,
            last_error=row.last_error,
            last_attempt_at=_utc(row.last_attempt),
            next_due=_utc(row.next_due),
            requested_by=row.requested_by,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (times ISO 8601, an infinite score as None, the job as its id)."""
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, Job):
                value = value.id
            elif isinstance(value, float) and math.isinf(value):
                value = None
            data[name] = value
        return data


@dataclass(frozen=True, slots=True)
class FreshnessGauges:
    """What metrics report of one freshness (bounded: per freshness, never per scope).

    ``breaches``: scopes whose score is >= 1 (stale, or never synced); ``staleness`` (seconds
    since its last successful sync) and ``score`` of the scope that became stale earliest
    (inf if it never synced; 0 with no scope).
    """

    name: str
    breaches: int
    staleness: float
    score: float


def _positive(value: timedelta | float, what: str) -> float:
    result = seconds(value, what)
    if not result > 0:
        raise ConfigurationError(f"{what} must be > 0, got {value!r}")
    return result


class Mirror:
    """A registered freshness (``app.freshness(...)``): its scopes, checks and sync task."""

    def __init__(
        self,
        app: AppPort,
        name: str,
        sync: Callable[..., Any],
        *,
        max_staleness: Staleness,
        full_every: timedelta | float,
        max_backoff: timedelta | float,
        task: Task[Any, Any],
    ) -> None:
        self.app = app
        self.name = name
        self.sync = sync
        #: The sync task (``fn(scope, full)``), an ordinary duly task.
        self.task = task
        self._max_staleness = max_staleness
        if not callable(max_staleness):
            _positive(max_staleness, "max_staleness")
        self.full_every = _positive(full_every, "full_every")
        self.max_backoff = _positive(max_backoff, "max_backoff")

    def __repr__(self) -> str:
        return f"<Mirror {self.name} task={self.task.name}>"

    def max_staleness(self, scope: str) -> float:
        """The staleness SLA of ``scope`` in seconds (``max_staleness`` may be per scope)."""
        value = self._max_staleness
        if callable(value):
            value = value(scope)
        return _positive(value, f"max_staleness({scope!r})")

    def offset(self, scope: str) -> float:
        """Where in each ``full_every`` interval the scope's baseline falls (from its name)."""
        digest = hashlib.sha256(f"{self.name}\x1f{scope}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 * self.full_every

    def _request(self, scope: str, reason: Reason, active: bool, now: float) -> FreshnessRequest:
        _check_scope(scope)
        task, limit = self.task, self.app.max_payload_bytes
        full = task.spec.encode_call((scope, True), {}, limit)
        job = task.config.new_job(
            full, (scope, True), {}, now, scheduled_for=now, key=f"freshness:{self.name}:{scope}"
        )
        return FreshnessRequest(
            name=self.name,
            scope=scope,
            reason=reason,
            active=bool(active),
            max_staleness=self.max_staleness(scope),
            full_every=self.full_every,
            max_backoff=self.max_backoff,
            offset=self.offset(scope),
            jitter=random.random(),
            job=job,
            delta_payload=task.spec.encode_call((scope, False), {}, limit),
        )

    async def _call(self, scope: str, reason: Reason, active: bool) -> Freshness:
        now = self.app.clock.now()
        request = self._request(scope, reason, active, now)
        store = FRESHNESS.of(await self.app.backend())
        [row] = await store.sync([request], now)
        return Freshness.from_state(self.app, row, now)

    def check(self, scope: str, *, active: bool = False) -> Freshness:
        """How fresh ``scope`` is; enqueues a full sync if it is stale (or never synced), a
        delta sync if it is half-way stale and ``active``. Never blocks on the upstream."""
        return self.app.run_sync(self._call(scope, "check", active))

    async def check_async(self, scope: str, *, active: bool = False) -> Freshness:
        """Async twin of ``check``."""
        return await self._call(scope, "check", active)

    def request(self, scope: str) -> Freshness:
        """ "Refresh now": a full sync even when current or backing off (one at a time)."""
        return self.app.run_sync(self._call(scope, "request", False))

    async def request_async(self, scope: str) -> Freshness:
        """Async twin of ``request``."""
        return await self._call(scope, "request", False)

    def touch(self, scope: str) -> Freshness:
        """After your own change upstream: a confirmation sync (``full=False``). While the
        scope's sync runs, one follow-up delta sync after it (touches coalesce); ``job`` is
        that follow-up, stored when the running sync succeeds."""
        return self.app.run_sync(self._call(scope, "touch", False))

    async def touch_async(self, scope: str) -> Freshness:
        """Async twin of ``touch``."""
        return await self._call(scope, "touch", False)

    def forget(self, scope: str) -> bool:
        """Remove ``scope`` (e.g. a deleted team): its row, its due entry and so its baseline
        syncs; True if it was known, False for a scope never seen (or forgotten already). A
        sync of it still running ends without bringing it back; a later check starts anew."""
        return self.app.run_sync(self.forget_async(scope))

    async def forget_async(self, scope: str) -> bool:
        """Async twin of ``forget``."""
        return await forget_scope(self.app, self.name, scope)

    def scopes(self, stale_only: bool = False, limit: int = 100) -> list[Freshness]:
        """Known scopes (checked or synced), stalest first (by score), with their last error;
        ``stale_only``: only those with score >= 1."""
        return self.app.run_sync(self.scopes_async(stale_only, limit))

    async def scopes_async(self, stale_only: bool = False, limit: int = 100) -> list[Freshness]:
        """Async twin of ``scopes``."""
        return await scopes_of(self.app, self.name, stale_only, limit)

    def gauges(self) -> FreshnessGauges:
        """SLA breaches and the stalest scope's staleness and score (two backend reads whose
        cost is the stale scopes, not all of them)."""
        return self.app.run_sync(self.gauges_async())

    async def gauges_async(self) -> FreshnessGauges:
        """Async twin of ``gauges``."""
        now = self.app.clock.now()
        store = FRESHNESS.of(await self.app.backend())
        breaches = await store.stale_count(self.name, now)
        stalest = await store.scopes(self.name, now, False, 1)
        if not stalest:
            return FreshnessGauges(self.name, breaches, 0.0, 0.0)
        row = stalest[0]
        ls = row.last_success
        staleness = math.inf if ls is None else max(now - ls, 0.0)
        return FreshnessGauges(self.name, breaches, staleness, row.score(now))


async def scopes_of(app: AppPort, name: str, stale_only: bool, limit: int) -> list[Freshness]:
    """The scopes of freshness ``name`` in ``app``'s backend, stalest first (``scopes``); the
    freshness need not be registered in ``app`` (the CLI reads any)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ValueError(f"limit must be an int from 1 to 10000, got {limit!r}")
    now = app.clock.now()
    store = FRESHNESS.of(await app.backend())
    rows = await store.scopes(name, now, stale_only, limit)
    found = [Freshness.from_state(app, row, now) for row in rows]
    found.sort(key=lambda f: -f.score)
    return found


async def forget_scope(app: AppPort, name: str, scope: str) -> bool:
    """Forget ``scope`` of freshness ``name`` in ``app``'s backend (``Mirror.forget``); the
    freshness need not be registered in ``app`` (the CLI forgets any)."""
    _check_scope(scope)
    return await FRESHNESS.of(await app.backend()).forget(name, scope)


async def sweep(app: AppPort, backend: Backend, now: float, limit: int = SWEEP_BATCH) -> int:
    """Enqueue the baseline (or post-backoff) syncs of up to ``limit`` due scopes of each of
    ``app``'s mirrors; how many syncs were enqueued. Cost: the scopes due, never the others."""
    if not app.mirrors:
        return 0
    store = FRESHNESS.of(backend)
    enqueued = 0
    for name, mirror in app.mirrors.items():
        due = await store.due(name, now, limit)
        if due:
            # sorted: one lock order for every sweeper (PostgreSQL locks each scope's row)
            requests = [mirror._request(s, "baseline", False, now) for s in sorted(due)]
            rows = await store.sync(requests, now)
            enqueued += sum(row.enqueued for row in rows)
    return enqueued
