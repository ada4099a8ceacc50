"""Redis-specific checks of ``RedisBackend``: keyspace, scripts, wake-ups, errors, memory.

The behaviour every backend shares is in ``tests/conformance``; these tests look at what only
the Redis backend has. Each test runs its own event loop (``asyncio.run``) on a namespace of its
own, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar
from uuid import uuid4

import msgspec
import pytest
import redis
from services import keys_matching
from stored import write_raw_payload

from duly._errors import BackendUnavailable
from duly._ids import new_id
from duly._records import JobFilter, NewJob, Outcome
from duly.backends.redis import RedisBackend
from duly.backends.redis._clients import AutoPipeline
from duly.backends.redis._enqueue import ENQUEUE_CHUNK
from duly.backends.redis._keys import DEFAULT_MAX_ATTEMPTS, Keyspace

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
    key: str | None = None,
    task: str = "t.add",
) -> NewJob:
    return NewJob(
        id=new_id(),
        task=task,
        queue=queue,
        payload=b'{"args":[1,2],"kwargs":{}}',
        max_attempts=3,
        key=key,
        priority=priority,
        enqueued_at=at,
        scheduled_for=at + delay,
    )


def scenario(url: str, body: Callable[[RedisBackend], Awaitable[T]]) -> T:
    """Run ``body`` against an opened backend on a fresh namespace, dropped afterwards."""

    async def main() -> T:
        backend = RedisBackend(url, namespace=f"t{uuid4().hex[:12]}")
        await backend.open()
        try:
            return await body(backend)
        finally:
            await backend.drop()
            await backend.close()

    return asyncio.run(main())


def raw(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def test_every_key_is_hash_tagged_and_matches_the_keyspace(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        k = b.keys
        queued, later, keyed = job(), job(delay=60), job("mail", key="user:1")
        await b.enqueue([queued, later, keyed])
        [claimed] = await b.claim("w1", ["mail"], 1, T0, T0 + LEASE)
        await b.finish("w1", [Outcome(claimed.id, "succeeded", b"1", expire_at=T0 + 9)], T0)
        client = raw(redis_url)
        try:
            names = keys_matching(client, k.pattern)
            assert names, "nothing stored"
            assert all(n.startswith(f"{{{k.namespace}}}:") for n in names)
            for job_id in (queued.id, later.id, keyed.id):
                assert k.job(job_id) in names
            assert client.zscore(k.ready("default"), queued.id) is not None
            assert client.zscore(k.due, later.id) == T0 + 60
            assert client.zscore(k.key_index("user:1"), keyed.id) == 0
            assert client.zscore(k.status_index("succeeded"), keyed.id) == 0
            assert client.zscore(k.expiry, keyed.id) == T0 + 9
            assert client.sismember(k.queues, "mail")
            assert client.exists(k.counters(int(T0 // 60)))
            assert client.zcard(k.all) == 3
            # 5 events (3 stored, 1 running, 1 succeeded): one entry per script call
            assert client.get(k.events_count) == b"5" and client.xlen(k.events) == 3
            assert client.xlen(k.key_events("user:1")) == 3
        finally:
            client.close()

    scenario(redis_url, body)


def test_keyspace_escapes_glob_characters() -> None:
    assert Keyspace("a*b").pattern == "{a\\*b}:*"
    assert Keyspace("duly").job("X") == "{duly}:j:X"


def test_drop_leaves_other_namespaces_alone(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        other = RedisBackend(redis_url, namespace=b.namespace + "x")
        await other.open()
        try:
            mine, theirs = job(), job()
            await b.enqueue([mine])
            await other.enqueue([theirs])
            await b.drop()
            assert await b.get_job(mine.id) is None
            assert await other.get_job(theirs.id) is not None
        finally:
            await other.drop()
            await other.close()

    scenario(redis_url, body)


def _mixed_batch() -> list[NewJob]:
    """Jobs whose shared fields change often: enqueue.lua gets many groups of varied size."""
    jobs = [job(at=T0 + i // 7, priority=i % 3 - 1) for i in range(ENQUEUE_CHUNK + 40)]
    jobs[5:9] = [job(task="t.other", key="k:1", at=T0 + 1) for _ in range(4)]
    jobs[300:303] = [job(queue="other", delay=60.0) for _ in range(3)]
    jobs[-1] = NewJob(**{**vars_of(job()), "unique_key": "t.add:u", "gate": "g", "gate_limit": 2})
    jobs[-2] = NewJob(**{**vars_of(job()), "unique_key": "t.add:u"})  # the last one dedupes
    return jobs


def vars_of(new: NewJob) -> dict[str, object]:
    return {name: getattr(new, name) for name in NewJob.__slots__}


@pytest.mark.parametrize("blocking", [False, True])
def test_grouped_batches_store_every_field(redis_url: str, blocking: bool) -> None:
    async def body(b: RedisBackend) -> None:
        jobs = _mixed_batch()
        await b._conn.client.script_flush()
        if blocking:
            results = await asyncio.to_thread(b.enqueue_blocking, jobs)
        else:
            results = await b.enqueue(jobs)
        assert [r.deduplicated for r in results] == [False] * (len(jobs) - 1) + [True]
        assert results[-1].id == jobs[-2].id
        for new in jobs[:-1]:
            record = await b.get_job(new.id)
            assert record is not None
            for name in ("task", "queue", "payload", "max_attempts", "key", "priority"):
                assert getattr(record, name) == getattr(new, name), (name, new)
            assert record.enqueued_at == new.enqueued_at
            scheduled = new.scheduled_for > new.enqueued_at
            assert record.status == ("scheduled" if scheduled else "queued")
            assert record.scheduled_for == (new.scheduled_for if scheduled else None)
        stats = {s.name: s for s in await b.queue_stats()}
        assert stats["default"].queued == len(jobs) - 4 and stats["other"].scheduled == 3

    scenario(redis_url, body)


def test_a_failing_chunk_raises_and_leaves_the_connection_usable(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        for enqueue in (b.enqueue, lambda js: asyncio.to_thread(b.enqueue_blocking, js)):
            jobs = [job() for _ in range(ENQUEUE_CHUNK + 2)]
            jobs[ENQUEUE_CHUNK] = NewJob(**{**vars_of(job()), "unique_key": "t.add:u"})
            await b._conn.client.set(b.keys.unique, "not a hash")  # the second chunk's HGET fails
            with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
                await enqueue(jobs)
            await b._conn.client.delete(b.keys.unique)
            results = await enqueue(jobs)  # the first chunk had been stored: it dedupes
            assert [r.deduplicated for r in results] == [True] * ENQUEUE_CHUNK + [False] * 2

    scenario(redis_url, body)


def test_calls_of_one_loop_turn_share_one_round_trip(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[list[str]] = []
    send = AutoPipeline._send

    async def counting_send(client: object, batch: list[tuple[object, ...]]) -> list[object]:
        sent.append([script.name for script, *_ in batch])  # type: ignore[attr-defined]
        return await send(client, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(AutoPipeline, "_send", staticmethod(counting_send))

    async def body(b: RedisBackend) -> None:
        await b.enqueue([job(), job()])
        await b._conn.client.script_flush()  # the first flush meets NOSCRIPT: each call reloads
        claimed, (moved, _), gone = await asyncio.gather(
            b.claim("w", ["default"], 5, T0 + 1, T0 + 1 + LEASE),
            b.promote_due(T0 + 1, 10),
            b.heartbeat("w", [], T0 + 1, T0 + 1 + LEASE),
        )
        assert len(claimed) == 2 and moved == 0 and gone == []
        assert sent[-1] == ["claim", "promote_due", "heartbeat"]
        sent.clear()
        applied, more = await asyncio.gather(
            b.finish("w", [Outcome(claimed[0].id, "succeeded")], T0 + 2),
            b.claim("w", ["default"], 5, T0 + 2, T0 + 2 + LEASE),
        )
        assert applied == [True] and more == []
        assert sent == [["finish", "claim"]]
        sent.clear()
        # A call cancelled before the flush is never sent: its job stays queued.
        await b.enqueue([job()])
        sent.clear()
        doomed = asyncio.ensure_future(b.claim("w", ["default"], 5, T0 + 2, T0 + 2 + LEASE))
        await asyncio.sleep(0)  # the claim is queued for the flush
        doomed.cancel()
        (moved_now, _) = await b.promote_due(T0 + 2, 10)
        assert sent == [["promote_due"]] and moved_now == 0
        [queued] = await b.queue_stats()
        assert queued.queued == 1 and queued.running == 1
        # An error reply fails its own call only.
        await b._conn.client.set(b.keys.due, "not a zset")
        failed, listed = await asyncio.gather(
            b.promote_due(T0 + 3, 10),
            b.list_jobs(JobFilter(), 10),
            return_exceptions=True,
        )
        assert isinstance(failed, redis.ResponseError) and "WRONGTYPE" in str(failed)
        assert isinstance(listed, list)
        assert {c.id for c in claimed} <= {r.id for r in listed}
        await b._conn.client.delete(b.keys.due)

    scenario(redis_url, body)


def test_blocking_enqueue_uses_one_connection_per_thread_and_per_process(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        def enqueue_many_times(out: list[str]) -> None:
            for _ in range(30):
                out.extend(r.id for r in b.enqueue_blocking([job(), job()]))

        found: list[list[str]] = [[] for _ in range(6)]
        threads = [threading.Thread(target=enqueue_many_times, args=(o,)) for o in found]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        every = [i for o in found for i in o]
        assert len(every) == len(set(every)) == 6 * 60
        assert len(b._conn.blocking.connections) <= 6 + 1  # ended threads' connections are garbage

        b.enqueue_blocking([job()])  # this thread's connection, then a fork inherits it
        inherited = b._conn.blocking.connection()
        pid = os.fork()
        if pid == 0:  # the child must not talk over the parent's socket
            code = 1
            try:
                [r] = b.enqueue_blocking([child := job(task="t.child")])
                own = b._conn.blocking.connection()
                code = 0 if r.id == child.id and own is not inherited else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        [again] = b.enqueue_blocking([parent := job()])  # the parent's socket is intact
        assert again.id == parent.id
        assert [r.task for r in await b.list_jobs(JobFilter(task="t.child"), 5)] == ["t.child"]

        b.close_blocking()
        assert len(b._conn.blocking.connections) == 0
        [after] = b.enqueue_blocking([job()])  # reconnects
        assert not after.deduplicated

    scenario(redis_url, body)


def test_big_batch_is_chunked_and_survives_a_flushed_script_cache(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        jobs = [job(at=T0 + i / 1000) for i in range(ENQUEUE_CHUNK * 2 + 7)]
        await b._conn.client.script_flush()
        results = await b.enqueue(jobs)
        assert [r.id for r in results] == [j.id for j in jobs]
        assert not any(r.deduplicated for r in results)
        again = await b.enqueue([*jobs[:3], job(at=T0 + 10)])
        assert [r.deduplicated for r in again] == [True, True, True, False]
        [stats] = await b.queue_stats()
        assert stats.queued == len(jobs) + 1
        await b._conn.client.script_flush()
        taken = await b.claim("w", ["default"], 5, T0 + 5, T0 + 5 + LEASE)
        assert [r.id for r in taken] == [j.id for j in jobs[:5]]

    scenario(redis_url, body)


def test_unreachable_redis_names_the_url_without_password() -> None:
    async def body() -> None:
        backend = RedisBackend("redis://user:s3cret@127.0.0.1:1/0", namespace="x")
        started = time.monotonic()
        with pytest.raises(BackendUnavailable) as caught:
            await backend.open()
        assert time.monotonic() - started < 3, "should fail fast"
        message = str(caught.value)
        assert "redis://user:***@127.0.0.1:1/0" in message  # one redaction for every backend
        assert "s3cret" not in message
        assert isinstance(caught.value.__cause__, (redis.ConnectionError, OSError))
        with pytest.raises(BackendUnavailable):
            await backend.enqueue([job()])
        with pytest.raises(BackendUnavailable):
            await backend.wait_for_work(["default"], 0.1)
        await backend.close()
        await backend.close()

    asyncio.run(body())


def test_times_round_trip_exactly(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        at = 1_700_000_040.123456789
        new = job(at=at, delay=0.000123)
        await b.enqueue([new])
        record = await b.get_job(new.id)
        assert record is not None
        assert record.enqueued_at == at
        assert record.scheduled_for == at + 0.000123
        assert record.status == "scheduled"

    scenario(redis_url, body)


def test_priority_is_clamped_for_ordering_but_stored_as_given(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        huge, big, low = job(priority=10**9), job(priority=1000), job(priority=-(10**9))
        await b.enqueue([low, big, huge])
        record = await b.get_job(huge.id)
        assert record is not None and record.priority == 10**9
        order = [r.id for r in await b.claim("w", ["default"], 3, T0, T0 + LEASE)]
        assert order == [huge.id, big.id, low.id]  # equal clamped priority: FIFO by time, id

    scenario(redis_url, body)


def test_handed_back_jobs_go_first_within_their_priority(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        first, second, urgent = job(), job(at=T0 + 1), job(at=T0 + 2, priority=5)
        await b.enqueue([first, second])
        await b.claim("w", ["default"], 2, T0, T0 + LEASE)
        await b.enqueue([urgent])
        assert await b.finish("w", [Outcome(second.id, "release")], T0 + 3) == [True]
        recovered = await b.recover(T0 + LEASE + 1, 3, 10, T0 + 999)
        assert [(r.id, r.requeued) for r in recovered] == [(first.id, True)]
        # the recovered job (it lost a worker) is handed out alone, after higher priorities
        order = [r.id for r in await b.claim("w", ["default"], 3, T0 + 40, T0 + 99)]
        assert order == [urgent.id]
        order = [r.id for r in await b.claim("w", ["default"], 3, T0 + 40, T0 + 99)]
        assert order == [first.id]
        order = [r.id for r in await b.claim("w", ["default"], 3, T0 + 40, T0 + 99)]
        assert order == [second.id]

    scenario(redis_url, body)


def test_quarantine_appends_to_the_history_without_reencoding_it(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        new = job()
        await b.enqueue([new])
        history = b'[{"type": "E", "message": "x", "traceback": null, "at": 1700000040.123456789}]'
        await b.claim("w", ["default"], 1, T0, T0 + LEASE)
        await b.finish("w", [Outcome(new.id, "retry", errors=history, run_at=T0)], T0)
        await b.promote_due(T0, 10)
        await b.claim("w", ["default"], 1, T0, T0 + LEASE)
        now = T0 + LEASE + 0.123456789
        [rec] = await b.recover(now, 1, 10, now + 7)
        assert not rec.requeued
        record = await b.get_job(new.id)
        assert record is not None and record.errors is not None
        assert record.errors.startswith(history[:-1])
        entries = json.loads(record.errors)
        assert entries[-1] == {
            "type": "LostWorker",
            "message": "lost its worker 1 times",
            "traceback": "",
            "at": now,
            "attempt": 2,
        }
        assert (record.status, record.lost, record.expire_at) == ("failed", 1, now + 7)

    scenario(redis_url, body)


def test_queue_counts_follow_every_transition(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        async def counts() -> tuple[int, int, int]:
            [s] = [q for q in await b.queue_stats() if q.name == "default"]
            return s.queued, s.scheduled, s.running

        a, c, d, later = job(), job(), job(), job(delay=10)
        await b.enqueue([a, c, d, later])
        assert await counts() == (3, 1, 0)
        await b.claim("w", ["default"], 3, T0, T0 + LEASE)
        assert await counts() == (0, 1, 3)
        await b.finish("w", [Outcome(a.id, "retry", errors=b"[]", run_at=T0 + 5)], T0)
        assert await counts() == (0, 2, 2)
        await b.cancel(c.id, T0, T0 + 99)
        assert await counts() == (0, 2, 2), "a running job's cancel waits for its run's end"
        assert await b.finish("w", [Outcome(c.id, "release")], T0) == [False]
        assert await counts() == (0, 2, 1)
        await b.promote_due(T0 + 20, 10)
        assert await counts() == (2, 0, 1)
        await b.recover(T0 + LEASE + 1, 3, 10, T0 + 999)
        assert await counts() == (3, 0, 0)

    scenario(redis_url, body)


def test_list_jobs_reads_the_right_index(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        jobs = [job(key="k" if i % 2 else None, task=f"t{i % 3}") for i in range(9)]
        await b.enqueue(jobs)
        newest_first = [j.id for j in reversed(jobs)]
        listed = await b.list_jobs(JobFilter(), 100)
        assert [r.id for r in listed] == newest_first
        keyed = await b.list_jobs(JobFilter(key="k"), 2)
        assert [r.id for r in keyed] == [
            i for i in newest_first if i in {j.id for j in jobs[1::2]}
        ][:2]
        t1 = await b.list_jobs(JobFilter(task="t1", status="queued"), 100)
        assert {r.id for r in t1} == {j.id for j in jobs if j.task == "t1"}
        await b.claim("w", ["default"], 4, T0, T0 + LEASE)
        running = await b.list_jobs(JobFilter(status="running"), 100)
        assert [r.id for r in running] == sorted((j.id for j in jobs[:4]), reverse=True)

    scenario(redis_url, body)


def test_wait_for_work_wakes_on_enqueue_from_another_instance(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        producer = RedisBackend(redis_url, namespace=b.namespace)
        await producer.open()
        try:
            await b.wait_for_work(["default"], 0.01)  # subscribes
            latencies = []
            for _ in range(5):
                waiter = asyncio.create_task(b.wait_for_work(["default"], 5))
                await asyncio.sleep(0.02)
                started = time.perf_counter()
                await producer.enqueue([job()])
                await waiter
                latencies.append(time.perf_counter() - started)
            assert max(latencies) < 0.5
            # A wake-up for another queue does not end the wait early.
            started = time.perf_counter()
            waiter = asyncio.create_task(b.wait_for_work(["default"], 0.3))
            await asyncio.sleep(0.02)
            await producer.enqueue([job("other")])
            await waiter
            assert time.perf_counter() - started >= 0.29
            # A message that arrived while nobody waited makes the next wait return at once.
            await producer.enqueue([job("default")])
            await asyncio.sleep(0.05)
            started = time.perf_counter()
            await b.wait_for_work(["default"], 5)
            assert time.perf_counter() - started < 0.1
        finally:
            await producer.close()

    scenario(redis_url, body)


def test_write_raw_payload_only_touches_existing_jobs(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        new = job()
        await b.enqueue([new])
        await write_raw_payload(b, new.id, b"\xff not json")
        record = await b.get_job(new.id)
        assert record is not None and record.payload == b"\xff not json"
        await write_raw_payload(b, "missing", b"x")
        assert await b.get_job("missing") is None

    scenario(redis_url, body)


def test_purge_deletes_counter_buckets_by_the_callers_clock(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        new = job()
        await b.enqueue([new])
        await b.claim("w", ["default"], 1, T0, T0 + LEASE)
        await b.finish("w", [Outcome(new.id, "succeeded", b"1", expire_at=T0 + 10)], T0)
        assert [r.succeeded for r in await b.stats(0)] == [1]
        assert await b.purge(T0 + 11, 100) == 1
        assert await b.list_jobs(JobFilter(), 10) == []
        assert len(await b.stats(0)) == 1  # still within 24 h
        assert await b.purge(T0 + 86_400 + 61, 100) == 0
        assert await b.stats(0) == []
        client = raw(redis_url)
        try:
            left = keys_matching(client, b.keys.pattern)
            # Queue names and the storage format stay; events are trimmed by the server's
            # clock (PRODUCT §8).
            kept = {b.keys.queues, b.keys.queue_counts, b.keys.events, b.keys.events_count}
            assert left <= kept | {b.keys.format}
        finally:
            client.close()

    scenario(redis_url, body)


def test_memory_per_queued_job_is_small(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        client = raw(redis_url)
        try:
            await b.enqueue([job(at=T0 + i / 1000) for i in range(2000)])
            before = sum(client.memory_usage(k) or 0 for k in (b.keys.all, b.keys.ready("default")))
            [sample] = await b.list_jobs(JobFilter(), 1)
            per_job = (client.memory_usage(b.keys.job(sample.id)) or 0) + before / 2000
            assert per_job < 500, per_job
        finally:
            client.close()

    scenario(redis_url, body)


def test_claim_drops_stale_ready_entries(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        done, fresh = job(), job(at=T0 + 1)
        await b.enqueue([done, fresh])
        await b.claim("w", ["default"], 1, T0, T0 + LEASE)
        await b.finish("w", [Outcome(done.id, "succeeded", b"1", expire_at=T0 + 9)], T0)
        # Corrupt the index on purpose: a finished job back in the ready zset.
        await b._conn.client.zadd(b.keys.ready("default"), {done.id: 0})
        taken = await b.claim("w", ["default"], 5, T0 + 2, T0 + 2 + LEASE)
        assert [r.id for r in taken] == [fresh.id]
        assert await b._conn.client.zcard(b.keys.ready("default")) == 0
        record = await b.get_job(done.id)
        assert record is not None and record.status == "succeeded"

    scenario(redis_url, body)


def test_cancelled_running_job_is_reported_gone_and_its_outcome_dropped(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        a, c = job(), job()
        await b.enqueue([a, c])
        await b.claim("w", ["default"], 2, T0, T0 + LEASE)
        assert await b.cancel(a.id, T0 + 1, T0 + 99)
        assert await b.heartbeat("w", [a.id, c.id, "nope"], T0 + 2, T0 + 50) == [a.id, "nope"]
        assert await b._conn.client.zscore(b.keys.running, c.id) == T0 + 50
        flags = await b.finish(
            "w", [Outcome(a.id, "succeeded", b"1"), Outcome(c.id, "succeeded", b"2")], T0 + 3
        )
        assert flags == [False, True]
        record = await b.get_job(a.id)
        assert record is not None
        assert (record.status, record.result, record.lease_until) == ("cancelled", None, None)
        assert [w.id for w in await b.workers()] == ["w"]

    scenario(redis_url, body)


def test_default_max_attempts_is_not_stored_and_reads_back(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        default, other = job(), job()
        default.max_attempts = DEFAULT_MAX_ATTEMPTS
        client = raw(redis_url)
        try:
            await b.enqueue([default, other])
            assert client.hget(b.keys.job(default.id), "m") is None
            assert client.hget(b.keys.job(other.id), "m") == b"3"
            got = await b.get_job(default.id)
            assert got is not None and got.max_attempts == DEFAULT_MAX_ATTEMPTS
            claimed = await b.claim("w1", ["default"], 2, T0, T0 + LEASE)
            assert {c.id: c.max_attempts for c in claimed} == {
                default.id: DEFAULT_MAX_ATTEMPTS,
                other.id: 3,
            }
        finally:
            client.close()

    scenario(redis_url, body)


def test_event_entries_are_compact_and_older_entries_still_read(redis_url: str) -> None:
    async def body(b: RedisBackend) -> None:
        k = b.keys
        client = raw(redis_url)
        try:
            plain, keyed = job(), job(key="user:1")
            await b.enqueue([plain])
            await b.enqueue([keyed])
            # One event: no `n` (absent = 1); the status is its code (queued = 2).
            [(_, fields)] = client.xrange(k.events, "-", "+", count=1)
            assert set(fields) == {b"a", b"e"}
            assert msgspec.msgpack.decode(fields[b"e"]) == [plain.id, 2, "t.add", "default", ""]
            # An entry as written before the codes (two events, `n`, status names), here and
            # in the key's stream, reads the same.
            old = [plain.id, "running", "t.add", "default", "", keyed.id, "failed", "t.add"]
            old += ["default", "user:1"]
            client.incrby(k.events_count, 2)
            client.xadd(k.events, {"n": 2, "a": 1000, "e": msgspec.msgpack.encode(old)}, "0-4")
            keyed_old = [4, keyed.id, "failed", "t.add", "default"]
            client.xadd(
                k.key_events("user:1"), {"a": 1000, "e": msgspec.msgpack.encode(keyed_old)}, "0-4"
            )
            events, _ = await b.events.read("0", None, 10)
            assert [(e.id, e.job_id, e.status) for e in events] == [
                ("1", plain.id, "queued"),
                ("2", keyed.id, "queued"),
                ("3", plain.id, "running"),
                ("4", keyed.id, "failed"),
            ]
            events, _ = await b.events.read("0", "user:1", 10)
            assert [(e.id, e.status, e.key) for e in events] == [
                ("2", "queued", "user:1"),
                ("4", "failed", "user:1"),
            ]
        finally:
            client.close()

    scenario(redis_url, body)
