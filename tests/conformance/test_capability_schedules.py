"""The schedules capability: stored schedules (upsert by name, delete, list) and skipped
ticks (counted once per tick however many schedulers record it), on every backend."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime

import pytest
from contract import T0, BackendFactory

import duly
from duly._scheduler import Scheduler
from duly.backends.base import Backend
from duly.backends.schedules import SCHEDULES, ScheduleRecord, SkippedTicks

pytestmark = pytest.mark.timeout(30)


def _utc(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def record(name: str, **fields: object) -> ScheduleRecord:
    values: dict[str, object] = {
        "name": name,
        "task": "t.report",
        "queue": "reports",
        "payload": b'{"args":[],"kwargs":{"kind":"daily","\\u00e9":1}}\x00\xff',
        "priority": 3,
        "every": None,
        "cron": "0 3 * * *",
        "tz": "Europe/Berlin",
        "catch_up": "one",
        "overlap": "skip",
        "updated_at": T0,
    }
    values.update(fields)
    return ScheduleRecord(**values)  # type: ignore[arg-type]


async def test_a_schedule_round_trips_exactly(backend: Backend) -> None:
    store = SCHEDULES.of(backend)
    nightly = record("nightly")
    every = record("often", every=30.0, cron=None, tz="UTC", overlap="queue", priority=0)
    assert await store.put(nightly) is True
    assert await store.put(every) is True
    assert await store.all() == [nightly, every]


async def test_put_replaces_the_schedule_of_that_name(backend: Backend) -> None:
    store = SCHEDULES.of(backend)
    await store.put(record("nightly"))
    changed = record("nightly", every=60.0, cron=None, task="t.other", updated_at=T0 + 5)
    assert await store.put(changed) is False
    assert await store.all() == [changed]


async def test_delete_removes_only_that_schedule(backend: Backend) -> None:
    store = SCHEDULES.of(backend)
    await store.put(record("a"))
    await store.put(record("b"))
    assert await store.delete("a") is True
    assert await store.delete("a") is False
    assert await store.delete("never") is False
    assert [r.name for r in await store.all()] == ["b"]


async def test_names_are_any_text(backend: Backend) -> None:
    store = SCHEDULES.of(backend)
    names = ["é 🎉", "a:b/c", "x" * 200]
    for name in names:
        await store.put(record(name))
    assert {r.name for r in await store.all()} == set(names)


async def test_a_skipped_tick_is_counted_once(backend: Backend) -> None:
    store = SCHEDULES.of(backend)
    assert await store.skipped() == {}
    assert await store.skip("periodic:beat", T0) is True
    assert await store.skip("periodic:beat", T0) is False  # another scheduler, same tick
    assert await store.skip("periodic:beat", T0 - 2) is False  # a lagging one, older tick
    assert await store.skip("periodic:beat", T0 + 2.5) is True
    assert await store.skip("schedule:nightly", T0) is True
    assert await store.skipped() == {
        "periodic:beat": SkippedTicks(2, T0 + 2.5),
        "schedule:nightly": SkippedTicks(1, T0),
    }


async def test_three_schedulers_skipping_one_tick_count_it_once(
    backend: Backend, make_backend: BackendFactory
) -> None:
    others = [make_backend() for _ in range(2)]
    for other in others:
        await other.open()
    try:
        stores = [SCHEDULES.of(b) for b in (backend, *others)]
        for tick in range(10):
            counted = await asyncio.gather(*(s.skip("periodic:beat", T0 + tick) for s in stores))
            assert sorted(counted) == [False, False, True]
        assert (await stores[0].skipped())["periodic:beat"] == SkippedTicks(10, T0 + 9)
    finally:
        for other in others:
            await other.close()


async def test_concurrent_puts_of_one_name_leave_one_whole_record(
    backend: Backend, make_backend: BackendFactory
) -> None:
    others = [make_backend() for _ in range(2)]
    for other in others:
        await other.open()
    try:
        versions = [
            record("nightly", task=f"t.v{i}", priority=i, updated_at=T0 + i) for i in range(3)
        ]
        stores = [SCHEDULES.of(b) for b in (backend, *others)]
        await asyncio.gather(*(s.put(v) for s, v in zip(stores, versions, strict=True)))
        (stored,) = await stores[0].all()
        assert stored in versions  # one writer's record, never a mix of two
        assert dataclasses.replace(stored) == versions[stored.priority]
    finally:
        for other in others:
            await other.close()


async def _three_apps(make_backend: BackendFactory, clock: duly.ManualClock) -> list[duly.App]:
    apps = [duly.App(backend=make_backend(), clock=clock) for _ in range(3)]
    for app in apps:

        @app.task(name="t.report")
        def report(kind: str) -> str:
            return kind

    return apps


async def _laps(apps: list[duly.App], schedulers: list[Scheduler]) -> list[int]:
    backends = [await app.backend() for app in apps]
    return list(
        await asyncio.gather(*(s.run_once(b) for s, b in zip(schedulers, backends, strict=True)))
    )


@pytest.mark.parametrize("overlap", ["queue", "skip"])
async def test_three_schedulers_tick_a_stored_schedule_once(
    backend: Backend, make_backend: BackendFactory, overlap: str
) -> None:
    """Three Apps (own backend instances) race on every tick of one stored schedule: one job
    per tick (``overlap="queue"``: no worker runs, so every tick is stored), or, with
    ``overlap="skip"``, the first tick's job still waiting, every later tick skipped and
    counted once. Every stored job has its tick as ``scheduled_for``."""
    clock = duly.ManualClock(start=T0 + 0.25)
    apps = await _three_apps(make_backend, clock)
    try:
        task = apps[0].tasks["t.report"]
        await apps[0].schedule_async("nightly", task.s(kind="daily"), every=1, overlap=overlap)  # type: ignore[arg-type]
        schedulers = [Scheduler(app) for app in apps]
        stored = []
        for _ in range(5):
            stored.append(sum(await _laps(apps, schedulers)))
            clock.advance(1)
        jobs = await apps[1].jobs_async(key="schedule:nightly", limit=100)
        assert all(j.task == "t.report" and j.kwargs == {"kind": "daily"} for j in jobs)
        ticks = sorted(j.scheduled_for.timestamp() for j in jobs if j.scheduled_for)
        (info,) = await apps[2].schedules_async()
        if overlap == "queue":
            assert stored == [1, 1, 1, 1, 1]
            assert ticks == [T0 + i for i in range(5)]
            assert info.skipped == 0
        else:
            assert stored == [1, 0, 0, 0, 0]
            assert ticks == [T0]
            assert (info.skipped, info.last_skipped_tick) == (4, _utc(T0 + 4))
            assert sum(s.skipped for s in schedulers) == 4  # each tick counted by one of them
        assert (info.kind, info.last_tick, info.key) == (
            "stored",
            _utc(ticks[-1]),
            "schedule:nightly",
        )
    finally:
        for app in apps:
            await app.aclose()


async def test_a_changed_schedule_ticks_the_new_call_and_a_removed_one_stops(
    backend: Backend, make_backend: BackendFactory
) -> None:
    clock = duly.ManualClock(start=T0 + 0.25)
    apps = await _three_apps(make_backend, clock)
    try:
        task = apps[0].tasks["t.report"]
        schedulers = [Scheduler(app) for app in apps]
        await apps[0].schedule_async("r", task.s(kind="a"), every=60, overlap="queue")
        assert sum(await _laps(apps, schedulers)) == 1
        # changed by another App: the next tick is every 1 s and enqueues the new arguments
        await apps[1].schedule_async(
            "r", apps[1].tasks["t.report"].s(kind="b"), every=1, overlap="queue"
        )
        clock.advance(1)
        assert sum(await _laps(apps, schedulers)) == 1
        newest = (await apps[2].jobs_async(key="schedule:r", limit=1))[0]
        assert newest.kwargs == {"kind": "b"}
        assert await apps[2].unschedule_async("r") is True
        clock.advance(1)
        assert sum(await _laps(apps, schedulers)) == 0
        assert await apps[0].unschedule_async("r") is False
        assert await apps[0].schedules_async() == []
    finally:
        for app in apps:
            await app.aclose()
