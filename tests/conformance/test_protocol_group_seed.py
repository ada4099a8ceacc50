"""Groups as seed 001 needs them (PRODUCT §17), on every backend: a named group is stored once
(``NewGroup.name``: a second store answers the stored group, atomically under concurrency),
and a group counts each member's current outcome (an operator retry takes an outcome back;
the callback is queued by the first completion only)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from contract import (
    EXPIRE,
    T0,
    W1,
    W2,
    BackendFactory,
    claim_ids,
    finish_one,
    in_own_thread,
    opened,
)
from contract import job as job_of
from test_protocol_groups_events import all_events, failed, make_group, ok

from duly._records import NewGroup, NewJob
from duly.backends.base import Backend


def named(name: str, n: int = 2) -> tuple[NewGroup, list[NewJob]]:
    group, members = make_group(n, key=name)
    return dataclasses.replace(group, name=name), members


async def test_a_named_group_is_stored_once(backend: Backend) -> None:
    group, members = named("obs-event:9")
    stored = await backend.groups.store(group, members)
    assert (stored.id, stored.members, stored.deduplicated) == (
        group.id,
        [m.id for m in members],
        False,
    )
    again, others = named("obs-event:9", 3)
    second = await backend.groups.store(again, others)
    assert (second.id, second.members, second.deduplicated) == (stored.id, stored.members, True)
    for other in [*others, again.callback]:  # nothing of the second group was stored
        assert other is not None and await backend.get_job(other.id) is None
    assert await backend.groups.get(again.id) is None
    by_name = await backend.groups.get("obs-event:9")
    by_id = await backend.groups.get(group.id)
    assert by_name is not None and by_name == by_id
    assert (by_name.id, by_name.name, by_name.total) == (group.id, "obs-event:9", 2)
    # Another name is another group.
    third, more = named("obs-event:10")
    assert not (await backend.groups.store(third, more)).deduplicated


async def test_concurrent_stores_of_one_name_store_one_group(
    backend: Backend, make_backend: BackendFactory
) -> None:
    cursor = (await backend.events.read(None, None, 1))[1]
    attempts = [named("obs-event:race") for _ in range(100)]

    async def store_all(part: list[tuple[NewGroup, list[NewJob]]]) -> list[str]:
        async with opened(make_backend()) as other:
            results = await asyncio.gather(*(other.groups.store(g, m) for g, m in part))
        return [r.id for r in results]

    # Two instances (as two processes), 50 concurrent stores each.
    ids = await asyncio.gather(
        in_own_thread(store_all(attempts[:50])), in_own_thread(store_all(attempts[50:]))
    )
    winners = {i for part in ids for i in part}
    assert len(winners) == 1
    [winner] = winners
    [members] = [m for g, m in attempts if g.id == winner]
    events = await all_events(backend, cursor)
    stored = {e.job_id for e in events}
    assert stored == {winner, *(m.id for m in members)}  # one group's jobs only
    record = await backend.groups.get("obs-event:race")
    assert record is not None and record.id == winner and record.total == 2


async def test_a_group_counts_current_outcomes(backend: Backend) -> None:
    group, members = make_group(2)
    await backend.groups.store(group, members)
    a, b = (m.id for m in members)
    assert sorted(await claim_ids(backend, W1, limit=2)) == sorted([a, b])
    assert await finish_one(backend, W1, ok(a), T0 + 1)
    assert await finish_one(backend, W1, failed(b), T0 + 2)
    assert (await job_of(backend, group.id)).status == "queued"  # complete: callback queued
    cursor = (await backend.events.read(None, None, 1))[1]
    assert await backend.retry(b, T0 + 3)  # the callback has not run yet
    record = await backend.groups.get(group.id)
    assert record is not None
    assert (record.succeeded, record.failed, record.cancelled) == (1, 0, 0)
    assert record.completed_at is None
    # The callback and the member run; the member fails again, is retried and is cancelled
    # this time: each outcome replaces the one before.
    assert sorted(await claim_ids(backend, W2, limit=2)) == sorted([group.id, b])
    assert await finish_one(backend, W2, failed(b), T0 + 4)
    record = await backend.groups.get(group.id)
    assert record is not None and (record.succeeded, record.failed) == (1, 1)
    assert record.completed_at == pytest.approx(T0 + 4)
    assert await backend.retry(b, T0 + 5)
    assert await backend.cancel(b, T0 + 6, T0 + EXPIRE)
    record = await backend.groups.get(group.id)
    assert record is not None
    assert (record.succeeded, record.failed, record.cancelled) == (1, 0, 1)
    assert record.completed_at == pytest.approx(T0 + 6)
    assert record.first_completed_at == pytest.approx(T0 + 2)
    assert await finish_one(backend, W2, ok(group.id), T0 + 7)
    events = await all_events(backend, cursor)
    assert [e.status for e in events if e.job_id == group.id] == ["running", "succeeded"]
