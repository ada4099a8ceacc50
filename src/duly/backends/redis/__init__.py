"""The Redis backend: every state change is one Lua script call (see ``keys.py``, ``lua/``).

One ``RedisBackend`` belongs to one event loop. It holds a ``redis.asyncio`` client (hiredis
parser when installed) and, once a worker waits for work, one pub/sub connection subscribed to
the namespace's wake channel; waiting never holds a pooled connection.

Listing (``list_jobs``) reads, newest first: the key's index when ``key`` is set; the status
index for a finished status; the running set for ``running``; else the index of every job.
Fields not served by the index are filtered while reading, examining at most
``LIST_SCAN_BOUND`` index entries per call, so a filter matching only old jobs may return fewer
than ``limit`` (never a scan of the whole keyspace).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Final, cast
from urllib.parse import urlsplit, urlunsplit

from redis import Connection as SyncConnection
from redis import ConnectionPool as SyncConnectionPool
from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.retry import Retry as SyncRetry

from duly.backends.redis.keys import Keyspace
from duly.backends.redis.scripts import RawHash, Scripts
from duly.errors import BackendUnavailable
from duly.records import (
    FINISHED_STATUSES,
    EnqueueResult,
    JobFilter,
    JobRecord,
    NewJob,
    Outcome,
    QueueStats,
    RateRequest,
    Recovered,
    StatRow,
    WorkerRecord,
)

__all__ = ["LIST_SCAN_BOUND", "RedisBackend"]

#: Most index entries ``list_jobs`` examines in one call when filtering.
LIST_SCAN_BOUND: Final = 10_000
_DROP_BATCH: Final = 1000
_MAX_CONNECTIONS: Final = 64
_POOL_WAIT: Final = 20.0  # seconds a caller waits for a free pooled connection
_UNAVAILABLE = (redis_errors.ConnectionError, redis_errors.TimeoutError, TimeoutError, OSError)
_SEP: Final = "\x1f"
_OUTCOME_FIELDS: Final = {"s": "succeeded", "f": "failed", "r": "retried"}
_OUTCOME_KINDS: Final = frozenset({"succeeded", "failed", "retry", "release", "again"})


_fork_generation = 0  # bumped in a forked child: connections made before belong to the parent


def _forked() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


try:  # hiredis packs commands in C; redis.asyncio packs them in Python (slow for many args)
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - hiredis is part of the redis extra
    _hiredis_pack = None  # type: ignore[assignment]


def _connection_class(url: str) -> type[AbstractConnection] | None:
    """The connection class for ``url``, packing commands with hiredis when it is installed."""
    if _hiredis_pack is None:
        return None
    scheme = urlsplit(url).scheme.lower()
    if scheme == "unix":
        return _FastUnixConnection
    return _FastSSLConnection if scheme == "rediss" else _FastConnection


class _HiredisPacking:
    def pack_command(self, *args: Any) -> list[bytes]:
        head = args[0]
        if isinstance(head, str):  # "SCRIPT LOAD" -> "SCRIPT", "LOAD"
            args = (*head.encode().split(), *args[1:])
        elif b" " in head:
            args = (*head.split(), *args[1:])
        assert _hiredis_pack is not None
        return [_hiredis_pack(args)]


class _FastConnection(_HiredisPacking, Connection):
    pass


class _FastSSLConnection(_HiredisPacking, SSLConnection):
    pass


class _FastUnixConnection(_HiredisPacking, UnixDomainSocketConnection):
    pass


def _safe_url(url: str) -> str:
    """``url`` without its password (kept: scheme, user, host, port, path)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=user + host))


def _float(raw: bytes | None) -> float | None:
    return None if raw is None else float(raw)


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode()


def _record(job_id: str, flat: RawHash | dict[bytes, bytes]) -> JobRecord:
    h = flat if isinstance(flat, dict) else dict(zip(flat[::2], flat[1::2], strict=True))
    return JobRecord(
        id=job_id,
        task=h[b"t"].decode(),
        queue=h[b"q"].decode(),
        payload=h.get(b"p", b""),
        status=h[b"s"].decode(),
        attempts=int(h.get(b"a", 0)),
        max_attempts=int(h[b"m"]),
        key=_text(h.get(b"k")),
        priority=int(h.get(b"r", 0)),
        enqueued_at=float(h[b"e"]),
        scheduled_for=_float(h.get(b"d")),
        started_at=_float(h.get(b"b")),
        finished_at=_float(h.get(b"f")),
        result=h.get(b"o"),
        errors=h.get(b"x"),
        worker=_text(h.get(b"w")),
        lease_until=_float(h.get(b"l")),
        lost=int(h.get(b"n", 0)),
        expire_at=_float(h.get(b"z")),
        rate_slot=_float(h.get(b"y")),
    )


