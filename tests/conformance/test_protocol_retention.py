"""purge(): finished jobs go at their expire_at (with their index entries), nothing else does."""

from __future__ import annotations

import pytest
from contract import LEASE, MINUTE0, T0, W1, claim_ids, enqueue, error_history, finish_one, new_job

from duly._records import JobFilter, Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)


async def _finished(backend: Backend, kind: str, expire_at: float, key: str | None = None) -> str:
    new = new_job(key=key)
    await enqueue(backend, new)
    assert await claim_ids(backend, W1, now=T0) == [new.id]
    if kind == "cancelled":  # requested while it runs: cancelled when its run ends
        assert await backend.cancel(new.id, T0 + 1, expire_at)
        assert not await finish_one(backend, W1, Outcome(new.id, "release"), T0 + 1)
    else:
        outcome = Outcome(
            new.id,
            kind,  # type: ignore[arg-type]
            result=b"1" if kind == "succeeded" else None,
            errors=error_history(("E", "m")) if kind == "failed" else None,
            expire_at=expire_at,
        )
        assert await finish_one(backend, W1, outcome, T0 + 1)
    return new.id


async def test_purge_deletes_expired_finished_jobs(backend: Backend) -> None:
    expired = [
        await _finished(backend, "succeeded", T0 + 100, key="k"),
        await _finished(backend, "failed", T0 + 200, key="k"),
        await _finished(backend, "cancelled", T0 + 300, key="k"),
    ]
    kept = await _finished(backend, "succeeded", T0 + 10_000, key="k")
    active = [new_job(key="k"), new_job(key="k", delay=50)]
    await enqueue(backend, *active)

    assert await backend.purge(T0 + 50, 100) == 0
    assert await backend.purge(T0 + 300, 100) == 3
    for job_id in expired:
        assert await backend.get_job(job_id) is None
    assert await backend.get_job(kept) is not None
    listed = [r.id for r in await backend.list_jobs(JobFilter(key="k"), 100)]
    assert listed == [active[1].id, active[0].id, kept]
    for state in ("succeeded", "failed", "cancelled"):
        remaining = await backend.list_jobs(JobFilter(status=state), 100)
        assert [r.id for r in remaining] == ([kept] if state == "succeeded" else [])
    assert [r.id for r in await backend.list_jobs(JobFilter(), 100)] == [
        active[1].id,
        active[0].id,
        kept,
    ]
    assert await backend.purge(T0 + 300, 100) == 0


async def test_purge_never_deletes_active_jobs(backend: Backend) -> None:
    queued, scheduled, running = new_job(), new_job(delay=10), new_job("busy")
    await enqueue(backend, queued, scheduled, running)
    assert await claim_ids(backend, W1, queues=["busy"], now=T0) == [running.id]
    assert await backend.purge(T0 + 30 * 86_400, 1000) == 0
    for new in (queued, scheduled, running):
        assert await backend.get_job(new.id) is not None


async def test_purge_respects_limit(backend: Backend) -> None:
    ids = [await _finished(backend, "succeeded", T0 + 10) for _ in range(5)]
    assert await backend.purge(T0 + 10, 2) == 2
    assert await backend.purge(T0 + 10, 2) == 2
    assert await backend.purge(T0 + 10, 2) == 1
    assert await backend.purge(T0 + 10, 2) == 0
    for job_id in ids:
        assert await backend.get_job(job_id) is None


async def test_quarantined_job_expires_at_failed_expire_at(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1, now=T0)
    assert len(await backend.recover(T0 + LEASE + 1, 1, 10, T0 + 500)) == 1
    assert await backend.purge(T0 + 499, 10) == 0
    assert await backend.purge(T0 + 500, 10) == 1
    assert await backend.get_job(new.id) is None


async def test_purge_drops_counter_buckets_older_than_a_day(backend: Backend) -> None:
    old = await _finished(backend, "succeeded", T0 + 10)
    new = new_job()
    await enqueue(backend, new)
    later = T0 + 86_400 + 600
    await claim_ids(backend, W1, now=later)
    outcome = Outcome(new.id, "succeeded", result=b"1", expire_at=later + 86_400)
    assert await finish_one(backend, W1, outcome, later)
    assert {r.minute for r in await backend.stats(0)} == {MINUTE0, int(later // 60)}

    assert await backend.purge(later + 60, 100) == 1
    assert await backend.get_job(old) is None
    assert {r.minute for r in await backend.stats(0)} == {int(later // 60)}


async def test_purge_forgets_workers_not_seen_for_a_day(backend: Backend) -> None:
    """A worker that died without unregistering does not stay listed forever."""
    await backend.register_worker("dead", T0, {"pid": 1})
    await backend.register_worker("alive", T0, {"pid": 2})
    await backend.heartbeat("alive", [], T0 + 86_000, T0 + 86_030)
    await backend.purge(T0 + 86_400 - 1, 100)
    assert {w.id for w in await backend.workers()} == {"dead", "alive"}
    await backend.purge(T0 + 86_400 + 1, 100)
    assert [w.id for w in await backend.workers()] == ["alive"]


async def test_purge_keeps_counters_and_workers_as_long_as_asked(backend: Backend) -> None:
    """``keep`` (``App(stats_retention=)``) replaces the default day for counters and workers."""
    await backend.register_worker("quiet", T0, {"pid": 1})
    job = new_job()
    await enqueue(backend, job)
    await claim_ids(backend, W1, now=T0)
    outcome = Outcome(job.id, "succeeded", result=b"1", expire_at=T0 + 86_400)
    assert await finish_one(backend, W1, outcome, T0)
    await backend.purge(T0 + 3_000, 100, keep=3_600)
    assert [r.minute for r in await backend.stats(0)] == [MINUTE0]
    assert {w.id for w in await backend.workers()} >= {"quiet"}
    await backend.purge(T0 + 3_700, 100, keep=3_600)
    assert await backend.stats(0) == []
    assert "quiet" not in {w.id for w in await backend.workers()}
    assert await backend.get_job(job.id) is not None  # jobs follow their own expire_at
