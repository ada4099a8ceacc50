"""A worker's default concurrency: 128 per process when every task is async (a waiting run
costs a coroutine), 16 as soon as one task runs on a thread or in a child process (each such
run holds a thread, and usually a database connection of its own)."""

from __future__ import annotations

import pytest

import duly
from duly._errors import ConfigurationError
from duly._worker.settings import ASYNC_CONCURRENCY, SYNC_CONCURRENCY

# Nothing is opened: a Worker reads the app's tasks, and the backend only once it runs.
URL = "redis://127.0.0.1:1/0"


def _app() -> duly.App:
    app = duly.App(URL)

    @app.task
    async def fetch(url: str) -> int:
        return len(url)

    return app


async def isolated_async(n: int) -> int:
    return n


def test_an_app_of_async_tasks_runs_128_at_once_per_process() -> None:
    assert ASYNC_CONCURRENCY == 128
    assert duly.Worker(_app()).concurrency == ASYNC_CONCURRENCY


def test_one_sync_task_brings_the_default_back_to_16() -> None:
    app = _app()

    @app.task
    def resize(path: str) -> str:
        return path

    assert SYNC_CONCURRENCY == 16
    assert duly.Worker(app).concurrency == SYNC_CONCURRENCY


def test_an_isolated_async_task_counts_as_one_that_holds_a_process() -> None:
    app = _app()
    app.task(isolated=True)(isolated_async)
    assert duly.Worker(app).concurrency == SYNC_CONCURRENCY


def test_an_app_without_tasks_and_an_explicit_value() -> None:
    assert duly.Worker(duly.App(URL)).concurrency == SYNC_CONCURRENCY
    assert duly.Worker(_app(), concurrency=3).concurrency == 3
    with pytest.raises(ConfigurationError, match="concurrency must be >= 1"):
        duly.Worker(_app(), concurrency=0)
