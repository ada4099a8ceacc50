"""Recycling a worker process: stop claiming after N jobs or above a memory ceiling.

``duly worker --max-jobs-per-child N --max-memory-per-child MB`` (Celery's
``max_tasks_per_child`` / ``max_memory_per_child``): a worker process that has started N jobs,
or whose resident memory is above MB, stops claiming, finishes what it runs (within its grace
period, as a graceful stop does: what is left is handed back, never lost), unregisters and
exits with ``EXIT_RECYCLED``; its supervisor starts a replacement at once. Its jobs end here,
so no lease lapses and nothing is recovered.
"""

from __future__ import annotations

import os
import resource
import sys
import time

from duly._errors import ConfigurationError, ConfigurationTypeError

__all__ = ["EXIT_RECYCLED", "Recycling", "rss_mb"]

#: A worker process's exit code once recycled (EX_TEMPFAIL): its supervisor replaces it at
#: once, as a planned exit rather than a crash.
EXIT_RECYCLED = 75
#: Seconds between two readings of the resident memory.
_MEMORY_EVERY = 1.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """This process's resident memory now, in MB (its peak where the OS tells no more)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE / 1_048_576
    except (OSError, IndexError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB; bytes on macOS
        return peak / (1_048_576 if sys.platform == "darwin" else 1024)


class Recycling:
    """When a worker retires: after ``max_jobs`` started jobs, or above ``max_memory`` MB."""

    def __init__(self, max_jobs: int | None, max_memory: float | None) -> None:
        if max_jobs is not None:
            if isinstance(max_jobs, bool) or not isinstance(max_jobs, int):
                raise ConfigurationTypeError(f"max_jobs must be an int, got {max_jobs!r}")
            if max_jobs < 1:
                raise ConfigurationError(f"max_jobs must be >= 1, got {max_jobs}")
        if max_memory is not None:
            if isinstance(max_memory, bool) or not isinstance(max_memory, int | float):
                raise ConfigurationTypeError(f"max_memory must be MB, got {max_memory!r}")
            if not max_memory > 0:
                raise ConfigurationError(f"max_memory must be > 0 MB, got {max_memory}")
        self.max_jobs = max_jobs
        self.max_memory = max_memory
        self._next_look = 0.0

    def budget(self, started: int, free: int) -> int:
        """How many of ``free`` slots may still be filled, ``started`` jobs in."""
        if self.max_jobs is None:
            return free
        return max(min(free, self.max_jobs - started), 0)

    def reason(self, started: int) -> str | None:
        """Why to retire now (None: not yet); memory is read at most once a second."""
        if self.max_jobs is not None and started >= self.max_jobs:
            return f"started {started} jobs (max_jobs {self.max_jobs})"
        if self.max_memory is not None and (now := time.monotonic()) >= self._next_look:
            self._next_look = now + _MEMORY_EVERY
            if (rss := rss_mb()) > self.max_memory:
                return f"resident memory {rss:.0f} MB > max_memory {self.max_memory:g} MB"
        return None
