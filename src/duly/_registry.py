"""The task registry: task settings as one typed dict, names, and the tasks of an App."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from duly._errors import ConfigurationError, ConfigurationTypeError
from duly._limits import Limits
from duly._retry import Backoff, RetryDelay
from duly._schedule import Schedule
from duly._sealing import plain_digest
from duly._task import Task, TaskConfig, seconds
from duly._watch import Watch, WatchConfig

if TYPE_CHECKING:
    from duly._ports import AppPort

__all__ = ["DEFAULT_WATCH_RETENTION", "Registry", "TaskSettings", "WatchTaskSettings"]

#: Ended watches stay this long by default (their history rows).
DEFAULT_WATCH_RETENTION = timedelta(days=7)


class WatchTaskSettings(TypedDict, total=False):
    """The settings of ``@app.watch`` beyond its guards (every task setting but ``timeout``,
    which a watch takes as a guard, and ``unique``, which a watch always is)."""

    name: str | None
    queue: str
    retries: int
    backoff: Backoff | RetryDelay | None
    retry_on: type[BaseException] | Iterable[type[BaseException]] | None
    retention: float | timedelta | None
    failed_retention: float | timedelta | None
    priority: int
    mutex: str | None
    concurrency: int | None
    concurrency_key: str | None
    rate_limit: str | None
    rate_key: str | None
    secret: Iterable[str] | None


class TaskSettings(WatchTaskSettings, total=False):
    """Keywords of ``@app.task`` (and ``@app.periodic``); see ``App.task`` for each one."""

    timeout: float | timedelta | None
    isolated: bool
    expires: float | timedelta | None
    debounce: float | timedelta | None
    unique: str | bool | None
    unique_until: Literal["start", "finish"]
    unique_ttl: float | timedelta | None
    retry_from_start: bool


def default_task_name(fn: Callable[..., Any]) -> str:
    """``module.qualname``; a script run as ``__main__`` is named after its file, so that the
    worker (which imports it by module name) finds the same task."""
    module = getattr(fn, "__module__", None) or "__main__"
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
        elif main is not None and getattr(main, "__file__", None):
            module = Path(main.__file__ or "main").stem
    return f"{module}.{fn.__qualname__}"


def _backoff(backoff: Backoff | RetryDelay | None) -> Backoff | RetryDelay:
    return Backoff() if backoff is None else backoff


def _optional_seconds(value: float | timedelta | None, what: str) -> float | None:
    return None if value is None else seconds(value, what)


def task_config(
    fn: Callable[..., Any],
    settings: TaskSettings,
    *,
    watch: WatchConfig | None = None,
    digest: Callable[[str], str] = plain_digest,
) -> TaskConfig:
    """Validate ``settings`` for ``fn`` into its ``TaskConfig`` (a watch: unique by its
    arguments, its ``timeout`` a guard that ends it rather than a retry). ``digest``: how keys
    rendered from secret arguments are stored (``duly._sealing``)."""
    unknown = set(settings) - set(TaskSettings.__annotations__)
    if unknown:
        raise ConfigurationTypeError(f"unknown task settings: {', '.join(sorted(unknown))}")
    unique = settings.get("unique")
    unique_until = settings.get("unique_until", "finish")
    debounce = _optional_seconds(settings.get("debounce"), "debounce")
    if debounce is not None:
        if not debounce > 0:
            raise ConfigurationError(f"debounce must be > 0 seconds, got {debounce!r}")
        if unique is None or unique is False:
            raise ConfigurationError(
                'debounce= needs unique= (which calls are "the same"), e.g. unique="{doc_id}"'
            )
        if settings.get("unique_until", "start") != "start":
            raise ConfigurationError(
                "debounce= holds its key until the job starts (a new call while it runs "
                "waits as a new job): drop unique_until='finish'"
            )
        unique_until = "start"
    if watch is not None:
        if unique is not None:
            raise ConfigurationError("a watch is unique by its arguments; drop unique=")
        unique, unique_until = True, "finish"
    retry_on = settings.get("retry_on")
    if isinstance(retry_on, type):
        retry_on = (retry_on,)
    name = settings.get("name")
    if name is None:
        name = default_task_name(fn)
    elif not isinstance(name, str) or not name.strip():
        # "" is a name given, not a default asked for: registering under the function's
        # name instead would hide the mistake (as " " already raised).
        raise ConfigurationError(f"name= must be a non-empty string, got {name!r}")
    secret = _secret_names(fn, settings.get("secret"))
    limits = Limits.build(
        name,
        fn,
        unique=unique,
        unique_until=unique_until,
        unique_ttl=_optional_seconds(settings.get("unique_ttl"), "unique_ttl"),
        mutex=settings.get("mutex"),
        concurrency=settings.get("concurrency"),
        concurrency_key=settings.get("concurrency_key"),
        rate_limit=settings.get("rate_limit"),
        rate_key=settings.get("rate_key"),
        key_by_unique=watch is not None,
        secret=secret,
        digest=digest,
    )
    return TaskConfig(
        name=name,
        queue=settings.get("queue", "default"),
        retries=settings.get("retries", 3),
        backoff=_backoff(settings.get("backoff")),
        timeout=_optional_seconds(settings.get("timeout"), "timeout"),
        expires=_optional_seconds(settings.get("expires"), "expires"),
        debounce=debounce,
        retry_on=tuple(retry_on) if retry_on is not None else (Exception,),
        retention=_optional_seconds(settings.get("retention"), "retention"),
        failed_retention=_optional_seconds(settings.get("failed_retention"), "failed_retention"),
        priority=settings.get("priority", 0),
        limits=limits,
        retry_timeouts=watch is None,  # a watch's check over its timeout ends the watch
        retry_from_start=settings.get("retry_from_start", False),
        secret=secret,
        secret_positions=_positions(fn, secret),
        isolated=_isolated(fn, settings.get("isolated", False), watch is not None),
    )


def _isolated(fn: Callable[..., Any], isolated: object, watch: bool) -> bool:
    """``isolated=`` checked: the child process finds the function by module and name."""
    if not isinstance(isolated, bool):
        raise ConfigurationTypeError(f"isolated= must be True or False, got {isolated!r}")
    if not isolated:
        return False
    if watch:
        raise ConfigurationError("a watch cannot be isolated=True")
    qualname = getattr(fn, "__qualname__", "")
    if "<locals>" in qualname or not getattr(fn, "__module__", None) or "<" in qualname:
        raise ConfigurationError(
            f"isolated=True needs a function defined at module level (its child process "
            f"imports it by name), got {qualname or fn!r}"
        )
    return True


def _positions(fn: Callable[..., Any], names: tuple[str, ...]) -> tuple[int, ...]:
    """Where each of ``names`` may be passed by position."""
    if not names:
        return ()
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = list(inspect.signature(fn).parameters.values())
    return tuple(i for i, p in enumerate(parameters) if p.kind in kinds and p.name in names)


def _secret_names(fn: Callable[..., Any], secret: Iterable[str] | None) -> tuple[str, ...]:
    """``secret=`` checked against ``fn``'s parameters (a typo would leak the value)."""
    if secret is None:
        return ()
    if isinstance(secret, str):
        raise ConfigurationTypeError(f"secret= takes parameter names, e.g. secret=({secret!r},)")
    names = tuple(secret)
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return names
    for name in names:
        if not isinstance(name, str) or name not in parameters:
            raise ConfigurationError(f"secret=: {fn.__qualname__} has no parameter {name!r}")
    return names


