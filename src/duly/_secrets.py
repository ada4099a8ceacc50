"""Secret arguments: ``@app.task(secret=("access_token",))``.

Outside the worker's call of the function, a secret argument shows as ``"***"``: in the HTTP
API and the dashboard, the event stream, ``duly status`` / ``duly jobs``, log lines, Sentry
reports and OpenTelemetry spans. Its value (any JSON type, nested, in its common encodings:
``secret_texts``) is also scrubbed out of the text of errors (the message and traceback of a
failure that quoted it, an enqueue error). Keys rendered from it are stored hashed
(``duly._limits.KeyTemplate``). The worker gets the real value.

Masking works from the task's registration, so the process showing a job must import the
App's tasks (``--app module:app``); an unknown task's arguments are shown as stored. With
``DULY_SECRET_KEY`` (``App(secret_key=)``) the values are also encrypted at rest
(``duly._sealing``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast
from urllib.parse import quote, quote_plus

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
    "scrub_exception",
    "secret_texts",
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
    """The texts to scrub out of a job's error output (``secret_texts`` of each of its task's
    secret arguments), longest first."""
    task = _task(app, task_name)
    if task is None:
        return []
    _, _, values = _split(task, args, kwargs)
    return secret_texts(values)


def secret_texts(values: Iterable[Any]) -> list[str]:
    """Every text a secret value can show as, longest first: the one collector of what
    duly scrubs (stored errors, Sentry events, enqueue errors).

    Each scalar inside ``values`` (a str, bytes, int, float, or any other object; dicts, lists,
    tuples and sets are searched, dict keys are names and are not) counts, as ``str()``,
    ``repr()``, JSON-escaped (ASCII or not) and URL-encoded (path and form style). True, False
    and None are not secrets worth a mask: scrubbing them would blank every ``None``."""
    texts: set[str] = set()
    for value in values:
        for leaf in _leaves(value, 0):
            texts.update(_forms(leaf))
    texts.discard("")
    texts.discard(MASK)
    return sorted(texts, key=lambda t: (-len(t), t))


def _leaves(value: Any, depth: int) -> Iterable[Any]:
    if isinstance(value, Mapping):
        items: Iterable[Any] = value.values()
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    else:
        if value is not None and not isinstance(value, bool):
            yield value
        if not isinstance(value, str | bytes | bytearray | int | float | bool | type(None)):
            # A typed argument (a dataclass, a Struct): its fields as JSON would carry them.
            try:
                builtins = msgspec.to_builtins(value)
            except (TypeError, ValueError):
                return
            if isinstance(builtins, dict | list):
                yield from _leaves(builtins, depth + 1)
        return
    if depth < _MAX_DEPTH:
        for item in items:
            yield from _leaves(item, depth + 1)


_MAX_DEPTH = 50


def _forms(value: Any) -> Iterable[str]:
    if isinstance(value, bytes | bytearray):
        yield repr(bytes(value))[2:-1]
        value = bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        yield str(value)
        yield repr(value)
        return
    yield value
    yield repr(value)[1:-1]
    yield json.dumps(value)[1:-1]
    yield json.dumps(value, ensure_ascii=False)[1:-1]
    yield quote(value, safe="")
    yield quote(value)
    yield quote_plus(value)


#: Texts shorter than this are masked only where they stand alone (not inside a longer word
#: or number): a pin of 42 is hidden in "bad pin 42" but not in "line 420".
_SHORT = 4


def scrub(text: str, values: Sequence[str]) -> str:
    """``text`` with every occurrence of each of ``values`` replaced by ``"***"`` (a short one
    only where it stands alone); ``values`` longest first, as ``secret_texts`` gives them."""
    short = []
    for value in values:
        if len(value) < _SHORT:
            short.append(value)
        elif value in text:
            text = text.replace(value, MASK)
    if short and any(value in text for value in short):
        alone = "|".join(re.escape(v) for v in short)
        text = re.sub(rf"(?<![0-9A-Za-z_])(?:{alone})(?![0-9A-Za-z_])", MASK, text)
    return text


def scrub_exception(exc: BaseException, values: Sequence[str]) -> BaseException:
    """``exc``, or an exception of its type whose message has ``values`` scrubbed out (for
    an error raised at enqueue from a secret argument: key templates, type checks)."""
    text = str(exc)
    clean = scrub(text, values)
    if clean == text:
        return exc
    try:
        scrubbed = type(exc)(clean)
    except Exception:  # an exception type that takes other arguments
        scrubbed = ValueError(clean)
    return scrubbed


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
