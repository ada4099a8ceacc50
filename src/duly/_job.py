"""What users get back: ``Job`` (a handle from enqueue) and ``JobInfo`` (a job's whole record)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from duly._records import FINISHED_STATUSES, JobRecord
from duly._serialization import decode, decode_payload, to_builtins

if TYPE_CHECKING:
    from duly._app import App
    from duly._task import Task

__all__ = ["Job", "JobInfo"]


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job's whole record: what it runs, where it is in its life, and how it ended.

    ``error`` is the last failure (``{"type", "message", "traceback", ...}``) and ``errors``
    every failure kept, oldest first. Times are timezone-aware UTC.
    """

    id: str
    task: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    status: str
    attempts: int
    max_attempts: int
    key: str | None
    priority: int
    enqueued_at: datetime
    scheduled_for: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    result: Any
    error: dict[str, Any] | None
    worker: str | None
    errors: list[dict[str, Any]] = field(default_factory=list)
    lost: int = 0

    @property
    def finished(self) -> bool:
        """True once the job reached an outcome (succeeded, failed or cancelled)."""
        return self.status in FINISHED_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (times as ISO 8601 strings)."""
        data = asdict(self)
        for name, value in data.items():
            if isinstance(value, datetime):
                data[name] = value.isoformat()
        data["result"] = to_builtins(self.result)  # a restored datetime, set...: as JSON has it
        return data

    @classmethod
    def from_record(cls, record: JobRecord, task: Task[Any, Any] | None = None) -> JobInfo:
        """Decode a backend record; a corrupt payload shows as empty arguments, never raises.

        With its ``task``, the result is restored to the return annotation's type."""
        try:
            args, kwargs = decode_payload(record.payload)
        except ValueError:
            args, kwargs = [], {}
        errors: list[dict[str, Any]] = []
        if record.errors:
            try:
                decoded = decode(record.errors)
                errors = [e for e in decoded if isinstance(e, dict)]
            except ValueError:
                errors = [{"type": "CorruptRecord", "message": "unreadable error history"}]
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
            status=record.status,
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
        )


class Job:
    """A handle on an enqueued job. ``deduplicated`` is True when enqueue returned an existing
    job instead of creating one (``unique=``)."""

    __slots__ = ("_app", "deduplicated", "id")

    def __init__(self, app: App, id: str, deduplicated: bool = False) -> None:
        self._app = app
        self.id = id
        self.deduplicated = deduplicated

    def __repr__(self) -> str:
        return f"<Job {self.id}{' (deduplicated)' if self.deduplicated else ''}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def info(self) -> JobInfo | None:
        """The job's current record, or None once retention removed it."""
        return self._app.get_job(self.id)

    async def info_async(self) -> JobInfo | None:
        """Async twin of ``info``."""
        return await self._app.get_job_async(self.id)

    def wait(self, timeout: float = 30.0, poll: float = 0.05) -> JobInfo:
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

    async def wait_async(self, timeout: float = 30.0, poll: float = 0.05) -> JobInfo:
        """Async twin of ``wait``."""
        deadline = time.monotonic() + timeout
        while True:
            info = await self.info_async()
            if info is not None and info.finished:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {self.id} not finished after {timeout}s")
            await asyncio.sleep(poll)
