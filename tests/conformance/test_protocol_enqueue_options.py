"""Enqueue-time options on every backend (PRODUCT §15): a caller's own job id, expiry before
start, debounce of a waiting unique job."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest
from contract import (
    T0,
    W1,
    BackendFactory,
    claim_ids,
    in_own_thread,
    job,
    new_job,
    opened,
    status,
)

from duly._records import JobFilter, Outcome
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
