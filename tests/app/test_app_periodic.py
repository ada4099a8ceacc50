"""Periodic tasks (PRODUCT §5): exactly one job per tick however many schedulers run, catch-up
after downtime, cron with time zones, bad schedules."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import duly
from duly._ids import ulid_time
from duly._scheduler import Schedule, Scheduler
from duly._scheduler.periodic import tick_job_id

pytestmark = pytest.mark.timeout(60)


def _ticks_of(app: duly.App, task: str) -> list[float]:
    return sorted(ulid_time(j.id) for j in app.jobs(key=f"periodic:{task}", limit=1000))


def _lap(app: duly.App) -> int:
    async def run() -> int:
        try:
            return await Scheduler(app).run_once(await app.backend())
        finally:
            await app.aclose()

    return asyncio.run(run())


def test_three_schedulers_store_one_job_per_tick(make_app: Callable[..., duly.App]) -> None:
    """Three schedulers (own apps, own loops, own threads) lap for ~4 s over a 1 s schedule."""
    apps = [make_app() for _ in range(3)]
    for app in apps:

        @app.periodic(every=1, name="beat", overlap="queue")  # no worker: every tick stays
        def beat() -> None:
            pass

    stop = threading.Event()
    stored = [0, 0, 0]
    # The window starts once every scheduler has its backend open: opening (a PostgreSQL
    # schema's migrations) can take seconds on a loaded machine, and ticks before the first
    # run are not owed (the first run stores the tick due now, not the ones before it).
    opened = threading.Barrier(4)

    def scheduler(i: int) -> None:
        async def run() -> None:
            runner = Scheduler(apps[i])
            backend = await apps[i].backend()
            opened.wait(60)
            while not stop.is_set():
                await runner.run_once(backend)
                await asyncio.sleep(0.05)
            stored[i] = runner.enqueued
            await apps[i].aclose()

        asyncio.run(run())

    threads = [threading.Thread(target=scheduler, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    opened.wait(60)
    start = time.time()
    time.sleep(4.2)
    stop.set()
    for t in threads:
        t.join(10)
    end = time.time()
    ticks = _ticks_of(apps[0], "beat")
    assert ticks == sorted(set(ticks)), "a tick was stored twice"
    expected = [float(t) for t in range(int(start) + 1, int(end) + 1)]
    # every tick of the window, none missed (the first may be before the window: "due now")
    assert set(expected[:-1]) <= set(ticks)
    assert all(b - a == 1.0 for a, b in itertools.pairwise(ticks))
    assert sum(stored) == len(ticks)  # the schedulers' own counts agree: no duplicate stored
    ids = {j.id for j in apps[0].jobs(key="periodic:beat", limit=1000)}
    assert ids == {tick_job_id("beat", t) for t in ticks}


def test_periodic_jobs_run_in_the_worker(
    app: duly.App, worker_thread: Callable[..., object], wait: Callable[..., object]
) -> None:
    runs: list[float] = []

    @app.periodic(every=timedelta(seconds=1), name="tick", retries=0)
    def tick() -> str:
        runs.append(time.time())
        return "ok"

    with worker_thread(app):
        wait(lambda: len(runs) >= 2, timeout=15)
    done = [j for j in app.jobs(key="periodic:tick") if j.status == "succeeded"]
    assert len(done) >= 2
    assert all(j.result == "ok" and j.task == "tick" for j in done)


@pytest.mark.parametrize(
    ("catch_up", "expected_extra"),
    [("skip", 0), ("one", 1), ("all", 5)],
)
def test_catch_up_after_downtime(
    make_app: Callable[..., duly.App], catch_up: str, expected_extra: int
) -> None:
    clock = duly.ManualClock(start=1_800_000_000.0)  # a multiple of 60
    app = make_app(clock=clock)

    @app.periodic(every=60, catch_up=catch_up, overlap="queue", name="minutely")  # type: ignore[arg-type]
    def minutely() -> None:
        pass

    clock.advance(0.5)
    assert _lap(app) == 1  # first start, a tick is due right now
    assert _lap(app) == 0  # same tick again: nothing new
    clock.advance(60)
    assert _lap(app) == 1  # the next tick, on time
    clock.advance(5 * 60 + 30)  # 5 ticks missed while nothing ran, 30 s late
    assert _lap(app) == expected_extra
    clock.advance(30)  # the next tick comes on time again
    assert _lap(app) == 1
    ticks = _ticks_of(app, "minutely")
    assert len(ticks) == 3 + expected_extra
    if catch_up == "one":
        assert ticks[2] == 1_800_000_000.0 + 6 * 60  # the latest missed tick, once


def test_never_ran_and_no_tick_due_waits_for_the_next(make_app: Callable[..., duly.App]) -> None:
    clock = duly.ManualClock(start=1_800_000_030.0)
    app = make_app(clock=clock)

    @app.periodic(every=60, name="later")
    def later() -> None:
        pass

    assert _lap(app) == 0
    clock.advance(30)
    assert _lap(app) == 1


def test_cron_in_a_time_zone(make_app: Callable[..., duly.App]) -> None:
    # 2026-01-15 08:59:59 in Berlin (UTC+1) = 07:59:59 UTC
    start = datetime(2026, 1, 15, 7, 59, 59, tzinfo=UTC).timestamp()
    clock = duly.ManualClock(start=start)
    app = make_app(clock=clock)

    @app.periodic(cron="0 9 * * *", tz="Europe/Berlin", name="morning")
    def morning() -> None:
        pass

    assert _lap(app) == 0
    clock.advance(1.5)
    assert _lap(app) == 1
    (tick,) = _ticks_of(app, "morning")
    assert datetime.fromtimestamp(tick, UTC) == datetime(2026, 1, 15, 8, 0, tzinfo=UTC)


def test_bad_schedules_are_refused_at_definition(app: duly.App) -> None:
    with pytest.raises(ValueError, match="exactly one of every= or cron="):
        app.periodic()
    with pytest.raises(ValueError, match="exactly one of every= or cron="):
        app.periodic(every=5, cron="* * * * *")
    with pytest.raises(ValueError, match="invalid cron"):
        app.periodic(cron="every tuesday")
    with pytest.raises(ValueError, match="unknown time zone"):
        app.periodic(cron="* * * * *", tz="Mars/Olympus")
    with pytest.raises(ValueError, match="at least 1 second"):
        app.periodic(every=0.1)
    with pytest.raises(ValueError, match="catch_up"):
        app.periodic(every=5, catch_up="some")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="called without arguments"):

        @app.periodic(every=5)
        def needs(x: int) -> None:
            pass


def test_tick_ids_are_time_ordered_and_stable() -> None:
    a, b = tick_job_id("t", 1000.0), tick_job_id("t", 1001.0)
    assert a < b and a == tick_job_id("t", 1000.0) and a != tick_job_id("u", 1000.0)
    schedule = Schedule("t", every=10)
    assert schedule.ticks(100, 135, 10) == [110, 120, 130]
    assert schedule.ticks(100, 1000, 2) == [990, 1000]
    assert Counter(len(tick_job_id("x", t)) for t in (0, 1e9, 4e12 / 1000)) == {26: 3}


SCHEDULED_APP = """
import os
import duly

