"""Introspection: list_jobs (and the key index), stats, queue_stats, workers."""

from __future__ import annotations

import pytest
from contract import (
    LEASE,
    MINUTE0,
    T0,
    W1,
    W2,
    approx,
    claim_ids,
    enqueue,
    error_history,
    finish_one,
    new_job,
)
from test_protocol_concurrency import gated_job

from duly._records import JobFilter, Outcome, QueueStats, StatRow
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)


async def _ids(backend: Backend, limit: int = 1000, **where: str) -> list[str]:
    return [r.id for r in await backend.list_jobs(JobFilter(**where), limit)]


async def test_list_jobs_newest_first_with_limit(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(3)])
    ids += await enqueue(backend, *[new_job(delay=60) for _ in range(2)])
    assert await _ids(backend) == ids[::-1]
    assert await _ids(backend, limit=2) == ids[::-1][:2]


async def test_list_jobs_on_an_empty_backend(backend: Backend) -> None:
    assert await backend.list_jobs(JobFilter(), 10) == []
    assert await backend.list_jobs(JobFilter(key="nobody"), 10) == []


async def test_list_jobs_filters(backend: Backend) -> None:
    a1 = new_job("qa", task="t.one", key="team:1")
    a2 = new_job("qa", task="t.two", key="team:2")
    b1 = new_job("qb", task="t.one", key="team:1")
    b2 = new_job("qb", task="t.two", delay=60)
    await enqueue(backend, a1, a2, b1, b2)
    assert await claim_ids(backend, W1, queues=["qa"]) == [a1.id]

    assert await _ids(backend, queue="qa") == [a2.id, a1.id]
    assert await _ids(backend, task="t.one") == [b1.id, a1.id]
    assert await _ids(backend, status="running") == [a1.id]
    assert await _ids(backend, status="scheduled") == [b2.id]
    assert await _ids(backend, status="queued") == [b1.id, a2.id]
    assert await _ids(backend, status="failed") == []
    assert await _ids(backend, queue="qb", task="t.two") == [b2.id]
    assert await _ids(backend, task="t.one", status="queued") == [b1.id]


async def test_key_index(backend: Backend) -> None:
    mine = [new_job(key="link:456") for _ in range(3)]
    others = [new_job(key="link:4567"), new_job(key="link:45"), new_job()]
    await enqueue(backend, mine[0], others[0], mine[1], others[1], others[2], mine[2])
    assert await _ids(backend, key="link:456") == [j.id for j in reversed(mine)]
    assert await _ids(backend, key="link:456", limit=2) == [mine[2].id, mine[1].id]
    assert await _ids(backend, key="link:45") == [others[1].id]
    assert await _ids(backend, key="link:999") == []


async def test_key_index_with_other_filters(backend: Backend) -> None:
    first, second, third = (new_job(key="k", task=t) for t in ("t.a", "t.b", "t.a"))
    await enqueue(backend, first, second, third)
    assert await claim_ids(backend, W1) == [first.id]
    assert await _ids(backend, key="k", status="running") == [first.id]
    assert await _ids(backend, key="k", status="queued") == [third.id, second.id]
    assert await _ids(backend, key="k", task="t.a") == [third.id, first.id]
    assert await _ids(backend, key="k", queue="elsewhere") == []


async def test_list_jobs_returns_full_records(backend: Backend) -> None:
    new = new_job(key="k", payload=b'{"x":"\xc3\xa9"}')
    await enqueue(backend, new)
    [by_key] = await backend.list_jobs(JobFilter(key="k"), 10)
    assert by_key == await backend.get_job(new.id)
    assert by_key.payload == b'{"x":"\xc3\xa9"}'


def _rows(rows: list[StatRow]) -> dict[tuple[int, str, str], tuple[int, int, int]]:
    table: dict[tuple[int, str, str], tuple[int, int, int]] = {}
    for row in rows:
        key = (row.minute, row.task, row.queue)
        assert key not in table, f"two rows for {key}"
        table[key] = (row.succeeded, row.failed, row.retried)
    return table


async def test_stats_count_outcomes_per_minute_task_and_queue(backend: Backend) -> None:
    jobs = [
        new_job("q1", task="t.a"),
        new_job("q1", task="t.a"),
        new_job("q1", task="t.a"),
        new_job("q2", task="t.a"),
        new_job("q1", task="t.b"),
        new_job("q1", task="t.b"),
    ]
    await enqueue(backend, *jobs)
    assert len(await claim_ids(backend, W1, queues=["q1", "q2"], limit=6)) == 6
    history = error_history(("E", "m"))

    def ok(i: int) -> Outcome:
        return Outcome(jobs[i].id, "succeeded", result=b"1", expire_at=T0 + 999)

    assert await backend.finish(W1, [ok(0), ok(1)], T0 + 5) == [True, True]
    assert await finish_one(
        backend, W1, Outcome(jobs[2].id, "retry", errors=history, run_at=T0 + 70), T0 + 10
    )
    assert await finish_one(backend, W1, ok(3), T0 + 59)
    assert await finish_one(
        backend, W1, Outcome(jobs[4].id, "failed", errors=history, expire_at=T0 + 999), T0 + 60
    )
    assert await finish_one(backend, W1, Outcome(jobs[5].id, "release", run_at=T0), T0 + 61)

    expected = {
        (MINUTE0, "t.a", "q1"): (2, 0, 1),
        (MINUTE0, "t.a", "q2"): (1, 0, 0),
        (MINUTE0 + 1, "t.b", "q1"): (0, 1, 0),
    }
    assert _rows(await backend.stats(0)) == expected
    assert _rows(await backend.stats(T0)) == expected
    assert _rows(await backend.stats(T0 + 1)) == {(MINUTE0 + 1, "t.b", "q1"): (0, 1, 0)}
    assert _rows(await backend.stats(T0 + 60)) == {(MINUTE0 + 1, "t.b", "q1"): (0, 1, 0)}
    assert await backend.stats(T0 + 120) == []


