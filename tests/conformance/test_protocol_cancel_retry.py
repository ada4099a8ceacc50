"""Operator actions: cancel() and retry()."""

from __future__ import annotations

import pytest
from contract import (
    LEASE,
    T0,
    W1,
    W2,
    approx,
    claim_ids,
    enqueue,
    error_history,
    finish_one,
    job,
    new_job,
)

from duly.backends.base import Backend
from duly.ids import new_id
from duly.records import Outcome

pytestmark = pytest.mark.timeout(30)

HISTORY = error_history(("ValueError", "boom"))


async def _in_state(backend: Backend, state: str) -> str:
    """A job brought to ``state`` through the protocol (the clock stays near T0)."""
    new = new_job(delay=1000 if state == "scheduled" else 0)
    await enqueue(backend, new)
    if state in ("scheduled", "queued"):
        return new.id
    assert await claim_ids(backend, W1, now=T0) == [new.id]
    outcomes = {
        "running": None,
        "retrying": Outcome(new.id, "retry", errors=HISTORY, run_at=T0 + 500),
        "succeeded": Outcome(new.id, "succeeded", result=b"42", expire_at=T0 + 5000),
        "failed": Outcome(new.id, "failed", errors=HISTORY, expire_at=T0 + 5000),
    }
    if state == "cancelled":
        assert await backend.cancel(new.id, T0 + 1, T0 + 5000)
    elif (outcome := outcomes[state]) is not None:
        assert await finish_one(backend, W1, outcome, T0 + 1)
    assert (await job(backend, new.id)).status == state
    return new.id


@pytest.mark.parametrize("state", ["scheduled", "queued", "retrying", "running"])
async def test_cancel_an_active_job(backend: Backend, state: str) -> None:
    job_id = await _in_state(backend, state)
    assert await backend.cancel(job_id, T0 + 2, T0 + 2 + 86_400) is True
    record = await job(backend, job_id)
    assert record.status == "cancelled"
    assert record.expire_at == approx(T0 + 2 + 86_400)
    # Never claimed, never promoted, never recovered afterwards.
    assert await backend.promote_due(T0 + 10_000, 100) == (0, None)
    assert await claim_ids(backend, W2, limit=10, now=T0 + 10_000) == []
    assert await backend.recover(T0 + 10_000, 3, 100, T0 + 20_000) == []
    assert (await job(backend, job_id)).status == "cancelled"


async def test_cancelled_running_job_is_reported_at_heartbeat(backend: Backend) -> None:
    job_id = await _in_state(backend, "running")
    assert await backend.cancel(job_id, T0 + 2, T0 + 1000)
    assert await backend.heartbeat(W1, [job_id], T0 + 3, T0 + 3 + LEASE) == [job_id]
    outcome = Outcome(job_id, "succeeded", result=b"1", expire_at=T0 + 50)
    assert await finish_one(backend, W1, outcome, T0 + 4) is False
    record = await job(backend, job_id)
    assert (record.status, record.result) == ("cancelled", None)


@pytest.mark.parametrize("state", ["succeeded", "failed", "cancelled"])
async def test_cannot_cancel_a_finished_job(backend: Backend, state: str) -> None:
    job_id = await _in_state(backend, state)
    before = await job(backend, job_id)
    assert await backend.cancel(job_id, T0 + 2, T0 + 9) is False
    assert await job(backend, job_id) == before


async def test_cannot_cancel_an_unknown_job(backend: Backend) -> None:
    assert await backend.cancel(new_id(), T0, T0 + 10) is False
    assert await backend.get_job(new_id()) is None


async def test_cancel_leaves_other_jobs_claimable(backend: Backend) -> None:
    keep, drop = new_job(), new_job()
    await enqueue(backend, drop, keep)
    assert await backend.cancel(drop.id, T0, T0 + 100)
    assert await claim_ids(backend, W1, limit=10) == [keep.id]


@pytest.mark.parametrize("state", ["failed", "cancelled"])
async def test_retry_requeues_with_fresh_attempts(backend: Backend, state: str) -> None:
    job_id = await _in_state(backend, state)
    before = await job(backend, job_id)
    assert await backend.retry(job_id, T0 + 10) is True
    record = await job(backend, job_id)
    assert record.status == "queued"
    assert record.attempts == 0
    assert record.lost == 0
    assert record.finished_at is None
    assert record.result is None
    assert record.expire_at is None
    assert record.errors == before.errors  # the history is kept
    [claimed] = await backend.claim(W2, ["default"], 5, T0 + 11, T0 + 11 + LEASE)
    assert (claimed.id, claimed.attempts, claimed.worker) == (job_id, 1, W2)


async def test_retry_a_quarantined_job_resets_lost(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1, now=T0)
    assert len(await backend.recover(T0 + 100, 1, 10, T0 + 999)) == 1
    assert (await job(backend, new.id)).lost == 1
    assert await backend.retry(new.id, T0 + 101)
    record = await job(backend, new.id)
    assert (record.status, record.attempts, record.lost, record.expire_at) == (
        "queued",
        0,
        0,
        None,
    )
    assert record.errors is not None  # the LostWorker entry stays in the history


async def test_retried_job_is_not_deleted_by_its_old_expiry(backend: Backend) -> None:
    job_id = await _in_state(backend, "failed")  # expire_at T0 + 5000
    assert await backend.retry(job_id, T0 + 10)
    assert await backend.purge(T0 + 10_000, 100) == 0
    assert (await job(backend, job_id)).status == "queued"


@pytest.mark.parametrize("state", ["scheduled", "queued", "running", "retrying", "succeeded"])
async def test_retry_refuses_other_states(backend: Backend, state: str) -> None:
    job_id = await _in_state(backend, state)
    before = await job(backend, job_id)
    assert await backend.retry(job_id, T0 + 10) is False
    assert await job(backend, job_id) == before


async def test_retry_unknown_job(backend: Backend) -> None:
    assert await backend.retry(new_id(), T0) is False
