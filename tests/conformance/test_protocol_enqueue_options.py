"""Enqueue-time options on every backend (PRODUCT §15): a caller's own job id, expiry before
start, debounce of a waiting unique job."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from typing import Any

import pytest
from contract import (
    DEFAULT_QUEUE,
    LEASE,
    T0,
    W1,
    BackendFactory,
    approx,
    claim_ids,
    errors_of,
    in_own_thread,
    job,
    new_job,
    opened,
    status,
)

from duly._records import JobFilter, JobRecord, NewJob, Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(60)


# -- a caller's own id -------------------------------------------------------------------------


async def test_a_hundred_concurrent_enqueues_of_one_own_id_store_one_job(
    backend: Backend, make_backend: BackendFactory
) -> None:
    start = threading.Barrier(4)

    async def enqueue_many(instance: Backend) -> list[tuple[str, bool]]:
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            out = []
            for n in range(25):
                [r] = await instance.enqueue([replace(new_job(at=T0 + n), id="invoice-42")])
                out.append((r.id, r.deduplicated))
            return out

    results = await asyncio.gather(*(in_own_thread(enqueue_many(make_backend())) for _ in range(4)))
    flat = [r for rs in results for r in rs]
    assert {job_id for job_id, _ in flat} == {"invoice-42"}
    assert sum(1 for _, dedup in flat if not dedup) == 1
    assert await claim_ids(backend, limit=10) == ["invoice-42"]
    assert await claim_ids(backend, limit=10) == []


async def test_an_own_id_twice_in_one_batch_is_one_job_and_listed(backend: Backend) -> None:
    first = replace(new_job(payload=b'{"args":[1],"kwargs":{}}'), id="invoice-42")
    again = replace(new_job(payload=b'{"args":[2],"kwargs":{}}'), id="invoice-42")
    plain = new_job()
    results = await backend.enqueue([first, again, plain])
    assert [(r.id, r.deduplicated) for r in results] == [
        ("invoice-42", False),
        ("invoice-42", True),
        (plain.id, False),
    ]
    assert (await job(backend, "invoice-42")).payload == first.payload  # the first one kept
    listed = {r.id for r in await backend.list_jobs(JobFilter(), 10)}
    assert listed == {"invoice-42", plain.id}  # ids of any case sort under the ceiling
    assert {r.id for r in await backend.list_jobs(JobFilter(status="queued"), 10)} == listed


async def test_an_own_id_is_free_again_once_its_job_is_purged(backend: Backend) -> None:
    own = replace(new_job(), id="report:2024-07.v1")
    await backend.enqueue([own])
    assert await claim_ids(backend) == [own.id]
    [done] = await backend.finish(W1, [Outcome(own.id, "succeeded", expire_at=T0 + 10)], T0 + 1)
    assert done
    [retained] = await backend.enqueue([replace(new_job(at=T0 + 2), id=own.id)])
    assert retained.deduplicated and await status(backend, own.id) == "succeeded"
    assert await backend.purge(T0 + 20, 100) == 1
    [fresh] = await backend.enqueue([replace(new_job(at=T0 + 21), id=own.id)])
    assert not fresh.deduplicated and await status(backend, own.id) == "queued"


# -- expiry before start -----------------------------------------------------------------------


def expiring(expires_at: float, **kw: Any) -> NewJob:
    return replace(new_job(**kw), expires_at=expires_at)


async def claim(backend: Backend, now: float, limit: int = 10, worker: str = W1) -> list[Any]:
    return await backend.claim(worker, [DEFAULT_QUEUE], limit, now, now + LEASE)


def assert_expired(record: JobRecord, now: float, *, ran_before: bool = False) -> None:
    assert record.status == "cancelled"
    assert record.finished_at == approx(now)
    assert (record.started_at is not None) is ran_before
    assert record.expire_at is not None and record.expire_at > now
    last = errors_of(record)[-1]
    assert last["type"] == "JobExpired" and "expir" in last["message"]


async def test_a_job_still_waiting_at_its_expiry_is_ended_by_the_claim(backend: Backend) -> None:
    stale = expiring(T0 + 5)
    fresh = expiring(T0 + 500, at=T0 + 1)
    plain = new_job(at=T0 + 2)
    await backend.enqueue([stale, fresh, plain])
    records = await claim(backend, T0 + 10)
    assert [(r.id, r.status) for r in records] == [
        (fresh.id, "running"),
        (plain.id, "running"),
        (stale.id, "cancelled"),  # the expired come last, ended
    ]
    assert_expired(records[-1], T0 + 10)
    assert_expired(await job(backend, stale.id), T0 + 10)
    assert await claim(backend, T0 + 11) == []
    assert [r.id for r in await backend.list_jobs(JobFilter(status="cancelled"), 10)] == [stale.id]


async def test_a_job_claimed_before_its_expiry_runs(backend: Backend) -> None:
    soon = expiring(T0 + 5)
    await backend.enqueue([soon])
    [record] = await claim(backend, T0 + 4.9)
    assert (record.id, record.status) == (soon.id, "running")
    applied = await backend.finish(W1, [Outcome(soon.id, "succeeded", expire_at=T0 + 99)], T0 + 9)
    assert applied == [True] and await status(backend, soon.id) == "succeeded"


async def test_a_scheduled_job_past_its_expiry_never_starts_a_retried_one_runs(
    backend: Backend,
) -> None:
    later = expiring(T0 + 20, delay=30)  # due after its expiry
    flaky = expiring(T0 + 20)
    await backend.enqueue([later, flaky])
    [first] = await claim(backend, T0 + 1)
    assert first.id == flaky.id
    retry = Outcome(flaky.id, "retry", errors=b'[{"type":"ValueError"}]', run_at=T0 + 25)
    assert await backend.finish(W1, [retry], T0 + 2) == [True]
    assert (await backend.promote_due(T0 + 40, 100))[0] == 2
    records = await claim(backend, T0 + 40)
    assert sorted((r.id, r.status) for r in records) == sorted(
        [(later.id, "cancelled"), (flaky.id, "running")]  # it had started: no expiry left
    )
    assert_expired(next(r for r in records if r.id == later.id), T0 + 40)
    again = await job(backend, flaky.id)
    assert again.attempts == 2 and [e["type"] for e in errors_of(again)] == ["ValueError"]


async def test_an_expired_gated_job_passes_its_turn_on(backend: Backend) -> None:
    holder = replace(new_job(), gate="g", gate_limit=1)
    stale = replace(expiring(T0 + 5, at=T0 + 1), gate="g", gate_limit=1)
    behind = replace(new_job(at=T0 + 2), gate="g", gate_limit=1)
    await backend.enqueue([holder, stale, behind])
    assert [r.id for r in await claim(backend, T0 + 3)] == [holder.id]  # the others park
    done = Outcome(holder.id, "succeeded", expire_at=T0 + 99)
    assert await backend.finish(W1, [done], T0 + 8) == [True]  # unparks `stale`
    records = await claim(backend, T0 + 9)
    taken = [r.id for r in records if r.status == "running"]
    taken += [r.id for r in await claim(backend, T0 + 9)]
    assert taken == [behind.id]  # the expired one's turn went to the job behind it
    assert_expired(await job(backend, stale.id), T0 + 9)


async def test_concurrent_claims_never_start_an_expired_job(
    backend: Backend, make_backend: BackendFactory
) -> None:
    stale = [expiring(T0 + 5, at=T0 + i * 0.01) for i in range(40)]
    live = [new_job(at=T0 + i * 0.01) for i in range(40)]
    await backend.enqueue([j for pair in zip(stale, live, strict=True) for j in pair])
    start = threading.Barrier(4)

    async def drain(instance: Backend, worker: str) -> list[tuple[str, str]]:
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            seen = []
            while records := await claim(instance, T0 + 10, limit=3, worker=worker):
                seen.extend((r.id, r.status) for r in records)
            return seen

    results = await asyncio.gather(
        *(in_own_thread(drain(make_backend(), f"w{n}")) for n in range(4))
    )
    seen = [pair for pairs in results for pair in pairs]
    started = [job_id for job_id, s in seen if s == "running"]
    ended = [job_id for job_id, s in seen if s == "cancelled"]
    assert sorted(started) == sorted(j.id for j in live)  # each once
    assert sorted(ended) == sorted(j.id for j in stale)  # each ended once, none started


# -- debounce ----------------------------------------------------------------------------------


def debounced(at: float, due: float, args: int, **kw: Any) -> NewJob:
    payload = b'{"args":[%d],"kwargs":{}}' % args
    job = new_job(at=at, delay=due - at, payload=payload, **kw)
    return replace(job, unique_key="doc:7", unique_until="start", debounce=True)


async def test_a_debounced_enqueue_pushes_the_waiting_job_back_with_its_arguments(
    backend: Backend,
) -> None:
    first = debounced(T0, T0 + 10, 1)
    await backend.enqueue([first])
    [again] = await backend.enqueue([debounced(T0 + 5, T0 + 15, 2)])
    assert (again.id, again.deduplicated) == (first.id, True)
    record = await job(backend, first.id)
    assert (record.status, record.scheduled_for) == ("scheduled", approx(T0 + 15))
    assert record.payload == b'{"args":[2],"kwargs":{}}'  # last write wins
    assert (await backend.promote_due(T0 + 12, 100))[0] == 0  # not due any more
    assert (await backend.promote_due(T0 + 16, 100))[0] == 1  # queued now
    [queued] = await backend.enqueue([debounced(T0 + 17, T0 + 27, 3)])
    assert queued.id == first.id  # a queued (ready) holder is pushed back too
    assert await status(backend, first.id) == "scheduled"
    assert await claim(backend, T0 + 20) == []
    assert (await backend.promote_due(T0 + 28, 100))[0] == 1
    [taken] = await claim(backend, T0 + 28)
    assert (taken.id, taken.payload) == (first.id, b'{"args":[3],"kwargs":{}}')
    assert len(await backend.list_jobs(JobFilter(), 10)) == 1


async def test_a_running_debounced_job_is_not_touched_a_new_one_waits(backend: Backend) -> None:
    first = debounced(T0, T0, 1)
    await backend.enqueue([first])
    [running] = await claim(backend, T0 + 1)
    assert running.id == first.id  # its hold ended at start
    [later] = await backend.enqueue([debounced(T0 + 2, T0 + 12, 2)])
    assert not later.deduplicated and later.id != first.id
    record = await job(backend, first.id)
    assert (record.status, record.payload) == ("running", b'{"args":[1],"kwargs":{}}')
    assert await status(backend, later.id) == "scheduled"


async def test_a_debounced_gated_job_passes_its_turn_on(backend: Backend) -> None:
    holder = replace(new_job(), gate="g", gate_limit=1)
    woken = replace(debounced(T0 + 1, T0 + 1, 1), gate="g", gate_limit=1)
    behind = replace(new_job(at=T0 + 2), gate="g", gate_limit=1)
    await backend.enqueue([holder, woken, behind])
    assert [r.id for r in await claim(backend, T0 + 3)] == [holder.id]  # the others park
    done = Outcome(holder.id, "succeeded", expire_at=T0 + 99)
    assert await backend.finish(W1, [done], T0 + 4) == [True]  # unparks `woken`
    [pushed] = await backend.enqueue([replace(debounced(T0 + 5, T0 + 50, 2), gate="g")])
    assert pushed.id == woken.id and await status(backend, woken.id) == "scheduled"
    taken = [r.id for r in await claim(backend, T0 + 6)]
    taken += [r.id for r in await claim(backend, T0 + 6)]
    assert taken == [behind.id]  # its turn went to the job behind it
