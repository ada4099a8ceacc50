"""Pausing queues (PRODUCT §15): ``app.pause(queue)`` / ``app.resume(queue)``.

A pause is stored in the backend (``duly.backends.pausing``) and honoured by every claim, in
the claim's own atomic step: once ``pause`` returned, no worker starts a job of the queue; jobs
running then finish. Enqueue still stores and delayed jobs still come due; ``resume`` lets the
workers take them again (and wakes the ones waiting). ``app.queues()`` shows ``.paused``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from duly._records import QueueStats
from duly._task import check_queue
from duly.backends.pausing import PAUSING

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly.backends import Backend

__all__ = ["mark_paused", "pause_queue", "resume_queue"]


async def pause_queue(backend: Backend, clock: Clock, queue: str) -> bool:
    """Pause ``queue`` (a name no job used yet too); False if it was paused already."""
    return await PAUSING.of(backend).pause(_checked(queue), clock.now())


async def resume_queue(backend: Backend, queue: str) -> bool:
    """Resume ``queue``; False if it was not paused."""
    return await PAUSING.of(backend).resume(_checked(queue))


async def mark_paused(backend: Backend, stats: Sequence[QueueStats]) -> list[QueueStats]:
    """``stats`` with ``paused`` set, plus a row for each paused queue no job used yet; by
    name."""
    paused = await PAUSING.of(backend).paused()
    rows = {s.name: dataclasses.replace(s, paused=s.name in paused) for s in stats}
    for name in paused.keys() - rows.keys():
        rows[name] = QueueStats(name, paused=True)
    return [rows[name] for name in sorted(rows)]


def _checked(queue: object) -> str:
    if not isinstance(queue, str):
        raise TypeError(f"a queue name is a str, got {queue!r}")
    return check_queue(queue)
