"""Enqueue on Redis: ``enqueue.lua`` stores a chunk of jobs (unique holds, gates, a duly group,
the hand-off to an idle worker) in one call; a batch is several chunks sent in one round trip.

Async callers go through the connection's auto-pipeline; blocking callers (sync ``enqueue``
with no event loop) through their thread's own connection; with ``?wait_replicas=`` both go
through ``_durable.py`` (the calls, then WAIT, on one connection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any, Final

from redis.cluster import RedisCluster as SyncRedisCluster
from redis.exceptions import NoScriptError, ResponseError

from duly._records import EnqueueResult, NewGroup, NewJob, StoredGroup
from duly.backends.redis import _codec
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._keys import Keyspace
from duly.backends.redis._migrate import Formats
from duly.backends.redis._scripts import Value, opt

__all__ = ["ENQUEUE_CHUNK", "enqueue", "enqueue_blocking", "store_group"]

#: Jobs per enqueue script call; a bigger batch is sent as several calls in one pipeline.
ENQUEUE_CHUNK: Final = 500


def _keys(k: Keyspace) -> tuple[str, ...]:
    return (k.due, k.all, k.queues, k.queue_counts, k.unique, k.running)


def _chunks(
    k: Keyspace, jobs: Sequence[NewJob], group: NewGroup | None = None
) -> Iterator[list[Value]]:
    """The ARGV of each chunk of enqueueing ``jobs``, built lazily (the blocking path sends
    a chunk while the next is built). Consecutive jobs sharing every field but id and payload
    form one group (enqueue.lua), so a bulk enqueue of one task sends ~2 values per job.
    A duly ``group`` (members and callback in ``jobs``) is sent as one chunk: one call."""
    chunk = ENQUEUE_CHUNK if group is None else max(1, len(jobs))
    for start in range(0, len(jobs), chunk):
        args: list[Value] = [k.prefix, k.wake]
        if group is None:
            args.append("")
        else:
            args += (
                group.id,
                group.key or "",
                float(group.created_at),
                group.retention,
                group.name or "",
            )
        shared: tuple[Value, ...] = ()
        count_at = 0
        for job in jobs[start : start + chunk]:
            header: tuple[Value, ...] = (
                job.task,
                job.queue,
                job.max_attempts,
                job.key or "",
                job.priority,
                float(job.enqueued_at),
                float(job.scheduled_for),
            )
            if job.unique_key is None and job.gate is None and job.expires_at is None:
                header += ("",)  # plain jobs: no concurrency fields, no expiry
            else:
                header += (
                    "c",
                    job.unique_key or "",
                    job.unique_until,
                    opt(job.unique_expires_at),
                    job.gate or "",
                    job.gate_limit,
                    opt(job.expires_at),
                    "1" if job.debounce else "",
                )
            if header != shared:
                shared = header
                count_at = len(args)
                args.append(0)
                args += header
            args[count_at] += 1  # type: ignore[operator]
            args += (job.id, job.payload)
        yield args


def _found(size: int, reply: list[Any], found: list[bytes | None]) -> None:
    """Extend ``found`` by one chunk of ``size`` jobs from its enqueue.lua reply."""
    base = len(found)
    found += [None] * size
    for i in range(0, len(reply), 2):
        found[base + reply[i] - 1] = reply[i + 1]


def _collect(jobs: Sequence[NewJob], replies: list[Any]) -> list[bytes | None]:
    """Per job, None if stored, else the id of the job it deduplicated to (its own, already
    existing; or the holder of its unique key)."""
    found: list[bytes | None] = []
    for start, reply in zip(range(0, len(jobs), ENQUEUE_CHUNK), replies, strict=True):
        _found(min(ENQUEUE_CHUNK, len(jobs) - start), reply, found)
    return found


async def _send(conn: RedisConnection, jobs: Sequence[NewJob]) -> list[bytes | None]:
    """Every chunk is its own script call, made in this loop turn: the auto-pipeline sends
    them in one round trip (with whatever else this turn calls). A connection error repeats
    the whole flush (the client's retry policy); chunks that had run dedupe by id, so nothing
    is stored twice."""
    keys = _keys(conn.keys)
    calls = [conn.call(conn.scripts.enqueue, keys, args) for args in _chunks(conn.keys, jobs)]
    replies = await asyncio.gather(*calls, return_exceptions=True)
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
    return _collect(jobs, replies)


async def enqueue(conn: RedisConnection, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
    """See ``Backend.enqueue``."""
    if not jobs:
        return []
    with conn.guard("enqueue"):
        if conn.durability is None:
            found = await _send(conn, jobs)
        else:
            chunks = list(_chunks(conn.keys, jobs))
            replies = await conn.durability.enqueue(
                conn.client, conn.scripts.enqueue, _keys(conn.keys), chunks, conn.safe_url
            )
            found = _collect(jobs, replies)
    return _codec.results(jobs, found)


def _send_blocking(
    conn: Any, head: tuple[Value, ...], source: str, chunks: Iterator[list[Value]]
) -> list[Any]:
    """The calls of ``chunks`` on a sync redis-py connection the caller owns (same script,
    one round trip). The connection is left clean: every reply read, or disconnected."""
    sent: list[list[Value]] = []

    def send_all() -> list[Any]:
        for args in sent:
            conn.send_command(*head, *args)
        for args in chunks:
            sent.append(args)
            conn.send_command(*head, *args)
        replies: list[Any] = []
        for _ in sent:
            try:
                replies.append(conn.read_response())
            except ResponseError as error:  # read on: the next replies are in the socket
                replies.append(error)
        return replies

    try:
        replies: list[Any] = conn.retry.call_with_retry(send_all, lambda _e: conn.disconnect())
        for i, reply in enumerate(replies):
            if isinstance(reply, NoScriptError):
                conn.send_command("SCRIPT", "LOAD", source)
                conn.read_response()
                conn.send_command(*head, *sent[i])
                replies[i] = conn.read_response()
    except BaseException:
        conn.disconnect()
        raise
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def _send_blocking_cluster(
    conn: RedisConnection, client: SyncRedisCluster, jobs: Sequence[NewJob]
) -> list[Any]:
    """On a cluster: each chunk is one script call that the sync cluster client sends to the
    namespace's node (following redirections)."""
    script, keys = conn.scripts.enqueue, _keys(conn.keys)
    replies: list[Any] = []
    for args in _chunks(conn.keys, jobs):
        try:
            replies.append(client.evalsha(script.sha, len(keys), *keys, *args))
        except NoScriptError:
            client.script_load(script.source)
            replies.append(client.evalsha(script.sha, len(keys), *keys, *args))
    return replies


def enqueue_blocking(
    conn: RedisConnection, formats: Formats, jobs: Sequence[NewJob]
) -> list[EnqueueResult]:
    """Blocking twin of ``enqueue`` for sync callers (thread-safe; no event loop). The first
    one checks the storage format, as ``open`` does."""
    if not jobs:
        return []
    script, keys = conn.scripts.enqueue, _keys(conn.keys)
    with conn.guard("enqueue"):
        if not formats.ready:
            formats.ensure_blocking(conn.blocking.evaluate)
        if conn.durability is not None:
            chunks = list(_chunks(conn.keys, jobs))
            replies = conn.durability.enqueue_blocking(
                conn.blocking, script, keys, chunks, conn.safe_url
            )
        elif conn.topology.kind == "cluster":
            replies = _send_blocking_cluster(conn, conn.blocking.cluster(), jobs)
        else:
            head: tuple[Value, ...] = ("EVALSHA", script.sha, len(keys), *keys)
            replies = _send_blocking(
                conn.blocking.connection(), head, script.source, _chunks(conn.keys, jobs)
            )
    return _codec.results(jobs, _collect(jobs, replies))


async def store_group(
    conn: RedisConnection, group: NewGroup, jobs: Sequence[NewJob]
) -> StoredGroup | list[bytes | None]:
    """Store a duly group: ``jobs`` (members, then the callback if any) in one call; per job,
    None if stored, else the id it deduplicated to; or, when a stored group has the group's
    name, that group (nothing stored)."""
    [args] = _chunks(conn.keys, jobs, group)
    keys = _keys(conn.keys)
    if conn.durability is None:
        reply = await conn.call(conn.scripts.enqueue, keys, args)
    else:
        [reply] = await conn.durability.enqueue(
            conn.client, conn.scripts.enqueue, keys, [args], conn.safe_url
        )
    if reply and reply[0] == 0:  # the name is taken: {0, its group's id, its members}
        members = reply[2].decode()
        return StoredGroup(reply[1].decode(), members.split(",") if members else [], True)
    found: list[bytes | None] = []
    _found(len(jobs), reply, found)
    return found