class Registry:
    """The tasks of one App by name, and the periodic schedules among them."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task[Any, Any]] = {}
        #: Periodic schedules by task name (``@app.periodic``).
        self.schedules: dict[str, Schedule] = {}

    def register(
        self,
        app: AppPort,
        fn: Callable[..., Any],
        settings: TaskSettings,
        *,
        watch: WatchConfig | None = None,
    ) -> Task[Any, Any]:
        """Make ``fn`` a task (a ``Watch`` with ``watch``); one function per name."""
        if not callable(fn):
            raise ConfigurationTypeError(f"@app.task needs a function, got {fn!r}")
        if watch is not None and settings.get("retention") is None:
            settings = {
                **settings,
                "retention": max(app.retention, DEFAULT_WATCH_RETENTION.total_seconds()),
            }
        digest = plain_digest if app.sealer is None else app.sealer.digest
        config = task_config(fn, settings, watch=watch, digest=digest)
        existing = self.tasks.get(config.name)
        if existing is not None and existing.fn is not fn:
            raise ConfigurationError(
                f"two tasks are named {config.name!r}; give one of them name=..."
            )
        task: Task[Any, Any] = (
            Task(app, fn, config) if watch is None else Watch(app, fn, config, watch)
        )
        self.tasks[config.name] = task
        return task

    def queues(self) -> list[str]:
        """The queues the registered tasks declare (periodic tasks, watches and freshness
        syncs are tasks too): ``default`` first, then in declaration order, each once."""
        return list(dict.fromkeys(["default", *(t.config.queue for t in self.tasks.values())]))

    def watches(self) -> list[str]:
        """Names of the registered watches."""
        return [name for name, task in self.tasks.items() if isinstance(task, Watch)]
