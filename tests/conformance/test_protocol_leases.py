"""Leases: heartbeat extends them, recover() requeues or quarantines the jobs whose lease lapsed."""

from __future__ import annotations

import pytest
from contract import (
    LEASE,
    MINUTE0,
    T0,
    TASK,
    W1,
    W2,
    approx,
    claim_ids,
    claim_order,
    enqueue,
    error_history,
    errors_of,
    finish_one,
    job,
    new_job,
)

from duly._ids import new_id
from duly._records import Outcome, Recovered
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)


async def test_heartbeat_extends_the_lease(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1, now=T0)  # lease until T0 + 30
    assert await backend.heartbeat(W1, [new.id], T0 + 20, T0 + 50) == []
    assert (await job(backend, new.id)).lease_until == approx(T0 + 50)
    assert await backend.recover(T0 + 40, 3, 100, T0 + 1000) == []
    record = await job(backend, new.id)
    assert (record.status, record.worker) == ("running", W1)
    assert await backend.recover(T0 + 51, 3, 100, T0 + 1000) == [Recovered(new.id, True)]


async def test_heartbeat_returns_ids_no_longer_owned(backend: Backend) -> None:
    mine, cancelled, lapsed, theirs, done = (new_job() for _ in range(5))
    await enqueue(backend, mine, cancelled, lapsed, theirs, done)
    assert len(await claim_ids(backend, W1, limit=3, now=T0)) == 3  # mine, cancelled, lapsed
    assert await claim_ids(backend, W2, limit=1, now=T0) == [theirs.id]
    assert await claim_ids(backend, W1, limit=1, now=T0) == [done.id]
    assert await backend.heartbeat(W1, [mine.id, cancelled.id, done.id], T0 + 20, T0 + 60) == []
    assert await backend.heartbeat(W2, [theirs.id], T0 + 20, T0 + 60) == []

    assert await backend.cancel(cancelled.id, T0 + 21, T0 + 500)
    assert await finish_one(
        backend, W1, Outcome(done.id, "succeeded", b"1", None, None, T0 + 99), T0 + 21
    )
    # ``lapsed`` was not heartbeated: its lease (T0 + 30) lapses and it is recovered.
    assert await backend.recover(T0 + 31, 3, 100, T0 + 1000) == [Recovered(lapsed.id, True)]

    unknown = new_id()
    asked = [mine.id, cancelled.id, lapsed.id, theirs.id, done.id, unknown]
    gone = await backend.heartbeat(W1, asked, T0 + 40, T0 + 70)
    assert sorted(gone) == sorted([cancelled.id, lapsed.id, theirs.id, done.id, unknown])

    # Only W1's own running job got the new lease; W2's job kept its own.
    assert (await job(backend, mine.id)).lease_until == approx(T0 + 70)
    theirs_now = await job(backend, theirs.id)
    assert (theirs_now.worker, theirs_now.lease_until) == (W2, approx(T0 + 60))
    assert (await job(backend, lapsed.id)).status == "queued"


async def test_heartbeat_with_no_jobs(backend: Backend) -> None:
    assert await backend.heartbeat(W1, [], T0, T0 + LEASE) == []


async def test_recover_only_lapsed_leases(backend: Backend) -> None:
    short, long_ = new_job(), new_job()
    await enqueue(backend, short, long_)
    assert await claim_ids(backend, W1, now=T0, lease=10) == [short.id]
    assert await claim_ids(backend, W2, now=T0, lease=100) == [long_.id]
    assert await backend.recover(T0 + 9, 3, 100, T0 + 1000) == []
    assert await backend.recover(T0 + 11, 3, 100, T0 + 1000) == [Recovered(short.id, True)]
    record = await job(backend, short.id)
    assert record.status == "queued"
    assert record.worker is None
    assert record.lost == 1
    assert record.attempts == 1  # the lost run shows
    other = await job(backend, long_.id)
    assert (other.status, other.worker, other.lost) == ("running", W2, 0)
    assert await backend.recover(T0 + 12, 3, 100, T0 + 1000) == []


async def test_recovered_job_goes_to_the_head_of_its_queue(backend: Backend) -> None:
    older = [new_job(delay=5), new_job(delay=5)]  # enqueued before the orphan, queued later
    await enqueue(backend, *older)
    orphan = new_job(at=T0 + 1)
    await enqueue(backend, orphan)
    assert await claim_ids(backend, W1, now=T0 + 1) == [orphan.id]
    assert (await backend.promote_due(T0 + 5, 10))[0] == 2
    assert await backend.recover(T0 + 1 + LEASE + 1, 3, 100, T0 + 1000) == [
        Recovered(orphan.id, True)
    ]
    order = await claim_order(backend, now=T0 + 40)
    assert order[0] == orphan.id
    assert sorted(order) == sorted([orphan.id, *(j.id for j in older)])
    record = await job(backend, orphan.id)
    assert (record.attempts, record.lost) == (2, 1)


async def test_recovered_job_keeps_its_priority(backend: Backend) -> None:
    high = new_job(priority=10, delay=5)
    await enqueue(backend, high)
    orphan = new_job(priority=0, at=T0 + 1)
    await enqueue(backend, orphan)
    assert await claim_ids(backend, W1, now=T0 + 1) == [orphan.id]
    await backend.promote_due(T0 + 5, 10)
    assert len(await backend.recover(T0 + 40, 3, 100, T0 + 1000)) == 1
    assert await claim_order(backend, now=T0 + 41) == [high.id, orphan.id]


async def test_recover_respects_limit(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(5)])
    await claim_ids(backend, W1, limit=5)
    first = await backend.recover(T0 + 100, 3, 2, T0 + 1000)
    assert len(first) == 2
    rest = await backend.recover(T0 + 100, 3, 10, T0 + 1000)
    assert len(rest) == 3
    assert sorted(r.id for r in first + rest) == sorted(ids)
    assert all(r.requeued for r in first + rest)


