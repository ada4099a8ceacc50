"""``app.pause`` / ``app.resume`` (PRODUCT §15) on every backend, with a real worker: running
jobs finish, nothing new starts, enqueue still stores, ``app.queues()`` and the gauge say so."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import duly
from duly.observability import metrics_text

pytestmark = pytest.mark.timeout(90)


def status(app: duly.App, job_id: str) -> str:
    info = app.get_job(job_id)
    assert info is not None
    return info.status


def test_a_paused_queue_finishes_what_runs_and_starts_nothing_until_resumed(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any]
) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task(name="p.slow", queue="mail")
    def slow() -> str:
        started.set()
        assert release.wait(30)
        return "done"

    @app.task(name="p.quick", queue="mail")
    def quick(n: int) -> int:
        return n

    @app.task(name="p.other")
    def other() -> str:
        return "ok"

    running = slow.enqueue()
    with worker_thread(app):
        assert started.wait(30)
        assert app.pause("mail") is True
        assert app.pause("mail") is False
        waiting = quick.enqueue(1)  # enqueue still stores
        later = quick.options(delay=0.2).enqueue(2)
        release.set()
        wait(lambda: status(app, running.id) == "succeeded")  # the running job finished
        done = other.enqueue()
        wait(lambda: status(app, done.id) == "succeeded")  # other queues go on
        wait(lambda: status(app, later.id) == "queued")  # delayed jobs still come due
        assert status(app, waiting.id) == "queued"
        [mail] = [q for q in app.queues() if q.name == "mail"]
        assert (mail.paused, mail.queued) == (True, 2)
        assert 'duly_queue_paused{queue="mail"} 1.0' in metrics_text(app).decode()

        assert app.resume("mail") is True
        assert app.resume("mail") is False
        wait(lambda: status(app, waiting.id) == status(app, later.id) == "succeeded")
    assert not [q for q in app.queues() if q.paused]
    assert 'duly_queue_paused{queue="mail"} 0.0' in metrics_text(app).decode()


def test_the_async_twins_and_a_queue_no_job_used_yet(app: duly.App) -> None:
    async def main() -> None:
        try:
            assert await app.pause_async("fresh") is True
            assert [q for q in await app.queues_async() if q.name == "fresh"] == [
                duly.QueueStats("fresh", paused=True)
            ]
            assert await app.resume_async("fresh") is True
            assert not [q for q in await app.queues_async() if q.paused]
        finally:
            await app.aclose()

    asyncio.run(main())


def test_a_bad_queue_name_is_refused(app: duly.App) -> None:
    with pytest.raises(TypeError):
        app.pause(3)  # type: ignore[arg-type]
    with pytest.raises(duly.ConfigurationError):
        app.pause("no spaces")
    with pytest.raises(duly.ConfigurationError):
        app.resume("")
    assert not [q for q in app.queues() if q.paused]
