"""Several backend instances, each in its own thread and event loop, acting at once."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest
from contract import LEASE, T0, BackendFactory, enqueue, in_own_thread, new_job, opened

from duly._records import Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(90)


async def _claim_until_empty(
    backend: Backend, worker: str, batch: int, start: threading.Barrier
) -> list[str]:
    taken: list[str] = []
    async with opened(backend):
        await asyncio.to_thread(start.wait, 30)  # every instance open: start together
        misses = 0
        while misses < 3:  # empty three times in a row: the others took the rest
            records = await backend.claim(worker, ["default"], batch, T0 + 1, T0 + 1 + 3600)
            if records:
                misses = 0
                taken.extend(r.id for r in records)
            else:
                misses += 1
                await asyncio.sleep(0.01)
    return taken


@pytest.mark.parametrize("instances", [2, 4])
async def test_every_job_is_claimed_exactly_once(
    backend: Backend, make_backend: BackendFactory, instances: int
) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(500)])
    start = threading.Barrier(instances)
    results = await asyncio.gather(
        *(
            in_own_thread(_claim_until_empty(make_backend(), f"worker-{n}", 3 + n, start))
            for n in range(instances)
        )
    )
    claimed = Counter(job_id for taken in results for job_id in taken)
    assert [job_id for job_id, count in claimed.items() if count > 1] == []
    assert set(claimed) == set(ids)
    for job_id in ids[:20]:
        record = await backend.get_job(job_id)
        assert record is not None
        assert (record.status, record.attempts) == ("running", 1)


async def _recover_until_empty(backend: Backend, now: float, start: threading.Barrier) -> list[str]:
    found: list[str] = []
    async with opened(backend):
        await asyncio.to_thread(start.wait, 30)
        while recovered := await backend.recover(now, 3, 7, now + 1000):
            found.extend(r.id for r in recovered)
    return found


async def test_concurrent_recovery_recovers_each_orphan_once(
    backend: Backend, make_backend: BackendFactory
) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(120)])
    claimed = await backend.claim("dead-worker", ["default"], 200, T0, T0 + LEASE)
    assert len(claimed) == 120
    now = T0 + LEASE + 5
    start = threading.Barrier(3)
    results = await asyncio.gather(
        *(in_own_thread(_recover_until_empty(make_backend(), now, start)) for _ in range(3))
    )
    recovered = Counter(job_id for found in results for job_id in found)
    assert sum(recovered.values()) == len(ids)
    assert set(recovered) == set(ids)
    for job_id in ids[:20]:
        record = await backend.get_job(job_id)
        assert record is not None
        assert (record.status, record.lost, record.attempts) == ("queued", 1, 1)


async def test_concurrent_quarantine_counts_each_failure_once(
    backend: Backend, make_backend: BackendFactory
) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(60)])
    assert len(await backend.claim("dead-worker", ["default"], 100, T0, T0 + LEASE)) == 60
    now = T0 + LEASE + 5

    start = threading.Barrier(3)

    async def quarantine(instance: Backend) -> int:
        total = 0
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            while recovered := await instance.recover(now, 1, 5, now + 1000):
                assert not any(r.requeued for r in recovered)
                total += len(recovered)
        return total

    counts = await asyncio.gather(*(in_own_thread(quarantine(make_backend())) for _ in range(3)))
    assert sum(counts) == len(ids)
    assert sum(row.failed for row in await backend.stats(0)) == len(ids)


async def test_claim_and_finish_race_cancel(backend: Backend, make_backend: BackendFactory) -> None:
    """Each job ends either succeeded (its run applied) or cancelled, never both, never twice."""
    ids = await enqueue(backend, *[new_job() for _ in range(200)])

    start = threading.Barrier(2)

    async def cancel_all(instance: Backend) -> set[str]:
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            return {job_id for job_id in ids if await instance.cancel(job_id, T0 + 1, T0 + 999)}

    async def run_all(instance: Backend) -> tuple[list[str], set[str]]:
        claimed: list[str] = []
        applied: set[str] = set()
        async with opened(instance):
            await asyncio.to_thread(start.wait, 30)
            while records := await instance.claim("claimer", ["default"], 5, T0 + 1, T0 + 99):
                claimed.extend(r.id for r in records)
                outcomes = [
                    Outcome(r.id, "succeeded", result=b"1", expire_at=T0 + 999) for r in records
                ]
                flags = await instance.finish("claimer", outcomes, T0 + 2)
                applied.update(r.id for r, flag in zip(records, flags, strict=True) if flag)
        return claimed, applied

    (claimed, succeeded), cancelled = await asyncio.gather(
        in_own_thread(run_all(make_backend())), in_own_thread(cancel_all(make_backend()))
    )
    assert len(claimed) == len(set(claimed)), "a job was claimed twice"
    assert succeeded.isdisjoint(cancelled)
    assert succeeded | cancelled == set(ids)
    for job_id in ids:
        record = await backend.get_job(job_id)
        assert record is not None
        assert record.status == ("cancelled" if job_id in cancelled else "succeeded")