async def test_dropped_outcomes_are_not_counted(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1)
    outcome = Outcome(new.id, "succeeded", result=b"1", expire_at=T0 + 99)
    assert await finish_one(backend, W2, outcome, T0 + 1) is False
    assert await backend.stats(0) == []


async def test_queue_stats(backend: Backend) -> None:
    assert await backend.queue_stats() == []
    jobs = {
        "b": [new_job("b"), new_job("b"), new_job("b", delay=60)],
        "a": [new_job("a"), new_job("a"), new_job("a"), new_job("a", delay=60)],
        "c": [new_job("c", delay=60)],
    }
    await enqueue(backend, *jobs["b"], *jobs["a"], *jobs["c"])
    assert len(await claim_ids(backend, W1, queues=["a"], limit=2)) == 2
    retried = jobs["b"][0].id
    assert await claim_ids(backend, W1, queues=["b"]) == [retried]
    assert await finish_one(
        backend, W1, Outcome(retried, "retry", errors=b"[]", run_at=T0 + 30), T0 + 1
    )
    stats = await backend.queue_stats()
    assert [q.name for q in stats] == sorted(q.name for q in stats)
    counted = {q.name: q for q in stats}
    assert counted["a"] == QueueStats("a", queued=1, scheduled=1, running=2, oldest_ready_at=T0)
    assert counted["b"] == QueueStats("b", queued=1, scheduled=2, running=0, oldest_ready_at=T0)
    assert counted["c"] == QueueStats("c", queued=0, scheduled=1, running=0)
    assert set(counted) == {"a", "b", "c"}


async def test_queue_stats_oldest_ready_is_by_ready_time_across_priorities(
    backend: Backend,
) -> None:
    # Enqueued first but ready last (promoted at T0 + 100): it heads its priority on some
    # backends, yet T0 + 10 is the longest wait; the low-priority band is read too.
    late = new_job("q", at=T0, delay=100)
    await enqueue(backend, late, new_job("q", at=T0 + 20, priority=5))
    await enqueue(backend, new_job("q", at=T0 + 10), new_job("q", at=T0 + 15, priority=-3))
    assert (await backend.promote_due(T0 + 100, 10))[0] == 1
    (stats,) = await backend.queue_stats()
    assert (stats.queued, stats.parked, stats.oldest_ready_at) == (4, 0, approx(T0 + 10))


async def test_queue_stats_oldest_ready_of_a_job_handed_back(backend: Backend) -> None:
    lost = new_job("r", at=T0 + 1.25)
    await enqueue(backend, lost)
    assert await claim_ids(backend, W1, queues=["r"], now=T0 + 2) == [lost.id]
    await enqueue(backend, new_job("r", at=T0 + 3))
    (recovered,) = await backend.recover(T0 + 3 + LEASE, 3, 10, T0 + 9999)
    assert recovered.requeued
    (stats,) = await backend.queue_stats()
    assert (stats.queued, stats.running, stats.oldest_ready_at) == (2, 0, approx(T0 + 1.25))


async def test_queue_stats_count_parked_jobs_apart(backend: Backend) -> None:
    gated = [gated_job("m", queue="g", at=T0 + i) for i in range(3)]
    await enqueue(backend, *gated)
    taken = await claim_ids(backend, W1, queues=["g"], limit=3)
    taken += await claim_ids(backend, W1, queues=["g"], limit=3)
    assert taken == [gated[0].id]
    (stats,) = await backend.queue_stats()
    assert stats == QueueStats("g", queued=2, running=1, parked=2, oldest_ready_at=None)
    await enqueue(backend, new_job("g", at=T0 + 7))
    (stats,) = await backend.queue_stats()
    assert (stats.queued, stats.parked, stats.oldest_ready_at) == (3, 2, approx(T0 + 7))


async def test_queue_stats_follow_finished_jobs(backend: Backend) -> None:
    new = new_job("only")
    await enqueue(backend, new)
    await claim_ids(backend, W1, queues=["only"])
    outcome = Outcome(new.id, "succeeded", result=b"1", expire_at=T0 + 9)
    assert await finish_one(backend, W1, outcome, T0 + 1)
    for queue in await backend.queue_stats():
        assert (queue.queued, queue.scheduled, queue.running) == (0, 0, 0)


async def test_workers_register_heartbeat_unregister(backend: Backend) -> None:
    assert await backend.workers() == []
    info: dict[str, object] = {"host": "box-1", "pid": 4242, "queues": ["a", "b"], "concurrency": 8}
    await backend.register_worker(W1, T0, info)
    await backend.register_worker(W2, T0 + 1, {"host": "box-2"})
    workers = {w.id: w for w in await backend.workers()}
    assert set(workers) == {W1, W2}
    assert workers[W1].started_at == approx(T0)
    assert workers[W1].last_seen == approx(T0)
    assert workers[W1].info == info
    assert workers[W2].info == {"host": "box-2"}

    assert await backend.heartbeat(W1, [], T0 + 15, T0 + 45) == []
    workers = {w.id: w for w in await backend.workers()}
    assert workers[W1].last_seen == approx(T0 + 15)
    assert workers[W1].started_at == approx(T0)
    assert workers[W2].last_seen == approx(T0 + 1)

    await backend.unregister_worker(W1)
    assert [w.id for w in await backend.workers()] == [W2]
    await backend.unregister_worker(W1)  # twice is harmless
    await backend.unregister_worker(W2)
    assert await backend.workers() == []
