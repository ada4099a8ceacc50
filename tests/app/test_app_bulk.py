"""``app.cancel_many`` / ``app.retry_many`` (PRODUCT §15) on every backend: the filters, the
async twins, a running job's cancel requested, and bad input refused."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import duly

pytestmark = pytest.mark.timeout(90)


def status(app: duly.App, job_id: str) -> str:
    info = app.get_job(job_id)
    assert info is not None
    return info.status


def test_cancel_many_and_retry_many_by_filter(app: duly.App, run_burst: Any) -> None:
    @app.task(name="b.add", queue="math")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="b.boom", retries=0)
    def boom() -> None:
        raise ValueError("no")

    mine = [add.options(key="k").enqueue(i, i) for i in range(3)]
    other_key = add.options(key="other").enqueue(1, 1)
    other_queue = add.options(key="k", queue="default").enqueue(2, 2)
    assert app.cancel_many(status="queued", task="b.add", queue="math", key="k") == 3
    assert app.cancel_many(status="queued", task="b.add", queue="math", key="k") == 0
    assert {status(app, j.id) for j in mine} == {"cancelled"}
    assert status(app, other_key.id) == status(app, other_queue.id) == "queued"

    failed = [boom.enqueue() for _ in range(2)]
    run_burst(app, queues=["default"])
    assert app.retry_many() == 2  # status="failed" by default
    assert {status(app, j.id) for j in failed} == {"queued"}
    assert app.retry_many(status="cancelled", key="k") == 3
    assert {status(app, j.id) for j in mine} == {"queued"}

    async def twins() -> tuple[int, int]:
        try:
            return await app.cancel_many_async(queue="math"), await app.retry_many_async(
                "cancelled", queue="math"
            )
        finally:
            await app.aclose()

    assert asyncio.run(twins()) == (4, 4)


def test_cancel_many_running_requests_the_cancel(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any]
) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task(name="b.slow")
    def slow() -> None:
        started.set()
        release.wait(30)

    job = slow.enqueue()
    with worker_thread(app):
        assert started.wait(30)
        assert app.cancel_many(status="running") == 1
        release.set()
        wait(lambda: status(app, job.id) == "cancelled")


def test_bad_input_is_refused(app: duly.App) -> None:
    with pytest.raises(duly.ConfigurationError):
        app.cancel_many(status="failed")
    with pytest.raises(duly.ConfigurationError):
        app.retry_many(status="queued")
    with pytest.raises(TypeError):
        app.cancel_many(status=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        app.retry_many(task=3)  # type: ignore[arg-type]
