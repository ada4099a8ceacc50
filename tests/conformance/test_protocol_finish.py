"""finish(): the four outcome kinds, and outcomes that no longer apply."""

from __future__ import annotations

import pytest
from contract import (
    DEFAULT_QUEUE,
    LEASE,
    T0,
    W1,
    W2,
    approx,
    claim_ids,
    claim_order,
    enqueue,
    error_history,
    finish_one,
    job,
    new_job,
)

from duly._ids import new_id
from duly._records import Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)

RESULT = b'{"value":3,"text":"d\xc3\xa9j\xc3\xa0 vu"}'


async def _running(backend: Backend, **kwargs: object) -> str:
    new = new_job(**kwargs)  # type: ignore[arg-type]
    await enqueue(backend, new)
    assert await claim_ids(backend, W1, queues=[new.queue]) == [new.id]
    return new.id


async def test_succeeded_stores_result_and_expiry(backend: Backend) -> None:
    job_id = await _running(backend)
    outcome = Outcome(job_id, "succeeded", result=RESULT, expire_at=T0 + 3600)
    assert await finish_one(backend, W1, outcome, T0 + 2) is True
    record = await job(backend, job_id)
    assert record.status == "succeeded"
    assert record.result == RESULT
    assert record.finished_at == approx(T0 + 2)
    assert record.expire_at == approx(T0 + 3600)
    assert record.attempts == 1
    assert record.started_at == approx(T0)


async def test_failed_stores_errors_and_expiry(backend: Backend) -> None:
    job_id = await _running(backend)
    history = error_history(("ValueError", "bad input"))
    outcome = Outcome(job_id, "failed", errors=history, expire_at=T0 + 7 * 86_400)
    assert await finish_one(backend, W1, outcome, T0 + 3) is True
    record = await job(backend, job_id)
    assert record.status == "failed"
    assert record.errors == history
    assert record.finished_at == approx(T0 + 3)
    assert record.expire_at == approx(T0 + 7 * 86_400)
    assert record.result is None


async def test_retry_waits_until_run_at_then_is_promoted(backend: Backend) -> None:
    job_id = await _running(backend)
    history = error_history(("TimeoutError", "upstream slow"))
    outcome = Outcome(job_id, "retry", errors=history, run_at=T0 + 60)
    assert await finish_one(backend, W1, outcome, T0 + 1) is True
    record = await job(backend, job_id)
    assert record.status == "retrying"
    assert record.errors == history
    assert record.scheduled_for == approx(T0 + 60)
    assert record.attempts == 1

    assert await claim_ids(backend, W2, limit=10, now=T0 + 61) == []
    moved, _ = await backend.promote_due(T0 + 59, 100)
    assert moved == 0
    assert (await job(backend, job_id)).status == "retrying"

    moved, pending = await backend.promote_due(T0 + 60, 100)
    assert (moved, pending) == (1, None)
    assert (await job(backend, job_id)).status == "queued"
    [again] = await backend.claim(W2, [DEFAULT_QUEUE], 10, T0 + 61, T0 + 61 + LEASE)
    assert again.id == job_id
    assert again.attempts == 2
    assert again.worker == W2
    assert again.errors == history


async def test_release_now_hands_back_to_the_head_without_charging(backend: Backend) -> None:
    older = new_job(delay=5)  # older than the released job, queued while it runs
    await enqueue(backend, older)
    job_id = await _running(backend, at=T0 + 1)
    assert (await backend.promote_due(T0 + 5, 10))[0] == 1
    outcome = Outcome(job_id, "release", run_at=T0 + 6)
    assert await finish_one(backend, W1, outcome, T0 + 6) is True
    record = await job(backend, job_id)
    assert record.status == "queued"
    assert record.attempts == 0
    assert await claim_order(backend, now=T0 + 7) == [job_id, older.id]
    assert (await job(backend, job_id)).attempts == 1


async def test_release_later_schedules(backend: Backend) -> None:
    job_id = await _running(backend)
    assert await finish_one(backend, W1, Outcome(job_id, "release", run_at=T0 + 30), T0 + 2)
    record = await job(backend, job_id)
    assert record.status == "scheduled"
    assert record.attempts == 0
    assert record.scheduled_for == approx(T0 + 30)
    assert await claim_ids(backend, W1, limit=5, now=T0 + 3) == []
    assert await backend.promote_due(T0 + 29, 10) == (0, approx(T0 + 30))
    assert (await backend.promote_due(T0 + 30, 10))[0] == 1
    assert await claim_ids(backend, W1, now=T0 + 31) == [job_id]
    assert (await job(backend, job_id)).attempts == 1


