"""Stopping the runs a heartbeat says this worker must give up.

The backend reports a running job at heartbeat when its cancel was requested (or when it was
recovered by another process after this one's lease lapsed). The run is then asked to stop:
``duly.current_job().cancel_requested`` turns True (a sync task polls it, or calls
``raise_if_cancelled()``), and an async task is cancelled as well (``CancelledError`` at its
next ``await``). A thread is never interrupted: a sync job keeps its slot until its function
returns. Either way the run's outcome is reported as usual and the backend decides: a job whose
cancel was requested ends ``cancelled``, whatever the run returned.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from duly._context import StopFlag, bind_stop_flag
from duly._worker.execute import Execution

__all__ = ["StopRequests"]

log = logging.getLogger("duly.worker")


class StopRequests:
    """The stop flag of each run of one worker, by job id."""

    def __init__(self) -> None:
        self._flags: dict[str, StopFlag] = {}

    def run_context(self, job_id: str) -> contextvars.Context:
        """A context for the run of ``job_id`` whose JobContext sees this run's stop flag."""
        flag = self._flags[job_id] = StopFlag()
        context = contextvars.copy_context()
        context.run(bind_stop_flag, flag)
        return context

    def request(self, execution: Execution, task: asyncio.Task[None], is_async: bool) -> None:
        """Ask the run of ``execution`` to stop (once; later heartbeats repeat the news)."""
        record = execution.record
        flag = self._flags.get(record.id)
        if flag is None or flag.requested:
            return
        flag.requested = True
        log.info(
            "job %s (%s) must stop: its cancel was requested, or it was recovered elsewhere%s",
            record.id,
            record.task,
            "" if is_async else " (a sync job runs on until its function returns)",
            extra={"job_id": record.id, "task": record.task, "attempt": record.attempts},
        )
        if is_async:
            execution.handed_back = True  # reported as a release: the backend settles it
            task.cancel()

    def forget(self, job_id: str) -> None:
        """The run ended."""
        self._flags.pop(job_id, None)
