"""Groups (exactly-once completion) and the event stream, on every backend (PRODUCT §8)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from contract import (
    EXPIRE,
    LEASE,
    T0,
    W1,
    W2,
    BackendFactory,
    claim_ids,
    enqueue,
    finish_one,
    in_own_thread,
    job,
    new_job,
    opened,
)

from duly._errors import EventsTrimmed
from duly._ids import new_id
from duly._records import EventRecord, NewGroup, NewJob, Outcome
from duly.backends.base import Backend

CALLBACK_TASK = "tests.tasks.done"


def make_group(
    n: int = 3, *, key: str | None = None, callback: bool = True
) -> tuple[NewGroup, list[NewJob]]:
    members = [new_job(key=key) for _ in range(n)]
    group_id = new_id() + "g"
    cb = None
    if callback:
        cb = dataclasses.replace(new_job(task=CALLBACK_TASK, key=key), id=group_id)
    return NewGroup(group_id, key, T0, EXPIRE, cb), members


def ok(job_id: str) -> Outcome:
    return Outcome(job_id, "succeeded", result=b"1", expire_at=T0 + EXPIRE)


def failed(job_id: str) -> Outcome:
    return Outcome(job_id, "failed", errors=b"[]", expire_at=T0 + EXPIRE)


async def run_all(backend: Backend, worker: str) -> None:
    """Claim every queued job and succeed it."""
    while taken := await claim_ids(backend, worker, limit=10):
        await backend.finish(worker, [ok(i) for i in taken], T0 + 1)


async def all_events(backend: Backend, after: str, key: str | None = None) -> list[EventRecord]:
    events: list[EventRecord] = []
    while True:
        page, after = await backend.events.read(after, key, 100)
        events += page
        if not page:
            return events


# -- groups ----------------------------------------------------------------------------------


async def test_group_is_stored_with_a_waiting_callback(backend: Backend) -> None:
    group, members = make_group(2, key="event:9")
    await backend.groups.store(group, members)
    record = await backend.groups.get(group.id)
    assert record is not None
    assert (record.total, record.succeeded, record.failed, record.cancelled) == (2, 0, 0, 0)
    assert record.completed_at is None and record.has_callback and record.key == "event:9"
    callback = await job(backend, group.id)
    assert (callback.status, callback.scheduled_for) == ("scheduled", None)
    # Nothing promotes or claims the callback before the group completes.
    assert await backend.promote_due(T0 + 10**9, 100) == (0, None)
    assert sorted(await claim_ids(backend, limit=10)) == sorted(m.id for m in members)
    assert (await job(backend, group.id)).status == "scheduled"
    assert await backend.groups.get("nope") is None


async def test_last_outcome_queues_the_callback_once(backend: Backend) -> None:
    group, members = make_group(3)
    await backend.groups.store(group, members)
    a, b, c = (m.id for m in members)
    assert sorted(await claim_ids(backend, W1, limit=2)) == sorted([a, b])
    assert await finish_one(backend, W1, ok(a), T0 + 1)
    assert await finish_one(backend, W1, failed(b), T0 + 2)
    assert (await job(backend, group.id)).status == "scheduled"
    assert await backend.cancel(c, T0 + 3, T0 + EXPIRE)  # the last one: cancelled counts
    record = await backend.groups.get(group.id)
    assert record is not None
    assert (record.succeeded, record.failed, record.cancelled) == (1, 1, 1)
    assert record.completed_at == pytest.approx(T0 + 3)
    assert (await job(backend, group.id)).status == "queued"
    assert await claim_ids(backend, W2) == [group.id]


async def test_a_retried_member_counts_its_new_outcome_and_never_refires(
    backend: Backend,
) -> None:
    group, members = make_group(1)
    await backend.groups.store(group, members)
    [m] = members
    await claim_ids(backend, W1)
    assert await finish_one(backend, W1, failed(m.id), T0 + 1)
    assert await claim_ids(backend, W1) == [group.id]
    assert await finish_one(backend, W1, ok(group.id), T0 + 2)
    assert await backend.retry(m.id, T0 + 3)
    record = await backend.groups.get(group.id)
    assert record is not None
    assert (record.succeeded, record.failed, record.total) == (0, 0, 1)  # pending again
    assert record.completed_at is None and record.first_completed_at == pytest.approx(T0 + 1)
    assert await claim_ids(backend, W1) == [m.id]
    assert await finish_one(backend, W1, ok(m.id), T0 + 4)
    record = await backend.groups.get(group.id)
    assert record is not None and (record.succeeded, record.failed) == (1, 0)
    assert record.completed_at == pytest.approx(T0 + 4)
    assert record.first_completed_at == pytest.approx(T0 + 1)
    assert (await job(backend, group.id)).status == "succeeded"  # not queued again


async def test_a_member_lost_with_its_worker_counts_once(backend: Backend) -> None:
    group, members = make_group(1)
    await backend.groups.store(group, members)
    [m] = members
    assert await claim_ids(backend, W1) == [m.id]
    [recovered] = await backend.recover(T0 + LEASE + 1, 3, 10, T0 + EXPIRE)
    assert recovered.requeued
    assert await claim_ids(backend, W2, now=T0 + LEASE + 2) == [m.id]
    assert await finish_one(backend, W2, ok(m.id), T0 + LEASE + 3)
    assert not await finish_one(backend, W1, ok(m.id), T0 + LEASE + 4)  # the lost worker's
    record = await backend.groups.get(group.id)
    assert record is not None and (record.total, record.succeeded) == (1, 1)
    assert (await job(backend, group.id)).status == "queued"


async def test_a_quarantined_member_counts_as_failed(backend: Backend) -> None:
    group, members = make_group(1)
    await backend.groups.store(group, members)
    await claim_ids(backend, W1)
    [recovered] = await backend.recover(T0 + LEASE + 1, 1, 10, T0 + EXPIRE)
    assert not recovered.requeued
    record = await backend.groups.get(group.id)
    assert record is not None and record.failed == 1 and record.completed_at is not None
    assert (await job(backend, group.id)).status == "queued"


async def test_a_running_member_cancelled_counts_when_its_run_ends(backend: Backend) -> None:
    group, members = make_group(1)
    await backend.groups.store(group, members)
    [m] = members
    await claim_ids(backend, W1)
    assert await backend.cancel(m.id, T0 + 1, T0 + EXPIRE)  # requested only
    assert (await job(backend, group.id)).status == "scheduled"
    assert not await finish_one(backend, W1, ok(m.id), T0 + 2)
    record = await backend.groups.get(group.id)
    assert record is not None and record.cancelled == 1
    assert (await job(backend, group.id)).status == "queued"


async def test_a_group_without_callback_completes(backend: Backend) -> None:
    group, members = make_group(2, callback=False)
    await backend.groups.store(group, members)
    await run_all(backend, W1)
    record = await backend.groups.get(group.id)
    assert record is not None and record.succeeded == 2 and not record.has_callback
    assert record.completed_at is not None
    assert await backend.get_job(group.id) is None


async def test_members_finishing_at_once_on_two_workers_queue_one_callback(
    backend: Backend, make_backend: BackendFactory
) -> None:
    cursor = (await backend.events.read(None, None, 1))[1]
    groups = [make_group(2) for _ in range(8)]
    for group, members in groups:
        await backend.groups.store(group, members)
    first = [members[0].id for _, members in groups]
    second = [members[1].id for _, members in groups]
    assert len(await claim_ids(backend, W1, limit=16)) == 16

    async def finish(worker: str, ids: list[str]) -> list[bool]:
        async with opened(make_backend()) as other:
            return await other.finish(worker, [ok(i) for i in ids], T0 + 1)

    # W1 keeps the first member of each group, W2 takes the second: the two finishing batches
    # race group by group.
    await backend.finish(W1, [Outcome(i, "release") for i in second], T0)
    assert sorted(await claim_ids(backend, W2, limit=16)) == sorted(second)
    flags = await asyncio.gather(
        in_own_thread(finish(W1, first)), in_own_thread(finish(W2, second))
    )
    assert all(all(f) for f in flags)
    events = await all_events(backend, cursor)
    for group, _ in groups:
        record = await backend.groups.get(group.id)
        assert record is not None and record.succeeded == 2
        assert (await job(backend, group.id)).status == "queued"
        queued = [e for e in events if e.job_id == group.id and e.status == "queued"]
        assert len(queued) == 1


async def test_a_group_with_a_stored_id_stores_nothing(backend: Backend) -> None:
    group, members = make_group(2)
    await enqueue(backend, members[1])
    with pytest.raises(ValueError, match="already stored"):
        await backend.groups.store(group, members)
    assert await backend.groups.get(group.id) is None
    assert await backend.get_job(members[0].id) is None
    assert await backend.get_job(group.id) is None


# -- events ----------------------------------------------------------------------------------


async def test_one_event_per_state_change_in_order(backend: Backend) -> None:
    _, cursor = await backend.events.read(None, None, 10)
    assert await backend.events.read(cursor, None, 10) == ([], cursor)
    scheduled = new_job(delay=5)
    [a, s] = await enqueue(backend, new_job(key="k1"), scheduled)
    await claim_ids(backend, W1)
    await finish_one(backend, W1, Outcome(a, "retry", errors=b"[]", run_at=T0 + 1), T0)
    await backend.promote_due(T0 + 1, 10)
    await backend.promote_due(T0 + 5, 10)
    await backend.cancel(s, T0 + 6, T0 + EXPIRE)
    events = await all_events(backend, cursor)
    assert [(e.job_id, e.status) for e in events] == [
        (a, "queued"),
        (s, "scheduled"),
        (a, "running"),
        (a, "retrying"),
        (a, "queued"),
        (s, "queued"),
        (s, "cancelled"),
    ]
    assert events[0].key == "k1" and events[1].key is None
    assert (events[0].task, events[0].queue) == ("tests.tasks.add", "default")
    assert all(e.at > 0 for e in events)
    # Resuming after an event misses nothing after it.
    assert [e.id for e in await all_events(backend, events[2].id)] == [e.id for e in events[3:]]
    # Paging: limit is honoured and the cursor goes on.
    page, after = await backend.events.read(cursor, None, 2)
    assert [e.id for e in page] == [e.id for e in events[:2]] and after == events[1].id


async def test_key_filter_reads_one_key(backend: Backend) -> None:
    _, cursor = await backend.events.read(None, "k1", 10)
    await enqueue(backend, new_job(key="k1"), new_job(key="k2"), new_job(), new_job(key="k1"))
    events = await all_events(backend, cursor, "k1")
    assert [e.key for e in events] == ["k1", "k1"]
    _, head = await backend.events.read(None, "k1", 10)
    assert await backend.events.read(head, "k1", 10) == ([], head)


async def test_group_events_include_the_callback(backend: Backend) -> None:
    _, cursor = await backend.events.read(None, None, 10)
    group, members = make_group(1, key="event:1")
    await backend.groups.store(group, members)
    await run_all(backend, W1)
    events = await all_events(backend, cursor, "event:1")
    assert [(e.job_id, e.status) for e in events] == [
        (members[0].id, "queued"),
        (group.id, "scheduled"),
        (members[0].id, "running"),
        (members[0].id, "succeeded"),
        (group.id, "queued"),
        (group.id, "running"),
        (group.id, "succeeded"),
    ]


async def test_a_reader_behind_the_trimmed_events_is_told(backend: Backend) -> None:
    _, cursor = await backend.events.read(None, None, 10)
    await enqueue(backend, new_job(), new_job())
    [first, *_] = await all_events(backend, cursor)
    # keep < 0: every event is older than that (each backend's own clock).
    await backend.purge(T0, 100, keep=-3600)
    with pytest.raises(EventsTrimmed):
        await backend.events.read(cursor, None, 10)
    with pytest.raises(EventsTrimmed):
        await backend.events.read(first.id, None, 10)
    _, head = await backend.events.read(None, None, 10)
    [c] = await enqueue(backend, new_job())
    assert [e.job_id for e in await all_events(backend, head)] == [c]


async def test_wait_for_events_returns_once_one_is_written(
    backend: Backend, make_backend: BackendFactory
) -> None:
    _, cursor = await backend.events.read(None, None, 10)

    async def produce() -> None:
        async with opened(make_backend()) as other:
            await enqueue(other, new_job())

    await in_own_thread(produce())
    await backend.events.wait(cursor, None, 30)
    assert len(await all_events(backend, cursor)) == 1


async def test_a_malformed_event_id_is_a_value_error(backend: Backend) -> None:
    with pytest.raises(ValueError, match="not an event id"):
        await backend.events.read("not-an-id!", None, 10)


async def test_a_big_batch_reads_back_every_event_in_order(backend: Backend) -> None:
    _, cursor = await backend.events.read(None, None, 10)
    group, members = make_group(1500, key="big")  # one atomic step: over a thousand events
    await backend.groups.store(group, members)
    events = await all_events(backend, cursor)
    assert [e.job_id for e in events] == [m.id for m in members] + [group.id]
    assert [int(e.id) for e in events] == list(range(int(cursor) + 1, int(cursor) + 1502))
    keyed = await all_events(backend, cursor, "big")
    assert [e.id for e in keyed] == [e.id for e in events]
