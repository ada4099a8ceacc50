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

from duly._ids import new_id
from duly._records import Outcome, Recovered
from duly.backends.base import Backend

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
    if state == "cancelled":  # requested while it runs: cancelled once the run reports
        assert await backend.cancel(new.id, T0 + 1, T0 + 5000)
        assert await finish_one(backend, W1, Outcome(new.id, "release"), T0 + 1) is False
    elif (outcome := outcomes[state]) is not None:
        assert await finish_one(backend, W1, outcome, T0 + 1)
    assert (await job(backend, new.id)).status == state
    return new.id


@pytest.mark.parametrize("state", ["scheduled", "queued", "retrying"])
async def test_cancel_a_waiting_job(backend: Backend, state: str) -> None:
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


@pytest.mark.parametrize("kind", ["succeeded", "failed", "retry", "release", "again"])
async def test_cancel_of_a_running_job_ends_when_its_run_ends(backend: Backend, kind: str) -> None:
    """A running job's cancel is a request: it runs on (its lease renewed, reported to its
    worker at every heartbeat) until its worker reports the run, which ends it cancelled,
    whatever the outcome, without applying or counting it."""
    job_id = await _in_state(backend, "running")
    assert await backend.cancel(job_id, T0 + 2, T0 + 1000) is True
    assert await backend.cancel(job_id, T0 + 3, T0 + 1000) is True, "asked twice: still fine"
    assert (await job(backend, job_id)).status == "running"
    assert await backend.heartbeat(W1, [job_id], T0 + 3, T0 + 3 + LEASE) == [job_id]
    assert await backend.heartbeat(W1, [job_id], T0 + 4, T0 + 4 + LEASE) == [job_id]
    # Its lease was renewed: not recovered while its worker lives.
    assert await backend.recover(T0 + LEASE + 2, 3, 100, T0 + 9999) == []
    assert (await job(backend, job_id)).status == "running"
    outcome = Outcome(
        job_id,
        kind,  # type: ignore[arg-type]
        result=b"1" if kind in ("succeeded", "again") else None,
        errors=HISTORY if kind in ("failed", "retry") else None,
        run_at=T0 + 10 if kind in ("retry", "release", "again") else None,
        expire_at=T0 + 50 if kind in ("succeeded", "failed") else None,
    )
    assert await finish_one(backend, W1, outcome, T0 + 5) is False
    record = await job(backend, job_id)
    assert (record.status, record.result, record.errors) == ("cancelled", None, None)
    assert record.finished_at == approx(T0 + 5)
    assert record.expire_at == approx(T0 + 1000)
    assert record.lease_until is None
    assert await backend.stats(T0 - 60) == [], "a cancelled run is not counted"
    # Never claimed, promoted or recovered afterwards; purged at its expire_at.
    assert await backend.promote_due(T0 + 999, 100) == (0, None)
    assert await claim_ids(backend, W2, limit=10, now=T0 + 999) == []
    assert await backend.recover(T0 + 999, 3, 100, T0 + 20_000) == []
    assert await backend.heartbeat(W1, [job_id], T0 + 6, T0 + 6 + LEASE) == [job_id]
    assert await backend.purge(T0 + 1000, 100) == 1


async def test_cancel_of_a_running_job_whose_worker_died(backend: Backend) -> None:
    """The cancel was requested, then the worker died: recovery cancels the job, never
    requeues it (a cancel always ends), and a late report of the dead run changes nothing."""
    job_id = await _in_state(backend, "running")
    assert await backend.cancel(job_id, T0 + 2, T0 + 1000)
    assert await backend.recover(T0 + LEASE + 1, 3, 100, T0 + 9999) == [
        Recovered(job_id, requeued=False, cancelled=True)
    ]
    record = await job(backend, job_id)
    assert (record.status, record.lost, record.expire_at) == ("cancelled", 0, approx(T0 + 1000))
    assert record.finished_at == approx(T0 + LEASE + 1)
    assert await backend.stats(T0 - 60) == [], "not counted as a failure"
    assert await claim_ids(backend, W2, limit=10, now=T0 + LEASE + 2) == []
    late = Outcome(job_id, "succeeded", result=b"1", expire_at=T0 + 50)
    assert await finish_one(backend, W1, late, T0 + LEASE + 3) is False
    assert await job(backend, job_id) == record


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