def _claimed(
    job_id: bytes, row: list[Any], worker: str, now: float, lease_until: float
) -> JobRecord:
    """A claimed job's record from its claim.lua row (fields by position, see claim.lua)."""
    task, queue, payload, attempts, max_attempts, key, priority, enqueued_at = row[:8]
    scheduled_for, result, errors, lost, expire_at, rate_slot = row[8:]
    return JobRecord(
        id=job_id.decode(),
        task=task.decode(),
        queue=queue.decode(),
        payload=payload or b"",
        status="running",
        attempts=attempts,
        max_attempts=int(max_attempts),
        key=None if key is None else key.decode(),
        priority=0 if priority is None else int(priority),
        enqueued_at=float(enqueued_at),
        scheduled_for=None if scheduled_for is None else float(scheduled_for),
        started_at=now,
        result=result,
        errors=errors,
        worker=worker,
        lease_until=lease_until,
        lost=0 if lost is None else int(lost),
        expire_at=None if expire_at is None else float(expire_at),
        rate_slot=None if rate_slot is None else float(rate_slot),
    )


def _results(jobs: Sequence[NewJob], found: Sequence[bytes | None]) -> list[EnqueueResult]:
    """One ``EnqueueResult`` per job from the enqueue script's answer (see ``Scripts.enqueue``)."""
    return [
        EnqueueResult(job.id) if other is None else EnqueueResult(other.decode(), True)
        for job, other in zip(jobs, found, strict=True)
    ]


