"""The schedules capability: stored schedules (upsert by name, delete, list) and skipped
ticks (counted once per tick however many schedulers record it), on every backend."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from contract import T0, BackendFactory

from duly.backends.base import Backend
from duly.backends.schedules import SCHEDULES, ScheduleRecord, SkippedTicks

pytestmark = pytest.mark.timeout(30)


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
