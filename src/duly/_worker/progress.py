"""Writing runs' progress and checkpoints (``duly.backends.progress``) with the heartbeat.

``set_progress`` / ``checkpoint`` keep the latest values in the run's ``RunProgress``; the
heartbeat loop (``duly._worker.maintenance``) looks every ``PROGRESS_INTERVAL`` seconds and,
if a run set something, beats early and sends it in the heartbeat's own atomic step: one write
per second at most, however often the runs report. Right before the worker reports outcomes,
``flush`` sends what their runs set since (so the last value is never lost; a run that starts
over clears its checkpoint here). Both hold one lock, so a heartbeat's write always lands
before the outcome that follows it (a job that is no longer running takes no write).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from duly._records import ProgressReport
from duly.backends.progress import PROGRESS

if TYPE_CHECKING:
    from duly._worker.execute import Execution
    from duly.backends.base import Backend

__all__ = ["PROGRESS_INTERVAL", "ProgressWriter"]

#: Seconds between two looks for reports to write (so at most one write per second).
PROGRESS_INTERVAL: Final = 1.0


class ProgressWriter:
    """The reports of one worker's runs (``runs()``: those running now), written with its
    heartbeat (``heartbeat``) and before their outcomes (``flush``)."""

    def __init__(self, backend: Backend, worker: str, runs: Callable[[], Iterable[Execution]]):
        self.backend = backend
        self.worker = worker
        self.runs = runs
        self.store = PROGRESS.of(backend) if PROGRESS.offered_by(backend) else None
        self._lock = asyncio.Lock()

    def pending(self) -> bool:
        """Whether a run set a progress or a checkpoint the store does not have yet."""
        return any(execution.progress.pending for execution in self.runs())

    async def heartbeat(self, job_ids: Sequence[str], now: float, lease_until: float) -> list[str]:
        """``Backend.heartbeat``, carrying the runs' new reports when there are any."""
        if self.store is None or not self.pending():
            return await self.backend.heartbeat(self.worker, job_ids, now, lease_until)
        async with self._lock:
            taken = self._take(self.runs(), restart=())
            try:
                return await self.store.heartbeat(
                    self.worker, job_ids, now, lease_until, [r for _, r in taken]
                )
            except BaseException:
                _give_back(taken)
                raise

    async def flush(self, executions: Sequence[Execution], now: float) -> None:
        """Before their outcomes are reported: store what these runs set since the last
        heartbeat, and clear the checkpoint of each that starts over (``starts_over``)."""
        if self.store is None:
            return
        async with self._lock:
            restart = [e for e in executions if e.starts_over]
            taken = self._take(executions, restart)
            if not taken:
                return
            try:
                await self.store.heartbeat(self.worker, (), now, now, [r for _, r in taken])
            except BaseException:
                _give_back(taken)
                raise

    @staticmethod
    def _take(
        executions: Iterable[Execution], restart: Iterable[Execution]
    ) -> list[tuple[Execution, ProgressReport]]:
        starting_over = {id(e) for e in restart}
        taken = []
        for execution in executions:
            clear = id(execution) in starting_over
            report = execution.progress.take(execution.record.id, clear_cursor=clear)
            if report is not None:
                taken.append((execution, report))
        return taken


def _give_back(taken: list[tuple[Execution, ProgressReport]]) -> None:
    """A write that failed: its reports are sent again with the next one (unless newer)."""
    for execution, report in taken:
        execution.progress.give_back(report)
