"""Running one claimed job to an ``Outcome``: lookup, decode, call, and the retry decision."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from duly._context import _NEVER, JobContext, RunContext, StopFlag, _current
from duly._errors import (
    ArgumentsMismatch,
    Interrupted,
    JobTimeout,
    Retry,
    SerializationError,
    TaskNotFound,
    Throttled,
)
from duly._groups import is_group_id
from duly._progress import RunProgress
from duly._records import JobRecord, Outcome
from duly._retry import Backoff, RetryDelay, retry_delay
from duly._sealing import open_without_key
from duly._secrets import scrub, secret_values
from duly._serialization import decode, encode
from duly._worker.around import call_around, run_around
from duly._worker.frames import user_traceback
from duly._workflows import piped_payload

if TYPE_CHECKING:
    from duly._app import App
    from duly._task import Task
    from duly._worker.isolation import IsolatedPool
    from duly._worker.threads import ThreadRunner

__all__ = ["Execution", "error_entry", "failure_outcome"]

log = logging.getLogger("duly.worker")
#: What a custom backoff that failed is replaced by (``App.task``'s default).
DEFAULT_BACKOFF = Backoff()

#: Failures kept per job (the oldest are dropped first).
MAX_ERRORS_KEPT = 20
_MAX_TRACEBACK_CHARS = 16_000
#: Failures that running the job again cannot mend: arguments that no longer fit the task,
#: a result JSON cannot carry. They fail the job at once, whatever ``retry_on`` says.
_NEVER_RETRIED = (ArgumentsMismatch, SerializationError)


def error_entry(exc: BaseException, attempt: int, now: float) -> dict[str, Any]:
    """The stored form of one failure; its traceback starts at the task's own frame (the
    worker's frames are left out; chained exceptions are kept whole)."""
    user_tb = user_traceback(exc.__traceback__) or exc.__traceback__
    tb = "".join(traceback.format_exception(type(exc), exc, user_tb))
    if len(tb) > _MAX_TRACEBACK_CHARS:
        tb = "...\n" + tb[-_MAX_TRACEBACK_CHARS:]
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": tb,
        "at": now,
        "attempt": attempt,
    }


def _append_error(record: JobRecord, entry: dict[str, Any]) -> bytes:
    errors: list[Any] = []
    if record.errors:
        try:
            decoded = decode(record.errors)
            if isinstance(decoded, list):
                errors = decoded
        except ValueError:
            errors = []
    errors.append(entry)
    return encode(errors[-MAX_ERRORS_KEPT:])


def _backoff_seconds(backoff: Backoff | RetryDelay, record: JobRecord, exc: BaseException) -> float:
    """The task's backoff for this failure; a custom backoff that raises or answers nonsense
    is logged and the default one used, so the retry the task asked for still happens."""
    try:
        return retry_delay(backoff, record.attempts, exc)
    except Exception:
        log.exception("job %s: its backoff failed; retrying with the default backoff", record.id)
        return DEFAULT_BACKOFF.delay(record.attempts)


def failure_outcome(
    app: App,
    task: Task[Any, Any] | None,
    record: JobRecord,
    exc: BaseException,
    now: float,
    hidden: Sequence[str] = (),
) -> Outcome:
    """Retry with backoff if the task allows another attempt for this error, else fail.
    ``hidden``: secret argument values, scrubbed out of the stored message and traceback."""
    entry = error_entry(exc, record.attempts, now)
    if hidden:
        entry = {k: scrub(v, hidden) if isinstance(v, str) else v for k, v in entry.items()}
    errors = _append_error(record, entry)
    if task is not None:
        config = task.config
        timeout_retried = config.retry_timeouts or not isinstance(exc, JobTimeout)
        retryable = timeout_retried and not isinstance(exc, _NEVER_RETRIED)
        if retryable and isinstance(exc, config.retry_on) and record.attempts < record.max_attempts:
            run_at = now + _backoff_seconds(config.backoff, record, exc)
            return Outcome(record.id, "retry", errors=errors, run_at=run_at)
        keep = config.failed_retention
    else:
        keep = None
    expire_at = now + (app.failed_retention if keep is None else keep)
    return Outcome(record.id, "failed", errors=errors, expire_at=expire_at)


