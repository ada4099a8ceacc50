"""Admission of claimed jobs under their task's rate limit (PRODUCT §4).

Jobs of rate-limited tasks reserve a slot of their limit right after the claim (one round trip
for the batch). A job whose slot starts later is handed back to start then, holding that slot,
without charging an attempt. ``raise duly.Throttled(retry_after=...)`` pauses the job's whole
rate key until then.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from duly._errors import BackendUnavailable, DulyError
from duly._records import JobRecord, Outcome, RateRequest
from duly._worker.execute import Execution

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly._task import Task
    from duly._worker.reporting import WorkerStats
    from duly.backends.base import Backend

__all__ = ["Admission"]

log = logging.getLogger("duly.worker")

#: A rate slot starting this close to now is taken as "now" (clock jitter between processes).
_RATE_SLACK = 0.005


class Admission:
    """Rate-limit admission for one worker (``worker``: its id).

    ``tasks`` are the App's tasks by name (their limits); a job deferred to a later slot is
    counted in ``stats`` and handed to ``defer_to`` (the outcomes to report) as a release."""

    def __init__(
        self,
        backend: Backend,
        clock: Clock,
        *,
        worker: str,
        tasks: Mapping[str, Task[Any, Any]],
        stats: WorkerStats,
        defer_to: Callable[[Execution, Outcome, BaseException | None], None],
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.worker = worker
        self.tasks = tasks
        self.stats = stats
        self.defer_to = defer_to

    def rate_request(self, record: JobRecord, not_before: float = 0.0) -> RateRequest | None:
        """The slot this job must reserve before it runs, or None (no limit, slot held)."""
        task = self.tasks.get(record.task)
        limits = None if task is None else task.config.limits
        if task is None or limits is None or limits.rate is None:
            return None
        if record.rate_slot is not None and not not_before:
            return None  # deferred to a slot it reserved earlier: that slot is now
        try:
            # The key renders from the arguments the function will get (annotations restored).
            args, kwargs = task.spec.decode_call(record.payload)
            return limits.rate_request(tuple(args), kwargs, not_before)
        except (ValueError, TypeError, DulyError):
            return None  # the run itself reports the bad payload

    async def admit(self, records: list[JobRecord]) -> list[JobRecord]:
        """The claimed jobs that may start now; the others are deferred to their slot."""
        asking = [(r, q) for r in records if (q := self.rate_request(r)) is not None]
        if not asking:
            return records
        now = self.clock.now()
        starts: list[float | None]
        try:
            starts = [*await self.backend.reserve_rate([q for _, q in asking], now)]
        except BackendUnavailable as exc:
            log.warning("rate limit: backend unavailable (%s); deferring %d jobs", exc, len(asking))
            starts = [None] * len(asking)  # no slot known: try again in a second
        later = set()
        for (record, _), start in zip(asking, starts, strict=True):
            if start is None or start > now + _RATE_SLACK:
                later.add(record.id)
                self.defer(record, now + 1.0 if start is None else start, start)
        return [r for r in records if r.id not in later]

    def defer(self, record: JobRecord, run_at: float, rate_slot: float | None) -> None:
        """Hand ``record`` back to start at ``run_at`` (no attempt charged)."""
        self.stats.deferred += 1
        outcome = Outcome(record.id, "release", run_at=run_at, rate_slot=rate_slot)
        self.defer_to(Execution(record, self.worker, deferred=True), outcome, None)

    async def throttled(self, execution: Execution, outcome: Outcome) -> Outcome:
        """A job raised ``Throttled``: pause its whole rate key until then, and take the first
        slot after the pause for this job."""
        assert outcome.run_at is not None
        request = self.rate_request(execution.record, not_before=outcome.run_at)
        if request is None:
            return outcome
        try:
            [start] = await self.backend.reserve_rate([request], self.clock.now())
        except BackendUnavailable:
            return outcome
        return dataclasses.replace(outcome, run_at=start, rate_slot=start)
