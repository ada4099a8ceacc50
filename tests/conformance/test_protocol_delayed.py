"""promote_due(): scheduled and retrying jobs become queued when due, and not before."""

from __future__ import annotations

import pytest
from contract import T0, W1, approx, claim_ids, claim_order, enqueue, finish_one, job, new_job

from duly._records import Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)


async def test_nothing_to_promote(backend: Backend) -> None:
    assert await backend.promote_due(T0, 100) == (0, None)
    await enqueue(backend, new_job())
    assert await backend.promote_due(T0, 100) == (0, None)


async def test_only_due_jobs_move(backend: Backend) -> None:
    jobs = [new_job(delay=d) for d in (30, 10, 20)]
    await enqueue(backend, *jobs)
    assert await backend.promote_due(T0 + 9, 100) == (0, approx(T0 + 10))
    assert await backend.promote_due(T0 + 15, 100) == (1, approx(T0 + 20))
    assert [(await job(backend, j.id)).status for j in jobs] == ["scheduled", "queued", "scheduled"]
    assert await claim_ids(backend, limit=10, now=T0 + 15) == [jobs[1].id]
    assert await backend.promote_due(T0 + 100, 100) == (2, None)
    assert sorted(await claim_ids(backend, limit=10, now=T0 + 100)) == sorted(
        [jobs[0].id, jobs[2].id]
    )


async def test_due_exactly_now_moves(backend: Backend) -> None:
    new = new_job(delay=10)
    await enqueue(backend, new)
    assert await backend.promote_due(T0 + 10, 100) == (1, None)
    assert (await job(backend, new.id)).status == "queued"


async def test_promote_respects_limit(backend: Backend) -> None:
    jobs = [new_job(delay=d) for d in (1, 2, 3, 4, 5)]
    await enqueue(backend, *jobs)
    moved, pending = await backend.promote_due(T0 + 10, 2)
    assert moved == 2
    assert pending == approx(T0 + 3)
    assert [(await job(backend, j.id)).status for j in jobs] == ["queued"] * 2 + ["scheduled"] * 3
    assert await backend.promote_due(T0 + 10, 2) == (2, approx(T0 + 5))
    assert await backend.promote_due(T0 + 10, 2) == (1, None)


async def test_pending_counts_retrying_jobs(backend: Backend) -> None:
    later = new_job(delay=100)
    retried = new_job()
    await enqueue(backend, later, retried)
    assert await claim_ids(backend, W1, now=T0) == [retried.id]
    outcome = Outcome(retried.id, "retry", errors=b"[]", run_at=T0 + 40)
    assert await finish_one(backend, W1, outcome, T0 + 1)
    assert await backend.promote_due(T0 + 2, 100) == (0, approx(T0 + 40))
    assert await backend.promote_due(T0 + 50, 100) == (1, approx(T0 + 100))
    assert (await job(backend, retried.id)).status == "queued"
    assert (await job(backend, later.id)).status == "scheduled"


async def test_promoted_jobs_keep_priority_order(backend: Backend) -> None:
    low = new_job(delay=5, priority=0)
    high = new_job(delay=6, priority=9)
    await enqueue(backend, low, high)
    assert (await backend.promote_due(T0 + 10, 100))[0] == 2
    assert await claim_order(backend, now=T0 + 10) == [high.id, low.id]


async def test_promoted_job_is_claimed_normally(backend: Backend) -> None:
    new = new_job(delay=60)
    await enqueue(backend, new)
    await backend.promote_due(T0 + 60, 10)
    [record] = await backend.claim(W1, ["default"], 1, T0 + 61, T0 + 91)
    assert (record.id, record.status, record.attempts) == (new.id, "running", 1)
    assert record.started_at == approx(T0 + 61)
