"""The progress capability (PRODUCT §16): a running job's progress and checkpoint, written
with the heartbeat.

A run reports progress (``duly.current_job().set_progress``) and checkpoints
(``checkpoint(cursor)``) as often as it likes; the worker keeps the latest of each and sends
them with its next heartbeat, so a job costs at most one write per heartbeat however often it
reports. ``heartbeat`` is ``Backend.heartbeat`` plus these writes, in the same atomic step (the
same Lua script on Redis, the same transaction on SQL): a report applies only to a job still
``running`` under the reporting worker (a job recovered elsewhere or finished keeps what it
has). The worker sends what is left right before it reports the run's outcome, so the last
value is never lost.

Stored on the job (``JobRecord.progress``, ``JobRecord.cursor``), the checkpoint outlives
the run: ``claim`` returns it, so the next run (after a crash, a hand-back or a retry) resumes
from it. A progress write also appends a ``progress`` event to the event stream when the
backend has one (``duly.backends.events``), in the same step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from duly._records import ProgressReport
from duly.backends.capability import Capability

__all__ = ["PROGRESS", "ProgressStore"]


class ProgressStore(Protocol):
    """Progress and checkpoints of running jobs, written with the heartbeat."""

    async def heartbeat(
        self,
        worker: str,
        job_ids: Sequence[str],
        now: float,
        lease_until: float,
        reports: Sequence[ProgressReport],
    ) -> list[str]:
        """``Backend.heartbeat(worker, job_ids, now, lease_until)`` (same effect, same
        answer) and, in the same atomic step, store each of ``reports`` on its job if that job
        is still ``running`` under ``worker`` (a report's None fields leave the stored value
        as it is). ``job_ids`` may be empty (the last reports of runs about to be reported)."""
        ...


#: ``backend.progress``.
PROGRESS: Final = Capability[ProgressStore]("progress", "job progress and checkpoints")
