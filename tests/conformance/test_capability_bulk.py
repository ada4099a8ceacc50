"""Bulk cancel and retry (``duly.backends.bulk``, PRODUCT §15) on every backend: one atomic step
per batch, a job that left the status skipped, a running job's cancel requested."""

from __future__ import annotations

import pytest
from contract import (
    T0,
    W1,
    claim_ids,
    enqueue,
    error_history,
    finish_one,
    job,
    new_job,
    status,
)

from duly._records import Outcome
from duly.backends.base import Backend
from duly.backends.bulk import BULK

pytestmark = pytest.mark.timeout(60)
EXPIRE = T0 + 86_400


async def test_cancel_a_batch_of_queued_jobs_skipping_those_that_moved_on(
    backend: Backend,
) -> None:
    ids = await enqueue(backend, *(new_job() for _ in range(5)))
    [taken] = await claim_ids(backend, W1, limit=1)  # running now: no longer queued
    scheduled = await enqueue(backend, new_job(delay=60))
    n = await BULK.of(backend).cancel(
        [*ids, *scheduled, "01NOSUCHJOB0000000000000000"], "queued", T0, EXPIRE
    )
    assert n == 4
    for job_id in ids:
        want = "running" if job_id == taken else "cancelled"
        assert await status(backend, job_id) == want
    assert await status(backend, scheduled[0]) == "scheduled"  # another status: untouched
    assert await claim_ids(backend, W1, limit=10) == []
    assert await BULK.of(backend).cancel(ids, "queued", T0, EXPIRE) == 0  # never twice


async def test_cancel_running_jobs_requests_it(backend: Backend) -> None:
    ids = await enqueue(backend, new_job(), new_job())
    assert sorted(await claim_ids(backend, W1, limit=2)) == sorted(ids)
    assert await BULK.of(backend).cancel(ids, "running", T0 + 1, EXPIRE) == 2
    for job_id in ids:
        assert (await job(backend, job_id)).status == "running"  # until its run reports
        assert await finish_one(backend, W1, Outcome(job_id, "release"), T0 + 2) is False
        assert (await job(backend, job_id)).status == "cancelled"


async def test_retry_a_batch_of_failed_jobs_once(backend: Backend) -> None:
    ids = await enqueue(backend, *(new_job() for _ in range(3)))
    assert len(await claim_ids(backend, W1, limit=3)) == 3
    history = error_history(("ValueError", "boom"))
    for job_id in ids:
        failed = Outcome(job_id, "failed", errors=history, expire_at=T0 + 5000)
        assert await finish_one(backend, W1, failed, T0 + 1)
    assert await BULK.of(backend).retry(ids, "cancelled", T0 + 2) == 0  # not cancelled
    assert await BULK.of(backend).retry(ids, "failed", T0 + 2) == 3
    assert await BULK.of(backend).retry(ids, "failed", T0 + 3) == 0  # queued now: skipped
    for job_id in ids:
        record = await job(backend, job_id)
        assert (record.status, record.attempts) == ("queued", 0)
    assert sorted(await claim_ids(backend, W1, limit=10, now=T0 + 3)) == sorted(ids)


async def test_a_batch_of_a_thousand_in_one_call(backend: Backend) -> None:
    ids = await enqueue(backend, *(new_job() for _ in range(1000)))
    assert await BULK.of(backend).cancel(ids, "queued", T0, EXPIRE) == 1000
    assert await BULK.of(backend).retry(ids, "cancelled", T0 + 1) == 1000
    assert await status(backend, ids[-1]) == "queued"
