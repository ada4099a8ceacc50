"""The watches capability (PRODUCT §6, §17) on every backend: ``move`` reschedules the active
job holding a unique key (a watch's job) in one atomic step."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from contract import EXPIRE, T0, W1, claim_ids, enqueue, finish_one, job, new_job

from duly._records import NewJob, Outcome
from duly.backends.base import Backend

KEY = "tests.watch:order=42"


def watch_job(delay: float = 3600.0, key: str = KEY) -> NewJob:
    return replace(new_job(delay=delay), unique_key=key)


async def test_a_scheduled_watch_moves_earlier_and_later(backend: Backend) -> None:
    [job_id] = await enqueue(backend, watch_job())
    assert await backend.watches.move(KEY, T0 + 60, T0) == (job_id, True)
    record = await job(backend, job_id)
    assert (record.status, record.scheduled_for) == ("scheduled", pytest.approx(T0 + 60))
    assert await backend.promote_due(T0 + 59, 10) == (0, pytest.approx(T0 + 60))
    assert await backend.watches.move(KEY, T0 + 7200, T0) == (job_id, True)
    assert await backend.promote_due(T0 + 3601, 10) == (0, pytest.approx(T0 + 7200))
    assert (await backend.promote_due(T0 + 7200, 10))[0] == 1
    assert await claim_ids(backend, W1, now=T0 + 7200) == [job_id]


async def test_a_queued_watch_waits_again_and_running_one_is_left(backend: Backend) -> None:
    [job_id] = await enqueue(backend, watch_job(delay=0))
    assert (await job(backend, job_id)).status == "queued"
    assert await backend.watches.move(KEY, T0, T0 + 1) == (job_id, True)  # due: unchanged
    assert (await job(backend, job_id)).status == "queued"
    assert await backend.watches.move(KEY, T0 + 600, T0 + 1) == (job_id, True)
    record = await job(backend, job_id)
    assert (record.status, record.scheduled_for) == ("scheduled", pytest.approx(T0 + 600))
    assert await claim_ids(backend, W1, now=T0 + 2) == []  # no longer claimable
    assert (await backend.promote_due(T0 + 600, 10))[0] == 1
    assert await claim_ids(backend, W1, now=T0 + 600) == [job_id]
    # A check running now is not moved: its outcome decides what follows.
    assert await backend.watches.move(KEY, T0 + 900, T0 + 601) == (job_id, False)
    assert (await job(backend, job_id)).status == "running"
    again = Outcome(job_id, "again", result=b"{}", run_at=T0 + 1200)
    assert await finish_one(backend, W1, again, T0 + 602)
    assert await backend.watches.move(KEY, T0 + 700, T0 + 603) == (job_id, True)
    assert (await job(backend, job_id)).scheduled_for == pytest.approx(T0 + 700)


async def test_no_active_holder_is_none(backend: Backend) -> None:
    assert await backend.watches.move(KEY, T0 + 60, T0) is None
    [job_id] = await enqueue(backend, watch_job(delay=0))
    await claim_ids(backend, W1)
    done = Outcome(job_id, "succeeded", result=b"{}", expire_at=T0 + EXPIRE)
    assert await finish_one(backend, W1, done, T0 + 1)
    assert await backend.watches.move(KEY, T0 + 60, T0 + 2) is None  # ended: held no more
    assert (await job(backend, job_id)).status == "succeeded"
    assert await backend.watches.move("another", T0 + 60, T0 + 2) is None


async def test_concurrent_moves_leave_one_due_time(backend: Backend) -> None:
    [job_id] = await enqueue(backend, watch_job())
    times = [T0 + 100 + i for i in range(20)]
    results = await asyncio.gather(*(backend.watches.move(KEY, t, T0) for t in times))
    assert all(r == (job_id, True) for r in results)
    record = await job(backend, job_id)
    assert record.status == "scheduled" and record.scheduled_for in times
    # One entry in the due index: promoting at the latest time moves it once.
    assert (await backend.promote_due(T0 + 200, 10))[0] == 1
