"""What ``@app.task(...)``, ``@app.periodic(...)`` and ``@app.watch(...)`` return."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from duly._errors import ConfigurationTypeError
from duly._registry import TaskSettings
from duly._schedule import CatchUp, Overlap, Schedule
from duly._task import Task, seconds
from duly._watch import Watch, WatchConfig

if TYPE_CHECKING:
    from duly._ports import AppPort

__all__ = ["PeriodicDecorator", "TaskDecorator", "WatchDecorator"]

P = ParamSpec("P")
R = TypeVar("R")


class TaskDecorator:
    """What ``@app.task(...)`` returns: typed so async functions yield ``Task[P, R]``."""

    def __init__(self, app: AppPort, settings: TaskSettings) -> None:
        self._app = app
        self._settings = settings

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]]) -> Task[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R]) -> Task[P, R]: ...
    def __call__(self, fn: Callable[P, Any]) -> Task[P, Any]:
        return self._app.registry.register(self._app, fn, self._settings)


class PeriodicDecorator:
    """What ``@app.periodic(...)`` returns."""

    def __init__(
        self,
        app: AppPort,
        every: float | timedelta | None,
        cron: str | None,
        tz: str,
        catch_up: CatchUp,
        overlap: Overlap,
        settings: TaskSettings,
    ) -> None:
        self._app = app
        self._settings = settings
        every_s = None if every is None else seconds(every, "every")
        # Built (and so validated) now; the task name is filled in when the function comes.
        self._schedule = Schedule(
            "", every=every_s, cron=cron, tz=tz, catch_up=catch_up, overlap=overlap
        )

    @overload
    def __call__(self, fn: Callable[[], Coroutine[Any, Any, R]]) -> Task[[], R]: ...
    @overload
    def __call__(self, fn: Callable[[], R]) -> Task[[], R]: ...
    def __call__(self, fn: Callable[[], Any]) -> Task[[], Any]:
        try:
            inspect.signature(fn).bind()
        except TypeError:
            raise ConfigurationTypeError(
                f"a periodic task is called without arguments; {fn.__qualname__} needs some"
            ) from None
        settings = self._settings
        schedule = self._schedule
        if settings.get("retention") is None:
            # The last tick is read back from the newest job: keep jobs for two periods at least.
            period = schedule.period(self._app.clock.now())
            settings = {**settings, "retention": max(self._app.retention, 2 * period)}
        registry = self._app.registry
        task = registry.register(self._app, fn, settings)
        registry.schedules[task.name] = dataclasses.replace(schedule, task=task.name)
        return task


class WatchDecorator:
    """What ``@app.watch(...)`` returns."""

    def __init__(self, app: AppPort, watch: WatchConfig, settings: TaskSettings) -> None:
        self._app = app
        self._watch = watch
        self._settings = settings

    def __call__(self, fn: Callable[P, Any]) -> Watch[P, Any]:
        task = self._app.registry.register(self._app, fn, self._settings, watch=self._watch)
        assert isinstance(task, Watch)
        return task