app = duly.App(os.environ["DULY_URL"], namespace=os.environ["DULY_NAMESPACE"])


@app.periodic(every=1, name="beat", overlap="queue")  # no worker runs: every tick stays
def beat() -> None:
    pass
"""


@pytest.mark.timeout(90)
def test_scheduler_processes_one_killed_midway(
    url_and_namespace: tuple[str, str], make_app: Callable[..., duly.App], tmp_path: Path
) -> None:
    """Three `duly scheduler` processes; one is SIGKILLed halfway: no tick twice, none missed."""
    url, namespace = url_and_namespace
    (tmp_path / "sched_app.py").write_text(SCHEDULED_APP)
    env = {**os.environ, "DULY_URL": url, "DULY_NAMESPACE": namespace,
           "PYTHONPATH": str(tmp_path)}  # fmt: skip
    command = [sys.executable, "-m", "duly", "scheduler", "sched_app:app", "--log-level", "INFO"]
    logs = [tmp_path / f"scheduler{i}.log" for i in range(3)]
    procs = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stderr=log.open("wb")) for log in logs
    ]
    try:
        # A SIGTERM before a process installed its handler would end it with -15, not a clean
        # stop: on a loaded machine an import can take seconds, so wait until all three run.
        deadline = time.monotonic() + 60
        while not all("scheduler started" in log.read_text(errors="replace") for log in logs):
            assert time.monotonic() < deadline, [log.read_text() for log in logs]
            time.sleep(0.1)
        time.sleep(4)
        procs[0].kill()
        killed_at = time.time()
        time.sleep(4)
    finally:
        # Taken before the stop: a loaded machine may take seconds to stop the processes, and
        # no tick is due after they were asked to.
        end = time.time()
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(15) for proc in procs]
    assert codes[1:] == [0, 0], [log.read_text() for log in logs]
    app = make_app()
    ticks = _ticks_of(app, "beat")
    assert len(ticks) == len(set(ticks))
    assert all(b - a == 1.0 for a, b in itertools.pairwise(ticks)), ticks
    # the ticks after the kill kept coming, up to the end
    assert [t for t in ticks if killed_at < t <= end - 1.5]
    assert ticks[-1] >= int(end) - 2


def test_a_tick_job_shows_its_tick_as_scheduled_for(make_app: Callable[..., duly.App]) -> None:
    clock = duly.ManualClock(start=1_800_000_000.0)
    app = make_app(clock=clock)

    @app.periodic(every=60, name="stamped")
    def stamped() -> None:
        pass

    clock.advance(0.5)  # the scheduler sees the tick half a second after it
    assert _lap(app) == 1
    (info,) = app.jobs(key="periodic:stamped")
    assert info.scheduled_for == datetime.fromtimestamp(1_800_000_000.0, UTC)
    assert info.enqueued_at == datetime.fromtimestamp(1_800_000_000.5, UTC)
