"""Retry timing: exponential backoff with full jitter and a cap."""

from __future__ import annotations

import random
from dataclasses import dataclass

from duly._errors import ConfigurationError

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Wait ``uniform(0, min(cap, base * 2 ** (attempt - 1)))`` seconds before retry ``attempt``.

    Full jitter spreads a burst of failures over the whole window, so a recovering upstream is
    not hit by every retry at the same instant.
    """

    base: float = 1.0
    cap: float = 300.0

    def __post_init__(self) -> None:
        if not self.base > 0:
            raise ConfigurationError(f"Backoff(base=...) must be > 0 seconds, got {self.base!r}")
        if not self.cap >= self.base:
            raise ConfigurationError(
                f"Backoff(cap=...) must be >= base ({self.base}), got {self.cap!r}"
            )

    def ceiling(self, attempt: int) -> float:
        """The largest delay retry ``attempt`` (1-based) can get."""
        return min(self.cap, self.base * 2.0 ** min(max(attempt - 1, 0), 64))

    def delay(self, attempt: int) -> float:
        """A random delay in seconds for retry ``attempt`` (1-based)."""
        return random.uniform(0.0, self.ceiling(attempt))
