"""The running job's context, readable from inside a task (sync or async)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["JobContext", "current_job"]


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a task can know about the run it is in."""

    id: str
    task: str
    queue: str
    attempt: int  # 1 on the first run
    max_attempts: int
    key: str | None
    worker: str

    @property
    def last_attempt(self) -> bool:
        """True when a failure now would fail the job for good."""
        return self.attempt >= self.max_attempts


_current: ContextVar[JobContext] = ContextVar("duly_current_job")


def current_job() -> JobContext:
    """The context of the job being run; raises RuntimeError outside a job."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("duly.current_job() called outside a running job") from None
