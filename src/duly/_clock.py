"""Where duly reads the time: replaceable so tests drive leases, delays and retention."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Returns the current time as POSIX seconds."""

    def now(self) -> float: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (for tests)."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self._now += seconds
