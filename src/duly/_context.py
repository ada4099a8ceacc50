"""The running job's context, readable from inside a task (sync or async)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from duly._errors import JobCancelled
from duly._progress import RunProgress

if TYPE_CHECKING:
    from duly._groups import GroupInfo

__all__ = ["JobContext", "RunContext", "StopFlag", "bind_stop_flag", "current_job"]


class StopFlag:
    """Set by the worker when the run must stop (read from the job's thread: a plain bool)."""

    __slots__ = ("requested",)

    def __init__(self) -> None:
        self.requested = False


#: Never set: the flag of a context built outside a worker's run (its stop, its drain).
_NEVER = StopFlag()
_stop_flag: ContextVar[StopFlag] = ContextVar("duly_stop_flag")


def bind_stop_flag(flag: StopFlag) -> None:
    """Make ``flag`` the stop flag of the JobContext built next in this context (the worker
    calls it in the context it runs the job in)."""
    _stop_flag.set(flag)


def _stop_flag_of_run() -> StopFlag:
    return _stop_flag.get(_NEVER)


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
    #: In a group's ``on_complete`` job: the group (its outcome counts), else None.
    group: GroupInfo | None = None
    _stop: StopFlag = field(default_factory=_stop_flag_of_run, repr=False, compare=False)
    #: The run's progress and checkpoint (the worker's heartbeat stores them).
    _progress: RunProgress = field(default_factory=RunProgress, repr=False, compare=False)
    #: Set while the worker drains (a graceful stop: deploy, SIGTERM).
    _draining: StopFlag = field(default=_NEVER, repr=False, compare=False)
    _now: Callable[[], float] = field(default=time.time, repr=False, compare=False)

    @property
    def last_attempt(self) -> bool:
        """True when a failure now would fail the job for good."""
        return self.attempt >= self.max_attempts

    @property
    def cancel_requested(self) -> bool:
        """True once the worker learnt (at a heartbeat, every ``lease / 3``) that this run
        must stop: the job's cancel was requested (or another worker recovered it). The job
        ends ``cancelled`` whatever the run returns, so a long sync task may poll this and
        return early; an async task is also cancelled (``asyncio.CancelledError``)."""
        return self._stop.requested

    @property
    def stopping(self) -> bool:
        """True while the worker drains (a deploy, SIGTERM): a long job should store its
        ``checkpoint`` and ``raise duly.Interrupted()``, handing itself back without charging
        an attempt; its next run resumes from ``cursor``."""
        return self._draining.requested

    @property
    def cursor(self) -> Any:
        """The last ``checkpoint`` of this job (stored by an earlier run, or this one's), None
        on a first run. A run after a crash, a hand-back or a retry resumes from it (a task
        with ``retry_from_start=True`` starts over after a failure)."""
        return self._progress.cursor

    def checkpoint(self, cursor: Any) -> None:
        """Remember ``cursor`` (any JSON value: an id, an offset, a dict) as where a later run
        of this job resumes. Costs no I/O: the worker stores the latest one with its next
        heartbeat (about once a second at most) and before it reports the run's end, so a
        run that crashes re-does at most the work since the last stored checkpoint."""
        self._progress.checkpoint(cursor)

    def set_progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the job got: ``fraction`` from 0 to 1 (ValueError outside; TypeError
        for a non-number) and an optional ``message``. Costs no I/O: the latest value is
        stored with the worker's next heartbeat (at most about once a second) and shows as
        ``JobInfo.progress``, in ``duly status``, on the dashboard and as a ``progress``
        event."""
        self._progress.set_progress(fraction, message, self._now())

    def raise_if_cancelled(self) -> None:
        """Raise ``duly.JobCancelled`` if ``cancel_requested``: a checkpoint for sync tasks."""
        if self._stop.requested:
            raise JobCancelled(f"job {self.id} was cancelled while it ran")


@dataclass(frozen=True, slots=True)
class RunContext:
    """What ``Hook.around_run`` is told of the run it wraps: the job's context (as
    ``duly.current_job()`` gives it inside), the call's decoded arguments, and the headers
    hooks set at its enqueue."""

    job: JobContext
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    headers: Mapping[str, str]


_current: ContextVar[JobContext] = ContextVar("duly_current_job")


def current_job() -> JobContext:
    """The context of the job being run; raises RuntimeError outside a job."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("duly.current_job() called outside a running job") from None
