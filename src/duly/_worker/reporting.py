"""What a worker tells its operators: one log line per job event, and its counters.

Every retry, final failure (an unknown task or a corrupt payload included), recovery,
quarantine, cancellation and dropped outcome is logged on the ``duly.worker`` logger, at
WARNING or ERROR for the ones that need a look: the text names the job id, the task, the
attempt as ``N/M`` and the error's type and message; the same facts travel as ``extra`` fields
(``job_id``, ``task``, ``attempt``, ``max_attempts``, ``queue``, ``worker``) for structured
formatters. A succeeded run formats nothing unless DEBUG is enabled.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from duly._errors import DulyError
from duly._serialization import decode

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly._records import JobRecord, Outcome, Recovered
    from duly._worker.execute import Execution
    from duly.backends.base import Backend

__all__ = ["Reporter", "WorkerStats"]

log = logging.getLogger("duly.worker")


class WorkerStats:
    """What this worker did, for progress displays and tests."""

    __slots__ = (
        "cancelled",
        "claimed",
        "deferred",
        "failed",
        "handed_back",
        "lost",
        "recovered",
        "retried",
        "succeeded",
    )

    def __init__(self) -> None:
        self.claimed = self.succeeded = self.failed = self.retried = 0
        self.handed_back = self.recovered = self.lost = self.deferred = self.cancelled = 0


def last_error(errors: bytes | None) -> tuple[str, str]:
    """Type and message of the newest entry of a stored error history."""
    try:
        entries = decode(errors) if errors else None
    except ValueError:
        entries = None
    if isinstance(entries, list) and entries and isinstance(entries[-1], dict):
        return str(entries[-1].get("type", "?")), str(entries[-1].get("message", ""))
    return "?", ""


class Reporter:
    """Counts and logs the end of each run and each recovered job of one worker."""

    def __init__(self, worker: str, clock: Clock, stats: WorkerStats) -> None:
        self.worker = worker
        self.clock = clock
        self.stats = stats

    def _extra(self, record: JobRecord) -> dict[str, Any]:
        return {
            "job_id": record.id,
            "task": record.task,
            "attempt": record.attempts,
            "max_attempts": record.max_attempts,
            "queue": record.queue,
            "worker": self.worker,
        }

    def _log(self, level: int, record: JobRecord, text: str, *args: object) -> None:
        """One line about ``record``: ``job <id> (<task>) <text>``, its attempt as ``N/M``."""
        attempt = f"{record.attempts}/{record.max_attempts}"
        log.log(
            level,
            f"job %s (%s) {text}",
            record.id,
            record.task,
            attempt,
            *args,
            extra=self._extra(record),
        )

    def ended(self, execution: Execution, outcome: Outcome, applied: bool) -> bool:
        """Count and log a reported outcome; True if the job failed for good (to be passed to
        the failure callbacks). Outcomes not applied are logged by ``not_applied``."""
        kind = outcome.kind
        if not applied:
            return False
        if execution.deferred:
            return False  # counted as deferred when it was deferred
        record = execution.record
        if kind in ("succeeded", "again"):
            self.stats.succeeded += 1
            if log.isEnabledFor(logging.DEBUG):
                self._log(logging.DEBUG, record, "succeeded, attempt %s")
        elif kind == "retry":
            self.stats.retried += 1
            delay = max((outcome.run_at or 0.0) - self.clock.now(), 0.0)
            text = "failed attempt %s with %s: %s; retrying in %.3gs"
            self._log(logging.WARNING, record, text, *last_error(outcome.errors), delay)
        elif kind == "failed":
            self.stats.failed += 1
            text = "failed for good at attempt %s with %s: %s"
            self._log(logging.ERROR, record, text, *last_error(outcome.errors))
            return True
        else:
            self.stats.handed_back += 1
            if log.isEnabledFor(logging.DEBUG):
                self._log(logging.DEBUG, record, "handed back at attempt %s")
        return False

    async def not_applied(self, backend: Backend, execution: Execution) -> None:
        """Log why a run's outcome was not applied: its cancel was requested (the job ended
        ``cancelled``), or it was recovered (another worker runs it now)."""
        record = execution.record
        try:
            now = await backend.get_job(record.id)
        except DulyError:
            now = None
        if now is not None and now.status == "cancelled":
            self.stats.cancelled += 1
            text = "cancelled while it ran, at attempt %s; its outcome is not kept"
            self._log(logging.WARNING, record, text)
            return
        self.stats.lost += 1
        text = "attempt %s: outcome dropped, this worker no longer holds the job (its lease "
        text += "lapsed and it was recovered; now %s)"
        self._log(logging.WARNING, record, text, "unknown" if now is None else now.status)

    def recovered(self, entry: Recovered, record: JobRecord | None) -> None:
        """Log one job ``Backend.recover`` took back from a dead worker (``record``: as it is
        now, if it could be read)."""
        self.stats.recovered += 1
        if record is None:
            log.warning("recovered job %s from a dead worker", entry.id, extra={"job_id": entry.id})
        elif entry.requeued:
            if record.status not in ("queued", "scheduled"):
                # Read after the recovery, the job may already run again (a claim adds one
                # attempt; a release takes it back): name the attempt that was lost.
                record = dataclasses.replace(record, attempts=max(record.attempts - 1, 0))
            text = "recovered: attempt %s was lost with its worker (LostWorker: lease lapsed, "
            text += "lost %d time(s)); back at the head of queue %s"
            self._log(logging.WARNING, record, text, record.lost, record.queue)
        elif entry.cancelled:
            self.stats.cancelled += 1
            text = "cancelled: its worker died at attempt %s after the cancel was requested"
            self._log(logging.WARNING, record, text)
        else:
            text = "quarantined at attempt %s with %s: %s"
            self._log(logging.ERROR, record, text, *last_error(record.errors))
