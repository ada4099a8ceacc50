"""Lookups on Redis: one job (HGETALL), listings (``list_jobs.lua`` over an index), queue
statistics (``queue_ages.lua`` and the queue counts) and the per-minute counters.

Listing (``list_jobs``) reads, newest first: the key's index when ``key`` is set; the status
index for a finished status; the running set for ``running``; else the index of every job.
Fields not served by the index are filtered while reading, examining at most
``LIST_SCAN_BOUND`` index entries per call, so a filter matching only old jobs may return fewer
than ``limit`` (never a scan of the whole keyspace).
"""

from __future__ import annotations

import math
from typing import Final, cast

from duly._records import FINISHED_STATUSES, JobFilter, JobRecord, QueueStats, StatRow
from duly.backends.redis import _codec
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._scripts import Value

__all__ = ["AGES_BUDGET", "LIST_SCAN_BOUND", "get_job", "list_jobs", "queue_stats", "stats"]

#: Most index entries ``list_jobs`` examines in one call when filtering.
LIST_SCAN_BOUND: Final = 10_000
#: Job hashes queue_ages.lua reads at most per queue (see its header).
AGES_BUDGET: Final = 1000


async def get_job(conn: RedisConnection, job_id: str) -> JobRecord | None:
    """See ``Backend.get_job``."""
    with conn.guard("get_job"):
        fields = cast(dict[bytes, bytes], await conn.client.hgetall(conn.keys.job(job_id)))
    return _codec.record(job_id, fields) if fields else None


async def list_jobs(conn: RedisConnection, where: JobFilter, limit: int) -> list[JobRecord]:
    """See ``Backend.list_jobs`` and the module docstring."""
    if limit <= 0:
        return []
    k = conn.keys
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
    args: list[Value] = [
        k.prefix,
        "sort" if sort else "lex",
        limit,
        LIST_SCAN_BOUND,
        status or "",
        where.task or "",
        where.queue or "",
        where.before or "",
    ]
    with conn.guard("list_jobs"):
        reply = await conn.call(conn.scripts.list_jobs, (index,), args)
    rows = zip(reply[::2], reply[1::2], strict=True)
    return [_codec.record(job_id.decode(), flat) for job_id, flat in rows]


async def queue_stats(conn: RedisConnection) -> list[QueueStats]:
    """See ``Backend.queue_stats``."""
    k = conn.keys
    with conn.guard("queue_stats"):
        client = conn.client
        members = cast(set[bytes], await client.smembers(k.queues))
        names = sorted(n.decode() for n in members)
        if not names:
            return []
        async with client.pipeline(transaction=True) as pipe:
            for name in names:
                pipe.zcard(k.ready(name))
            pipe.hgetall(k.queue_counts)
            *ready, counts = await pipe.execute()
        # KEYS[1] only routes the call to the namespace's slot (on a cluster).
        reply = await conn.call(
            conn.scripts.queue_ages, (k.queues,), [k.prefix, AGES_BUDGET, *names]
        )
    ages: list[bytes | None] = [raw or None for raw in reply]
    return _codec.queue_stats(names, ready, counts, ages)


async def stats(conn: RedisConnection, since: float) -> list[StatRow]:
    """See ``Backend.stats``: the per-minute counter buckets from ``since``."""
    k = conn.keys
    first = math.ceil(since / 60)
    with conn.guard("stats"):
        client = conn.client
        found = cast(list[bytes], await client.zrangebyscore(k.counter_minutes, first, "+inf"))
        minutes = [int(m) for m in found]
        if not minutes:
            return []
        async with client.pipeline(transaction=False) as pipe:
            for minute in minutes:
                pipe.hgetall(k.counters(minute))
            buckets = await pipe.execute()
    return _codec.stat_rows(minutes, buckets)
