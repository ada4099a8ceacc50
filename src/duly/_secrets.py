"""Secret arguments: ``@app.task(secret=("access_token",))``.

Outside the worker's call of the function, a secret argument shows as ``"***"``: in the HTTP
API and the dashboard, the event stream, ``duly status`` / ``duly jobs``, log lines, Sentry
reports and OpenTelemetry spans. Its value is also scrubbed out of the text of errors (the
message and traceback of a failure that quoted it). The worker gets the real value.

Masking works from the task's registration, so the process showing a job must import the
App's tasks (``--app module:app``); an unknown task's arguments are shown as stored. With
``DULY_SECRET_KEY`` (``App(secret_key=)``) the values are also encrypted at rest
(``duly._sealing``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import msgspec

if TYPE_CHECKING:
    from duly._job import JobError, JobInfo
    from duly._ports import AppPort as App
    from duly._task import Task
    from duly._watch import WatchRecord

__all__ = [
    "MASK",
    "redact_arguments",
    "redact_job",
    "redact_watch",
    "scrub",
    "secret_values",
]

R = TypeVar("R")

#: What a secret argument shows as.
MASK: Final = "***"


def _task(app: App, name: str) -> Task[Any, Any] | None:
    task = app.tasks.get(name)
    return task if task is not None and task.config.secret else None


def _positions(task: Task[Any, Any]) -> dict[int, str]:
    """Positional index -> name of each secret parameter that can be passed by position."""
    secret = set(task.config.secret)
    try:
        parameters = list(inspect.signature(task.fn).parameters.values())
    except (TypeError, ValueError):  # pragma: no cover - no signature
        return {}
    found: dict[int, str] = {}
    for index, parameter in enumerate(parameters):
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            break
        if parameter.name in secret:
            found[index] = parameter.name
    return found


def _split(
    task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any], list[Any]]:
    positions = _positions(task)
    secret = set(task.config.secret)
    values: list[Any] = []
    new_args = list(args)
    for index in positions:
        if index < len(new_args):
            values.append(new_args[index])
            new_args[index] = MASK
    new_kwargs = dict(kwargs)
    for name in secret & set(new_kwargs):
        values.append(new_kwargs[name])
        new_kwargs[name] = MASK
    return new_args, new_kwargs, values


def redact_arguments(
    app: App, task_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` of a job of ``task_name`` with its secret ones as ``"***"``."""
    task = _task(app, task_name)
    if task is None:
        return list(args), dict(kwargs)
    new_args, new_kwargs, _ = _split(task, args, kwargs)
    return new_args, new_kwargs


def secret_values(
    app: App, task_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> list[str]:
    """The texts to scrub out of a job's error output: each secret argument's value (and the
    strings inside a secret list or dict), longest first."""
    task = _task(app, task_name)
    if task is None:
        return []
    _, _, values = _split(task, args, kwargs)
    texts: set[str] = set()
    for value in values:
        texts.update(_strings(value))
    return sorted((t for t in texts if t and t != MASK), key=len, reverse=True)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _strings(item)


def scrub(text: str, values: Sequence[str]) -> str:
    """``text`` with every occurrence of each of ``values`` replaced by ``"***"``."""
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    return text


def _scrub_error(error: JobError, values: Sequence[str]) -> JobError:
    scrubbed = {k: scrub(v, values) if isinstance(v, str) else v for k, v in error.items()}
    return cast("JobError", scrubbed)


def redact_watch(app: App, row: WatchRecord) -> WatchRecord:
    """A watch's history row with its secret arguments as ``"***"``."""
    if _task(app, row.watch) is None:
        return row
    args, kwargs = redact_arguments(app, row.watch, row.args, row.kwargs)
    return dataclasses.replace(row, args=args, kwargs=kwargs)


def redact_job(app: App, info: JobInfo[R]) -> JobInfo[R]:
    """``info`` with its task's secret arguments as ``"***"`` and their values scrubbed out of
    its errors; ``info`` itself when the task has none."""
    task = _task(app, info.task)
    if task is None:
        return info
    args, kwargs, _ = _split(task, info.args, info.kwargs)
    values = secret_values(app, info.task, info.args, info.kwargs)
    errors = [_scrub_error(e, values) for e in info.errors]
    error = None if info.error is None else _scrub_error(info.error, values)
    return msgspec.structs.replace(info, args=args, kwargs=kwargs, errors=errors, error=error)
