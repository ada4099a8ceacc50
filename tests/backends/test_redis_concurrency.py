"""Redis-specific checks of the concurrency primitives: unique holds, gates, rate slots.

The behaviour every backend shares is in ``tests/conformance/test_protocol_concurrency.py``;
these tests look at the Redis keyspace behind it (``keys.py``): the new keys are where the
Python side says, ``drop`` removes them, rate state expires by itself, the ``u`` hash never
keeps an entry of an inactive job, and a random run of every operation keeps the gate
invariants (no parked job stranded while its gate has a free slot).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar
from uuid import uuid4

import pytest
import redis
from services import keys_matching

from duly._ids import new_id
from duly._records import ACTIVE_STATUSES, NewJob, Outcome, RateRequest
from duly.backends.redis import RedisBackend
from duly.backends.redis._enqueue import ENQUEUE_CHUNK

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
T0 = 1_700_000_040.0
LEASE = 30.0


def job(
    queue: str = "default",
    *,
    at: float = T0,
    delay: float = 0.0,
    priority: int = 0,
    unique: str | None = None,
    until: str = "finish",
    gate: str | None = None,
    limit: int = 1,
) -> NewJob:
    new = NewJob(
        id=new_id(),
        task="t.add",
        queue=queue,
        payload=b"{}",
        max_attempts=3,
        key=None,
        priority=priority,
        enqueued_at=at,
        scheduled_for=at + delay,
    )
    if unique is not None:
        new = replace(new, unique_key=unique, unique_until=until)  # type: ignore[arg-type]
    if gate is not None:
        new = replace(new, gate=gate, gate_limit=limit)
    return new


def scenario(url: str, body: Callable[[RedisBackend, redis.Redis], Awaitable[T]]) -> T:
    """Run ``body`` against an opened backend on a fresh namespace (and a raw sync client)."""

    async def main() -> T:
        backend = RedisBackend(url, namespace=f"t{uuid4().hex[:12]}")
        client = redis.Redis.from_url(url)
        await backend.open()
        try:
            return await body(backend, client)
        finally:
            await backend.drop()
            await backend.close()
            client.close()

    return asyncio.run(main())


def test_new_keys_match_the_keyspace_and_drop_removes_them(redis_url: str) -> None:
    async def body(b: RedisBackend, client: redis.Redis) -> None:
        k = b.keys
        holder, waiting = job(gate="m"), job(gate="m", at=T0 + 1, unique="u1")
        await b.enqueue([holder, waiting])
        await b.claim("w", ["default"], 5, T0, T0 + LEASE)
        await b.reserve_rate([RateRequest("api", 60.0, 1)], time.time())
        assert client.smembers(k.gate_running("m")) == {holder.id.encode()}
        assert client.zrange(k.gate_parked("m"), 0, -1) == [waiting.id.encode()]
        assert client.hgetall(k.unique) == {b"u1": waiting.id.encode()}
        assert client.exists(k.rate("api"))
        assert client.hget(k.queue_counts, "default\x1fw") == b"1"
        await b.drop()
        assert keys_matching(client, k.pattern) == set()

    scenario(redis_url, body)


def test_rate_state_expires_when_its_tat_passes(redis_url: str) -> None:
    async def body(b: RedisBackend, client: redis.Redis) -> None:
        key = b.keys.rate("api")
        now = time.time()
        starts = await b.reserve_rate([RateRequest("api", 0.5, 2)] * 3, now)
        assert starts == [now, now, pytest.approx(now + 0.5)]
        # tat = now + 1.5: the key lives that long (by the caller's clock), then vanishes.
        assert 0 < client.pttl(key) <= 1500
        tat, floor = (float(part) for part in client.get(key).split())  # type: ignore[union-attr]
        assert (tat, floor) == (pytest.approx(now + 1.5), 0.0)
        await asyncio.sleep(now + 1.6 - time.time())
        assert not client.exists(key)
        later = time.time()
        assert await b.reserve_rate([RateRequest("api", 0.5, 2)], later) == [later]

    scenario(redis_url, body)


def test_rate_floor_stays_with_the_key_for_the_whole_burst(redis_url: str) -> None:
    async def body(b: RedisBackend, client: redis.Redis) -> None:
        req = RateRequest("api", interval=1.0, burst=3)
        paused = replace(req, not_before=T0 + 30)
        starts = await b.reserve_rate([paused, req, req, req], T0)
        assert starts == [T0 + 30, T0 + 30, T0 + 30, T0 + 31]

    scenario(redis_url, body)


def test_unique_hash_keeps_only_active_holders(redis_url: str) -> None:
    async def body(b: RedisBackend, client: redis.Redis) -> None:
        k = b.keys
        done, cancelled, lost, started = (
            job(unique="a"),
            job(unique="b"),
            job(unique="c"),
            job(unique="d", until="start"),
        )
        await b.enqueue([done, cancelled, lost, started])
        assert client.hlen(k.unique) == 4
        await b.claim("w", ["default"], 4, T0, T0 + LEASE)
        assert not client.hexists(k.unique, "d")  # ended at start
        assert not client.hexists(k.job(started.id), "u")  # so retry will not take it again
        ok = Outcome(done.id, "succeeded", b"1", expire_at=T0 + 5)
        assert await b.finish("w", [ok], T0 + 1) == [True]
        assert await b.cancel(cancelled.id, T0 + 1, T0 + 5)
        assert client.hexists(k.unique, "b"), "held until the cancelled run ends"
        await b.heartbeat("w", [started.id], T0 + 1, T0 + 999)
        recovered = await b.recover(T0 + LEASE + 1, 1, 10, T0 + 40)
        assert sorted((r.id, r.cancelled) for r in recovered) == sorted(
            [(lost.id, False), (cancelled.id, True)]
        )
        assert client.hlen(k.unique) == 0
        assert await b.purge(T0 + 100, 10) == 3
        assert client.hlen(k.unique) == 0

    scenario(redis_url, body)


def test_blocking_enqueue_dedupes_like_enqueue(redis_url: str) -> None:
    async def body(b: RedisBackend, client: redis.Redis) -> None:
        first = job(unique="u")
        await b.enqueue([first])
        batch = [job(unique="u"), job(unique="v"), job(unique="v"), job(gate="g")]
        try:
            results = await asyncio.to_thread(b.enqueue_blocking, batch)
        finally:
            b.close_blocking()
        assert [(r.id, r.deduplicated) for r in results] == [
            (first.id, True),
            (batch[1].id, False),
            (batch[1].id, True),
            (batch[3].id, False),
        ]
        assert client.hget(b.keys.job(batch[3].id), "g") == b"g"

    scenario(redis_url, body)


def test_duplicates_across_enqueue_chunks_resolve_to_the_first(redis_url: str) -> None:
    async def body(b: RedisBackend, client: redis.Redis) -> None:
        jobs = [job(at=T0 + i / 1000) for i in range(ENQUEUE_CHUNK)]
        first, late = job(unique="u"), job(unique="u")
        results = await b.enqueue([first, *jobs, late])
        assert (results[0].id, results[0].deduplicated) == (first.id, False)
        assert (results[-1].id, results[-1].deduplicated) == (first.id, True)
        assert await b.get_job(late.id) is None

    scenario(redis_url, body)


def test_random_operations_keep_the_gate_and_unique_invariants(redis_url: str) -> None:
    """After every step: ``gr:<gate>`` = the gate's running jobs; parked jobs are queued and in
    no ready zset; a gate with parked jobs has all its slots taken or promised to ready jobs
    (so none is stranded); the parked counts and ``u`` hash agree with the jobs."""
    rng = random.Random(7)
    gates = {"m": 1, "c": 2}
    queues = ["q1", "q2"]

    async def body(b: RedisBackend, client: redis.Redis) -> None:
        k = b.keys
        ids: list[str] = []
        now = T0

        def check() -> None:
            pipe = client.pipeline(transaction=False)  # one round trip: 400 checks stay quick
            for i in ids:
                pipe.hgetall(k.job(i))
            jobs = {i: h for i, h in zip(ids, pipe.execute(), strict=True) if h}
            ready = {m.decode() for q in queues for m in client.zrange(k.ready(q), 0, -1)}
            for gate, limit in gates.items():
                gated = {i: h for i, h in jobs.items() if h.get(b"g") == gate.encode()}
                running = {i for i, h in gated.items() if h[b"s"] == b"running"}
                taken = {m.decode() for m in client.smembers(k.gate_running(gate))}
                assert taken == running, gate
                parked = {m.decode() for m in client.zrange(k.gate_parked(gate), 0, -1)}
                assert all(gated[i][b"s"] == b"queued" for i in parked)
                assert not parked & ready
                queued = {i for i, h in gated.items() if h[b"s"] == b"queued"}
                assert queued == parked | (queued & ready)
                if parked:
                    assert len(running) + len(queued & ready) >= limit, gate
            for q in queues:
                parked_here = sum(
                    1
                    for gate in gates
                    for m in client.zrange(k.gate_parked(gate), 0, -1)
                    if jobs[m.decode()][b"q"] == q.encode()
                )
                assert int(client.hget(k.queue_counts, f"{q}\x1fw") or 0) == parked_here
            for key, holder in client.hgetall(k.unique).items():
                h = jobs[holder.decode()]
                assert h[b"s"].decode() in ACTIVE_STATUSES
                assert h[b"u"] == key

        for _ in range(400):
            now += 1
            op = rng.choice(["enqueue", "claim", "claim", "finish", "finish", "cancel", "more"])
            if op == "enqueue":
                gate = rng.choice([*gates, *gates, None])
                new = job(
                    rng.choice(queues),
                    at=now,
                    delay=rng.choice([0, 0, 3]),
                    priority=rng.choice([0, 1]),
                    unique=rng.choice([None, "u1", "u2"]),
                    until=rng.choice(["start", "finish"]),
                    gate=gate,
                    limit=gates.get(gate or "", 1),
                )
                [result] = await b.enqueue([new])
                if not result.deduplicated:
                    ids.append(new.id)
            elif op == "claim":
                worker = rng.choice(["w1", "w2"])
                await b.claim(worker, rng.sample(queues, 2), rng.randint(1, 3), now, now + 5)
            elif op == "finish":
                for worker in ("w1", "w2"):
                    running = [m.decode() for m in client.zrange(k.running, 0, -1)]
                    mine = [i for i in running if client.hget(k.job(i), "w") == worker.encode()]
                    if mine:
                        kind = rng.choice(["succeeded", "failed", "retry", "release", "again"])
                        outcome = Outcome(
                            rng.choice(mine),
                            kind,  # type: ignore[arg-type]
                            result=b"1",
                            errors=b"[]",
                            run_at=now + rng.choice([0, 2]),
                            expire_at=now + 20,
                        )
                        await b.finish(worker, [outcome], now)
            elif op == "cancel" and ids:
                here = [i for i in ids if client.hget(k.job(i), "s") in (b"queued", b"running")]
                await b.cancel(rng.choice(here or ids), now, now + 20)
            else:
                await b.promote_due(now, 100)
                await b.recover(now, 2, 10, now + 20)
                if ids and rng.random() < 0.5:
                    await b.retry(rng.choice(ids), now)
                if rng.random() < 0.3:
                    await b.purge(now, 100)
            check()
        # Drain: every job still active ends up run, once the workers keep claiming.
        for _ in range(200):
            now += 10
            await b.promote_due(now, 1000)
            await b.recover(now, 99, 1000, now + 20)
            claimed = await b.claim("w1", queues, 10, now, now + 5)
            outcomes = [Outcome(r.id, "succeeded", b"1", expire_at=now) for r in claimed]
            await b.finish("w1", outcomes, now)
            check()
        left = [
            i for i in ids if client.hget(k.job(i), "s") in {s.encode() for s in ACTIVE_STATUSES}
        ]
        assert left == []

    scenario(redis_url, body)


def test_cancelling_an_unparked_job_passes_its_turn_on(redis_url: str) -> None:
    """A freed slot unparks one job into its ready zset; if that job is cancelled before a
    claim takes it, the next parked job must get the turn (the slot is free)."""

    async def body(b: RedisBackend, client: redis.Redis) -> None:
        holder, first, second = (job(gate="m", at=T0 + i) for i in range(3))
        await b.enqueue([holder, first, second])
        assert [r.id for r in await b.claim("w", ["default"], 5, T0, T0 + LEASE)] == [holder.id]
        done = Outcome(holder.id, "succeeded", b"1", expire_at=T0 + 9)
        assert await b.finish("w", [done], T0 + 1) == [True]
        assert client.zrange(b.keys.gate_parked("m"), 0, -1) == [second.id.encode()]
        assert await b.cancel(first.id, T0 + 2, T0 + 9)
        assert [r.id for r in await b.claim("w", ["default"], 5, T0, T0 + LEASE)] == [second.id]
        [stats] = await b.queue_stats()
        assert (stats.queued, stats.running) == (0, 1)

    scenario(redis_url, body)


def test_a_result_of_a_previous_run_is_not_taken_for_the_last_ones(redis_url: str) -> None:
    async def body(b: RedisBackend, client: redis.Redis) -> None:
        new = job()
        await b.enqueue([new])
        await b.claim("w", ["default"], 1, T0, T0 + LEASE)
        again = Outcome(new.id, "again", result=b"1", run_at=T0)
        assert await b.finish("w", [again], T0) == [True]
        [claimed] = await b.claim("w", ["default"], 1, T0, T0 + LEASE)
        assert claimed.result == b"1"
        assert await b.finish("w", [Outcome(new.id, "succeeded")], T0) == [True]
        record = await b.get_job(new.id)
        assert record is not None and (record.status, record.result) == ("succeeded", None)

    scenario(redis_url, body)
