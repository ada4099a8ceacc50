"""The pausing capability (PRODUCT §15): a paused queue keeps its jobs but starts none.

A pause is stored in the backend. The claim honours it in its own atomic step: it takes no job
of a paused queue (the Redis claim script, the SQLite transaction, the PostgreSQL statement,
which locks the queue's row so a ``pause`` that returned is seen by every claim committed
after it), and enqueue hands no job of a paused queue to an idle worker (the Redis hand-off).
So no job of a paused queue starts after ``pause`` returned; jobs already running finish.
Enqueue still stores, delayed and retrying jobs still become due (``queued``), and ``resume``
makes them claimable again and wakes the waiting workers.
"""

from __future__ import annotations

from typing import Final, Protocol

from duly.backends.capability import Capability

__all__ = ["PAUSING", "PauseStore"]


class PauseStore(Protocol):
    """Which queues are paused, stored with the jobs."""

    async def pause(self, queue: str, now: float) -> bool:
        """Pause ``queue`` (known or not yet); False if it was paused already. Once this
        returns, no claim starts a job of it."""
        ...

    async def resume(self, queue: str) -> bool:
        """Resume ``queue`` and wake the workers waiting for work; False if it was not
        paused."""
        ...

    async def paused(self) -> dict[str, float]:
        """The paused queues, each with the time it was paused."""
        ...


#: ``backend.pausing``.
PAUSING: Final = Capability[PauseStore]("pausing", "pausing a queue")
