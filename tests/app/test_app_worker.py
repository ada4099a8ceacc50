"""The in-process ``duly.Worker`` (PRODUCT §1): graceful stop, hand-back past the grace,
concurrency, and several queues."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import duly

pytestmark = pytest.mark.timeout(60)


def info_of(app: duly.App, job_id: str) -> duly.JobInfo:
    info = app.get_job(job_id)
    assert info is not None, f"job {job_id} vanished"
    return info


def both_running(app: duly.App, *jobs: duly.Job) -> bool:
    return all(info_of(app, j.id).status == "running" for j in jobs)


def test_graceful_stop_lets_running_jobs_finish(app: duly.App, worker_thread, wait) -> None:
    @app.task(name="t.sync_work")
    def sync_work() -> str:
        time.sleep(1.0)
        return "sync"

    @app.task(name="t.async_work")
    async def async_work() -> str:
        await asyncio.sleep(1.0)
        return "async"

    jobs = [sync_work.enqueue(), async_work.enqueue()]
    runner = worker_thread(app, concurrency=2, grace=10)
    with runner as worker:
        wait(lambda: both_running(app, *jobs))
        asked = time.monotonic()
        worker.stop()
    # leaving the block joined the worker: it stopped by itself once both jobs finished
    assert time.monotonic() - asked < 10
    for job, result in zip(jobs, ("sync", "async"), strict=True):
        info = info_of(app, job.id)
        assert (info.status, info.result, info.attempts, info.errors) == (
            "succeeded",
            result,
            1,
            [],
        )
    assert worker.stats.succeeded == 2 and worker.stats.failed == 0


def test_stop_past_the_grace_hands_jobs_back_uncharged(app: duly.App, worker_thread, wait) -> None:
    halt = threading.Event()

    @app.task(name="t.sync_long", retries=0)
    def sync_long() -> str:
        for _ in range(300):  # 3 s of short, interruptible sleeps
            if halt.is_set():
                break
            time.sleep(0.01)
        return "sync"

    @app.task(name="t.async_long", retries=0)
    async def async_long() -> str:
        await asyncio.sleep(3.0)
        return "async"

    jobs = [sync_long.enqueue(), async_long.enqueue()]
    try:
        with worker_thread(app, concurrency=2, grace=0.3) as worker:
            wait(lambda: both_running(app, *jobs))
            asked = time.monotonic()
            worker.stop()
        assert time.monotonic() - asked < 2.5, "it should not wait for the 3 s jobs"
    finally:
        halt.set()
    for job in jobs:
        info = info_of(app, job.id)
        assert info.status == "queued", info
        assert info.attempts == 0, "a hand-back must not charge an attempt"
        assert info.errors == [] and info.worker is None
    assert sum(r.failed + r.retried for r in app.stats()) == 0

    halt.clear()
    with worker_thread(app, concurrency=2):
        wait(lambda: all(info_of(app, j.id).finished for j in jobs))
    for job, result in zip(jobs, ("sync", "async"), strict=True):
        info = info_of(app, job.id)
        assert (info.status, info.result, info.attempts) == ("succeeded", result, 1)
    # the first worker's own account of it ("what this worker did, for ... tests")
    assert (worker.stats.handed_back, worker.stats.lost, worker.stats.failed) == (2, 0, 0)


def test_concurrency_bounds_running_jobs(app: duly.App, run_burst) -> None:
    lock = threading.Lock()
    running = [0]
    peak = [0]

    @app.task(name="t.count")
    def count() -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1

    @app.task(name="t.acount")
    async def acount() -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.1)
        with lock:
            running[0] -= 1

    app.enqueue_many([count.s() for _ in range(6)] + [acount.s() for _ in range(6)])
    worker = run_burst(app, concurrency=3)
    assert peak[0] == 3
    assert worker.stats.succeeded == 12


def test_queues_are_tried_in_order(app: duly.App, run_burst) -> None:
    order: list[str] = []

    @app.task(name="t.note")
    def note(what: str) -> None:
        order.append(what)

    for n in range(3):
        note.options(queue="low").enqueue(f"low{n}")
    for n in range(3):
        note.options(queue="high").enqueue(f"high{n}")
    note.options(queue="ignored").enqueue("ignored")
    run_burst(app, queues=["high", "low"], concurrency=1)
    assert order == ["high0", "high1", "high2", "low0", "low1", "low2"]
    assert [q.queued for q in app.queues() if q.name == "ignored"] == [1]


def test_a_job_failing_during_a_graceful_stop_is_reported(
    app: duly.App, worker_thread, wait
) -> None:
    """``on_failure``: "failures are reported, never silent" -- also for a job that fails for
    good while the worker is stopping."""
    reported: list[str] = []
    app.on_failure(lambda info, error: reported.append(info.id))

    @app.task(name="t.doomed", retries=0)
    async def doomed() -> None:
        await asyncio.sleep(0.5)
        raise ValueError("failed while the worker stopped")

    job = doomed.enqueue()
    with worker_thread(app, grace=10) as worker:
        wait(lambda: info_of(app, job.id).status == "running")
        worker.stop()
    info = info_of(app, job.id)
    assert (info.status, info.attempts) == ("failed", 1)
    assert reported == [job.id]
    assert (worker.stats.failed, worker.stats.lost) == (1, 0)


def test_a_starting_worker_recovers_orphans_before_its_first_claim(
    app: duly.App, run_burst
) -> None:
    """PRODUCT §17, seed 002: the job a dead worker left running (its lease lapsed) runs
    before a newer queued job, because a fresh worker recovers before it claims (issue 31.5)."""
    from services import claim_as

    ran: list[str] = []

    @app.task(name="t.in_order", retries=0)
    def in_order(name: str) -> None:
        ran.append(name)

    orphan = in_order.enqueue("orphan")
    claim_as(app, orphan.id, "dead-worker", lease=-1)
    newer = in_order.enqueue("newer")
    run_burst(app, concurrency=1)
    assert ran == ["orphan", "newer"]
    assert [info_of(app, j.id).status for j in (orphan, newer)] == ["succeeded"] * 2