async def test_quarantine_after_max_lost(backend: Backend) -> None:
    new = new_job(task="app.poison", queue="q")
    await enqueue(backend, new)
    now = T0
    for lost in (1, 2):
        assert await claim_ids(backend, W1, queues=["q"], now=now) == [new.id]
        now += LEASE + 1
        assert await backend.recover(now, 3, 100, now + 7 * 86_400) == [Recovered(new.id, True)]
        record = await job(backend, new.id)
        assert (record.status, record.lost, record.attempts) == ("queued", lost, lost)
    assert await claim_ids(backend, W1, queues=["q"], now=now) == [new.id]
    now += LEASE + 1
    assert await backend.recover(now, 3, 100, now + 7 * 86_400) == [Recovered(new.id, False)]
    record = await job(backend, new.id)
    assert record.status == "failed"
    assert record.lost == 3
    assert record.attempts == 3
    assert record.expire_at == approx(now + 7 * 86_400)
    [entry] = errors_of(record)
    assert entry["type"] == "LostWorker"
    assert "lost its worker 3 times" in entry["message"]
    assert await claim_ids(backend, W2, queues=["q"], now=now + 1) == []
    assert await backend.heartbeat(W1, [new.id], now + 1, now + 60) == [new.id]

    [row] = await backend.stats(0)
    assert (row.minute, row.task, row.queue) == (int(now // 60), "app.poison", "q")
    assert (row.succeeded, row.failed, row.retried) == (0, 1, 0)


async def test_quarantine_appends_to_the_error_history(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1, now=T0)
    history = error_history(("ValueError", "first try"))
    assert await finish_one(backend, W1, Outcome(new.id, "retry", errors=history, run_at=T0), T0)
    await backend.promote_due(T0 + 1, 10)
    assert await claim_ids(backend, W1, now=T0 + 1) == [new.id]
    assert await backend.recover(T0 + 100, 1, 100, T0 + 999) == [Recovered(new.id, False)]
    record = await job(backend, new.id)
    entries = errors_of(record)
    assert len(entries) == 2
    assert entries[0]["type"] == "ValueError"
    assert entries[0]["message"] == "first try"
    assert entries[1]["type"] == "LostWorker"
    assert "lost its worker 1 times" in entries[1]["message"]
    assert (record.status, record.lost, record.attempts) == ("failed", 1, 2)


async def test_quarantined_job_counts_as_failed_in_its_minute(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(2)])
    await claim_ids(backend, W1, limit=2, now=T0)
    recovered = await backend.recover(T0 + 50, 1, 100, T0 + 999)
    assert sorted(r.id for r in recovered) == sorted(ids)
    assert not any(r.requeued for r in recovered)
    [row] = await backend.stats(T0)
    assert (row.minute, row.task, row.failed, row.succeeded, row.retried) == (
        MINUTE0,
        TASK,
        2,
        0,
        0,
    )


async def test_recover_skips_finished_and_waiting_jobs(backend: Backend) -> None:
    done, queued, later = new_job(), new_job(), new_job(delay=10)
    await enqueue(backend, done, queued, later)
    assert await claim_ids(backend, W1, now=T0) == [done.id]
    assert await finish_one(
        backend, W1, Outcome(done.id, "succeeded", result=b"1", expire_at=T0 + 999), T0 + 1
    )
    assert await backend.recover(T0 + 500, 3, 100, T0 + 999) == []
    assert (await job(backend, done.id)).status == "succeeded"
    assert (await job(backend, queued.id)).status == "queued"
    assert (await job(backend, later.id)).status == "scheduled"


async def test_a_job_that_lost_its_worker_is_claimed_alone(backend: Backend) -> None:
    """A possible poison pill must not take innocent batch-mates down with the next worker."""
    suspect, a, b, c = (new_job(at=T0 + i) for i in range(4))
    other_queue = new_job("other", at=T0)
    await enqueue(backend, suspect, a, b, c, other_queue)
    assert await claim_ids(backend, W1, limit=1, now=T0) == [suspect.id]
    assert await backend.recover(T0 + LEASE + 1, 3, 100, T0 + 1000) == [Recovered(suspect.id, True)]
    now = T0 + LEASE + 2
    # back at the head of its queue, but handed out alone, even with room for more
    assert await claim_ids(backend, W2, ["default", "other"], limit=10, now=now) == [suspect.id]
    # the rest are claimed together; a later suspect is not mixed into another batch
    got = await claim_ids(backend, W2, ["default", "other"], limit=10, now=now)
    assert sorted(got) == sorted([a.id, b.id, c.id, other_queue.id])


async def test_a_batch_stops_before_a_job_that_lost_its_worker(backend: Backend) -> None:
    first, suspect = new_job(at=T0), new_job(at=T0 + 1)
    later = new_job("other", at=T0)
    await enqueue(backend, first, suspect, later)
    assert await claim_ids(backend, W1, limit=2, now=T0) == [first.id, suspect.id]
    assert await finish_one(backend, W1, Outcome(first.id, "release"), T0 + 1)
    recovered = await backend.recover(T0 + LEASE + 1, 3, 100, T0 + 1000)
    assert recovered == [Recovered(suspect.id, True)]
    now = T0 + LEASE + 2
    # ``first`` (released, not lost) and ``suspect`` are both at the head; ``first`` is taken,
    # the batch stops before ``suspect``, and goes on with the next queue
    got = await claim_ids(backend, W2, ["default", "other"], limit=10, now=now)
    assert suspect.id not in got
    assert first.id in got
    assert await claim_ids(backend, W2, ["default", "other"], limit=10, now=now) == [suspect.id]
