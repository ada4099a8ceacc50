"""Pausing a queue (``duly.backends.pausing``, PRODUCT §15) on every backend: a paused queue
keeps and receives jobs but gives none to a claim until resumed."""

from __future__ import annotations

import asyncio
import threading

import pytest
from contract import (
    LEASE,
    T0,
    W1,
    BackendFactory,
    claim_ids,
    enqueue,
    in_own_thread,
    new_job,
    opened,
    status,
)

from duly._records import JobFilter
from duly.backends.base import Backend
from duly.backends.pausing import PAUSING

pytestmark = pytest.mark.timeout(60)


async def test_a_paused_queue_gives_no_job_until_resumed(backend: Backend) -> None:
    pausing = PAUSING.of(backend)
    [mail] = await enqueue(backend, new_job("mail"))
    assert await pausing.pause("mail", T0) is True
    assert await pausing.pause("mail", T0 + 1) is False  # already paused: unchanged
    assert await pausing.paused() == {"mail": pytest.approx(T0)}
    [later, plain] = await enqueue(backend, new_job("mail"), new_job("default"))  # still stored

    assert await claim_ids(backend, queues=["mail", "default"], limit=10) == [plain]
    assert await status(backend, mail) == "queued"
    assert await status(backend, later) == "queued"

    assert await pausing.resume("mail") is True
    assert await pausing.resume("mail") is False
    assert await pausing.paused() == {}
    assert sorted(await claim_ids(backend, queues=["mail"], limit=10)) == sorted([mail, later])


async def test_a_queue_paused_before_its_first_job_and_delayed_jobs_coming_due(
    backend: Backend,
) -> None:
    pausing = PAUSING.of(backend)
    assert await pausing.pause("reports", T0) is True
    [due] = await enqueue(backend, new_job("reports", delay=10))
    moved, _ = await backend.promote_due(T0 + 20, 100)
    assert moved == 1
    assert await status(backend, due) == "queued"  # delayed jobs still become due
    assert await claim_ids(backend, queues=["reports"], now=T0 + 20) == []
    await pausing.resume("reports")
    assert await claim_ids(backend, queues=["reports"], now=T0 + 20) == [due]


async def test_pausing_names_queues_exactly_and_drop_forgets_them(
    backend: Backend, make_backend: BackendFactory
) -> None:
    pausing = PAUSING.of(backend)
    for name in ("mail", "mail:eu", "m\u00e9l"):
        await pausing.pause(name, T0)
    [eu] = await enqueue(backend, new_job("mail:eu"))
    [other] = await enqueue(backend, new_job("mail-other"))
    assert await claim_ids(backend, queues=["mail:eu", "mail-other"], limit=5) == [other]
    assert set(await pausing.paused()) == {"mail", "mail:eu", "m\u00e9l"}
    assert await status(backend, eu) == "queued"
    await backend.drop()
    again = make_backend()  # reopening the dropped namespace finds nothing paused
    async with opened(again):
        assert await PAUSING.of(again).paused() == {}


async def _claim_until_told(
    instance: Backend, started: threading.Event, stop: threading.Event
) -> None:
    """Claim from ``hot`` in a loop (another process) until ``stop``."""
    async with opened(instance):
        started.set()
        while not stop.is_set():
            await instance.claim(W1, ["hot"], 5, T0, T0 + LEASE)


async def test_no_job_starts_after_pause_returned_even_with_claims_in_flight(
    backend: Backend, make_backend: BackendFactory
) -> None:
    await enqueue(backend, *(new_job("hot") for _ in range(400)))
    started, stop = threading.Event(), threading.Event()
    claimer = asyncio.create_task(in_own_thread(_claim_until_told(make_backend(), started, stop)))
    assert await asyncio.to_thread(started.wait, 20)
    await asyncio.sleep(0.05)
    await PAUSING.of(backend).pause("hot", T0)
    running = await backend.list_jobs(JobFilter(status="running"), 1000)
    await asyncio.sleep(0.3)  # the claimer goes on trying
    stop.set()
    await claimer
    after = await backend.list_jobs(JobFilter(status="running"), 1000)
    assert {r.id for r in after} == {r.id for r in running}
    queued = await backend.list_jobs(JobFilter(status="queued"), 1000)
    assert len(queued) + len(running) == 400
