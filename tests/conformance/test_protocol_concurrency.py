"""Concurrency primitives (PRODUCT §4): unique holds, gates (mutex / concurrency), rate slots,
and the ``again`` outcome a watch uses to run the same job once more."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from contract import (
    DEFAULT_QUEUE,
    LEASE,
    T0,
    W1,
    W2,
    BackendFactory,
    approx,
    claim_ids,
    enqueue,
    finish_one,
    in_own_thread,
    job,
    new_job,
    opened,
    status,
)

from duly._records import NewJob, Outcome, RateRequest
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(60)

RESULT = b'{"checks":1}'


def unique_job(
    key: str = "u1", until: Any = "finish", expires: float | None = None, **kw: Any
) -> NewJob:
    return replace(new_job(**kw), unique_key=key, unique_until=until, unique_expires_at=expires)


def gated_job(gate: str = "g1", limit: int = 1, **kw: Any) -> NewJob:
    return replace(new_job(**kw), gate=gate, gate_limit=limit)


async def claim_all(
    backend: Backend, worker: str = W1, limit: int = 10, now: float = T0, queues: Any = None
) -> list[str]:
    """Claim until a claim returns nothing (a claim may stop short while jobs remain)."""
    taken: list[str] = []
    for _ in range(50):
        got = await claim_ids(
            backend, worker, queues=queues or [DEFAULT_QUEUE], limit=limit, now=now
        )
        if not got:
            return taken
        taken.extend(got)
    raise AssertionError("claim kept returning jobs")


async def succeed(backend: Backend, job_id: str, now: float = T0 + 1, worker: str = W1) -> None:
    outcome = Outcome(job_id, "succeeded", result=b"1", expire_at=now + 3600)
    assert await finish_one(backend, worker, outcome, now) is True


# -- unique holds ------------------------------------------------------------------------------


async def test_unique_enqueue_returns_the_holder(backend: Backend) -> None:
    first, second = unique_job(), unique_job()
    [r1] = await backend.enqueue([first])
    [r2] = await backend.enqueue([second])
    assert (r1.id, r1.deduplicated) == (first.id, False)
    assert (r2.id, r2.deduplicated) == (first.id, True)
    assert await backend.get_job(second.id) is None
    assert (await job(backend, first.id)).status == "queued"
    other = unique_job(key="u2")
    [r3] = await backend.enqueue([other])
    assert (r3.id, r3.deduplicated) == (other.id, False)


async def test_unique_duplicates_within_one_batch(backend: Backend) -> None:
    jobs = [unique_job(), unique_job(key="u2"), unique_job(), new_job()]
    results = await backend.enqueue(jobs)
    assert [(r.id, r.deduplicated) for r in results] == [
        (jobs[0].id, False),
        (jobs[1].id, False),
        (jobs[0].id, True),
        (jobs[3].id, False),
    ]
    assert await backend.get_job(jobs[2].id) is None


async def test_unique_hold_covers_scheduled_running_and_retrying(backend: Backend) -> None:
    holder = unique_job(delay=60)
    await enqueue(backend, holder)
    assert (await backend.enqueue([unique_job()]))[0].id == holder.id  # scheduled
    await backend.promote_due(T0 + 60, 100)
    assert await claim_ids(backend, now=T0 + 60) == [holder.id]
    assert (await backend.enqueue([unique_job(at=T0 + 61)]))[0].id == holder.id  # running
    retry = Outcome(holder.id, "retry", errors=b"[]", run_at=T0 + 100)
    assert await finish_one(backend, W1, retry, T0 + 62)
    assert (await backend.enqueue([unique_job(at=T0 + 63)]))[0].id == holder.id  # retrying
    await backend.promote_due(T0 + 100, 100)
    assert await claim_ids(backend, now=T0 + 100) == [holder.id]
    await succeed(backend, holder.id, T0 + 101)
    fresh = unique_job(at=T0 + 102)
    [result] = await backend.enqueue([fresh])
    assert (result.id, result.deduplicated) == (fresh.id, False)


@pytest.mark.parametrize("end", ["failed", "cancelled", "quarantined"])
async def test_unique_hold_ends_with_the_job(backend: Backend, end: str) -> None:
    holder = unique_job()
    await enqueue(backend, holder)
    assert await claim_ids(backend) == [holder.id]
    if end == "failed":
        outcome = Outcome(holder.id, "failed", errors=b"[]", expire_at=T0 + 99)
        assert await finish_one(backend, W1, outcome, T0 + 1)
    elif end == "cancelled":  # requested while it runs: the hold lasts until the run ends
        assert await backend.cancel(holder.id, T0 + 1, T0 + 99)
        held = await backend.enqueue([unique_job(at=T0 + 1)])
        assert (held[0].id, held[0].deduplicated) == (holder.id, True)
        assert not await finish_one(backend, W1, Outcome(holder.id, "succeeded"), T0 + 1)
    else:
        [recovered] = await backend.recover(T0 + LEASE + 1, 1, 10, T0 + 999)
        assert recovered.requeued is False
    fresh = unique_job(at=T0 + 2)
    assert (await backend.enqueue([fresh]))[0].deduplicated is False


async def test_unique_until_start_ends_at_claim(backend: Backend) -> None:
    holder = unique_job(until="start")
    await enqueue(backend, holder)
    assert (await backend.enqueue([unique_job(until="start")]))[0].id == holder.id
    assert await claim_ids(backend) == [holder.id]
    fresh = unique_job(until="start", at=T0 + 1)
    assert (await backend.enqueue([fresh]))[0].deduplicated is False
    # The started job does not take the key back when it retries.
    retry = Outcome(holder.id, "retry", errors=b"[]", run_at=T0 + 5)
    assert await finish_one(backend, W1, retry, T0 + 2)
    await backend.promote_due(T0 + 5, 100)
    assert await status(backend, holder.id) == "queued"
    assert (await backend.enqueue([unique_job(until="start", at=T0 + 6)]))[0].id == fresh.id


async def test_unique_hold_expires(backend: Backend) -> None:
    holder = unique_job(expires=T0 + 10)
    await enqueue(backend, holder)
    assert (await backend.enqueue([unique_job(at=T0 + 9)]))[0].id == holder.id
    late = unique_job(at=T0 + 10, expires=T0 + 20)
    [result] = await backend.enqueue([late])
    assert (result.id, result.deduplicated) == (late.id, False)
    assert await status(backend, holder.id) == "queued"  # the old job is untouched
    assert (await backend.enqueue([unique_job(at=T0 + 11)]))[0].id == late.id


async def test_retry_retakes_the_unique_key_or_refuses(backend: Backend) -> None:
    holder = unique_job()
    await enqueue(backend, holder)
    assert await claim_ids(backend) == [holder.id]
    failed = Outcome(holder.id, "failed", errors=b"[]", expire_at=T0 + 999)
    assert await finish_one(backend, W1, failed, T0 + 1)
    assert await backend.retry(holder.id, T0 + 2) is True
    assert (await backend.enqueue([unique_job(at=T0 + 3)]))[0].id == holder.id
    assert await backend.cancel(holder.id, T0 + 4, T0 + 999)
    newer = unique_job(at=T0 + 5)
    assert (await backend.enqueue([newer]))[0].deduplicated is False
    assert await backend.retry(holder.id, T0 + 6) is False
    assert await status(backend, holder.id) == "cancelled"


async def test_retry_of_a_job_whose_hold_expired_takes_no_key(backend: Backend) -> None:
    old = unique_job(expires=T0 + 2)
    await enqueue(backend, old)
    assert await backend.cancel(old.id, T0 + 4, T0 + 999)  # after its hold expired
    holder = unique_job(at=T0 + 5)
    assert (await backend.enqueue([holder]))[0].deduplicated is False
    assert await backend.retry(old.id, T0 + 6) is True  # it holds nothing to be refused for
    assert (await backend.enqueue([unique_job(at=T0 + 7)]))[0].id == holder.id


async def test_hundred_concurrent_enqueues_store_one_job(
    backend: Backend, make_backend: BackendFactory
) -> None:
    start = threading.Barrier(4)

    async def enqueue_many(instance: Backend) -> list[tuple[str, bool]]:
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            out = []
            for _ in range(25):
                [r] = await instance.enqueue([unique_job(key="team:7:scope")])
                out.append((r.id, r.deduplicated))
            return out

    results = await asyncio.gather(*(in_own_thread(enqueue_many(make_backend())) for _ in range(4)))
    flat = [r for rs in results for r in rs]
    assert len({job_id for job_id, _ in flat}) == 1
    assert sum(1 for _, dedup in flat if not dedup) == 1
    assert len(await claim_all(backend)) == 1


# -- gates -------------------------------------------------------------------------------------


async def test_mutex_runs_one_at_a_time_in_order(backend: Backend) -> None:
    jobs = [gated_job(at=T0 + i) for i in range(4)]
    other = new_job(at=T0 + 5)
    await enqueue(backend, *jobs, other)
    taken = await claim_all(backend)
    assert sorted(taken) == sorted([jobs[0].id, other.id])
    for parked in jobs[1:]:
        record = await job(backend, parked.id)
        assert (record.status, record.attempts) == ("queued", 0)
    stats = {q.name: q for q in await backend.queue_stats()}
    assert (stats[DEFAULT_QUEUE].queued, stats[DEFAULT_QUEUE].running) == (3, 2)
    assert len(await backend.list_jobs(where_status("queued"), 10)) == 3
    order = [jobs[0].id]
    now = T0 + 10
    while True:
        await succeed(backend, order[-1], now)
        got = await claim_all(backend, now=now)
        if not got:
            break
        assert len(got) == 1
        order.extend(got)
        now += 1
    assert order == [j.id for j in jobs]


def where_status(value: str) -> Any:
    from duly._records import JobFilter

    return JobFilter(status=value)


async def test_concurrency_limit_n(backend: Backend) -> None:
    jobs = [gated_job("team:1", limit=3, at=T0 + i) for i in range(7)]
    await enqueue(backend, *jobs)
    first = await claim_all(backend, limit=2)
    assert first == [j.id for j in jobs[:3]]
    await succeed(backend, first[1])
    await succeed(backend, first[2])
    assert await claim_all(backend, now=T0 + 2) == [j.id for j in jobs[3:5]]


async def test_gates_are_independent_and_shared_across_queues(backend: Backend) -> None:
    a1, a2 = gated_job("a", queue="q1"), gated_job("a", queue="q2", at=T0 + 1)
    b1 = gated_job("b", queue="q2", at=T0 + 2)
    await enqueue(backend, a1, a2, b1)
    taken = await claim_all(backend, queues=["q1", "q2"])
    assert sorted(taken) == sorted([a1.id, b1.id])
    await succeed(backend, a1.id)
    assert await claim_all(backend, queues=["q2"], now=T0 + 2) == [a2.id]


async def test_parked_job_returns_by_priority(backend: Backend) -> None:
    holder = gated_job(at=T0)
    low = gated_job(at=T0 + 1, priority=0)
    high = gated_job(at=T0 + 2, priority=5)
    await enqueue(backend, holder)
    assert await claim_all(backend) == [holder.id]
    await enqueue(backend, low, high)
    assert await claim_all(backend) == []
    await succeed(backend, holder.id)
    assert await claim_all(backend, now=T0 + 3) == [high.id]


@pytest.mark.parametrize("how", ["retry", "release", "failed", "again", "cancel", "recover"])
async def test_every_way_out_of_running_frees_the_slot(backend: Backend, how: str) -> None:
    holder, waiting = gated_job(at=T0), gated_job(at=T0 + 1)
    await enqueue(backend, holder, waiting)
    assert await claim_all(backend) == [holder.id]
    now = T0 + 2
    if how == "cancel":  # requested while it runs: the slot frees when the run ends
        assert await backend.cancel(holder.id, now, now + 99)
        assert await claim_all(backend, W2, now=now) == []
        assert not await finish_one(backend, W1, Outcome(holder.id, "succeeded"), now)
    elif how == "recover":
        now = T0 + LEASE + 1
        assert len(await backend.recover(now, 3, 10, now + 99)) == 1
    else:
        outcome = Outcome(
            holder.id,
            how,  # type: ignore[arg-type]
            errors=b"[]" if how in ("retry", "failed") else None,
            result=RESULT if how == "again" else None,
            run_at=now + 50 if how in ("retry", "release", "again") else None,
            expire_at=now + 99 if how == "failed" else None,
        )
        assert await finish_one(backend, W1, outcome, now)
    got = await claim_all(backend, W2, now=now)
    if how == "recover":  # the orphan went back to the head of the queue
        assert got == [holder.id]
    else:
        assert got == [waiting.id]


async def test_parked_job_can_be_cancelled(backend: Backend) -> None:
    holder, waiting = gated_job(at=T0), gated_job(at=T0 + 1)
    await enqueue(backend, holder, waiting)
    assert await claim_all(backend) == [holder.id]
    assert await backend.cancel(waiting.id, T0 + 1, T0 + 99)
    assert await status(backend, waiting.id) == "cancelled"
    await succeed(backend, holder.id, T0 + 2)
    assert await claim_all(backend, now=T0 + 3) == []
    stats = {q.name: q for q in await backend.queue_stats()}
    assert (stats[DEFAULT_QUEUE].queued, stats[DEFAULT_QUEUE].running) == (0, 0)


async def test_gate_wakes_idle_workers(backend: Backend, make_backend: BackendFactory) -> None:
    holder, waiting = gated_job(at=T0), gated_job(at=T0 + 1)
    await enqueue(backend, holder, waiting)
    assert await claim_all(backend) == [holder.id]
    async with opened(make_backend()) as listener:
        await listener.wait_for_work([DEFAULT_QUEUE], 0.05)  # subscribe
        waiter = asyncio.create_task(listener.wait_for_work([DEFAULT_QUEUE], 10))
        await asyncio.sleep(0.2)
        await succeed(backend, holder.id)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(waiter, 5)
        assert loop.time() - started < 5


async def test_mutex_never_overlaps_across_instances(
    backend: Backend, make_backend: BackendFactory
) -> None:
    """Four instances claim and finish jobs of two mutexes; spans of one gate never overlap."""
    jobs = [gated_job(f"m{i % 2}", at=T0 + i) for i in range(40)] + [new_job() for _ in range(10)]
    await enqueue(backend, *jobs)
    gate_of = {j.id: j.gate for j in jobs}
    start = threading.Barrier(4)
    events: list[tuple[str, str, str]] = []  # (gate, "start"/"end", id) in global order
    lock = threading.Lock()

    async def work(instance: Backend, worker: str) -> int:
        done = 0
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            misses = 0
            while misses < 20:
                records = await instance.claim(worker, [DEFAULT_QUEUE], 3, T0 + 100, T0 + 9999)
                if not records:
                    misses += 1
                    await asyncio.sleep(0.01)
                    continue
                misses = 0
                with lock:
                    events.extend((str(gate_of[r.id]), "start", r.id) for r in records)
                await asyncio.sleep(0.002)
                for r in records:
                    with lock:
                        events.append((str(gate_of[r.id]), "end", r.id))
                    outcome = Outcome(r.id, "succeeded", result=b"1", expire_at=T0 + 9999)
                    assert await instance.finish(worker, [outcome], T0 + 101) == [True]
                    done += 1
        return done

    counts = await asyncio.gather(*(in_own_thread(work(make_backend(), f"w{n}")) for n in range(4)))
    assert sum(counts) == 50
    running: Counter[str] = Counter()
    for gate, kind, _ in events:
        if gate == "None":
            continue
        running[gate] += 1 if kind == "start" else -1
        assert running[gate] <= 1, f"gate {gate} overlapped"


# -- the again outcome -------------------------------------------------------------------------


async def test_again_runs_the_same_job_later(backend: Backend) -> None:
    new = unique_job("watch:1")
    await enqueue(backend, new)
    assert await claim_ids(backend) == [new.id]
    outcome = Outcome(new.id, "again", result=RESULT, run_at=T0 + 60)
    assert await finish_one(backend, W1, outcome, T0 + 1)
    record = await job(backend, new.id)
    assert record.status == "scheduled"
    assert record.scheduled_for == approx(T0 + 60)
    assert (record.attempts, record.lost, record.worker) == (0, 0, None)
    assert record.result == RESULT
    assert (await backend.enqueue([unique_job("watch:1", at=T0 + 2)]))[0].id == new.id
    [row] = await backend.stats(0)
    assert row.succeeded == 1
    await backend.promote_due(T0 + 60, 10)
    [claimed] = await backend.claim(W2, [DEFAULT_QUEUE], 5, T0 + 60, T0 + 60 + LEASE)
    assert (claimed.id, claimed.attempts, claimed.result) == (new.id, 1, RESULT)


async def test_again_due_now_is_queued(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    assert await claim_ids(backend) == [new.id]
    outcome = Outcome(new.id, "again", result=RESULT, run_at=T0 + 1)
    assert await finish_one(backend, W1, outcome, T0 + 1)
    assert await status(backend, new.id) == "queued"
    assert await claim_ids(backend, now=T0 + 1) == [new.id]


# -- rate slots --------------------------------------------------------------------------------


async def test_reserve_rate_bursts_then_spaces(backend: Backend) -> None:
    req = RateRequest("api", interval=0.5, burst=3)
    starts = await backend.reserve_rate([req] * 5, T0)
    assert starts == [approx(T0), approx(T0), approx(T0), approx(T0 + 0.5), approx(T0 + 1.0)]
    [later] = await backend.reserve_rate([req], T0 + 0.2)
    assert later == approx(T0 + 1.5)
    [other] = await backend.reserve_rate([RateRequest("other", 1.0, 1)], T0)
    assert other == approx(T0)
    [idle] = await backend.reserve_rate([req], T0 + 100)
    assert idle == approx(T0 + 100)


async def test_reserve_rate_not_before_pushes_the_key(backend: Backend) -> None:
    req = RateRequest("api", interval=1.0, burst=2)
    assert await backend.reserve_rate([req], T0) == [approx(T0)]
    paused = RateRequest("api", interval=1.0, burst=2, not_before=T0 + 30)
    assert await backend.reserve_rate([paused, req, req], T0 + 1) == [
        approx(T0 + 30),
        approx(T0 + 30),
        approx(T0 + 31),
    ]


async def test_reserve_rate_is_shared_across_instances(
    backend: Backend, make_backend: BackendFactory
) -> None:
    start = threading.Barrier(4)
    req = RateRequest("shared", interval=0.1, burst=1)

    async def reserve(instance: Backend) -> list[float]:
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            out: list[float] = []
            for _ in range(10):
                out.extend(await instance.reserve_rate([req], T0))
            return out

    results = await asyncio.gather(*(in_own_thread(reserve(make_backend())) for _ in range(4)))
    starts = sorted(s for rs in results for s in rs)
    assert starts == [approx(T0 + 0.1 * i) for i in range(40)]


async def test_rate_slot_is_stored_by_release_and_cleared_after(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    assert await claim_ids(backend) == [new.id]
    release = Outcome(new.id, "release", run_at=T0 + 5, rate_slot=T0 + 5)
    assert await finish_one(backend, W1, release, T0 + 1)
    record = await job(backend, new.id)
    assert (record.status, record.rate_slot, record.attempts) == ("scheduled", approx(T0 + 5), 0)
    await backend.promote_due(T0 + 5, 10)
    [claimed] = await backend.claim(W1, [DEFAULT_QUEUE], 1, T0 + 5, T0 + 5 + LEASE)
    assert claimed.rate_slot == approx(T0 + 5)
    retry = Outcome(new.id, "retry", errors=b"[]", run_at=T0 + 6)
    assert await finish_one(backend, W1, retry, T0 + 5)
    assert (await job(backend, new.id)).rate_slot is None
