"""Shared bits of the peer modules: the bench Redis, the counter, version lookup."""

from __future__ import annotations

import os
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

BENCH_REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/5")
BENCH_PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/bench")
COUNTER_KEY = "bench:count"
LAT_KEY = "bench:lat"

_sync: Any = None
_async: Any = None


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


async def aincr() -> None:
    await async_redis().incr(COUNTER_KEY)


async def astamp() -> None:
    await async_redis().rpush(LAT_KEY, repr(time.time()))


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
