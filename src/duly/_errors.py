"""Every error duly raises, under one root.

::

    DulyError
    ├── BackendUnavailable      the backend could not be reached (enqueue, lookups, the worker)
    │   └── DurabilityError     an enqueue fewer replicas confirmed than ``wait_replicas``
    ├── ConfigurationError      a bad URL, a missing extra, an invalid option
    ├── StorageTooNew           the backend's data was stored by a newer duly: upgrade duly
    ├── PayloadError            arguments that cannot be stored, or no longer fit their task
    │   ├── SerializationError  (also a TypeError) a value JSON cannot carry faithfully
    │   ├── ArgumentsMismatch   (also a TypeError) arguments that do not fit the task's signature
    │   └── PayloadTooLarge     (also a ValueError) the encoded arguments exceed the size limit
    ├── TaskNotFound            a worker was given a task name it does not know
    ├── JobNotFound             a lookup or action on an id that does not exist
    ├── DependencyFailed        (the error type stored) a job it waited for failed or was
    │                           cancelled, so this one was cancelled (``after=``, chains)
    ├── EventsTrimmed           events after the id a reader resumes from were trimmed
    ├── JobTimeout              (also a TimeoutError) a job ran past its ``timeout``
    ├── JobProcessDied          an ``isolated=True`` run's child process died (signal, exit)
    ├── JobCancelled            raised in a task by ``current_job().raise_if_cancelled()``
    ├── JobExpired              the error type of a job that expired (``expires=``) unstarted
    └── JobFailed               ``job.result()`` of a job that failed or was cancelled

Control-flow exceptions raised *inside* tasks (not errors):

    Retry(after=...)            reschedule this job without charging an attempt
    Throttled(retry_after=...)  the upstream said "slow down": defer this job, and every job of
                                its rate limit, without charging an attempt
    Interrupted()               hand this job back to its queue now (the worker drains), without
                                charging an attempt; its next run resumes from its checkpoint

Each class's docstring is its default message, so ``raise BackendUnavailable()`` still says
something useful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duly._job import JobInfo

__all__ = [
    "ArgumentsMismatch",
    "BackendUnavailable",
    "ConfigurationError",
    "DependencyFailed",
    "DulyError",
    "DurabilityError",
    "EventsTrimmed",
    "Interrupted",
    "JobCancelled",
    "JobExpired",
    "JobFailed",
    "JobNotFound",
    "JobProcessDied",
    "JobTimeout",
    "PayloadError",
    "PayloadTooLarge",
    "Retry",
    "SerializationError",
    "StorageTooNew",
    "TaskNotFound",
    "Throttled",
]


class DulyError(Exception):
    """A duly error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class BackendUnavailable(DulyError):
    """The job backend could not be reached; nothing was written."""


class DurabilityError(BackendUnavailable):
    """Fewer Redis replicas confirmed an enqueue than ``?wait_replicas=`` asks for.

    Unlike its parent, the jobs *were* stored on the primary: they are only not known to
    survive its failure (Redis replicates asynchronously). Enqueueing the same job ids again
    stores nothing twice. ``acked``: the replicas that confirmed; ``wanted``: how many the URL
    asks for.
    """

    def __init__(
        self, where: str = "", acked: int = 0, wanted: int = 0, timeout_ms: int = 0
    ) -> None:
        self.acked = acked
        self.wanted = wanted
        message = None
        if wanted:
            message = (
                f"{where}: {acked} of {wanted} replicas confirmed the enqueue within "
                f"{timeout_ms} ms (wait_replicas={wanted}); the jobs are on the primary but "
                "may be lost if it fails now"
            )
        super().__init__(message)


class ConfigurationError(DulyError, ValueError):
    """duly is configured wrongly: an invalid option, name, URL or setting.

    A ``ValueError`` too, so code written against the built-in error keeps working."""


class ConfigurationTypeError(ConfigurationError, TypeError):
    """An option of the wrong type: a ``ConfigurationError``, and a ``TypeError`` as before."""