class RedisBackend:
    """Jobs in Redis under ``{namespace}:`` keys (one cluster slot per namespace)."""

    def __init__(self, url: str, namespace: str = "duly") -> None:
        self.url = url
        self.namespace = namespace
        self.keys = Keyspace(namespace)
        self._scripts = Scripts(self.keys)
        self._safe_url = _safe_url(url)
        self._client: Redis | None = None
        self._loaded = False
        # wait_for_work: one pub/sub connection, a listener task, and who waits for what.
        self._sync_factory: SyncConnectionPool | None = None  # only to make connections
        self._sync_connections: weakref.WeakSet[SyncConnection] = weakref.WeakSet()
        self._sync_local = threading.local()
        self._sync_lock = threading.Lock()
        self._pubsub: PubSub | None = None
        self._listener: asyncio.Task[None] | None = None
        self._pending: set[str] = set()
        self._waiters: list[tuple[frozenset[str], asyncio.Future[None]]] = []

    def __repr__(self) -> str:
        return f"RedisBackend({self._safe_url!r}, namespace={self.namespace!r})"

    # -- plumbing --------------------------------------------------------------------------
    @property
    def _redis(self) -> Redis:
        if self._client is None:
            # A blocking pool: many concurrent callers wait for a connection instead of
            # failing with "Too many connections".
            extra: dict[str, Any] = {}
            connection_class = _connection_class(self.url)
            if connection_class is not None:
                extra["connection_class"] = connection_class
            pool = BlockingConnectionPool.from_url(
                self.url,
                **extra,
                max_connections=_MAX_CONNECTIONS,
                timeout=_POOL_WAIT,
                decode_responses=False,
                # Fail fast when Redis is down: the worker has its own backoff. A retried call
                # whose first send did reach Redis is harmless: enqueue dedupes by id, a
                # repeated finish is dropped, and jobs of a lost claim reply are recovered
                # when their lease lapses (never held by two workers).
                retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
                socket_connect_timeout=5,
            )
            self._client = Redis.from_pool(pool)  # the client owns (and closes) the pool
        return self._client

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except _UNAVAILABLE as exc:
            raise BackendUnavailable(
                f"Redis at {self._safe_url} is unavailable ({doing}): {exc}"
            ) from exc

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        with self._guard("open"):
            client = self._redis
            await client.ping()
            if not self._loaded:
                await self._scripts.load(client)
                self._loaded = True

    async def close(self) -> None:
        await self._stop_listener()
        client, self._client = self._client, None
        self._loaded = False
        if client is not None:
            with suppress(*_UNAVAILABLE):
                await client.aclose()

    async def ping(self) -> None:
        with self._guard("ping"):
            await self._redis.ping()

    async def drop(self) -> None:
        with self._guard("drop"):
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
        with self._guard("enqueue"):
            found = await self._scripts.enqueue(self._redis, jobs)
        return _results(jobs, found)

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue`` for sync callers (thread-safe; no event loop)."""
        if not jobs:
            return []
        with self._guard("enqueue"):
            found = self._scripts.enqueue_blocking(self._blocking_connection(), jobs)
        return _results(jobs, found)

    def _blocking_connection(self) -> SyncConnection:
        """This thread's own connection for blocking calls. Not from a pool: a pool's checkout
        asks the OS for the pid and polls the socket on every call (a third of a one-job
        enqueue's client time). It closes when its thread ends (garbage) or at
        ``close_blocking``; a forked child makes its own."""
        local = self._sync_local
        conn: SyncConnection | None = getattr(local, "conn", None)
        if conn is None or local.generation != _fork_generation:
            with self._sync_lock:
                if self._sync_factory is None:
                    self._sync_factory = SyncConnectionPool.from_url(
                        self.url,
                        decode_responses=False,
                        retry=SyncRetry(ExponentialBackoff(cap=0.2, base=0.02), 2),
                        socket_connect_timeout=5,
                    )
                factory = self._sync_factory
                conn = factory.connection_class(**factory.connection_kwargs)
                self._sync_connections.add(conn)
            local.conn, local.generation = conn, _fork_generation
        return conn

    def close_blocking(self) -> None:
        """Close the connections of the blocking calls."""
        with self._sync_lock:
            connections: list[Any] = list(self._sync_connections)  # redis-py: untyped
            self._sync_connections.clear()
            self._sync_local = threading.local()
        for conn in connections:
            conn.disconnect()

    async def write_raw_payload(self, job_id: str, payload: bytes) -> None:
        """Overwrite a stored payload without any check (tests of corrupt storage)."""
        with self._guard("write_raw_payload"):
            client = self._redis
            if await client.exists(self.keys.job(job_id)):
                await client.hset(self.keys.job(job_id), "p", payload)

    # -- consuming -------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        if limit <= 0 or not queues:
            return []
        with self._guard("claim"):
            rows = await self._scripts.claim(self._redis, worker, queues, limit, now, lease_until)
        now, lease_until = float(now), float(lease_until)
        return [_claimed(job_id, row, worker, now, lease_until) for job_id, row in rows]

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        with self._guard("heartbeat"):
            gone = await self._scripts.heartbeat(self._redis, worker, job_ids, now, lease_until)
        return [job_id.decode() for job_id in gone]

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        if not outcomes:
            return []
        for outcome in outcomes:
            if outcome.kind not in _OUTCOME_KINDS:
                raise ValueError(f"unknown outcome kind {outcome.kind!r}")
        with self._guard("finish"):
            return await self._scripts.finish(self._redis, worker, outcomes, now)

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        with self._guard("promote_due"):
            moved, first = await self._scripts.promote_due(self._redis, now, max(limit, 0))
        return moved, _float(first)

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        if limit <= 0:
            return []
        with self._guard("recover"):
            rows = await self._scripts.recover(self._redis, now, max_lost, limit, failed_expire_at)
        return [Recovered(job_id.decode(), flag == 1, flag == 2) for job_id, flag in rows]

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        wanted = frozenset(queues)
        await self._ensure_listener()
        if self._pending & wanted:
            self._pending -= wanted
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (wanted, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, max(timeout, 0.0))
        except TimeoutError:
            pass
        finally:
            self._waiters.remove(entry)

    async def _ensure_listener(self) -> None:
        if self._listener is not None and not self._listener.done():
            return
        await self._stop_listener()
        with self._guard("subscribe"):
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.keys.wake)
            except BaseException:
                with suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                raise
        self._pubsub = pubsub
        self._listener = asyncio.create_task(self._listen(pubsub), name="duly-redis-wake")

    async def _listen(self, pubsub: PubSub) -> None:
        """Route wake messages to waiters; a message nobody waits for is kept as pending."""
        try:
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is None or message.get("type") != "message":
                    continue
                data = message["data"]
                queue = data.decode() if isinstance(data, bytes) else str(data)
                woke = False
                for wanted, future in self._waiters:
                    if queue in wanted and not future.done():
                        future.set_result(None)
                        woke = True
                if not woke:
                    self._pending.add(queue)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Connection lost (or a bug): wake everyone, so the worker claims (and meets the
            # error there); the next wait subscribes again.
            for _, future in self._waiters:
                if not future.done():
                    future.set_result(None)

    async def _stop_listener(self) -> None:
        listener, self._listener = self._listener, None
        pubsub, self._pubsub = self._pubsub, None
        if listener is not None and not listener.done():
            listener.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await listener
        if pubsub is not None:
            with suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    # -- workers ---------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        k = self.keys
        blob = json.dumps({"s": float(now), "i": info}, default=str)
        with self._guard("register_worker"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zadd(k.workers, {worker: float(now)})
                pipe.hset(k.worker_info, worker, blob)
                await pipe.execute()

    async def unregister_worker(self, worker: str) -> None:
        k = self.keys
        with self._guard("unregister_worker"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zrem(k.workers, worker)
                pipe.hdel(k.worker_info, worker)
                await pipe.execute()

    async def workers(self) -> list[WorkerRecord]:
        k = self.keys
        with self._guard("workers"):
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zrange(k.workers, 0, -1, withscores=True)
                pipe.hgetall(k.worker_info)
                seen, infos = await pipe.execute()
        records = []
        for raw_id, last_seen in seen:
            blob = infos.get(raw_id)
            data: dict[str, Any] = json.loads(blob) if blob else {}
            records.append(
                WorkerRecord(
                    id=raw_id.decode(),
                    started_at=float(data.get("s", last_seen)),
                    last_seen=float(last_seen),
                    info=dict(data.get("i") or {}),
                )
            )
        return records

    # -- operator actions ------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        with self._guard("cancel"):
            return await self._scripts.cancel(self._redis, job_id, now, expire_at)

    async def retry(self, job_id: str, now: float) -> bool:
        with self._guard("retry"):
            return await self._scripts.retry(self._redis, job_id, now)

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        if not requests:
            return []
        with self._guard("reserve_rate"):
            starts = await self._scripts.reserve_rate(self._redis, requests, now)
        return [float(start) for start in starts]

    async def purge(self, now: float, limit: int) -> int:
        cutoff = (now - 86_400) / 60  # counter buckets of minutes before this are deleted
        with self._guard("purge"):
            return await self._scripts.purge(self._redis, now, max(limit, 0), cutoff)

    # -- introspection ---------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        with self._guard("get_job"):
            fields = cast(dict[bytes, bytes], await self._redis.hgetall(self.keys.job(job_id)))
        return _record(job_id, fields) if fields else None

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
        with self._guard("list_jobs"):
            rows = await self._scripts.list_jobs(
                self._redis,
                index,
                sort,
                limit,
                LIST_SCAN_BOUND,
                status,
                where.task,
                where.queue,
            )
        return [_record(job_id.decode(), flat) for job_id, flat in rows]

    async def queue_stats(self) -> list[QueueStats]:
        k = self.keys
        with self._guard("queue_stats"):
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
        stats = []
        for name, queued in zip(names, ready, strict=True):
            parked = max(int(counts.get(f"{name}{_SEP}w".encode(), 0)), 0)
            stats.append(
                QueueStats(
                    name=name,
                    queued=int(queued) + parked,
                    scheduled=max(int(counts.get(f"{name}{_SEP}s".encode(), 0)), 0),
                    running=max(int(counts.get(f"{name}{_SEP}r".encode(), 0)), 0),
                )
            )
        return stats

    async def stats(self, since: float) -> list[StatRow]:
        k = self.keys
        first = math.ceil(since / 60)
        with self._guard("stats"):
            client = self._redis
            found = cast(list[bytes], await client.zrangebyscore(k.counter_minutes, first, "+inf"))
            minutes = [int(m) for m in found]
            if not minutes:
                return []
            async with client.pipeline(transaction=False) as pipe:
                for minute in minutes:
                    pipe.hgetall(k.counters(minute))
                buckets = await pipe.execute()
        rows: dict[tuple[int, str, str], StatRow] = {}
        for minute, bucket in zip(minutes, buckets, strict=True):
            for field, count in bucket.items():
                task, queue, kind = field.decode().rsplit(_SEP, 2)
                row = rows.get((minute, task, queue))
                if row is None:
                    row = rows[minute, task, queue] = StatRow(minute, task, queue)
                name = _OUTCOME_FIELDS.get(kind)
                if name is not None:
                    setattr(row, name, getattr(row, name) + int(count))
        return [rows[key] for key in sorted(rows)]
