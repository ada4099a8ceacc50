"""The watches capability (PRODUCT §6, §17): move an active watch's next check.

A watch is one job holding its arguments' unique key (``duly._watch``); ``start(...,
replace=True)`` moves that job's next run in one atomic step, so a check is never run twice,
never lost, and never moved while it runs.
"""

from __future__ import annotations

from typing import Final, Protocol

from duly.backends.capability import Capability

__all__ = ["WATCHES", "WatchStore"]


class WatchStore(Protocol):
    """Rescheduling the active job that holds a unique key (a watch's job)."""

    async def move(self, unique_key: str, run_at: float, now: float) -> tuple[str, bool] | None:
        """Move the next run of the active job holding ``unique_key`` to ``run_at``, atomically.

        A ``scheduled`` or ``retrying`` job gets ``scheduled_for = run_at`` (a promotion queues
        it once due); a ``queued`` one becomes ``scheduled`` for ``run_at`` (with its event),
        unless ``run_at <= now`` (due already: left queued). Returns ``(its id, True)``;
        ``(its id, False)`` when it is not moved: it runs now (its run decides what follows)
        or waits parked behind its gate; None when no active job holds the key.
        """
        ...


#: ``backend.watches``.
WATCHES: Final = Capability[WatchStore]("watches", "start(..., replace=True)")
