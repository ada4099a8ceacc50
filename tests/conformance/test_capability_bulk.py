"""Bulk cancel and retry (``duly.backends.bulk``, PRODUCT §15) on every backend: one atomic step
per batch, a job that left the status skipped, a running job's cancel requested."""

from __future__ import annotations

from dataclasses import replace

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

from duly._bulk import cancel_matching, retry_matching
from duly._records import JobFilter, Outcome
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


async def test_cancel_and_retry_many_reach_jobs_behind_many_newer_ones(backend: Backend) -> None:
    # More newer non-matching jobs than a Redis listing examines (10,000): the selection goes
    # on by cursor until the index is exhausted, not until a page comes back short.
    old = await enqueue(backend, *(new_job("a", task="old") for _ in range(5)))
    for _ in range(11):
        await enqueue(backend, *(new_job("b", task="new") for _ in range(1000)))
    queued_a = JobFilter(status="queued", queue="a")
    assert await cancel_matching(backend, queued_a, T0, EXPIRE) == 5
    assert [await status(backend, job_id) for job_id in old] == ["cancelled"] * 5
    queued_b = JobFilter(status="queued", queue="b")
    assert await cancel_matching(backend, queued_b, T0, EXPIRE) == 11_000
    cancelled_old = JobFilter(status="cancelled", task="old")
    assert await retry_matching(backend, cancelled_old, T0 + 1) == 5
    assert [await status(backend, job_id) for job_id in old] == ["queued"] * 5


async def test_retry_of_two_jobs_taking_one_unique_key_still_checks_the_status(
    backend: Backend,
) -> None:
    # On PostgreSQL two jobs of one batch taking the same key fail the batch statement, which
    # then goes one job at a time: that way too, a job in another status is skipped.
    first = await enqueue(backend, replace(new_job(), unique_key="doc:1"))
    assert await BULK.of(backend).cancel(first, "queued", T0, EXPIRE) == 1
    second = await enqueue(backend, replace(new_job(), unique_key="doc:1"))
    assert await BULK.of(backend).cancel(second, "queued", T0, EXPIRE) == 1
    failed = await enqueue(backend, new_job())
    assert await claim_ids(backend, W1, limit=1) == failed
    history = error_history(("ValueError", "boom"))
    outcome = Outcome(failed[0], "failed", errors=history, expire_at=T0 + 5000)
    assert await finish_one(backend, W1, outcome, T0 + 1)
    assert await BULK.of(backend).retry([*first, *second, *failed], "cancelled", T0 + 2) == 1
    assert await status(backend, failed[0]) == "failed"  # not in the requested status
    assert sorted([await status(backend, first[0]), await status(backend, second[0])]) == [
        "cancelled",
        "queued",
    ]