class StorageTooNew(DulyError):
    """The backend's data was stored by a newer duly than this one: upgrade duly.

    Raised when a backend opens (and by a sync enqueue, which opens nothing) on data whose
    storage format is newer than the newest this duly reads: ``stored`` and ``readable`` are
    the two format numbers. Nothing was written.
    """

    def __init__(self, where: str = "", stored: int = 0, readable: int = 0) -> None:
        self.stored = stored
        self.readable = readable
        message = None
        if stored:
            head = f"{where}: " if where else ""
            message = (
                f"{head}stored by format {stored}, this duly reads up to {readable}: upgrade duly"
            )
        super().__init__(message)


class EventsTrimmed(DulyError):
    """Events after the id this reader resumes from were removed by retention; resume with
    ``since=None`` (from now) and re-read the state you need (``app.jobs``)."""


class PayloadError(DulyError):
    """The job's arguments cannot be stored."""


class SerializationError(PayloadError, TypeError):
    """A value JSON cannot carry faithfully, and no annotation lets duly restore it."""


class ArgumentsMismatch(PayloadError, TypeError):
    """The arguments do not fit the task's signature (or its annotated types).

    Raised at enqueue; a stored job whose arguments no longer fit (the task changed between
    deploys) fails with it at once, without retries: running it again cannot help.
    """


class PayloadTooLarge(PayloadError, ValueError):
    """The encoded arguments exceed the payload size limit."""


class TaskNotFound(DulyError):
    """unknown task"""


class JobNotFound(DulyError):
    """No job has this id (it never existed, or retention removed it)."""


class DependencyFailed(DulyError):
    """A job this one waited for (``options(after=...)``, a chain's previous step) failed for
    good or was cancelled, so this one was cancelled: its ``error.type`` says so, its message
    names that job. A retry of that job that succeeds releases this one again."""


class JobTimeout(DulyError, TimeoutError):
    """The job ran past its timeout."""


class JobProcessDied(DulyError):
    """The child process of an ``isolated=True`` run died before it answered (a segfault,
    ``os._exit``, the out-of-memory killer): "the job's process died: signal 11 (SIGSEGV)"
    or "...: exit code 3". Retried like any error of the task's own."""


class JobCancelled(DulyError):
    """The job was cancelled while it ran: stop now (the job ends cancelled either way)."""


class JobExpired(DulyError):
    """The job was still waiting at its ``expires`` time: it never ran (it ended cancelled)."""


class JobFailed(DulyError):
    """``job.result()`` of a job that failed or was cancelled; ``info`` is its record (its
    ``error``, every attempt's ``errors``)."""

    def __init__(self, info: JobInfo[Any]) -> None:
        error = info.error
        why = f": {error['type']}: {error['message']}" if error else ""
        super().__init__(f"job {info.id} ({info.task}) {info.status}{why}")
        self.info = info


class Retry(Exception):
    """Raise inside a task to run it again later without charging an attempt."""

    def __init__(self, after: float = 0.0) -> None:
        if after < 0:
            raise ValueError("Retry(after=...) must be >= 0 seconds")
        super().__init__(f"retry in {after:g}s")
        self.after = float(after)


class Interrupted(Exception):
    """Raise inside a task to hand the job back to its queue without charging an attempt.

    Meant for ``if duly.current_job().stopping: raise duly.Interrupted()``: the worker drains
    (a deploy, SIGTERM), and the job's next run, on any worker, resumes from its last
    ``checkpoint`` (stored before the job is handed back)."""

    def __init__(self, message: str = "handed back to its queue") -> None:
        super().__init__(message)


class Throttled(Exception):
    """Raise inside a task when the upstream says "slow down" (HTTP 429, Retry-After...).

    The job runs again after ``retry_after`` seconds without charging an attempt; with a
    ``rate_limit`` on the task, its whole rate key is paused until then, so the other jobs of
    that key wait too instead of hitting the upstream.
    """

    def __init__(self, retry_after: float = 1.0) -> None:
        if isinstance(retry_after, bool) or not isinstance(retry_after, int | float):
            raise TypeError(f"Throttled(retry_after=...) must be seconds, got {retry_after!r}")
        if retry_after < 0:
            raise ValueError("Throttled(retry_after=...) must be >= 0 seconds")
        super().__init__(f"throttled for {retry_after:g}s")
        self.retry_after = float(retry_after)
