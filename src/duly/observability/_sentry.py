"""Sentry error reports of failed jobs (``pip install 'duly[sentry]'``).

``app.add_hook(SentryHook(app))`` after ``sentry_sdk.init(...)``: each job that fails for good
(its last attempt failed, or it was quarantined) is reported once, as its exception, with the
job's context: tags ``duly._task`` and ``duly.queue``, and a ``duly`` context with its id,
attempt, max attempts, queue, key and arguments. ``retries=True`` reports every failed attempt
that will be retried too, at level ``warning``.

Secret arguments are redacted from the whole event: those a task names in ``secret=`` and
those named in ``SentryHook(secret=...)``. Their values show as ``"***"`` in the job context,
in the stack frames' local variables (which Sentry captures by default), and wherever the value
itself appears in a string of the event (an exception message that quotes it).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from duly._errors import ConfigurationError
from duly._hooks import Hook
from duly._secrets import scrub, secret_texts

if TYPE_CHECKING:
    from duly._app import App
    from duly._job import JobInfo
    from duly._records import JobRecord

__all__ = ["REDACTED", "SentryHook", "require_sentry"]

#: What a secret argument's value becomes.
REDACTED = "***"


def require_sentry() -> Any:
    """The ``sentry_sdk`` module; ``ConfigurationError`` naming the extra if missing."""
    try:
        import sentry_sdk
    except ImportError as exc:
        raise ConfigurationError(
            "Sentry reports need sentry-sdk: pip install 'duly[sentry]'"
        ) from exc
    return sentry_sdk


class SentryHook(Hook):
    """Report failed jobs to Sentry with their context, secret arguments redacted (see the
    module doc). ``app`` gives each task's own ``secret=`` names; ``secret``: argument names
    redacted in every task."""

    def __init__(
        self, app: App | None = None, *, secret: Iterable[str] = (), retries: bool = False
    ) -> None:
        self._sentry = require_sentry()
        self.app = app
        self.secret = frozenset(secret)
        self.retries = retries

    def failed(self, job: JobInfo, error: BaseException) -> None:
        """Report a job that failed for good."""
        self._report(job.id, job.task, job.queue, job.attempts, job.max_attempts, job.key,
                     job.args, job.kwargs, error, "error")  # fmt: skip

    def retried(self, record: JobRecord, error: BaseException | None, run_at: float) -> None:
        """With ``retries=True``, report a failed attempt that will be retried."""
        if not self.retries or error is None:
            return
        from duly._payload import decode_payload

        try:
            args, kwargs = decode_payload(record.payload)
        except ValueError:
            args, kwargs = [], {}
        self._report(record.id, record.task, record.queue, record.attempts,
                     record.max_attempts, record.key, args, kwargs, error, "warning")  # fmt: skip

    def _report(
        self,
        job_id: str,
        task: str,
        queue: str,
        attempt: int,
        max_attempts: int,
        key: str | None,
        args: list[Any],
        kwargs: dict[str, Any],
        error: BaseException,
        level: str,
    ) -> None:
        names = self._secret_names(task)
        sealer = None if self.app is None else self.app.sealer
        if sealer is not None:  # sealed at rest: the values to scrub are the opened ones
            args = [sealer.open_value(v) for v in args]
            kwargs = {k: sealer.open_value(v) for k, v in kwargs.items()}
        hidden = _secret_values(self._parameters(task), names, args, kwargs)
        context = {
            "job_id": job_id,
            "task": task,
            "queue": queue,
            "attempt": attempt,
            "max_attempts": max_attempts,
            "key": key,
            "args": _redact_args(self._parameters(task), names, args),
            "kwargs": {k: REDACTED if k in names else v for k, v in kwargs.items()},
        }
        sentry = self._sentry
        with sentry.new_scope() as scope:
            scope.set_level(level)
            scope.set_tag("duly.task", task)
            scope.set_tag("duly.queue", queue)
            scope.set_context("duly", context)
            scope.add_event_processor(_Redactor(names, hidden))
            sentry.capture_exception(error)

    def _task(self, name: str) -> Any:
        return None if self.app is None else self.app.tasks.get(name)

    def _secret_names(self, task_name: str) -> frozenset[str]:
        task = self._task(task_name)
        own = getattr(getattr(task, "config", None), "secret", None) or ()
        return self.secret | frozenset(own)

    def _parameters(self, task_name: str) -> list[str]:
        task = self._task(task_name)
        if task is None:
            return []
        try:
            return list(inspect.signature(task.fn).parameters)
        except (TypeError, ValueError):
            return []


def _redact_args(parameters: list[str], names: frozenset[str], args: list[Any]) -> list[Any]:
    return [
        REDACTED if i < len(parameters) and parameters[i] in names else value
        for i, value in enumerate(args)
    ]


def _secret_values(
    parameters: list[str], names: frozenset[str], args: list[Any], kwargs: dict[str, Any]
) -> list[str]:
    """Every text the secret arguments' values can show as (``duly._secrets.secret_texts``:
    any JSON type, nested, and their common encodings)."""
    values = [v for k, v in kwargs.items() if k in names]
    values += [v for i, v in enumerate(args) if i < len(parameters) and parameters[i] in names]
    return secret_texts(values)


class _Redactor:
    """A Sentry event processor: secret names' values in frames become ``***``, and so does
    each secret value wherever a string of the event holds it."""

    def __init__(self, names: frozenset[str], values: list[str]) -> None:
        self.names, self.values = names, values

    def __call__(self, event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
        for exception in (event.get("exception") or {}).get("values") or []:
            for frame in (exception.get("stacktrace") or {}).get("frames") or []:
                frame_vars = frame.get("vars")
                if isinstance(frame_vars, dict):
                    for name in self.names & frame_vars.keys():
                        frame_vars[name] = REDACTED
        if self.values:
            event = self._scrub(event)
        return event

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value, self.values)
        if isinstance(value, int | float) and not isinstance(value, bool):
            # A frame's local holding a numeric secret (Sentry keeps numbers as they are).
            return REDACTED if str(value) in self.values else value
        if isinstance(value, dict):
            return {k: self._scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._scrub(v) for v in value]
        return value
