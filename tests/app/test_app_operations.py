"""Operator actions and history (PRODUCT §2, §3): ``app.cancel``, ``app.retry``, per-minute
counters, queue stats, workers, and retention driven by a ``duly.ManualClock``."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

import duly
from duly._worker.maintenance import Maintenance, Retention
from duly._worker.outcomes import BATCH_LIMIT

pytestmark = pytest.mark.timeout(60)

UNKNOWN_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def info_of(app: duly.App, job_id: str) -> duly.JobInfo:
    info = app.get_job(job_id)
    assert info is not None, f"job {job_id} vanished"
    return info


def purge(app: duly.App) -> int:
    """Run the backend's retention pass once at the app's clock time."""

    async def go() -> int:
        try:
            return await (await app.backend()).purge(app.clock.now(), 1000)
        finally:
            await app.aclose()

    return asyncio.run(go())


def test_cancel_a_queued_or_scheduled_job(app: duly.App, run_burst) -> None:
    ran: list[str] = []

    @app.task(name="t.work")
    def work(name: str) -> None:
        ran.append(name)

    queued = work.enqueue("queued")
    scheduled = work.options(delay=3600).enqueue("scheduled")
    keep = work.enqueue("keep")
    assert app.cancel(queued.id) is True
    assert app.cancel(scheduled.id) is True
    for job in (queued, scheduled):
        info = info_of(app, job.id)
        assert info.status == "cancelled"
        assert info.finished
        assert info.finished_at is not None
    assert app.cancel(queued.id) is False, "already cancelled"
    assert app.cancel(UNKNOWN_ID) is False
    run_burst(app, limit=10)
    assert ran == ["keep"]
    assert info_of(app, keep.id).status == "succeeded"
    assert app.cancel(keep.id) is False, "a finished job cannot be cancelled"
    assert info_of(app, keep.id).status == "succeeded"


def test_retry_a_failed_job(app: duly.App, run_burst) -> None:
    broken = [True]

    @app.task(name="t.fixable", retries=0)
    def fixable(n: int) -> int:
        if broken[0]:
            raise ValueError("still broken")
        return n + 1

    job = fixable.options(key="thing:1").enqueue(41)
    run_burst(app)
    failed = info_of(app, job.id)
    assert (failed.status, failed.attempts) == ("failed", 1)

    broken[0] = False
    assert app.retry(job.id) is True
    again = info_of(app, job.id)
    assert again.status == "queued"
    assert again.attempts == 0
    assert again.finished_at is None
    assert [e["message"] for e in again.errors] == ["still broken"], "history is kept"
    run_burst(app)
    done = info_of(app, job.id)
    assert (done.status, done.result, done.attempts) == ("succeeded", 42, 1)
    assert (done.key, done.args) == ("thing:1", [41])
    assert len(done.errors) == 1
    assert app.retry(job.id) is False, "a succeeded job is not retried"
    assert app.retry(UNKNOWN_ID) is False


def test_retry_a_cancelled_job(app: duly.App, run_burst) -> None:
    @app.task(name="t.work")
    def work() -> str:
        return "done"

    job = work.enqueue()
    assert app.cancel(job.id)
    assert app.retry(job.id) is True
    assert info_of(app, job.id).status == "queued"
    run_burst(app)
    assert info_of(app, job.id).status == "succeeded"


def test_retry_and_cancel_async_twins(app: duly.App) -> None:
    @app.task(name="t.work")
    def work() -> None:
        return None

    job = work.enqueue()

    async def go() -> tuple[bool, bool, bool]:
        try:
            return (
                await app.cancel_async(job.id),
                await app.retry_async(job.id),
                await app.cancel_async(UNKNOWN_ID),
            )
        finally:
            await app.aclose()

    assert asyncio.run(go()) == (True, True, False)
    assert info_of(app, job.id).status == "queued"


def test_per_minute_stats_count_outcomes(app: duly.App, worker_thread, wait) -> None:
    @app.task(name="t.ok")
    def ok() -> None:
        return None

    @app.task(name="t.doomed", retries=2, backoff=duly.Backoff(0.05, 0.1))
    def doomed() -> None:
        raise ValueError("no")

    @app.task(name="t.elsewhere", queue="other")
    async def elsewhere() -> None:
        return None

    jobs = [ok.enqueue() for _ in range(3)] + [doomed.enqueue(), elsewhere.enqueue()]
    with worker_thread(app, queues=["default", "other"]):
        wait(lambda: all(info_of(app, j.id).finished for j in jobs))
    rows = app.stats()
    assert rows, "no counters"
    for row in rows:
        assert isinstance(row, duly.StatRow)
        assert isinstance(row.minute, int)
        assert abs(row.minute * 60 - app.clock.now()) < 180

    def total(task: str, queue: str) -> tuple[int, int, int]:
        mine = [r for r in rows if (r.task, r.queue) == (task, queue)]
        return (
            sum(r.succeeded for r in mine),
            sum(r.failed for r in mine),
            sum(r.retried for r in mine),
        )

    assert total("t.ok", "default") == (3, 0, 0)
    assert total("t.doomed", "default") == (0, 1, 2)
    assert total("t.elsewhere", "other") == (1, 0, 0)
    assert app.stats(minutes=1440)  # the whole day is kept
    with pytest.raises(ValueError):
        app.stats(minutes=0)
    with pytest.raises(ValueError):
        app.stats(minutes=1441)


def test_stats_are_per_minute_buckets(make_app, run_burst) -> None:
    clock = duly.ManualClock(start=1_800_000_000.0)  # on a minute boundary
    app = make_app(clock=clock)

    @app.task(name="t.ok")
    def ok() -> None:
        return None

    ok.enqueue()
    run_burst(app)
    clock.advance(60)
    ok.enqueue()
    ok.enqueue()
    run_burst(app)
    rows = sorted((r.minute, r.succeeded) for r in app.stats() if r.task == "t.ok")
    assert rows == [(30_000_000, 1), (30_000_001, 2)]
    assert [(r.minute, r.succeeded) for r in app.stats(minutes=1) if r.task == "t.ok"] == [
        (30_000_001, 2)
    ]


def test_queue_stats(app: duly.App, worker_thread, wait) -> None:
    release = threading.Event()

    @app.task(name="t.block", queue="busy")
    def block() -> None:
        release.wait(20)

    @app.task(name="t.idle")
    def idle() -> None:
        return None

    for _ in range(3):
        idle.enqueue()
    idle.options(delay=3600).enqueue()
    idle.options(queue="later", delay=3600).enqueue()
    running = block.enqueue()
    try:
        with worker_thread(app, queues=["busy"]):
            wait(lambda: info_of(app, running.id).status == "running")
            found = {q.name: q for q in app.queues()}
            assert all(isinstance(q, duly.QueueStats) for q in found.values())
            assert list(found) == sorted(found)
            d = found["default"]
            assert (d.queued, d.scheduled, d.running) == (3, 1, 0)
            b = found["busy"]
            assert (b.queued, b.scheduled, b.running) == (0, 0, 1)
            later = found["later"]
            assert (later.queued, later.scheduled, later.running) == (0, 1, 0)
            release.set()
            wait(lambda: info_of(app, running.id).status == "succeeded")
    finally:
        release.set()
    b = {q.name: q for q in app.queues()}["busy"]
    assert (b.queued, b.scheduled, b.running) == (0, 0, 0)


def test_workers_are_registered_while_they_run(app: duly.App, worker_thread, wait) -> None:
    with worker_thread(app, concurrency=3) as worker:
        record = wait(lambda: next((w for w in app.workers() if w.id == worker.id), None))
        assert isinstance(record, duly.WorkerRecord)
        assert record.last_seen >= record.started_at
        assert record.info.get("concurrency") == 3
    assert worker.id not in {w.id for w in app.workers()}, "a clean stop unregisters"


def test_retention_deletes_finished_jobs_after_their_time(make_app, run_burst) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock, retention=60, failed_retention=600)

    @app.task(name="t.ok")
    def ok() -> None:
        return None

    @app.task(name="t.brief", retention=timedelta(seconds=10))
    def brief() -> None:
        return None

    @app.task(name="t.doomed", retries=0)
    def doomed() -> None:
        raise ValueError("no")

    @app.task(name="t.doomed_brief", retries=0, failed_retention=30)
    def doomed_brief() -> None:
        raise ValueError("no")

    good = ok.options(key="k").enqueue()
    short = brief.options(key="k").enqueue()
    bad = doomed.options(key="k").enqueue()
    bad_short = doomed_brief.enqueue()
    run_burst(app)
    waiting = ok.options(delay=100_000).enqueue()
    cancelled = ok.enqueue()
    app.cancel(cancelled.id)

    def alive() -> set[str]:
        jobs = (good, short, bad, bad_short, waiting, cancelled)
        return {j.id for j in jobs if app.get_job(j.id) is not None}

    everything = {good.id, short.id, bad.id, bad_short.id, waiting.id, cancelled.id}
    assert purge(app) == 0
    assert alive() == everything
    clock.advance(11)
    assert purge(app) == 1
    assert alive() == everything - {short.id}
    assert [i.id for i in app.jobs(key="k")] == [bad.id, good.id], "the key index is trimmed"
    clock.advance(20)  # t = 31
    purge(app)
    assert alive() == everything - {short.id, bad_short.id}
    clock.advance(30)  # t = 61
    purge(app)
    assert alive() == {bad.id, waiting.id, cancelled.id}
    assert [i.id for i in app.jobs(key="k")] == [bad.id]
    clock.advance(540)  # t = 601
    purge(app)
    assert alive() == {waiting.id}, "failed and cancelled jobs go after failed_retention"
    assert app.jobs(key="k") == []
    assert [i.id for i in app.jobs()] == [waiting.id], "a job that has not run is never purged"


def test_default_retention_is_a_day_for_finished_and_a_week_for_failed(make_app, run_burst) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock)

    @app.task(name="t.ok")
    def ok() -> None:
        return None

    @app.task(name="t.doomed", retries=0)
    def doomed() -> None:
        raise ValueError("no")

    good, bad = ok.enqueue(), doomed.enqueue()
    run_burst(app)
    clock.advance(24 * 3600 - 5)
    purge(app)
    assert app.get_job(good.id) is not None
    clock.advance(10)
    purge(app)
    assert app.get_job(good.id) is None
    assert app.get_job(bad.id) is not None
    clock.advance(6 * 24 * 3600)
    purge(app)
    assert app.get_job(bad.id) is None


def test_the_worker_purges_expired_jobs_itself(make_app, worker_thread, wait) -> None:
    """Retention runs in the worker's maintenance (a quarter of the retention, at most every
    30 s): no cron needed."""
    clock = duly.ManualClock()
    app = make_app(clock=clock, retention=1)

    @app.task(name="t.ok")
    def ok() -> None:
        return None

    job = ok.enqueue()
    with worker_thread(app):
        wait(lambda: info_of(app, job.id).status == "succeeded")
        clock.advance(5)
        wait(lambda: app.get_job(job.id) is None, 45)


def test_one_purge_round_clears_a_backlog_bigger_than_a_batch(
    make_app, url_and_namespace, run_burst
) -> None:
    """Issue 28.1: one batch of 1,000 per 30 s could not keep pace with a steady load (33
    jobs/s); a round now purges batch after batch until nothing expired is left."""
    clock = duly.ManualClock()
    app = make_app(clock=clock, retention=60)

    @app.task(name="t.ok")
    def ok(n: int) -> None:
        return None

    total = 2 * BATCH_LIMIT + 500
    for start in range(0, total, 500):
        app.enqueue_many([ok.s(n) for n in range(start, start + 500)])
    run_burst(app)
    clock.advance(120)  # every job has expired

    async def one_round() -> bool:
        backend = duly.backend_from_url(*url_and_namespace)
        await backend.open()
        try:
            maintenance = Maintenance(
                backend,
                clock,
                worker="w-test",
                lease=30.0,
                retention=Retention(3, 60.0, 86_400.0, 60.0),
                hooks=app.hooks,
                reporter=None,  # type: ignore[arg-type]  # the purge reports nothing
                held=list,
                share=None,
                stop_runs=lambda ids: None,
                report_failure=None,  # type: ignore[arg-type]
                freshness=None,  # type: ignore[arg-type]
            )
            return await maintenance.purge()
        finally:
            await backend.close()

    backlog_left = asyncio.run(one_round())
    assert not backlog_left
    assert app.jobs(limit=10) == []
    assert Retention(3, 60.0, 86_400.0, 60.0).purge_interval == 15.0
    assert Retention(3, 600.0, 86_400.0, 3_600.0).purge_interval == 30.0
    assert Retention(3, 600.0, 86_400.0, 1.0).purge_interval == 1.0
