"""Expiry before start (PRODUCT §15, ``expires=``), the edges: more expired jobs than a claim
ends, an expiry that ends with the job's first start, what a claim reports."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from contract import DEFAULT_QUEUE, LEASE, T0, W1, errors_of, job, new_job

from duly._records import JobRecord, NewJob, Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(120)


def expiring(expires_at: float, **kw: Any) -> NewJob:
    return replace(new_job(**kw), expires_at=expires_at)


async def claim(backend: Backend, now: float, limit: int = 10) -> list[JobRecord]:
    return await backend.claim(W1, [DEFAULT_QUEUE], limit, now, now + LEASE)


async def test_more_expired_jobs_than_a_claim_ends_never_start(backend: Backend) -> None:
    stale = [expiring(T0 + 0.5, at=T0 + i * 0.0001) for i in range(1005)]
    live = new_job(at=T0 + 0.2)
    for start in range(0, len(stale), 500):
        await backend.enqueue(stale[start : start + 500])
    await backend.enqueue([live])
    seen: list[tuple[str, str]] = []
    for _ in range(50):  # each claim ends a bounded number: a few claims end them all
        records = await claim(backend, T0 + 5)
        if not records:
            break
        seen.extend((r.id, r.status) for r in records)
    assert [job_id for job_id, s in seen if s == "running"] == [live.id]
    ended = [job_id for job_id, s in seen if s == "cancelled"]
    assert sorted(ended) == sorted(j.id for j in stale)  # each ended once, none started
    assert len(seen) == len(stale) + 1


async def test_an_expired_job_retried_by_an_operator_runs(backend: Backend) -> None:
    stale = expiring(T0 + 5)
    await backend.enqueue([stale])
    [ended] = await claim(backend, T0 + 10)
    assert ended.status == "cancelled"
    assert await backend.retry(stale.id, T0 + 11)
    [record] = await claim(backend, T0 + 12)
    assert (record.id, record.status) == (stale.id, "running")
    assert (await job(backend, stale.id)).status == "running"


async def test_a_started_job_recovered_after_its_expiry_runs_again(backend: Backend) -> None:
    soon = expiring(T0 + 5)
    await backend.enqueue([soon])
    [first] = await claim(backend, T0 + 1)
    assert first.status == "running"
    recovered = await backend.recover(T0 + 1 + LEASE + 1, 5, 100, T0 + 9_999)
    assert [r.id for r in recovered] == [soon.id]
    [again] = await claim(backend, T0 + LEASE + 3)  # past its expiry: it had started
    assert (again.id, again.status, again.lost) == (soon.id, "running", 1)
    stored = await job(backend, soon.id)
    assert stored.status == "running" and stored.expires_at is None
    assert stored.errors is None  # no JobExpired: it was never ended


async def test_a_claim_reports_an_expired_job_as_stored(backend: Backend) -> None:
    stale = replace(expiring(T0 + 5, priority=3), key="k-1")
    await backend.enqueue([stale])
    [reported] = await claim(backend, T0 + 10)
    stored = await job(backend, stale.id)
    assert reported.status == stored.status == "cancelled"
    assert reported.errors is not None and errors_of(reported) == errors_of(stored)
    for field in ("id", "task", "queue", "payload", "attempts", "key", "priority", "worker"):
        assert getattr(reported, field) == getattr(stored, field), field
    for field in ("finished_at", "expire_at", "expires_at", "enqueued_at", "started_at"):
        want = getattr(stored, field)
        got = getattr(reported, field)
        assert (got is None) == (want is None) and (want is None or got == pytest.approx(want))


async def test_one_claim_ends_a_bounded_number_of_expired_jobs(backend: Backend) -> None:
    stale = [expiring(T0 + 0.5, at=T0 + i * 0.001) for i in range(150)]
    await backend.enqueue(stale)
    first = await claim(backend, T0 + 5)
    assert 0 < len(first) <= 100 and {r.status for r in first} == {"cancelled"}
    rest = await claim(backend, T0 + 5)
    assert sorted(r.id for r in first + rest) == sorted(j.id for j in stale)


async def test_expired_jobs_of_one_gate_ended_together_pass_every_turn_on(
    backend: Backend,
) -> None:
    def gated(job: NewJob) -> NewJob:
        return replace(job, gate="g", gate_limit=2)

    holders = [gated(new_job(at=T0 + i * 0.01)) for i in range(2)]
    stale = [gated(expiring(T0 + 5, at=T0 + 1 + i * 0.01)) for i in range(3)]
    behind = [gated(new_job(at=T0 + 2 + i * 0.01)) for i in range(2)]
    await backend.enqueue([*holders, *stale, *behind])
    assert sorted(r.id for r in await claim(backend, T0 + 3)) == sorted(j.id for j in holders)
    done = [Outcome(j.id, "succeeded", expire_at=T0 + 99) for j in holders]
    assert await backend.finish(W1, done, T0 + 8) == [True, True]  # unparks two of `stale`
    taken: list[str] = []
    for _ in range(5):
        taken += [r.id for r in await claim(backend, T0 + 9) if r.status == "running"]
    assert sorted(taken) == sorted(j.id for j in behind)  # both freed slots reached them
    for job_ in stale:
        assert (await job(backend, job_.id)).status == "cancelled"