async def test_outcome_from_another_worker_is_dropped(backend: Backend) -> None:
    job_id = await _running(backend)
    outcome = Outcome(job_id, "succeeded", result=RESULT, expire_at=T0 + 10)
    assert await finish_one(backend, W2, outcome, T0 + 1) is False
    record = await job(backend, job_id)
    assert (record.status, record.worker, record.result) == ("running", W1, None)
    assert await backend.stats(0) == []


@pytest.mark.parametrize("kind", ["succeeded", "failed", "retry", "release"])
async def test_outcome_after_cancel_is_dropped(backend: Backend, kind: str) -> None:
    job_id = await _running(backend)
    assert await backend.cancel(job_id, T0 + 1, T0 + 100) is True
    outcome = Outcome(
        job_id,
        kind,  # type: ignore[arg-type]
        result=RESULT if kind == "succeeded" else None,
        errors=error_history(("E", "m")) if kind in ("failed", "retry") else None,
        run_at=T0 + 2 if kind in ("retry", "release") else None,
        expire_at=T0 + 50 if kind in ("succeeded", "failed") else None,
    )
    assert await finish_one(backend, W1, outcome, T0 + 2) is False
    record = await job(backend, job_id)
    assert record.status == "cancelled"
    assert record.result is None
    assert record.errors is None
    assert record.expire_at == approx(T0 + 100)
    assert await backend.stats(0) == []


async def test_outcome_after_recovery_is_dropped(backend: Backend) -> None:
    job_id = await _running(backend)
    recovered = await backend.recover(T0 + LEASE + 1, 3, 100, T0 + 1000)
    assert [r.id for r in recovered] == [job_id]
    outcome = Outcome(job_id, "failed", errors=error_history(("E", "late")), expire_at=T0 + 99)
    assert await finish_one(backend, W1, outcome, T0 + LEASE + 2) is False
    record = await job(backend, job_id)
    assert (record.status, record.errors, record.worker) == ("queued", None, None)

    # Reclaimed by another worker: the first worker's late outcome still does not apply.
    assert await claim_ids(backend, W2, now=T0 + LEASE + 3) == [job_id]
    late = Outcome(job_id, "succeeded", result=b"1", expire_at=T0 + 99)
    assert await finish_one(backend, W1, late, T0 + LEASE + 4) is False
    assert (await job(backend, job_id)).status == "running"
    on_time = Outcome(job_id, "succeeded", result=b"2", expire_at=T0 + 99)
    assert await finish_one(backend, W2, on_time, T0 + LEASE + 5) is True
    record = await job(backend, job_id)
    assert (record.status, record.result, record.attempts) == ("succeeded", b"2", 2)


async def test_outcome_for_finished_or_unknown_job_is_dropped(backend: Backend) -> None:
    job_id = await _running(backend)
    done = Outcome(job_id, "succeeded", result=b"1", expire_at=T0 + 99)
    assert await finish_one(backend, W1, done, T0 + 1) is True
    twice = Outcome(job_id, "failed", errors=error_history(("E", "m")), expire_at=T0 + 5)
    assert await finish_one(backend, W1, twice, T0 + 2) is False
    record = await job(backend, job_id)
    assert (record.status, record.result, record.errors) == ("succeeded", b"1", None)
    ghost = Outcome(new_id(), "succeeded", result=b"1", expire_at=T0 + 99)
    assert await finish_one(backend, W1, ghost, T0 + 3) is False


async def test_outcome_for_queued_job_is_dropped(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    outcome = Outcome(new.id, "succeeded", result=b"1", expire_at=T0 + 99)
    assert await finish_one(backend, W1, outcome, T0 + 1) is False
    assert (await job(backend, new.id)).status == "queued"


async def test_batch_of_outcomes_flags_in_order(backend: Backend) -> None:
    jobs = [new_job() for _ in range(4)]
    await enqueue(backend, *jobs)
    assert len(await claim_ids(backend, W1, limit=4)) == 4
    assert await backend.cancel(jobs[2].id, T0 + 1, T0 + 100)
    outcomes = [
        Outcome(jobs[0].id, "succeeded", result=b"0", expire_at=T0 + 50),
        Outcome(jobs[1].id, "failed", errors=error_history(("E", "1")), expire_at=T0 + 50),
        Outcome(jobs[2].id, "succeeded", result=b"2", expire_at=T0 + 50),
        Outcome(new_id(), "succeeded", result=b"x", expire_at=T0 + 50),
        Outcome(jobs[3].id, "retry", errors=error_history(("E", "3")), run_at=T0 + 20),
    ]
    assert await backend.finish(W1, outcomes, T0 + 2) == [True, True, False, False, True]
    statuses = [(await job(backend, j.id)).status for j in jobs]
    assert statuses == ["succeeded", "failed", "cancelled", "retrying"]


async def test_empty_batch_of_outcomes(backend: Backend) -> None:
    assert await backend.finish(W1, [], T0) == []
