"""Django's database connections around each run of a sync task, as Django does around each
request.

A worker runs sync tasks on a pool of long-lived threads, and Django keeps one connection per
thread. Without a request cycle nothing would ever close one: a connection broken by a
database restart would fail every later task of its thread, and ``CONN_MAX_AGE`` would never
apply. So each run of a sync task, in a worker, starts and ends with
``django.db.close_old_connections()`` (what Django's request_started / request_finished
signals do). Outside a worker (``task(...)`` called directly) the function runs as it is.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from duly._context import current_job
from duly._registry import Registry, TaskSettings
from duly._task import Task
from duly._watch import WatchConfig

__all__ = ["DjangoRegistry"]


def _in_a_run() -> bool:
    try:
        current_job()
    except RuntimeError:
        return False
    return True


def _with_fresh_connections(fn: Callable[..., Any]) -> Callable[..., Any]:
    from django.db import close_old_connections

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not _in_a_run():
            return fn(*args, **kwargs)
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return run


class DjangoRegistry(Registry):
    """The tasks of a Django project's App: sync ones get ``close_old_connections()`` around
    each run in a worker (async tasks reach the ORM through ``sync_to_async``, which does not
    keep a thread's connection)."""

    def __init__(self) -> None:
        super().__init__()
        self._wrapped: dict[Callable[..., Any], Callable[..., Any]] = {}

    def register(
        self,
        app: Any,
        fn: Callable[..., Any],
        settings: TaskSettings,
        *,
        watch: WatchConfig | None = None,
    ) -> Task[Any, Any]:
        if callable(fn) and not inspect.iscoroutinefunction(fn):
            # one wrapper per function: registering it again is not a second task
            if fn not in self._wrapped:
                self._wrapped[fn] = _with_fresh_connections(fn)
            fn = self._wrapped[fn]
        return super().register(app, fn, settings, watch=watch)
