"""Runtime schedules (PRODUCT §15) and overlapping ticks (PRODUCT §17): ``app.schedule`` /
``unschedule`` / ``schedules``, ``overlap="skip"`` by default, on every backend."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import duly
from duly._scheduler import Scheduler
from duly.observability import metrics_text

pytestmark = pytest.mark.timeout(90)

T = 1_800_000_000.0  # a multiple of 60


def _utc(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def _lap(app: duly.App) -> int:
    async def run() -> int:
        try:
            return await Scheduler(app).run_once(await app.backend())
        finally:
            await app.aclose()

    return asyncio.run(run())


def test_a_tick_is_skipped_while_the_previous_job_still_waits(
    make_app: Callable[..., duly.App],
    run_burst: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = duly.ManualClock(start=T + 0.5)
    app = make_app(clock=clock)

    @app.periodic(every=60, name="minutely")
    def minutely() -> None:
        pass

    assert _lap(app) == 1
    first = app.jobs(key="periodic:minutely")[0]
    clock.advance(60)  # the first job has not run yet: this tick is skipped
    with caplog.at_level(logging.INFO, logger="duly.scheduler"):
        assert _lap(app) == 0
        assert _lap(app) == 0  # seen again by the next lap: counted once
    assert "periodic minutely: tick 2027-01-15T08:01:00+00:00 skipped" in caplog.text
    (info,) = app.schedules()
    assert (info.kind, info.overlap, info.skipped) == ("decorated", "skip", 1)
    assert info.last_skipped_tick == _utc(T + 60)
    assert (info.last_job_id, info.last_status, info.last_tick) == (first.id, "queued", _utc(T))
    text = metrics_text(app).decode()
    assert 'duly_schedule_skipped_ticks{schedule="minutely"} 1.0' in text
    run_burst(app, scheduler=False)
    assert _lap(app) == 0  # the skipped tick is not run late now that the job ended
    clock.advance(60)
    assert _lap(app) == 1  # the next tick runs
    ticks = sorted(j.scheduled_for for j in app.jobs(key="periodic:minutely"))
    assert ticks == [_utc(T), _utc(T + 120)]


def test_a_task_with_its_own_unique_key_keeps_it_for_its_ticks(
    make_app: Callable[..., duly.App],
) -> None:
    """overlap="skip" dedupes ticks by the schedule's key, unless the task has a unique key of
    its own: then that key holds (a direct enqueue and a tick share one job, as the task says)."""
    clock = duly.ManualClock(start=T + 0.5)
    app = make_app(clock=clock)

    @app.periodic(every=60, name="report", unique="report")
    def report() -> None:
        pass

    direct = report.enqueue()
    assert _lap(app) == 0  # the tick finds the task's own unique job waiting
    assert [j.id for j in app.jobs(task="report")] == [direct.id]
    (info,) = app.schedules()
    assert info.skipped == 1


def test_overlap_queue_stores_every_tick(make_app: Callable[..., duly.App]) -> None:
    clock = duly.ManualClock(start=T + 0.5)
    app = make_app(clock=clock)

    @app.periodic(every=60, name="minutely", overlap="queue")
    def minutely() -> None:
        pass

    assert _lap(app) == 1
    clock.advance(60)
    assert _lap(app) == 1
    (info,) = app.schedules()
    assert (info.overlap, info.skipped, info.last_skipped_tick) == ("queue", 0, None)
    assert len(app.jobs(key="periodic:minutely")) == 2


def test_a_slow_periodic_job_never_overlaps_itself(
    make_app: Callable[..., duly.App], worker_thread: Callable[..., Any]
) -> None:
    """Seed 001's clock.rb: a 3 s job every 2 s, three schedulers (one of them the worker's),
    never two of its jobs waiting or running at once, and no backlog."""
    apps = [make_app() for _ in range(3)]
    for app in apps:

        @app.periodic(every=2, name="slow", retries=0)
        def slow() -> None:
            time.sleep(3)

    stop = threading.Event()

    def scheduler(app: duly.App) -> None:
        async def run() -> None:
            runner = Scheduler(app)
            backend = await app.backend()
            while not stop.is_set():
                await runner.run_once(backend)
                await asyncio.sleep(0.05)
            await app.aclose()

        asyncio.run(run())

    threads = [threading.Thread(target=scheduler, args=(app,)) for app in apps[1:]]
    with worker_thread(apps[0], concurrency=4):
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(apps[0].jobs(key="periodic:slow", status="succeeded")) < 2:
            assert time.monotonic() < deadline, apps[0].jobs(key="periodic:slow")
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join(10)
    jobs = sorted(apps[0].jobs(key="periodic:slow", limit=100), key=lambda j: j.id)
    # each job was stored only once the one before it had ended: no two ever ran at once
    for before, after in itertools.pairwise(jobs):
        assert before.finished_at is not None
        assert after.started_at is None or before.finished_at <= after.started_at
    assert [j.status for j in jobs[:-1]] == ["succeeded"] * (len(jobs) - 1)
    (info,) = apps[0].schedules()
    assert info.skipped >= 1


def test_a_stored_schedule_ticks_its_call(make_app: Callable[..., duly.App]) -> None:
    clock = duly.ManualClock(start=T + 0.5)
    app = make_app(clock=clock)

    @app.task(name="report")
    def report(kind: str, pages: int = 1) -> str:
        return kind

    @app.periodic(every=3600, name="hourly")
    def hourly() -> None:
        pass

    info = app.schedule(
        "nightly", report.options(queue="reports", priority=4).s("daily", pages=2), every=60
    )
    assert (info.name, info.kind, info.task, info.every, info.cron) == (
        "nightly", "stored", "report", 60.0, None,
    )  # fmt: skip
    assert (info.args, info.kwargs, info.queue, info.priority) == (
        ["daily"],
        {"pages": 2},
        "reports",
        4,
    )
    assert (info.next_tick, info.last_tick, info.updated_at) == (_utc(T + 60), None, _utc(T + 0.5))
    assert _lap(app) == 2  # the decorated hourly's tick and the stored one's
    (job,) = app.jobs(key="schedule:nightly")
    assert (job.task, job.args, job.kwargs, job.queue, job.priority) == (
        "report", ["daily"], {"pages": 2}, "reports", 4,
    )  # fmt: skip
    assert job.scheduled_for == _utc(T)
    listed = app.schedules()
    assert [(s.name, s.kind) for s in listed] == [("hourly", "decorated"), ("nightly", "stored")]
    assert listed[1].last_job_id == job.id and listed[1].last_tick == _utc(T)


def test_a_cron_schedule_in_a_time_zone(make_app: Callable[..., duly.App]) -> None:
    start = datetime(2026, 1, 15, 1, 59, 59, tzinfo=UTC).timestamp()  # 02:59:59 in Berlin
    clock = duly.ManualClock(start=start)
    app = make_app(clock=clock)

    @app.task(name="report")
    def report(kind: str) -> None:
        pass

    app.schedule("nightly", report.s(kind="daily"), cron="0 3 * * *", tz="Europe/Berlin")
    assert _lap(app) == 0
    clock.advance(1.5)
    assert _lap(app) == 1
    (job,) = app.jobs(key="schedule:nightly")
    assert job.scheduled_for == datetime(2026, 1, 15, 2, 0, tzinfo=UTC)


def test_unschedule_stops_it(make_app: Callable[..., duly.App]) -> None:
    clock = duly.ManualClock(start=T + 0.5)
    app = make_app(clock=clock)

    @app.task(name="report")
    def report() -> None:
        pass

    app.schedule("often", report.s(), every=60, overlap="queue")
    assert _lap(app) == 1
    assert app.unschedule("often") is True
    assert app.unschedule("often") is False
    clock.advance(60)
    assert _lap(app) == 0
    assert app.schedules() == []


def test_bad_schedules_are_refused_and_nothing_is_stored(make_app: Callable[..., duly.App]) -> None:
    app = make_app()
    other = make_app()

    @app.task(name="report")
    def report(kind: str) -> None:
        pass

    @other.task(name="elsewhere")
    def elsewhere() -> None:
        pass

    @app.periodic(every=60, name="hourly")
    def hourly() -> None:
        pass

    sig = report.s(kind="daily")
    refused: list[tuple[Any, str]] = [
        (lambda: app.schedule("x", elsewhere.s(), every=60), "not registered in this app"),
        (lambda: app.schedule("x", sig, cron="every day"), "invalid cron"),
        (lambda: app.schedule("x", sig, cron="0 3 * * *", tz="Mars/Base"), "unknown time zone"),
        (lambda: app.schedule("x", sig, every=60, cron="0 3 * * *"), "exactly one of"),
        (lambda: app.schedule("x", sig), "exactly one of"),
        (lambda: app.schedule("x", sig, every=0.5), "at least 1 second"),
        (lambda: app.schedule("x", sig, every=60, overlap="pile"), "overlap"),  # type: ignore[arg-type]
        (lambda: app.schedule("", sig, every=60), "schedule name"),
        (lambda: app.schedule("a/b", sig, every=60), "schedule name"),
        (lambda: app.schedule("hourly", sig, every=60), "periodic task of this app"),
        (lambda: app.schedule("x", report.options(delay=5).s(kind="d"), every=60), "delay="),
    ]
    for call, message in refused:
        with pytest.raises(duly.ConfigurationError, match=message):
            call()
    with pytest.raises(TypeError):
        app.schedule("x", report.s(kind="daily", extra=1), every=60)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="signature"):
        app.schedule("x", report, every=60)  # type: ignore[arg-type]
    assert [s.kind for s in app.schedules()] == ["decorated"]


def test_the_async_twins(make_app: Callable[..., duly.App]) -> None:
    app = make_app()

    @app.task(name="report")
    def report() -> None:
        pass

    async def run() -> None:
        try:
            info = await app.schedule_async("often", report.s(), every=30)
            assert info.every == 30.0
            assert [s.name for s in await app.schedules_async()] == ["often"]
            assert await app.unschedule_async("often") is True
        finally:
            await app.aclose()

    asyncio.run(run())
