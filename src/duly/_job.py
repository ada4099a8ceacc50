"""What users get back: ``Job`` (a handle from enqueue) and ``JobInfo`` (a job's whole record)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, NotRequired, TypedDict, TypeVar

import msgspec

from duly._errors import JobFailed
from duly._payload import decode_payload, payload_links
from duly._progress import Progress, decode_progress
from duly._records import FINISHED_STATUSES, JobRecord, JobStatus
from duly._serialization import decode

if TYPE_CHECKING:
    from typing_extensions import TypeVar as DefaultingTypeVar

    from duly._ports import AppPort
    from duly._task import Task

    # A bare ``duly.Job`` / ``duly.JobInfo`` (as code written before they were generic says)
    # means ``Job[Any]``, even under ``mypy --strict``. Python 3.11's TypeVar has no default.
    R = DefaultingTypeVar("R", default=Any)
else:
    R = TypeVar("R")

__all__ = ["Job", "JobError", "JobInfo"]
#: The times of a JobInfo (``to_dict`` writes them as ``datetime.isoformat`` does).
_TIMES = ("enqueued_at", "scheduled_for", "started_at", "finished_at", "expires_at")


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


class JobError(TypedDict):
    """One failed attempt: the exception's type and message, its traceback, when (POSIX
    seconds) and which attempt. A plain dict (``info.error["message"]``)."""

    type: str
    message: str
    traceback: NotRequired[str | None]
    at: NotRequired[float | None]
    attempt: NotRequired[int | None]


def _error(raw: dict[str, Any]) -> JobError:
    """A stored failure with its five keys, whatever an older writer left out or mistyped."""

    def text(name: str) -> str | None:
        value = raw.get(name)
        return None if value is None else str(value)

    at, attempt = raw.get("at"), raw.get("attempt")
    return JobError(
        type=text("type") or "Error",
        message=text("message") or "",
        traceback=text("traceback"),
        at=float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None,
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
    )


class JobInfo(msgspec.Struct, Generic[R], frozen=True):
    """A job's whole record: what it runs, where it is in its life, and how it ended.

    ``R`` is what its task returns: ``result`` holds it once the job ``succeeded`` (restored
    to the task's return annotation), None before and otherwise. ``error`` is the last failure
    (``{"type", "message", "traceback", "at", "attempt"}``) and ``errors`` every failure kept,
    oldest first. ``progress`` is how far its run last said it got (``set_progress``), None
    if it never did. Times are timezone-aware UTC. This one Struct is also the HTTP API's job
    (its OpenAPI schema is generated from it) and what ``duly status --json`` prints.
    """

    id: str
    task: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    status: JobStatus
    attempts: int
    max_attempts: int
    key: str | None
    priority: int
    enqueued_at: datetime
    scheduled_for: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    result: R | None
    error: JobError | None
    worker: str | None
    errors: list[JobError]
    lost: int
    #: The ids of the jobs it waits (or waited) for (``options(after=...)``, a chain's
    #: previous step); empty for most jobs.
    after: list[str] = []
    progress: Progress | None = None
    #: When the job, still waiting then, never starts (``expires=``): it ends cancelled with
    #: a ``JobExpired`` error. None: no expiry, or no longer (it started, or was retried).
    expires_at: datetime | None = None

    @property
    def finished(self) -> bool:
        """True once the job reached an outcome (succeeded, failed or cancelled)."""
        return self.status in FINISHED_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (times as ISO 8601 strings; a result as JSON has it)."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        for name in _TIMES:  # ``isoformat``'s ``+00:00``, as duly's JSON always wrote them
            value = getattr(self, name)
            data[name] = None if value is None else value.isoformat()
        return data

    @classmethod
    def from_record(cls, record: JobRecord, task: Task[Any, R] | None = None) -> JobInfo[R]:
        """Decode a backend record; a corrupt payload shows as empty arguments, never raises.

        With its ``task``, the result is restored to the return annotation's type."""
        try:
            args, kwargs = decode_payload(record.payload)
        except ValueError:
            args, kwargs = [], {}
        errors: list[JobError] = []
        if record.errors:
            try:
                decoded = decode(record.errors)
                errors = [_error(e) for e in decoded if isinstance(e, dict)]
            except ValueError:
                errors = [JobError(type="CorruptRecord", message="unreadable error history")]
        result: Any = None
        if record.result is not None:
            try:
                result = (
                    decode(record.result) if task is None else task.decode_result(record.result)
                )
            except ValueError:
                result = None
        return cls(
            id=record.id,
            task=record.task,
            queue=record.queue,
            args=args,
            kwargs=kwargs,
            status=record.status,  # type: ignore[arg-type]  # backends store only STATUSES
            attempts=record.attempts,
            max_attempts=record.max_attempts,
            key=record.key,
            priority=record.priority,
            enqueued_at=datetime.fromtimestamp(record.enqueued_at, UTC),
            scheduled_for=_time(record.scheduled_for),
            started_at=_time(record.started_at),
            finished_at=_time(record.finished_at),
            result=result,
            error=errors[-1] if errors else None,
            worker=record.worker,
            errors=errors,
            lost=record.lost,
            after=payload_links(record.payload).after,
            progress=decode_progress(record.progress),
            expires_at=_time(record.expires_at),
        )


class Job(Generic[R]):
    """A handle on an enqueued job; ``R`` is what its task returns. ``deduplicated`` is True
    when enqueue returned an existing job instead of creating one (``unique=``)."""

    __slots__ = ("_app", "deduplicated", "id")

    def __init__(self, app: AppPort, id: str, deduplicated: bool = False) -> None:
        self._app = app
        self.id = id
        self.deduplicated = deduplicated

    def __repr__(self) -> str:
        return f"<Job {self.id}{' (deduplicated)' if self.deduplicated else ''}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def info(self) -> JobInfo[R] | None:
        """The job's current record, or None once retention removed it."""
        return self._app.get_job(self.id)

    async def info_async(self) -> JobInfo[R] | None:
        """Async twin of ``info``."""
        return await self._app.get_job_async(self.id)

    def wait(self, timeout: float = 30.0, poll: float = 0.05) -> JobInfo[R]:
        """Block until the job has finished (succeeded, failed or cancelled); its record.

        Raises TimeoutError if it has not finished within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            info = self.info()
            if info is not None and info.finished:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {self.id} not finished after {timeout}s")
            time.sleep(poll)

    async def wait_async(self, timeout: float = 30.0, poll: float = 0.05) -> JobInfo[R]:
        """Async twin of ``wait``."""
        deadline = time.monotonic() + timeout
        while True:
            info = await self.info_async()
            if info is not None and info.finished:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {self.id} not finished after {timeout}s")
            await asyncio.sleep(poll)

    def result(self, timeout: float = 30.0, poll: float = 0.05) -> R:
        """Block until the job has finished; what its task returned.

        Raises ``duly.JobFailed`` if it failed or was cancelled, TimeoutError if it has not
        finished within ``timeout`` seconds.
        """
        return _result(self.wait(timeout, poll))

    async def result_async(self, timeout: float = 30.0, poll: float = 0.05) -> R:
        """Async twin of ``result``."""
        return _result(await self.wait_async(timeout, poll))


def _result(info: JobInfo[R]) -> R:
    if info.status != "succeeded":
        raise JobFailed(info)
    return info.result  # type: ignore[return-value]  # a succeeded job's result is its R
