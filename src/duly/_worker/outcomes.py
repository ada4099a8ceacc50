"""Reporting runs' outcomes: batched to the backend, then counted, logged and told to hooks.

Outcomes of jobs ending together go to the backend in one ``finish`` call (one round trip per
batch of up to ``BATCH_LIMIT``). Only once the backend applied an outcome do the worker's
counters, its log and the App's hooks (``finished``, ``retried``, ``failed``) hear of it, so
a hook never sees a state that was not stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from duly._errors import BackendUnavailable, DulyError
from duly._hooks import Finished
from duly._job import JobInfo
from duly._records import JobRecord, Outcome
from duly._worker.execute import Execution

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly._hooks import Hooks
    from duly._worker.progress import ProgressWriter
    from duly._worker.reporting import Reporter
    from duly.backends.base import Backend

__all__ = ["BATCH_LIMIT", "Outcomes"]

log = logging.getLogger("duly.worker")

#: Most jobs one claim takes, or one ``finish`` / ``promote_due`` / ``recover`` call handles.
BATCH_LIMIT = 1000


class Outcomes:
    """The outcomes a worker still has to report, and the loop that reports them.

    ``worker`` is the id the outcomes are reported under; ``reporter`` counts and logs them
    once applied, and ``hooks`` hear of them then; ``runs``, if any, stores what the runs
    reported since their last heartbeat (progress, checkpoints) right before."""

    def __init__(
        self,
        backend: Backend,
        clock: Clock,
        *,
        worker: str,
        hooks: Hooks,
        reporter: Reporter,
        runs: ProgressWriter | None = None,
    ) -> None:
        self.backend = backend
        self.runs = runs
        self.clock = clock
        self.worker = worker
        self.hooks = hooks
        self.reporter = reporter
        self.pending: list[tuple[Execution, Outcome, BaseException | None]] = []
        #: Jobs whose run ended here but whose outcome the backend has not applied yet (their
        #: leases are still renewed, so no other worker recovers them meanwhile).
        self.unacked: dict[str, Execution] = {}
        self.ready = asyncio.Event()
        #: Set by ``close``: the loop reports what is left (until ``_deadline``), then ends.
        self.closing = False
        self._deadline = float("inf")

    def close(self, deadline: float) -> None:
        """The worker is closing: report what is left until ``deadline`` (monotonic), then
        end the loop."""
        self.closing = True
        self._deadline = deadline
        self.ready.set()

    def _past_deadline(self) -> bool:
        return self.closing and time.monotonic() > self._deadline

    def put(self, execution: Execution, outcome: Outcome, error: BaseException | None) -> None:
        """Queue ``outcome`` for the next report."""
        self.unacked[outcome.job_id] = execution
        self.pending.append((execution, outcome, error))
        self.ready.set()

    async def loop(self) -> None:
        """Report outcomes as they come, until the worker closes and nothing is left."""
        while True:
            await self.ready.wait()
            await asyncio.sleep(0)  # outcomes of jobs ending together go in one report
            self.ready.clear()
            await self.flush()
            if self.closing and (not self.pending or self._past_deadline()):
                return

    async def flush(self) -> None:
        """Report every pending outcome (retrying an unreachable backend with backoff)."""
        backend = self.backend
        backoff = 0.1
        while self.pending:
            batch = self.pending[:BATCH_LIMIT]
            try:
                if self.runs is not None:
                    await self.runs.flush([e for e, _, _ in batch], self.clock.now())
                applied = await backend.finish(
                    self.worker, [outcome for _, outcome, _ in batch], self.clock.now()
                )
            except BackendUnavailable as exc:
                if self._past_deadline():
                    log.error(
                        "could not report %d outcomes before exit: %s; their jobs will "
                        "be recovered after their lease",
                        len(self.pending),
                        exc,
                    )
                    return
                log.warning("finish: backend unavailable (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            del self.pending[: len(batch)]
            hooks = self.hooks
            # Hooks that take the batch's runs at once (PrometheusHook) hear of them after the
            # loop, in one call; the others one run at a time, here.
            told: list[Finished] | None = [] if hooks.watching("finished_batch") else None
            tell_one = hooks.watching("finished") or hooks.watching("retried")
            for (execution, outcome, error), ok in zip(batch, applied, strict=True):
                self.unacked.pop(outcome.job_id, None)
                failed_for_good = self.reporter.ended(execution, outcome, ok)
                record = execution.record
                if not ok:
                    await self.reporter.not_applied(backend, execution)
                    if hooks.watching("abandoned"):
                        await hooks.emit("abandoned", record, outcome)
                    continue
                if told is not None:
                    told.append((record, outcome, error))
                if tell_one:
                    if (waiting := hooks.fire("finished", record, outcome, error)) is not None:
                        await waiting
                    if outcome.kind == "retry" and outcome.run_at is not None:
                        await hooks.emit("retried", record, error, outcome.run_at)
                if failed_for_good:
                    await self.report_failure(record, outcome, error)
            if told and (waiting := hooks.fire("finished_batch", told)) is not None:
                await waiting

    async def report_failure(
        self, record: JobRecord, outcome: Outcome, error: BaseException | None
    ) -> None:
        """Tell the ``failed`` hooks (``on_failure`` callbacks) that ``record`` failed for
        good, as it now stands in the backend."""
        hooks = self.hooks
        if not hooks.watching("failed"):
            return
        final = dataclasses.replace(
            record,
            status="failed",
            errors=outcome.errors or record.errors,
            finished_at=self.clock.now(),
        )
        await hooks.emit("failed", JobInfo.from_record(final), error or DulyError("job failed"))
