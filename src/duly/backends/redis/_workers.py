"""The worker registry on Redis: the ``workers`` zset (last seen) and the ``worker_info`` hash
(what the worker said of itself), written together in one MULTI."""

from __future__ import annotations

from duly._records import WorkerRecord
from duly.backends.redis import _codec
from duly.backends.redis._connection import RedisConnection

__all__ = ["register_worker", "unregister_worker", "workers"]


async def register_worker(
    conn: RedisConnection, worker: str, now: float, info: dict[str, object]
) -> None:
    """See ``Backend.register_worker``."""
    k = conn.keys
    blob = _codec.worker_info(now, info)
    with conn.guard("register_worker"):
        async with conn.client.pipeline(transaction=True) as pipe:
            pipe.zadd(k.workers, {worker: float(now)})
            pipe.hset(k.worker_info, worker, blob)
            await pipe.execute()


async def unregister_worker(conn: RedisConnection, worker: str) -> None:
    """See ``Backend.unregister_worker``."""
    k = conn.keys
    with conn.guard("unregister_worker"):
        async with conn.client.pipeline(transaction=True) as pipe:
            pipe.zrem(k.workers, worker)
            pipe.hdel(k.worker_info, worker)
            await pipe.execute()


async def workers(conn: RedisConnection) -> list[WorkerRecord]:
    """See ``Backend.workers``."""
    k = conn.keys
    with conn.guard("workers"):
        async with conn.client.pipeline(transaction=True) as pipe:
            pipe.zrange(k.workers, 0, -1, withscores=True)
            pipe.hgetall(k.worker_info)
            seen, infos = await pipe.execute()
    return _codec.worker_records(seen, infos)