@dataclass(slots=True)
class Execution:
    """One run of a claimed job inside a worker."""

    record: JobRecord
    worker: str
    #: Set when the job must not report an outcome (lost its lease, or cancelled).
    abandoned: bool = False
    #: Set when a graceful stop hands the job back instead of finishing it.
    handed_back: bool = False
    #: Set when the job is deferred without running to an outcome (rate limit, ``Throttled``).
    deferred: bool = False
    #: The values of its secret arguments (scrubbed out of its stored errors).
    hidden: list[str] = field(default_factory=list)
    #: Set while the worker drains (``duly.current_job().stopping``).
    draining: StopFlag = _NEVER
    #: Its progress and checkpoint (``duly._worker.progress`` stores them).
    progress: RunProgress = field(init=False)
    #: Set when its next run must not resume from its checkpoint (a failure of a task with
    #: ``retry_from_start``, a watch's next check): its checkpoint is cleared with its outcome.
    starts_over: bool = False

    def __post_init__(self) -> None:
        self.progress = RunProgress(self.record.cursor)

    async def run(
        self, app: App, threads: ThreadRunner, isolation: IsolatedPool | None = None
    ) -> tuple[Outcome, BaseException | None]:
        """Run the job; the outcome to report and, for a failed or retried run, the error.
        An ``isolated`` task runs in a child process of ``isolation``."""
        record = self.record
        task = app.tasks.get(record.task)
        if task is None:
            exc: BaseException = TaskNotFound(
                f"unknown task {record.task!r}: no task of that name is registered in this "
                "worker's app"
            )
            return failure_outcome(app, None, record, exc, app.clock.now()), exc
        try:
            payload = record.payload if app.sealer is None else app.sealer.open(record.payload)
            payload = await piped_payload(app, record, open_without_key(payload))
            args, kwargs = task.spec.decode_call(payload)
        except ArgumentsMismatch as mismatch:  # the task changed since this job was stored
            return self._failed(app, task, mismatch)
        except ValueError as decode_error:
            return failure_outcome(app, None, record, decode_error, app.clock.now()), decode_error
        self.hidden = secret_values(app, record.task, args, kwargs) if task.config.secret else []
        context = JobContext(
            id=record.id,
            task=record.task,
            queue=record.queue,
            attempt=record.attempts,
            max_attempts=record.max_attempts,
            key=record.key,
            worker=self.worker,
            group=await app.get_group_async(record.id) if is_group_id(record.id) else None,
            _progress=self.progress,
            _draining=self.draining,
            _now=app.clock.now,
        )
        timeout = task.config.timeout
        deadline: asyncio.Timeout | None = None
        hooks = app.hooks
        around = (
            RunContext(context, tuple(args), kwargs, record.headers)
            if hooks.watching("around_run")
            else None
        )
        token = _current.set(context)
        try:
            if task.config.isolated and isolation is not None:
                child = partial(isolation.run, task.fn, context, payload, timeout)
                data = await (
                    child() if around is None else run_around(hooks.arounds, around, child)
                )
                expire_at = self._expire_at(app, task)
                return Outcome(record.id, "succeeded", result=data, expire_at=expire_at), None
            if task.is_async:
                # Awaited in this very frame (no inner Task), so a SystemExit or
                # KeyboardInterrupt raised by the task is caught here, not by the loop.
                if around is None:
                    awaited = task.fn(*args, **kwargs)
                else:
                    awaited = run_around(hooks.arounds, around, lambda: task.fn(*args, **kwargs))
                if timeout is None:
                    value = await awaited
                else:
                    deadline = asyncio.timeout(timeout)
                    async with deadline:
                        value = await awaited
            else:
                ctx = contextvars.copy_context()
                if around is None:
                    call = lambda: task.fn(*args, **kwargs)  # noqa: E731
                else:
                    call = partial(call_around, hooks.arounds, around, task.fn)
                value = await threads.run(call, ctx, timeout)
            outcome = task.success_outcome(
                record, value, app.clock.now(), self._expire_at(app, task)
            )
            self.starts_over = outcome.kind == "again"
        except Interrupted:  # handed back (the worker drains), not charged
            return Outcome(record.id, "release", run_at=app.clock.now()), None
        except Retry as retry:
            now = app.clock.now()
            return Outcome(record.id, "release", run_at=now + retry.after), None
        except Throttled as throttled:
            self.deferred = True
            now = app.clock.now()
            return Outcome(record.id, "release", run_at=now + throttled.retry_after), None
        except asyncio.CancelledError:
            raise
        except TimeoutError as timed_out:
            exc = timed_out  # JobTimeout, or the task's own (a socket's, say)
            if deadline is not None and deadline.expired() and not isinstance(exc, JobTimeout):
                exc = JobTimeout(f"timed out after {timeout:g}s (async job cancelled)")
            return self._failed(app, task, exc)
        except BaseException as error:
            return self._failed(app, task, error)
        finally:
            _current.reset(token)
        return outcome, None

    @staticmethod
    def _expire_at(app: App, task: Task[Any, Any]) -> float:
        keep = task.config.retention
        return app.clock.now() + (app.retention if keep is None else keep)

    def _failed(
        self, app: App, task: Task[Any, Any], exc: BaseException
    ) -> tuple[Outcome, BaseException | None]:
        self.starts_over = task.config.retry_from_start
        return failure_outcome(app, task, self.record, exc, app.clock.now(), self.hidden), exc
