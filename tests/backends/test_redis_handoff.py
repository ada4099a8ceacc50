"""The Redis direct hand-off (lua/_handoff.lua, handoff.py): an idle worker registered by its
claim gets a new plain job from the enqueue itself, already ``running`` under its lease.

Real Redis, one namespace per test. A "worker" here is just a worker id the test claims for: a
worker that registered and never reads its inbox is a worker that died.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar
from uuid import uuid4

import pytest
import redis

import duly
from duly._ids import new_id
from duly._records import JobFilter, NewGroup, NewJob
from duly.backends.redis import RedisBackend

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
LEASE = 30.0
IDLE = 5.0  # seconds a registration lives in these tests (unless the test says otherwise)


def job(queue: str = "default", *, delay: float = 0.0, **extra: object) -> NewJob:
    now = time.time()
    return NewJob(
        id=new_id(),
        task="t.add",
        queue=queue,
        payload=b"\x00binary:payload,",
        max_attempts=3,
        key=None,
        priority=0,
        enqueued_at=now,
        scheduled_for=now + delay,
        **extra,  # type: ignore[arg-type]
    )


def scenario(url: str, body: Callable[[RedisBackend, redis.Redis], Awaitable[T]]) -> T:
    async def main() -> T:
        backend = RedisBackend(url, namespace=f"t{uuid4().hex[:12]}")
        await backend.open()
        client = redis.Redis.from_url(url)
        try:
            return await body(backend, client)
        finally:
            client.close()
            await backend.drop()
            await backend.close()

    return asyncio.run(main())


async def idle(b: RedisBackend, worker: str, *queues: str, idle_for: float = IDLE) -> None:
    """Register ``worker`` idle (its claim finds nothing)."""
    now = time.time()
    got = await b.handoff.claim_idle(
        worker, list(queues or ["default"]), 4, now, now + LEASE, idle_for
    )
    assert got == []


async def status(b: RedisBackend, job_id: str) -> tuple[str, str | None]:
    record = await b.get_job(job_id)
    assert record is not None
    return record.status, record.worker


def test_a_plain_job_is_claimed_for_the_idle_worker_and_returned_by_its_wait(
    redis_url: str,
) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1")
        stop = asyncio.Event()
        waiting = asyncio.create_task(b.handoff.wait("w1", ["default"], 5.0, stop))
        await asyncio.sleep(0.1)
        j = job()
        await b.enqueue([j])
        [got] = await asyncio.wait_for(waiting, 5)
        stored = await b.get_job(j.id)
        assert stored is not None
        assert got == stored
        assert (got.status, got.worker, got.attempts, got.payload) == (
            "running",
            "w1",
            1,
            j.payload,
        )
        assert got.lease_until is not None and got.lease_until >= time.time() + LEASE
        assert r.zscore(b.keys.running, j.id) == got.lease_until
        assert r.zcard(b.keys.ready("default")) == 0
        [stats] = await b.queue_stats()
        assert (stats.queued, stats.running) == (0, 1)
        events, _ = await b.events.read("0", None, 10)
        assert [(e.job_id, e.status) for e in events] == [(j.id, "queued"), (j.id, "running")]
        # The registration is used up: the next job is queued for a claim.
        k = job()
        await b.enqueue([k])
        assert await status(b, k.id) == ("queued", None)

    scenario(redis_url, body)


def test_a_registration_is_never_used_after_it_lapsed(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "gone", idle_for=0.2)
        assert r.exists(b.keys.idle_entry("gone"))
        await asyncio.sleep(0.4)  # the worker died: it never claims again
        j = job()
        await b.enqueue([j])
        assert await status(b, j.id) == ("queued", None)
        assert r.llen(b.keys.inbox("gone")) == 0
        assert not r.exists(b.keys.idle("default"))

    scenario(redis_url, body)


def test_a_job_handed_to_a_worker_that_died_is_recovered_after_its_lease(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "dead")
        j = job()
        await b.enqueue([j])  # handed; "dead" never reads its inbox
        assert await status(b, j.id) == ("running", "dead")
        handed = await b.get_job(j.id)
        assert handed is not None and handed.lease_until is not None
        assert 0 < r.pttl(b.keys.inbox("dead")) <= (LEASE + IDLE) * 1000
        assert await b.recover(handed.lease_until - 1, 3, 10, 0) == []
        [back] = await b.recover(handed.lease_until + 1, 3, 10, 0)
        assert (back.id, back.requeued) == (j.id, True)
        now = time.time()
        [again] = await b.claim("w2", ["default"], 4, now, now + LEASE)
        assert (again.id, again.attempts, again.lost, again.worker) == (j.id, 2, 1, "w2")

    scenario(redis_url, body)


def test_two_idle_workers_and_one_job_one_gets_it_the_other_stays_idle(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1")
        await asyncio.sleep(0.01)
        await idle(b, "w2")  # the newer registration is used first
        first, second, third = job(), job(), job()
        await b.enqueue([first])
        assert await status(b, first.id) == ("running", "w2")
        assert r.llen(b.keys.inbox("w1")) == 0
        await b.enqueue([second])
        assert await status(b, second.id) == ("running", "w1")
        await b.enqueue([third])
        assert await status(b, third.id) == ("queued", None)
        assert r.llen(b.keys.inbox("w1")) == r.llen(b.keys.inbox("w2")) == 1

    scenario(redis_url, body)


def test_a_batch_hands_one_job_per_idle_worker_and_queues_the_rest(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1")
        jobs = [job() for _ in range(3)]
        await b.enqueue(jobs)
        assert [await status(b, j.id) for j in jobs] == [
            ("running", "w1"),
            ("queued", None),
            ("queued", None),
        ]
        assert r.zcard(b.keys.ready("default")) == 2

    scenario(redis_url, body)


def test_gated_unique_scheduled_and_group_jobs_go_through_claim(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1")
        gated = job(gate="g", gate_limit=1)
        unique = job(unique_key="u", unique_until="start")
        later = job(delay=60)
        await b.enqueue([gated])
        await b.enqueue([unique])
        await b.enqueue([later])
        member = job()
        group = NewGroup(id=new_id(), key=None, created_at=time.time(), retention=60)
        await b.groups.store(group, [member])
        assert await status(b, gated.id) == ("queued", None)
        assert await status(b, unique.id) == ("queued", None)
        assert await status(b, later.id) == ("scheduled", None)
        assert await status(b, member.id) == ("queued", None)
        assert r.exists(b.keys.idle_entry("w1"))  # unused
        # With a ready job in its queue, a plain one waits its turn there too.
        plain = job()
        await b.enqueue([plain])
        assert await status(b, plain.id) == ("queued", None)
        # The worker's next claim takes them through claim.lua (the gate, the unique hold).
        now = time.time()
        got = await b.handoff.claim_idle("w1", ["default"], 10, now, now + LEASE, IDLE)
        assert {g.id for g in got} == {gated.id, unique.id, member.id, plain.id}
        assert await b.list_jobs(JobFilter(status="queued"), 10) == []

    scenario(redis_url, body)


def test_a_recovered_job_is_never_handed_off(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        j = job()
        await b.enqueue([j])
        now = time.time()
        await b.claim("w0", ["default"], 1, now, now + 1)
        await idle(b, "w1")
        await b.recover(now + 2, 3, 10, 0)  # w0 died: j is back, lost 1 (a suspect)
        assert await status(b, j.id) == ("queued", None)
        assert r.llen(b.keys.inbox("w1")) == 0
        now = time.time()
        [got] = await b.handoff.claim_idle("w1", ["default"], 4, now, now + LEASE, IDLE)
        assert (got.id, got.lost) == (j.id, 1)

    scenario(redis_url, body)


def test_the_next_claim_takes_the_inbox_first_within_its_limit(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1")
        handed, ready = job(), job()
        await b.enqueue([handed])  # the worker was not waiting: it stays in the inbox
        await b.enqueue([ready])
        now = time.time()
        got = await b.handoff.claim_idle("w1", ["default"], 1, now, now + LEASE, IDLE)
        assert [g.id for g in got] == [handed.id]
        assert r.llen(b.keys.inbox("w1")) == 0
        assert not r.exists(b.keys.idle_entry("w1"))  # it took work: not idle
        got = await b.handoff.claim_idle("w1", ["default"], 1, now, now + LEASE, IDLE)
        assert [g.id for g in got] == [ready.id]

    scenario(redis_url, body)


def test_withdraw_ends_the_registration_and_returns_the_inbox(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1", "a", "b")
        j = job("b")
        await b.enqueue([j])
        # Using the registration removed it from every queue of the worker.
        assert r.zscore(b.keys.idle("a"), "w1") is None
        assert [g.id for g in await b.handoff.withdraw("w1", ["a", "b"])] == [j.id]
        await idle(b, "w1", "a", "b")
        assert await b.handoff.withdraw("w1", ["a", "b"]) == []
        k = job("a")
        await b.enqueue([k])
        assert await status(b, k.id) == ("queued", None)

    scenario(redis_url, body)


def test_a_wait_returns_on_stop_on_a_wake_up_and_on_its_timeout(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1")
        stop = asyncio.Event()
        waiting = asyncio.create_task(b.handoff.wait("w1", ["default"], 30.0, stop))
        await asyncio.sleep(0.1)
        stop.set()
        assert await asyncio.wait_for(waiting, 5) == []
        stop.clear()
        # A wake-up (here: a delayed job promoted) ends the wait; the worker then claims.
        later = job(delay=0.05)
        await b.enqueue([later])
        waiting = asyncio.create_task(b.handoff.wait("w1", ["default"], 30.0, stop))
        await asyncio.sleep(0.1)
        assert await b.promote_due(time.time(), 10) == (1, None)
        assert await asyncio.wait_for(waiting, 5) == []
        started = time.monotonic()
        assert await b.handoff.wait("w1", ["default"], 0.2, stop) == []
        assert time.monotonic() - started < 5
        # The wait's connection still works after being unblocked.
        now = time.time()
        assert [g.id for g in await b.claim("w1", ["default"], 4, now, now + LEASE)] == [later.id]
        await idle(b, "w1")
        waiting = asyncio.create_task(b.handoff.wait("w1", ["default"], 30.0, stop))
        await asyncio.sleep(0.1)
        j = job()
        await b.enqueue([j])
        assert [g.id for g in await asyncio.wait_for(waiting, 5)] == [j.id]

    scenario(redis_url, body)


def test_a_stopping_worker_runs_the_job_in_its_inbox(redis_url: str) -> None:
    """A job handed to a worker that stops before waiting for it is run, not left behind."""
    namespace = f"t{uuid4().hex[:12]}"
    app = duly.App(redis_url, namespace=namespace)
    ran: list[int] = []

    @app.task(name="t.record")
    def record(n: int) -> int:
        ran.append(n)
        return n

    async def main() -> None:
        b = await app.backend()
        assert isinstance(b, RedisBackend)
        try:
            await idle(b, "wx")  # the worker registered, then was asked to stop
            handle = await record.enqueue_async(7)
            assert await status(b, handle.id) == ("running", "wx")
            worker = app.worker(name="wx", install_signal_handlers=False, scheduler=False)
            worker.stop()
            await asyncio.wait_for(worker.run(), 30)
            info = await app.get_job_async(handle.id)
            assert info is not None
            assert (info.status, info.attempts, info.result) == ("succeeded", 1, 7)
            assert ran == [7]
            assert not await b._conn.client.exists(b.keys.inbox("wx"), b.keys.idle_entry("wx"))
        finally:
            await b.drop()
            await app.aclose()

    asyncio.run(main())


def test_no_job_of_a_paused_queue_is_handed_to_an_idle_worker(redis_url: str) -> None:
    async def body(b: RedisBackend, r: redis.Redis) -> None:
        await idle(b, "w1", "mail", "default")
        assert await b.pausing.pause("mail", time.time())
        j = job("mail")
        await b.enqueue([j])
        assert await status(b, j.id) == ("queued", None)  # waits, paused
        assert r.llen(b.keys.inbox("w1")) == 0
        assert r.exists(b.keys.idle_entry("w1"))  # the registration is still unused
        # An idle claim skips the paused queue too, and the worker's registration holds on.
        now = time.time()
        assert await b.handoff.claim_idle("w1", ["mail"], 4, now, now + LEASE, IDLE) == []
        assert await b.pausing.resume("mail")
        [got] = await b.handoff.claim_idle("w1", ["mail"], 4, now, now + LEASE, IDLE)
        assert (got.id, got.status) == (j.id, "running")

    scenario(redis_url, body)
