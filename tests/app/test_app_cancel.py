"""Cancelling a running job (PRODUCT §2, docs/guide.md "Cancelling"): the cancel is a request
the worker learns at its next heartbeat; an async job is cancelled, a sync job is asked (its
``current_job().cancel_requested``) and runs on until its function returns; either way the job
ends ``cancelled``, never retried, failed or reported as a failure."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

import duly

pytestmark = pytest.mark.timeout(60)


def status(app: duly.App, job: duly.Job) -> str:
    info = app.get_job(job.id)
    assert info is not None
    return info.status


def test_an_async_job_is_cancelled(app: duly.App, worker_thread, wait) -> None:
    started, stopped = threading.Event(), threading.Event()
    seen: list[bool] = []

    @app.task(name="t.long")
    async def long() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(duly.current_job().cancel_requested)
            stopped.set()
            raise
        return "should not finish"

    @app.task(name="t.next")
    def next_one() -> str:
        return "next"

    job = long.enqueue()
    with worker_thread(app) as worker:
        wait(lambda: started.is_set())
        assert app.cancel(job.id) is True
        wait(stopped.is_set)  # at the next heartbeat (every lease / 3)
        wait(lambda: status(app, job) == "cancelled")
        assert seen == [True], "cancelled at the worker's heartbeat, with the flag set"
        after = next_one.enqueue()
        wait(lambda: status(app, after) == "succeeded")
    assert (worker.stats.cancelled, worker.stats.failed, worker.stats.lost) == (1, 0, 0)
    info = app.get_job(job.id)
    assert info is not None and info.result is None and info.error is None
    assert app.cancel(job.id) is False, "already cancelled"


def test_a_sync_job_stops_at_its_checkpoint(app: duly.App, worker_thread, wait) -> None:
    started, reported = threading.Event(), []

    @app.task(name="t.crunch", retries=3)
    def crunch() -> str:
        started.set()
        for _ in range(3000):  # 30 s at most
            duly.current_job().raise_if_cancelled()
            time.sleep(0.01)
        return "done"

    app.on_failure(lambda info, exc: reported.append(info.id))
    job = crunch.enqueue()
    with worker_thread(app):
        wait(lambda: started.is_set())
        assert app.cancel(job.id) is True
        wait(lambda: status(app, job) == "cancelled")
    info = app.get_job(job.id)
    assert info is not None
    assert (info.attempts, info.error, info.result) == (1, None, None), "not retried, not failed"
    assert reported == [], "a cancel is no failure"


def test_a_sync_job_runs_until_its_function_returns(
    make_app, worker_thread, wait, caplog: pytest.LogCaptureFixture
) -> None:
    """A thread is never interrupted: the job stays running (and holds its mutex) until its
    function returns, then ends cancelled; its result is not kept."""
    app = make_app()
    saw_cancel, release = threading.Event(), threading.Event()

    @app.task(name="t.stubborn", mutex="one")
    def stubborn() -> str:
        while not duly.current_job().cancel_requested:
            time.sleep(0.01)
        saw_cancel.set()
        release.wait(20)
        return "finished anyway"

    caplog.set_level(logging.INFO, logger="duly.worker")
    job, queued_behind = stubborn.enqueue(), stubborn.enqueue()
    assert app.cancel(queued_behind.id) is True
    second = stubborn.enqueue()
    with worker_thread(app, concurrency=2):
        wait(lambda: status(app, job) == "running")
        assert app.cancel(job.id) is True
        assert saw_cancel.wait(10)
        assert status(app, job) == "running", "its thread still runs"
        assert status(app, second) == "queued", "and it still holds its mutex"
        release.set()
        wait(lambda: status(app, job) == "cancelled")
        wait(lambda: saw_cancel.is_set() and status(app, second) == "running")
        assert app.cancel(second.id)
        wait(lambda: status(app, second) == "cancelled")
    info = app.get_job(job.id)
    assert info is not None and info.result is None
    assert status(app, queued_behind) == "cancelled"
    lines = [r.getMessage() for r in caplog.records if job.id in r.getMessage()]
    assert any("cancelled while it ran" in line for line in lines), lines
    assert not any("dropped" in line for line in lines), lines


def test_a_cancel_whose_worker_died_still_ends(app: duly.App, worker_thread, wait) -> None:
    """The cancel was requested, then the job's worker died: lease recovery cancels it (it is
    not run again)."""
    ran: list[Any] = []

    @app.task(name="t.orphan")
    def orphan() -> None:
        ran.append(1)

    job = orphan.enqueue()

    async def claim_and_die() -> None:
        try:
            backend = await app.backend()
            now = app.clock.now()
            assert [r.id for r in await backend.claim("dead", ["default"], 1, now, now + 1)] == [
                job.id
            ]
        finally:
            await app.aclose()

    asyncio.run(claim_and_die())
    assert app.cancel(job.id) is True
    assert status(app, job) == "running"
    with worker_thread(app) as worker:
        wait(lambda: status(app, job) == "cancelled")
        wait(lambda: worker.stats.cancelled == 1)  # counted once the job is read back
    assert ran == []
