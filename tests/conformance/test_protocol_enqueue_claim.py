"""Enqueue, get_job and claim: what is stored, and the order in which queues hand jobs out."""

from __future__ import annotations

import asyncio

import pytest
from contract import (
    DEFAULT_QUEUE,
    LEASE,
    PAYLOAD,
    T0,
    TASK,
    W1,
    W2,
    BackendFactory,
    approx,
    claim_ids,
    claim_order,
    enqueue,
    job,
    new_job,
    opened,
    status,
)

from duly._ids import new_id
from duly._records import EnqueueResult, JobFilter
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)


async def test_open_is_idempotent_and_ping_answers(backend: Backend) -> None:
    await backend.open()
    await backend.ping()
    assert isinstance(backend, Backend)


async def test_close_is_idempotent(make_backend: BackendFactory) -> None:
    other = make_backend()
    await other.open()
    await other.ping()
    await other.close()
    await other.close()


async def test_drop_deletes_only_its_own_namespace(
    backend: Backend, make_backend: BackendFactory
) -> None:
    mine = new_job(key="k")
    await enqueue(backend, mine)
    namespace = make_backend.new_namespace()
    elsewhere = make_backend(namespace)
    namespace_job = new_job(key="k")
    async with opened(elsewhere):
        await enqueue(elsewhere, namespace_job)
        assert await backend.get_job(namespace_job.id) is None  # namespaces do not mix
        await elsewhere.drop()
    assert (await job(backend, mine.id)).status == "queued"
    assert [r.id for r in await backend.list_jobs(JobFilter(key="k"), 10)] == [mine.id]

    # Reopening the dropped namespace finds it empty.
    again = make_backend(namespace)
    async with opened(again):
        assert await again.get_job(namespace_job.id) is None
        assert await again.list_jobs(JobFilter(), 10) == []
        await again.drop()


async def test_enqueue_returns_one_result_per_job_in_order(backend: Backend) -> None:
    jobs = [new_job(), new_job(delay=60), new_job("other"), new_job(key="k:1")]
    results = await backend.enqueue(jobs)
    assert results == [EnqueueResult(id=j.id, deduplicated=False) for j in jobs]


async def test_enqueue_empty_batch(backend: Backend) -> None:
    assert await backend.enqueue([]) == []


async def test_immediate_job_is_queued_and_future_job_scheduled(backend: Backend) -> None:
    now_job = new_job()
    past_job = new_job(delay=-5)
    future_job = new_job(delay=0.5)
    await enqueue(backend, now_job, past_job, future_job)
    assert (await job(backend, now_job.id)).status == "queued"
    assert (await job(backend, past_job.id)).status == "queued"
    scheduled = await job(backend, future_job.id)
    assert scheduled.status == "scheduled"
    assert scheduled.scheduled_for == approx(T0 + 0.5)


async def test_get_job_returns_every_field(backend: Backend) -> None:
    payload = '{"args":["héllo ☃ 𝄞","\\u0000\\n\\"q\\""],"kwargs":{"n":[1,2.5,null]}}'.encode()
    new = new_job(
        "mail", task="app.send", priority=7, key="user:42", payload=payload, max_attempts=5
    )
    await enqueue(backend, new)
    record = await job(backend, new.id)
    assert record.id == new.id
    assert record.task == "app.send"
    assert record.queue == "mail"
    assert record.payload == payload
    assert type(record.payload) is bytes
    assert record.status == "queued"
    assert record.attempts == 0
    assert record.max_attempts == 5
    assert record.key == "user:42"
    assert record.priority == 7
    assert record.enqueued_at == approx(T0)
    assert record.scheduled_for in (None, approx(T0))
    assert record.started_at is None
    assert record.finished_at is None
    assert record.result is None
    assert record.errors is None
    assert record.worker is None
    assert record.lease_until is None
    assert record.lost == 0
    assert record.expire_at is None


async def test_scheduled_job_fields(backend: Backend) -> None:
    new = new_job(delay=3600, key=None, priority=-3)
    await enqueue(backend, new)
    record = await job(backend, new.id)
    assert record.status == "scheduled"
    assert record.key is None
    assert record.priority == -3
    assert record.scheduled_for == approx(T0 + 3600)
    assert record.enqueued_at == approx(T0)


async def test_large_payload_round_trips(backend: Backend) -> None:
    payload = ('{"blob":"' + "x☃" * 100_000 + '"}').encode()
    new = new_job(payload=payload)
    await enqueue(backend, new)
    assert (await job(backend, new.id)).payload == payload
    [claimed] = await backend.claim(W1, [DEFAULT_QUEUE], 1, T0, T0 + LEASE)
    assert claimed.payload == payload


async def test_unknown_id_is_none(backend: Backend) -> None:
    assert await backend.get_job(new_id()) is None
    assert await backend.get_job("no-such-job") is None


async def test_claim_sets_running_state(backend: Backend) -> None:
    new = new_job(task="app.work", key="k", priority=2)
    await enqueue(backend, new)
    records = await backend.claim(W1, [DEFAULT_QUEUE], 10, T0 + 5, T0 + 5 + LEASE)
    assert len(records) == 1
    for record in (records[0], await job(backend, new.id)):
        assert record.id == new.id
        assert record.status == "running"
        assert record.attempts == 1
        assert record.started_at == approx(T0 + 5)
        assert record.worker == W1
        assert record.lease_until == approx(T0 + 5 + LEASE)
        assert record.finished_at is None
        assert record.result is None
        assert record.payload == PAYLOAD
        assert record.task == "app.work"
        assert record.key == "k"
        assert record.priority == 2
        assert record.max_attempts == 3


