"""Shared bits of the peer modules: the bench Redis, the counter, version lookup."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

BENCH_REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/5")
BENCH_PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/bench")
COUNTER_KEY = "bench:count"
LAT_KEY = "bench:lat"

IO_SECONDS = 0.02  # = bench.harness.IO_SECONDS (not imported: workers import only this)
PG_POOL_SIZE = 10  # connections per worker process for the "pg" I/O-bound job
PG_QUERY = "SELECT count(*) FROM pg_class WHERE relkind = 'r'"

_sync: Any = None
_async: Any = None
_pg_sync: Any = None
_pg_async: Any = None
_pg_sync_lock = threading.Lock()  # threaded workers' first jobs race to make the pool


def sync_redis() -> Any:
    """A module-level redis-py client (made lazily, so it is made after a fork)."""
    global _sync
    if _sync is None:
        import redis

        _sync = redis.Redis.from_url(BENCH_REDIS)
    return _sync


def async_redis() -> Any:
    global _async
    if _async is None:
        import redis.asyncio

        # a blocking pool: a worker running many jobs at once waits for a connection instead
        # of failing with redis-py's MaxConnectionsError (the plain pool's limit is 100)
        _async = redis.asyncio.Redis(
            connection_pool=redis.asyncio.BlockingConnectionPool.from_url(
                BENCH_REDIS, max_connections=50
            )
        )
    return _async


def incr() -> None:
    sync_redis().incr(COUNTER_KEY)


def stamp() -> None:
    sync_redis().rpush(LAT_KEY, repr(time.time()))


class _TurnCounter:
    """The async jobs' counter: one INCRBY per event-loop turn for every job that counted in
    it, sent after the job returned (the job does not wait for it).

    Why not one INCR per job, awaited: through redis-py's pooled asyncio client each command
    cost about 10 ms at 100 concurrent jobs (the pool's lock and condition hand off through the
    event loop), so a job queue with many slots was measured by its instrument instead of by
    itself (duly at 100 slots: 1,880 jobs/s with a per-job INCR, 4,140 without). Awaited
    even once per turn, the round trip still lengthened every job (20 ms became 21.3 ms at 64
    slots). A count may land a round trip after its job ended: the harness polls every 5 ms
    and measures thousands of jobs. Every library's async job counts through this one.
    """

    def __init__(self) -> None:
        self._pending = 0
        self._sending: set[asyncio.Task[None]] = set()  # strong references until sent

    def add(self) -> None:
        self._pending += 1
        if self._pending == 1:
            task = asyncio.ensure_future(self._store())
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _store(self) -> None:
        await asyncio.sleep(0)  # the jobs ending in this turn join
        n, self._pending = self._pending, 0
        await async_redis().incrby(COUNTER_KEY, n)


_counter = _TurnCounter()


async def aincr() -> None:
    _counter.add()


async def astamp() -> None:
    await async_redis().rpush(LAT_KEY, repr(time.time()))


def sleep_incr() -> None:
    """The sync I/O-bound job: wait ``IO_SECONDS``, then count."""
    time.sleep(IO_SECONDS)
    incr()


async def asleep_incr() -> None:
    """The async I/O-bound job: wait ``IO_SECONDS``, then count."""
    await asyncio.sleep(IO_SECONDS)
    await aincr()


def pg_incr() -> None:
    """The sync PostgreSQL job: one query on a pooled connection, then count."""
    global _pg_sync
    if _pg_sync is None:
        with _pg_sync_lock:
            if _pg_sync is None:
                from psycopg_pool import ConnectionPool

                _pg_sync = ConnectionPool(BENCH_PG, min_size=1, max_size=PG_POOL_SIZE, open=True)
    with _pg_sync.connection() as conn:
        conn.execute(PG_QUERY).fetchone()
    incr()


async def apg_incr() -> None:
    """The async PostgreSQL job: one query on a pooled connection, then count."""
    global _pg_async
    if _pg_async is None:
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(BENCH_PG, min_size=1, max_size=PG_POOL_SIZE, open=False)
        _pg_async = (pool, asyncio.ensure_future(pool.open()))  # concurrent first jobs wait on it
    pool, opening = _pg_async
    await opening
    async with pool.connection() as conn:
        await (await conn.execute(PG_QUERY)).fetchone()
    await aincr()


def dist_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


class RedisPeer:
    store = "redis"
    has_bulk = False
    drain_modes = ["default"]

    async def reset(self) -> None:
        sync_redis().flushdb()
        await self.after_reset()

    async def after_reset(self) -> None:
        pass


def pg_truncate(tables: list[str]) -> None:
    import psycopg

    with psycopg.connect(BENCH_PG, autocommit=True) as conn:
        existing = {
            r[0]
            for r in conn.execute(
                "select tablename from pg_tables where schemaname = 'public'"
            ).fetchall()
        }
        todo = [t for t in tables if t in existing]
        if todo:
            conn.execute(f"TRUNCATE {', '.join(todo)} RESTART IDENTITY CASCADE")
