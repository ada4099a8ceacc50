"""The Redis backend: every state change is one Lua script call (see ``keys.py``, ``lua/``).

One ``RedisBackend`` belongs to one event loop. It holds a ``redis.asyncio`` client (hiredis
parser when installed) and, once a worker waits for work, one pub/sub connection subscribed to
the namespace's wake channel; waiting never holds a pooled connection.

This module maps each protocol method to one script or command; the rest lives beside it:
``connection.py`` (client, blocking connections, auto-pipeline, errors), ``scripts.py`` (the
typed script calls), ``format.py`` (the storage format, checked and upgraded at ``open``),
``_codec.py`` (replies to records, by field name), ``wake.py`` (waiting).

Listing (``list_jobs``) reads, newest first: the key's index when ``key`` is set; the status
index for a finished status; the running set for ``running``; else the index of every job.
Fields not served by the index are filtered while reading, examining at most
``LIST_SCAN_BOUND`` index entries per call, so a filter matching only old jobs may return fewer
than ``limit`` (never a scan of the whole keyspace).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import suppress
from typing import Final, cast

from duly._records import (
    FINISHED_STATUSES,
    STATS_RETENTION,
    EnqueueResult,
    JobFilter,
    JobRecord,
    NewJob,
    Outcome,
    QueueStats,
    RateRequest,
    Recovered,
    StatRow,
    StorageFormat,
    WorkerRecord,
)
from duly.backends._urls import redact_url
from duly.backends.redis import _codec
from duly.backends.redis._connection import (
    UNAVAILABLE,
    BlockingConnections,
    Client,
    guard,
    make_client,
)
from duly.backends.redis._durable import Durability
from duly.backends.redis._events import RedisEvents
from duly.backends.redis._format import Formats
from duly.backends.redis._freshness import RedisFreshness
from duly.backends.redis._groups import RedisGroups
from duly.backends.redis._handoff import RedisHandoff
from duly.backends.redis._keys import Keyspace
from duly.backends.redis._scripts import Scripts
from duly.backends.redis._topology import Topology
from duly.backends.redis._wake import Wake
from duly.backends.redis._webhooks import RedisWebhooks

__all__ = ["LIST_SCAN_BOUND", "RedisBackend"]

#: Most index entries ``list_jobs`` examines in one call when filtering.
LIST_SCAN_BOUND: Final = 10_000
_DROP_BATCH: Final = 1000
_OUTCOME_KINDS: Final = frozenset({"succeeded", "failed", "retry", "release", "again"})


class RedisBackend:
    """Jobs in Redis under ``{namespace}:`` keys (one cluster slot per namespace): one server,
    a Redis Cluster (``redis+cluster://``) or a Sentinel-managed primary (``redis+sentinel://``;
    see ``topology.py``)."""

    def __init__(
        self, url: str, namespace: str = "duly", durability: Durability | None = None
    ) -> None:
        self.url = url
        self.namespace = namespace
        #: ``?wait_replicas=``: every enqueue waits for that many replicas (durable.py).
        self.durability = durability
        self.keys = Keyspace(namespace)
        self.topology = Topology.parse(url)
        self._scripts = Scripts(self.keys)
        self._safe_url = redact_url(url)
        self._client: Client | None = None
        self._loaded = False
        self._blocking = BlockingConnections(self.topology)
        self._wake = Wake(self.keys.wake, self._safe_url)
        # Capabilities (duly.backends.capability): one object each, over this client.
        self.freshness = RedisFreshness(self)
        self.groups = RedisGroups(self)
        self.events = RedisEvents(self)
        self.webhooks = RedisWebhooks(self)
        #: Direct hand-off (``_handoff.py``) on one server; a cluster or Sentinel only wakes.
        self.handoff = RedisHandoff(self) if self.topology.kind == "server" else None
        self._formats = Formats(self.keys, f"Redis namespace {namespace!r} at {self._safe_url}")

    def __repr__(self) -> str:
        return f"RedisBackend({self._safe_url!r}, namespace={self.namespace!r})"

    def clone(self) -> RedisBackend:
        """A new, unopened backend on the same server and namespace."""
        return RedisBackend(self.url, self.namespace, self.durability)

    # -- plumbing --------------------------------------------------------------------------
    @property
    def _redis(self) -> Client:
        if self._client is None:
            self._client = make_client(self.topology)
        return self._client

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        with guard(self._safe_url, "open"):
            client = self._redis
            await client.ping()
            if not self._loaded:
                await self._scripts.load(client)
                self._loaded = True
            if not self._formats.ready:
                await self._formats.ensure(client)

    async def migrate(self) -> list[int]:
        """Redis keeps no schema: check the server answers, load the scripts, and check (and
        upgrade) the storage format (``format.py``)."""
        await self.open()
        return []

    async def storage_format(self) -> StorageFormat:
        with guard(self._safe_url, "storage_format"):
            return await self._formats.read(self._redis)

    async def close(self) -> None:
        await self._wake.stop()
        if self.handoff is not None:
            await self.handoff.close()
        client, self._client = self._client, None
        self._loaded = False
        if client is not None:
            with suppress(*UNAVAILABLE):
                await client.aclose()

    async def ping(self) -> None:
        with guard(self._safe_url, "ping"):
            await self._redis.ping()

    async def drop(self) -> None:
        with guard(self._safe_url, "drop"):
            client = self._redis
            batch: list[bytes] = []
            async for key in client.scan_iter(match=self.keys.pattern, count=_DROP_BATCH):
                batch.append(key)
                if len(batch) >= _DROP_BATCH:
                    await client.unlink(*batch)
                    batch.clear()
            if batch:
                await client.unlink(*batch)

    # -- producing -------------------------------------------------------------------------
    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        if not jobs:
            return []
        with guard(self._safe_url, "enqueue"):
            if self.durability is None:
                found = await self._scripts.enqueue(self._redis, jobs)
            else:
                replies = await self.durability.enqueue(
                    self._scripts, self._redis, jobs, self._safe_url
                )
                found = self._scripts.collect(jobs, replies)
        return _codec.results(jobs, found)

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue`` for sync callers (thread-safe; no event loop)."""
        if not jobs:
            return []
        with guard(self._safe_url, "enqueue"):
            if not self._formats.ready:
                self._formats.ensure_blocking(self._blocking.evaluate)
            if self.durability is not None:
                replies = self.durability.enqueue_blocking(
                    self._scripts, self._blocking, jobs, self._safe_url
                )
                found = self._scripts.collect(jobs, replies)
            elif self.topology.kind == "cluster":
                found = self._scripts.enqueue_blocking_cluster(self._blocking.cluster(), jobs)
            else:
                found = self._scripts.enqueue_blocking(self._blocking.connection(), jobs)
        return _codec.results(jobs, found)

    def close_blocking(self) -> None:
        """Close the connections of the blocking calls."""
        self._blocking.close()

    async def write_raw_payload(self, job_id: str, payload: bytes) -> None:
        """Overwrite a stored payload without any check (tests of corrupt storage)."""
        with guard(self._safe_url, "write_raw_payload"):
            client = self._redis
            if await client.exists(self.keys.job(job_id)):
                await client.hset(self.keys.job(job_id), "p", payload)

    # -- consuming -------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        if limit <= 0 or not queues:
            return []
        with guard(self._safe_url, "claim"):
            _, rows = await self._scripts.claim(
                self._redis, worker, queues, limit, now, lease_until
            )
        now, lease_until = float(now), float(lease_until)
        return [_codec.claimed(job_id, row, worker, now, lease_until) for job_id, row in rows]

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        with guard(self._safe_url, "heartbeat"):
            gone = await self._scripts.heartbeat(self._redis, worker, job_ids, now, lease_until)
        return [job_id.decode() for job_id in gone]

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        if not outcomes:
            return []
        for outcome in outcomes:
            if outcome.kind not in _OUTCOME_KINDS:
                raise ValueError(f"unknown outcome kind {outcome.kind!r}")
        with guard(self._safe_url, "finish"):
            return await self._scripts.finish(self._redis, worker, outcomes, now)

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        with guard(self._safe_url, "promote_due"):
            moved, first = await self._scripts.promote_due(self._redis, now, max(limit, 0))
        return moved, _codec.float_or_none(first)

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        if limit <= 0:
            return []
        with guard(self._safe_url, "recover"):
            rows = await self._scripts.recover(self._redis, now, max_lost, limit, failed_expire_at)
        return [Recovered(job_id.decode(), flag == 1, flag == 2) for job_id, flag in rows]

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        await self._wake.wait(self._redis, queues, timeout)

    # -- workers ---------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        k = self.keys
        blob = _codec.worker_info(now, info)
        with guard(self._safe_url, "register_worker"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zadd(k.workers, {worker: float(now)})
                pipe.hset(k.worker_info, worker, blob)
                await pipe.execute()

    async def unregister_worker(self, worker: str) -> None:
        k = self.keys
        with guard(self._safe_url, "unregister_worker"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zrem(k.workers, worker)
                pipe.hdel(k.worker_info, worker)
                await pipe.execute()

    async def workers(self) -> list[WorkerRecord]:
        k = self.keys
        with guard(self._safe_url, "workers"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zrange(k.workers, 0, -1, withscores=True)
                pipe.hgetall(k.worker_info)
                seen, infos = await pipe.execute()
        return _codec.worker_records(seen, infos)

    # -- operator actions ------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        with guard(self._safe_url, "cancel"):
            return await self._scripts.cancel(self._redis, job_id, now, expire_at)

    async def retry(self, job_id: str, now: float) -> bool:
        with guard(self._safe_url, "retry"):
            return await self._scripts.retry(self._redis, job_id, now)

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        if not requests:
            return []
        with guard(self._safe_url, "reserve_rate"):
            starts = await self._scripts.reserve_rate(self._redis, requests, now)
        return [float(start) for start in starts]

    async def purge(self, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
        cutoff = (now - keep) / 60  # counter buckets of minutes before this are deleted
        with guard(self._safe_url, "purge"):
            return await self._scripts.purge(
                self._redis, now, max(limit, 0), cutoff, now - keep, keep
            )

    # -- introspection ---------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        with guard(self._safe_url, "get_job"):
            fields = cast(dict[bytes, bytes], await self._redis.hgetall(self.keys.job(job_id)))
        return _codec.record(job_id, fields) if fields else None

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        if limit <= 0:
            return []
        k = self.keys
        status = where.status
        sort = False
        if where.key is not None:
            index = k.key_index(where.key)
        elif status in FINISHED_STATUSES:
            index, status = k.status_index(status), None
        elif status == "running":
            index, sort = k.running, True
        else:
            index = k.all
        with guard(self._safe_url, "list_jobs"):
            rows = await self._scripts.list_jobs(
                self._redis,
                index,
                sort,
                limit,
                LIST_SCAN_BOUND,
                status,
                where.task,
                where.queue,
                where.before,
            )
        return [_codec.record(job_id.decode(), flat) for job_id, flat in rows]

    async def queue_stats(self) -> list[QueueStats]:
        k = self.keys
        with guard(self._safe_url, "queue_stats"):
            client = self._redis
            members = cast(set[bytes], await client.smembers(k.queues))
            names = sorted(n.decode() for n in members)
            if not names:
                return []
            async with client.pipeline(transaction=True) as pipe:
                for name in names:
                    pipe.zcard(k.ready(name))
                pipe.hgetall(k.queue_counts)
                *ready, counts = await pipe.execute()
            ages = await self._scripts.queue_ages(client, names)
        return _codec.queue_stats(names, ready, counts, ages)

    async def stats(self, since: float) -> list[StatRow]:
        k = self.keys
        first = math.ceil(since / 60)
        with guard(self._safe_url, "stats"):
            client = self._redis
            found = cast(list[bytes], await client.zrangebyscore(k.counter_minutes, first, "+inf"))
            minutes = [int(m) for m in found]
            if not minutes:
                return []
            async with client.pipeline(transaction=False) as pipe:
                for minute in minutes:
                    pipe.hgetall(k.counters(minute))
                buckets = await pipe.execute()
        return _codec.stat_rows(minutes, buckets)
