"""What a worker's options mean when they are left out or written as text: the default
concurrency, and the ``--queues`` spec (names, optional weights)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from duly._errors import ConfigurationError
from duly._task import check_queue

if TYPE_CHECKING:
    from duly._registry import Registry

__all__ = ["ASYNC_CONCURRENCY", "SYNC_CONCURRENCY", "default_concurrency", "parse_queues"]

#: Jobs at once per process when some task runs on a thread (or in a child process): each
#: such run holds a thread, and usually a database connection of its own.
SYNC_CONCURRENCY = 16
#: Jobs at once per process when every task is ``async def``: a waiting run costs a coroutine.
#: Measured on Redis, 2 cores, 5,000 jobs awaiting 20 ms, the default worker (2 processes),
#: 3 alternated rounds (docs/benchmarks.md): 64 per process 5,831 jobs/s (0.91 of the ideal
#: slots / 20 ms), 128 10,844 (0.85), 256 19,723 (0.77), against pgqueuer's 5,660 (it runs
#: every queued job at once); jobs of one query on a pool of 10 connections ran as fast at 128
#: as at 64 (4,047 and 4,188 jobs/s): the pool sets their pace, and a run waits its turn on it.
ASYNC_CONCURRENCY = 128


def default_concurrency(registry: Registry) -> int:
    """``ASYNC_CONCURRENCY`` when every registered task is async and not isolated, else
    ``SYNC_CONCURRENCY``."""
    tasks = registry.tasks.values()
    if tasks and all(t.is_async and not t.config.isolated for t in tasks):
        return ASYNC_CONCURRENCY
    return SYNC_CONCURRENCY


def parse_queues(specs: Sequence[str]) -> tuple[list[str], list[float] | None]:
    """Queue names, and their weights if any spec is ``"name:weight"`` (others weigh 1)."""
    names: list[str] = []
    weights: list[float] = []
    for spec in specs:
        if not isinstance(spec, str):
            check_queue(spec)  # raises the clear error for a non-string name
        name, _, weight = spec.partition(":")
        names.append(check_queue(name.strip()))
        try:
            value = float(weight) if weight else 1.0
        except ValueError:
            value = 0.0
        if not value > 0:
            raise ConfigurationError(f"queue weight in {spec!r} must be a number > 0")
        weights.append(value)
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a queue is listed twice in {list(specs)!r}")
    weighted = any(":" in spec for spec in specs)
    return names, weights if weighted else None