async def test_claim_from_empty_or_unknown_queue(backend: Backend) -> None:
    assert await claim_ids(backend, queues=["nothing-here"], limit=5) == []
    await enqueue(backend, new_job("a"))
    assert await claim_ids(backend, queues=["b"], limit=5) == []


async def test_claim_respects_limit(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(5)])
    first = await claim_ids(backend, limit=2)
    assert len(first) == 2
    second = await claim_ids(backend, limit=2)
    assert len(second) == 2
    third = await claim_ids(backend, limit=2)
    assert len(third) == 1
    assert sorted(first + second + third) == sorted(ids)
    assert await claim_ids(backend, limit=2) == []


async def test_fifo_within_a_priority(backend: Backend) -> None:
    jobs = [new_job(at=T0 + i) for i in range(6)]
    ids = await enqueue(backend, *jobs[:3])
    ids += await enqueue(backend, *jobs[3:])
    assert await claim_order(backend, now=T0 + 10) == ids


async def test_fifo_with_one_enqueue_time(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(5)])
    assert await claim_order(backend) == ids


async def test_higher_priority_first(backend: Backend) -> None:
    low = new_job(priority=0)
    high = new_job(priority=10)
    negative = new_job(priority=-5)
    mid_a = new_job(priority=5)
    mid_b = new_job(priority=5)
    await enqueue(backend, low, high, negative, mid_a, mid_b)
    assert await claim_order(backend) == [high.id, mid_a.id, mid_b.id, low.id, negative.id]


async def test_batch_claim_takes_the_best_jobs(backend: Backend) -> None:
    jobs = [new_job(priority=p) for p in (1, 9, 3, 9, 0, 5)]
    await enqueue(backend, *jobs)
    taken = await claim_ids(backend, limit=3)
    assert sorted(taken) == sorted([jobs[1].id, jobs[3].id, jobs[5].id])


async def test_queues_are_tried_in_the_given_order(backend: Backend) -> None:
    a = [new_job("a", priority=100) for _ in range(2)]
    b = [new_job("b") for _ in range(3)]
    await enqueue(backend, *a, *b)
    taken = await claim_ids(backend, queues=["b", "a"], limit=4)
    assert len(taken) == 4
    assert {j.id for j in b} <= set(taken)
    assert len(set(taken) & {j.id for j in a}) == 1


async def test_first_listed_queue_first_one_at_a_time(backend: Backend) -> None:
    a = [new_job("a", priority=100) for _ in range(2)]
    b = [new_job("b") for _ in range(2)]
    await enqueue(backend, *a, *b)
    assert await claim_order(backend, queues=["b", "a"]) == [b[0].id, b[1].id, a[0].id, a[1].id]


async def test_claim_only_takes_listed_queues(backend: Backend) -> None:
    a = new_job("a")
    b = new_job("b")
    await enqueue(backend, a, b)
    assert await claim_ids(backend, queues=["b"], limit=10) == [b.id]
    assert (await job(backend, a.id)).status == "queued"


async def test_claimed_job_is_never_claimed_again_while_running(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(3)])
    assert sorted(await claim_ids(backend, W1, limit=10)) == sorted(ids)
    assert await claim_ids(backend, W1, limit=10, now=T0 + 1) == []
    assert await claim_ids(backend, W2, limit=10, now=T0 + 2) == []
    for job_id in ids:
        record = await job(backend, job_id)
        assert (record.status, record.worker, record.attempts) == ("running", W1, 1)


async def test_scheduled_job_is_not_claimed_before_promotion(backend: Backend) -> None:
    later = new_job(delay=10)
    await enqueue(backend, later)
    assert await claim_ids(backend, limit=10, now=T0 + 100) == []
    assert (await job(backend, later.id)).status == "scheduled"


async def test_claim_does_not_touch_other_jobs(backend: Backend) -> None:
    first, second = new_job(), new_job()
    await enqueue(backend, first, second)
    await claim_ids(backend, limit=1)
    record = await job(backend, second.id)
    assert (record.status, record.attempts, record.worker) == ("queued", 0, None)
    assert record.task == TASK


async def test_enqueue_blocking_stores_like_enqueue(
    make_backend: BackendFactory, backend: Backend
) -> None:
    """The sync path (task.enqueue) needs no open() and no event loop, from any thread."""
    fresh = make_backend()  # same namespace, never opened
    jobs = [new_job(), new_job(delay=60)]
    try:
        results = await asyncio.to_thread(fresh.enqueue_blocking, jobs)
        again = await asyncio.to_thread(fresh.enqueue_blocking, jobs[:1])
    finally:
        await asyncio.to_thread(fresh.close_blocking)
        await asyncio.to_thread(fresh.close_blocking)  # idempotent
    assert [(r.id, r.deduplicated) for r in results] == [(j.id, False) for j in jobs]
    assert [(r.id, r.deduplicated) for r in again] == [(jobs[0].id, True)]
    assert await status(backend, jobs[0].id) == "queued"
    assert await status(backend, jobs[1].id) == "scheduled"
    assert await claim_ids(backend, limit=5) == [jobs[0].id]


async def test_a_due_time_before_the_enqueue_is_stored(backend: Backend) -> None:
    """A periodic tick is enqueued just after its time: every backend keeps that time as
    ``scheduled_for`` (queued at once, not scheduled), through its claim and its finish."""
    tick = new_job(at=T0 + 0.4, delay=-0.4)
    await enqueue(backend, tick)
    record = await job(backend, tick.id)
    assert (record.status, record.scheduled_for) == ("queued", approx(T0))
    (claimed,) = await backend.claim(W1, [DEFAULT_QUEUE], 1, T0 + 1, T0 + 1 + LEASE)
    assert claimed.scheduled_for == approx(T0)
    assert (await job(backend, tick.id)).scheduled_for == approx(T0)
