"""Dependencies (``options(after=...)``) on every backend (PRODUCT §16): a dependent waits, is
released exactly once by its last dependency's success, and is cancelled (transitively) by a
dependency that fails or is cancelled, until a retry of it succeeds."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from contract import (
    EXPIRE,
    LEASE,
    T0,
    W1,
    W2,
    BackendFactory,
    claim_ids,
    enqueue,
    errors_of,
    finish_one,
    in_own_thread,
    job,
    new_job,
    opened,
)

from duly._errors import ConfigurationError, JobNotFound
from duly._records import EventRecord, NewJob, Outcome
from duly.backends.base import Backend
from duly.backends.dependencies import MAX_DEPTH

RETENTION = 7 * 86_400.0


def after(*dependencies: NewJob, pipe: NewJob | None = None, **fields: object) -> NewJob:
    """A new job that waits for ``dependencies`` (a chain step taking ``pipe``'s result)."""
    return dataclasses.replace(
        new_job(**fields),  # type: ignore[arg-type]
        after=tuple(d.id for d in dependencies),
        pipe_from=None if pipe is None else pipe.id,
    )


def ok(job_id: str, result: bytes = b"1") -> Outcome:
    return Outcome(job_id, "succeeded", result=result, expire_at=T0 + EXPIRE)


def failed(job_id: str) -> Outcome:
    return Outcome(job_id, "failed", errors=b"[]", expire_at=T0 + EXPIRE)


async def store(backend: Backend, *jobs: NewJob) -> None:
    results = await backend.dependencies.enqueue(list(jobs), RETENTION)
    assert [r.id for r in results] == [j.id for j in jobs]


async def run(backend: Backend, job_id: str, outcome: Outcome | None = None) -> None:
    """Claim ``job_id`` (it must be the next queued job) and report ``outcome`` (success)."""
    assert await claim_ids(backend, W1) == [job_id]
    assert await finish_one(backend, W1, outcome or ok(job_id), T0 + 1)


async def all_events(backend: Backend, after: str | None) -> list[EventRecord]:
    events: list[EventRecord] = []
    while True:
        page, after = await backend.events.read(after, None, 100)
        events += page
        if not page:
            return events


async def test_a_dependent_waits_and_is_released_by_its_last_dependency(backend: Backend) -> None:
    a, b = new_job(), new_job()
    await enqueue(backend, a, b)
    c = after(a, b)
    await store(backend, c)
    waiting = await job(backend, c.id)
    assert (waiting.status, waiting.scheduled_for) == ("scheduled", None)
    assert await backend.promote_due(T0 + 10**9, 100) == (0, None)
    await run(backend, a.id)
    assert (await job(backend, c.id)).status == "scheduled"
    await run(backend, b.id)
    assert (await job(backend, c.id)).status == "queued"
    await run(backend, c.id)
    assert await backend.dependencies.dependents(a.id) == [c.id]


async def test_a_dependency_that_already_succeeded_counts_as_done(backend: Backend) -> None:
    a, b = new_job(), new_job()
    await enqueue(backend, a, b)
    await run(backend, a.id, ok(a.id, b'"first"'))
    c = after(a, pipe=a)
    await store(backend, c)
    assert (await job(backend, c.id)).status == "queued"
    assert await backend.dependencies.input(c.id) == b'"first"'


async def test_an_unknown_dependency_stores_nothing(backend: Backend) -> None:
    a = new_job()
    ghost = new_job()
    first, dependent = new_job(), after(a, ghost)
    await enqueue(backend, a)
    with pytest.raises(JobNotFound):
        await store(backend, first, dependent)
    assert await backend.get_job(first.id) is None
    assert await backend.get_job(dependent.id) is None


async def test_a_dependent_may_wait_for_a_job_earlier_in_its_batch(backend: Backend) -> None:
    a = new_job()
    b = after(a, pipe=a)
    c = after(b, pipe=b)
    await store(backend, a, b, c)
    assert [(await job(backend, i)).status for i in (a.id, b.id, c.id)] == [
        "queued",
        "scheduled",
        "scheduled",
    ]
    await run(backend, a.id, ok(a.id, b"[1,2]"))
    assert await backend.dependencies.input(b.id) == b"[1,2]"
    await run(backend, b.id, ok(b.id, b"3"))
    assert await backend.dependencies.input(c.id) == b"3"
    assert (await job(backend, c.id)).status == "queued"


async def test_a_failure_cancels_its_dependents_transitively(backend: Backend) -> None:
    a = new_job()
    b = after(a)
    c = after(b)
    await store(backend, a, b, c)
    await run(backend, a.id, failed(a.id))
    for dependent, cause in ((b, a), (c, b)):
        record = await job(backend, dependent.id)
        assert record.status == "cancelled" and record.finished_at is not None
        [error] = errors_of(record)
        assert error["type"] == "DependencyFailed"
        assert cause.id in error["message"]
    assert await claim_ids(backend, W1) == []


async def test_a_retried_dependency_that_succeeds_releases_its_dependents_once(
    backend: Backend,
) -> None:
    a = new_job()
    b = after(a, pipe=a)
    c = after(b)
    await store(backend, a, b, c)
    await run(backend, a.id, failed(a.id))
    assert (await job(backend, c.id)).status == "cancelled"
    # Its dependents run when a succeeds, not on their own.
    assert not await backend.retry(b.id, T0 + 2)
    assert (await job(backend, b.id)).status == "cancelled"
    assert await backend.retry(a.id, T0 + 2)
    assert (await job(backend, b.id)).status == "cancelled"  # until a succeeds
    await run(backend, a.id, ok(a.id, b'"again"'))
    released = await job(backend, b.id)
    assert (released.status, released.finished_at) == ("queued", None)
    assert await backend.dependencies.input(b.id) == b'"again"'
    assert (await job(backend, c.id)).status == "cancelled"
    await run(backend, b.id)
    assert (await job(backend, c.id)).status == "queued"
    await run(backend, c.id)
    assert await claim_ids(backend, W1) == []


async def test_cancelling_a_dependency_cancels_its_dependents(backend: Backend) -> None:
    a = new_job(delay=60)
    b = after(a)
    await store(backend, a, b)
    assert await backend.cancel(a.id, T0 + 1, T0 + EXPIRE)
    record = await job(backend, b.id)
    assert record.status == "cancelled"
    assert errors_of(record)[-1]["type"] == "DependencyFailed"
    # A dependent of a job cancelled already is cancelled at once (and still releasable).
    c = after(a)
    await store(backend, c)
    assert (await job(backend, c.id)).status == "cancelled"


async def test_a_quarantined_dependency_cancels_its_dependents(backend: Backend) -> None:
    a = new_job(max_attempts=1)
    b = after(a)
    await store(backend, a, b)
    # max_lost=0: the first lapsed lease quarantines the job (failed, LostWorker).
    assert await claim_ids(backend, W1) == [a.id]
    await backend.recover(T0 + LEASE + 1, 0, 100, T0 + EXPIRE)
    assert (await job(backend, a.id)).status == "failed"
    assert (await job(backend, b.id)).status == "cancelled"


async def test_cancelling_a_waiting_dependent_leaves_its_dependency_alone(
    backend: Backend,
) -> None:
    a = new_job()
    b = after(a)
    await store(backend, a, b)
    assert await backend.cancel(b.id, T0 + 1, T0 + EXPIRE)
    await run(backend, a.id)
    assert (await job(backend, b.id)).status == "cancelled"  # an operator's cancel is final


async def test_racing_finishes_release_a_dependent_exactly_once(
    backend: Backend, make_backend: BackendFactory
) -> None:
    cursor = (await backend.events.read(None, None, 1))[1]
    rounds = 8
    pairs = [(new_job(), new_job()) for _ in range(rounds)]
    await enqueue(backend, *[j for pair in pairs for j in pair])
    dependents = [after(x, y) for x, y in pairs]
    await store(backend, *dependents)
    first, second = [x.id for x, _ in pairs], [y.id for _, y in pairs]
    taken = await claim_ids(backend, W1, limit=2 * rounds)
    assert sorted(taken) == sorted(first + second)
    await backend.finish(W1, [Outcome(i, "release") for i in second], T0)
    assert sorted(await claim_ids(backend, W2, limit=rounds)) == sorted(second)

    async def finish(worker: str, ids: list[str]) -> list[bool]:
        async with opened(make_backend()) as other:
            return await other.finish(worker, [ok(i) for i in ids], T0 + 1)

    flags = await asyncio.gather(
        in_own_thread(finish(W1, first)), in_own_thread(finish(W2, second))
    )
    assert all(all(f) for f in flags)
    events = await all_events(backend, cursor)
    for dependent in dependents:
        assert (await job(backend, dependent.id)).status == "queued"
        queued = [e for e in events if e.job_id == dependent.id and e.status == "queued"]
        assert len(queued) == 1


async def test_a_dependency_lost_mid_finish_still_releases_once(backend: Backend) -> None:
    a = new_job()
    b = after(a)
    await store(backend, a, b)
    assert await claim_ids(backend, W1) == [a.id]
    # The worker dies before its finish: recovery puts a back, another run succeeds.
    await backend.recover(T0 + LEASE + 1, 3, 100, T0 + EXPIRE)
    assert (await job(backend, b.id)).status == "scheduled"
    assert await claim_ids(backend, W2, now=T0 + LEASE + 2) == [a.id]
    assert not await finish_one(backend, W1, ok(a.id), T0 + LEASE + 3)  # the dead one's
    assert await finish_one(backend, W2, ok(a.id), T0 + LEASE + 3)
    assert (await job(backend, b.id)).status == "queued"
    assert await claim_ids(backend, W2, now=T0 + LEASE + 4) == [b.id]


async def test_a_purged_dependent_is_forgotten(backend: Backend) -> None:
    a = new_job()
    b = after(a)
    await store(backend, a, b)
    await run(backend, a.id, failed(a.id))
    assert (await job(backend, b.id)).status == "cancelled"
    await backend.purge(T0 + RETENTION + EXPIRE + 10, 100, T0 + RETENTION + EXPIRE)
    assert await backend.get_job(b.id) is None
    assert await backend.dependencies.input(b.id) is None


async def test_a_dependent_keeps_its_expiry(backend: Backend) -> None:
    a = new_job()
    b = dataclasses.replace(after(a), expires_at=T0 + 30)
    c = dataclasses.replace(new_job(), expires_at=T0 + 40)
    await store(backend, a, b, c)
    assert (await job(backend, b.id)).expires_at == T0 + 30
    assert (await job(backend, c.id)).expires_at == T0 + 40


async def test_a_dependent_deeper_than_the_cap_is_refused(backend: Backend) -> None:
    # Stored in two batches: the second one reads the depth the first one stored.
    line = [new_job()]
    for _ in range(MAX_DEPTH - 1):
        line.append(after(line[-1]))
    half = MAX_DEPTH // 2
    await store(backend, *line[:half])
    await store(backend, *line[half:])
    too_deep = after(line[-1])
    with pytest.raises(ConfigurationError, match=f"{MAX_DEPTH + 1} jobs deep"):
        await store(backend, new_job(), too_deep)
    assert await backend.get_job(too_deep.id) is None
    longer = [after(line[-2])]
    longer.append(after(longer[-1]))  # too deep within its own batch
    with pytest.raises(ConfigurationError):
        await store(backend, *longer)
    assert await backend.get_job(longer[0].id) is None
    # A failure of the first cancels all MAX_DEPTH - 1 below it.
    await run(backend, line[0].id, failed(line[0].id))
    assert (await job(backend, line[-1].id)).status == "cancelled"
    assert (await job(backend, line[half].id)).status == "cancelled"


async def test_released_dependents_queue_in_the_order_they_were_released(
    backend: Backend,
) -> None:
    # Released at their dependency's finish, whenever they were enqueued (as the SQL
    # backends place them): the one enqueued last but released first runs first.
    a, b = new_job(), new_job()
    await enqueue(backend, a, b)
    early, late = after(b), after(a, at=T0 + 5)
    await store(backend, early, late)
    assert sorted(await claim_ids(backend, W1, limit=2)) == sorted([a.id, b.id])
    assert await finish_one(backend, W1, ok(a.id), T0 + 6)
    assert await finish_one(backend, W1, ok(b.id), T0 + 7)
    assert await claim_ids(backend, W1, limit=2, now=T0 + 8) == [late.id, early.id]


async def test_a_batch_below_a_failed_dependency_is_cancelled_down_its_line(
    backend: Backend,
) -> None:
    a = new_job()
    await enqueue(backend, a)
    await run(backend, a.id, failed(a.id))
    b = after(a, pipe=a)
    c, d = after(b, pipe=b), after(b, a)
    await store(backend, b, c, d)
    for dependent, cause in ((b, a), (c, b), (d, a)):
        record = await job(backend, dependent.id)
        assert record.status == "cancelled"
        [error] = errors_of(record)
        assert cause.id in error["message"], dependent
    assert await backend.dependencies.dependents(b.id) == sorted([c.id, d.id])
