"""Retry timing: how long a failed job waits before its next attempt.

``Backoff(base, cap)`` is exponential with full jitter and a cap (the default);
``Backoff.constant(s)`` always waits ``s``; ``Backoff.linear(step, cap)`` waits ``step`` more
each attempt, up to ``cap``. A task may also take any callable ``(attempt, error) -> seconds |
timedelta`` (``RetryDelay``); ``retry_delay`` turns either into seconds.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, TypeAlias

from duly._errors import ConfigurationError, ConfigurationTypeError

__all__ = ["Backoff", "RetryDelay", "check_backoff", "retry_delay"]

#: A custom backoff: called with the attempt that failed (1-based) and its error.
RetryDelay: TypeAlias = Callable[[int, BaseException], "float | timedelta"]

BackoffKind = Literal["exponential", "constant", "linear"]


def _positive(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationTypeError(f"{what} must be seconds (int/float), got {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ConfigurationError(f"{what} must be > 0 seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Wait ``uniform(0, min(cap, base * 2 ** (attempt - 1)))`` seconds before retry ``attempt``.

    Full jitter spreads a burst of failures over the whole window, so a recovering upstream is
    not hit by every retry at the same instant. ``Backoff.constant`` and ``Backoff.linear``
    make the other two usual shapes (without jitter: their waits are exactly as written).
    """

    base: float = 1.0
    cap: float = 300.0
    kind: BackoffKind = "exponential"

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "constant", "linear"):
            raise ConfigurationError(f"Backoff(kind=...) is unknown: {self.kind!r}")
        _positive(self.base, "Backoff(base=...)")
        if isinstance(self.cap, bool) or not isinstance(self.cap, int | float):
            raise ConfigurationTypeError(f"Backoff(cap=...) must be seconds, got {self.cap!r}")
        if not self.cap >= self.base:
            raise ConfigurationError(
                f"Backoff(cap=...) must be >= base ({self.base}), got {self.cap!r}"
            )

    @classmethod
    def constant(cls, seconds: float) -> Backoff:
        """Wait exactly ``seconds`` before every retry."""
        _positive(seconds, "Backoff.constant(seconds)")
        return cls(base=seconds, cap=seconds, kind="constant")

    @classmethod
    def linear(cls, step: float, cap: float = 300.0) -> Backoff:
        """Wait ``step * attempt`` seconds before retry ``attempt``, at most ``cap``."""
        _positive(step, "Backoff.linear(step)")
        return cls(base=step, cap=cap, kind="linear")

    def ceiling(self, attempt: int) -> float:
        """The largest delay retry ``attempt`` (1-based) can get."""
        attempt = max(attempt, 1)
        if self.kind == "constant":
            return self.base
        if self.kind == "linear":
            return min(self.cap, self.base * attempt)
        return min(self.cap, self.base * 2.0 ** min(attempt - 1, 64))

    def delay(self, attempt: int) -> float:
        """A delay in seconds for retry ``attempt`` (1-based): random under the ceiling for
        the exponential kind, the ceiling itself for the others."""
        if self.kind == "exponential":
            return random.uniform(0.0, self.ceiling(attempt))
        return self.ceiling(attempt)


def check_backoff(backoff: object) -> Backoff | RetryDelay:
    """``backoff=`` validated: a ``Backoff``, or a callable taking ``(attempt, error)``."""
    if isinstance(backoff, Backoff):
        return backoff
    if not callable(backoff) or isinstance(backoff, type):
        raise ConfigurationTypeError(
            "backoff must be a duly.Backoff or a callable (attempt, error) -> seconds, "
            f"got {backoff!r}"
        )
    try:
        inspect.signature(backoff).bind(1, Exception())
    except TypeError:
        raise ConfigurationError(
            f"backoff={backoff!r} must take two arguments: (attempt, error)"
        ) from None
    except ValueError:  # pragma: no cover - a builtin without a signature: trust it
        pass
    delay: RetryDelay = backoff
    return delay


def retry_delay(backoff: Backoff | RetryDelay, attempt: int, error: BaseException) -> float:
    """Seconds to wait before retrying after ``attempt`` (1-based) failed with ``error``; a
    custom callable's answer checked (a ``ConfigurationError`` for anything but a finite,
    non-negative number of seconds or a timedelta)."""
    if isinstance(backoff, Backoff):
        return backoff.delay(attempt)
    value = backoff(attempt, error)
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationTypeError(
            f"backoff {backoff!r} returned {value!r}: expected seconds or a timedelta"
        )
    if not (value >= 0 and math.isfinite(value)):
        raise ConfigurationError(f"backoff {backoff!r} returned {value!r}: expected >= 0 seconds")
    return float(value)
