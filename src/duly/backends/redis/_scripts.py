"""The Lua scripts of the Redis backend: loaded from ``lua/*.lua``, registered once, typed.

Each script is ``lua/_common.lua`` (shared helpers) followed by the script's own file; its header
documents KEYS, ARGV and the invariants it keeps. Scripts are registered with ``SCRIPT LOAD`` at
``open`` and called with ``EVALSHA``; a ``NOSCRIPT`` reply (the server restarted or flushed its
script cache) loads the script again and repeats the call, which is safe because a ``NOSCRIPT``
call did nothing.

The wrappers take plain values and return what Redis answered, barely shaped; turning hashes
and rows into records is ``codec.py``'s job.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
from collections.abc import Awaitable, Iterator, Sequence
from importlib import resources
from typing import Any, Final

from redis.asyncio.cluster import RedisCluster
from redis.cluster import RedisCluster as SyncRedisCluster
from redis.exceptions import NoScriptError, ResponseError

from duly._freshness_state import FreshnessRequest
from duly._records import NewGroup, NewJob, Outcome, RateRequest
from duly.backends.redis._connection import AutoPipeline, Client
from duly.backends.redis._keys import Keyspace

__all__ = ["ENQUEUE_CHUNK", "Script", "Scripts"]

#: Jobs per enqueue script call; a bigger batch is sent as several calls in one pipeline.
ENQUEUE_CHUNK: Final = 500
#: Job hashes queue_ages.lua reads at most per queue (see its header).
AGES_BUDGET: Final = 1000
#: Seconds a per-minute counter bucket lives in Redis (24 h of history + slack).
COUNTER_TTL: Final = 25 * 3600

#: A flat ``HGETALL`` reply as Lua returns it: field, value, field, value...
RawHash = list[bytes]
Value = str | bytes | int | float


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name).read_text(encoding="utf-8")


_DEFINES = re.compile(r"^local (?:function )?(\w+(?:\s*,\s*\w+)*)", re.MULTILINE)


def _helpers_for(body: str, common: str) -> str:
    """The definitions of ``common`` that ``body`` uses, directly or through another, in
    their order. Each call of a script runs all its top-level definitions (a closure or a
    table each), so a script carries only what it needs: a one-job enqueue costs Redis ~15 %
    less than with every helper."""
    blocks: list[tuple[set[str], str]] = []
    for chunk in re.split(r"\n(?=local )", common):  # a block: one top-level `local`
        match = _DEFINES.match(chunk)
        names = set(re.split(r"\s*,\s*", match.group(1))) if match else set()
        blocks.append((names, chunk))
    needed: set[int] = set()
    used = set(re.findall(r"\w+", body))
    changed = True
    while changed:
        changed = False
        for i, (names, chunk) in enumerate(blocks):
            if i not in needed and names & used:
                needed.add(i)
                used |= set(re.findall(r"\w+", chunk))
                changed = True
    return "\n".join(chunk for i, (_, chunk) in enumerate(blocks) if i in needed)


@functools.cache
def _compiled(name: str) -> tuple[str, str]:
    """Script ``name``'s source (its helpers, then its body) and SHA1: read once per process,
    not once per backend."""
    body = _read(f"{name}.lua")
    common = "\n".join(_read(f) for f in ("_common.lua", "_freshness.lua", "_handoff.lua"))
    source = _helpers_for(body, common) + "\n" + body
    return source, hashlib.sha1(source.encode()).hexdigest()


class Script:
    """One Lua script, addressed by its SHA1 once loaded."""

    __slots__ = ("name", "sha", "source")

    def __init__(self, name: str) -> None:
        self.name = name
        self.source, self.sha = _compiled(name)

    async def load(self, client: Client) -> None:
        """Register the script (on a cluster: on every primary)."""
        sha = await client.script_load(self.source)
        if (sha.decode() if isinstance(sha, bytes) else sha) != self.sha:  # pragma: no cover
            raise RuntimeError(f"Redis computed another SHA1 for script {self.name}")

    async def __call__(self, client: Client, keys: Sequence[str], args: Sequence[Value]) -> Any:
        """Run the script (loading it first if Redis does not know it)."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await self.load(client)
            return await client.evalsha(self.sha, len(keys), *keys, *args)


def _opt(value: float | None) -> Value:
    return "" if value is None else value


class Scripts:
    """Typed calls of every script for one keyspace."""

    def __init__(self, keys: Keyspace) -> None:
        self.keys = keys
        self.enqueue_script = Script("enqueue")
        self.claim_script = Script("claim")
        self.heartbeat_script = Script("heartbeat")
        self.finish_script = Script("finish")
        self.promote_script = Script("promote_due")
        self.recover_script = Script("recover")
        self.cancel_script = Script("cancel")
        self.retry_script = Script("retry")
        self.purge_script = Script("purge")
        self.list_script = Script("list_jobs")
        self.rate_script = Script("reserve_rate")
        self.freshness_script = Script("freshness")
        self.freshness_scopes_script = Script("freshness_scopes")
        self.ages_script = Script("queue_ages")
        self.all = (
            self.enqueue_script,
            self.claim_script,
            self.heartbeat_script,
            self.finish_script,
            self.promote_script,
            self.recover_script,
            self.cancel_script,
            self.retry_script,
            self.purge_script,
            self.list_script,
            self.rate_script,
            self.freshness_script,
            self.freshness_scopes_script,
            self.ages_script,
        )

        self.pipeline = AutoPipeline()

    def _call(
        self, script: Script, client: Client, keys: Sequence[str], args: Sequence[Value]
    ) -> Awaitable[Any]:
        """One script call: auto-pipelined on one server; on a cluster, sent by the cluster
        client to the node of its keys' slot (it follows MOVED/ASK)."""
        if isinstance(client, RedisCluster):
            return script(client, keys, args)
        return self.pipeline.call(client, script, keys, args)

    async def load(self, client: Client) -> None:
        """Register every script."""
        for script in self.all:
            await script.load(client)

    def enqueue_chunks(
        self, jobs: Sequence[NewJob], group: NewGroup | None = None
    ) -> Iterator[list[Value]]:
        """The ARGV of each chunk of enqueueing ``jobs``, built lazily (the blocking path sends
        a chunk while the next is built). Consecutive jobs sharing every field but id and payload
        form one group (enqueue.lua), so a bulk enqueue of one task sends ~2 values per job.
        A duly ``group`` (members and callback in ``jobs``) is sent as one chunk: one call."""
        k = self.keys
        chunk = ENQUEUE_CHUNK if group is None else max(1, len(jobs))
        for start in range(0, len(jobs), chunk):
            args: list[Value] = [k.prefix, k.wake]
            if group is None:
                args.append("")
            else:
                args += (group.id, group.key or "", float(group.created_at), group.retention)
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
                if job.unique_key is None and job.gate is None:
                    header += ("",)  # plain jobs: no concurrency fields
                else:
                    header += (
                        "c",
                        job.unique_key or "",
                        job.unique_until,
                        _opt(job.unique_expires_at),
                        job.gate or "",
                        job.gate_limit,
                    )
                if header != shared:
                    shared = header
                    count_at = len(args)
                    args.append(0)
                    args += header
                args[count_at] += 1  # type: ignore[operator]
                args += (job.id, job.payload)
            yield args

    @staticmethod
    def _found(size: int, reply: list[Any], found: list[bytes | None]) -> None:
        """Extend ``found`` by one chunk of ``size`` jobs from its enqueue.lua reply."""
        base = len(found)
        found += [None] * size
        for i in range(0, len(reply), 2):
            found[base + reply[i] - 1] = reply[i + 1]

    async def enqueue(self, client: Client, jobs: Sequence[NewJob]) -> list[bytes | None]:
        """Store ``jobs``; per job, None if stored, else the id of the job it deduplicated to
        (its own, already existing; or the holder of its unique key).

        Every chunk is its own script call, made in this loop turn: the auto-pipeline sends
        them in one round trip (with whatever else this turn calls). A connection error
        repeats the whole flush (the client's retry policy); chunks that had run dedupe by id,
        so nothing is stored twice."""
        keys = self.enqueue_keys()
        calls = [
            self._call(self.enqueue_script, client, keys, args)
            for args in self.enqueue_chunks(jobs)
        ]
        replies = await asyncio.gather(*calls, return_exceptions=True)
        for reply in replies:
            if isinstance(reply, BaseException):
                raise reply
        return self.collect(jobs, replies)

    def enqueue_blocking(self, conn: Any, jobs: Sequence[NewJob]) -> list[bytes | None]:
        """Blocking twin of ``enqueue`` on a sync redis-py connection the caller owns (same
        script, same round trip). The connection is left clean: every reply read, or
        disconnected."""
        script, keys = self.enqueue_script, self.enqueue_keys()
        head = ("EVALSHA", script.sha, len(keys), *keys)
        chunks: list[list[Value]] = []
        lazy = self.enqueue_chunks(jobs)

        def send_all() -> list[Any]:
            for args in chunks:
                conn.send_command(*head, *args)
            for args in lazy:
                chunks.append(args)
                conn.send_command(*head, *args)
            replies: list[Any] = []
            for _ in chunks:
                try:
                    replies.append(conn.read_response())
                except ResponseError as error:  # read on: the next replies are in the socket
                    replies.append(error)
            return replies

        try:
            replies = conn.retry.call_with_retry(send_all, lambda _error: conn.disconnect())
            for i, reply in enumerate(replies):
                if isinstance(reply, NoScriptError):
                    conn.send_command("SCRIPT", "LOAD", script.source)
                    conn.read_response()
                    conn.send_command(*head, *chunks[i])
                    replies[i] = conn.read_response()
        except BaseException:
            conn.disconnect()
            raise
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return self.collect(jobs, replies)

    async def enqueue_group(
        self, client: Client, group: NewGroup, jobs: Sequence[NewJob]
    ) -> list[bytes | None]:
        """Store a duly group: ``jobs`` (members, then the callback if any) in one call."""
        [args] = self.enqueue_chunks(jobs, group)
        reply = await self._call(self.enqueue_script, client, self.enqueue_keys(), args)
        return self.collect_group(jobs, reply)

    def collect_group(self, jobs: Sequence[NewJob], reply: list[Any]) -> list[bytes | None]:
        """``collect`` for a group's single enqueue call."""
        found: list[bytes | None] = []
        self._found(len(jobs), reply, found)
        return found

    def enqueue_blocking_cluster(
        self, client: SyncRedisCluster, jobs: Sequence[NewJob]
    ) -> list[bytes | None]:
        """``enqueue_blocking`` on a cluster: each chunk is one script call that the sync
        cluster client sends to the namespace's node (following redirections)."""
        script, keys = self.enqueue_script, self.enqueue_keys()
        replies: list[Any] = []
        for args in self.enqueue_chunks(jobs):
            try:
                replies.append(client.evalsha(script.sha, len(keys), *keys, *args))
            except NoScriptError:
                client.script_load(script.source)
                replies.append(client.evalsha(script.sha, len(keys), *keys, *args))
        return self.collect(jobs, replies)

    def enqueue_keys(self) -> tuple[str, ...]:
        k = self.keys
        return (k.due, k.all, k.queues, k.queue_counts, k.unique, k.running)

    def collect(self, jobs: Sequence[NewJob], replies: list[Any]) -> list[bytes | None]:
        found: list[bytes | None] = []
        for start, reply in zip(range(0, len(jobs), ENQUEUE_CHUNK), replies, strict=True):
            self._found(min(ENQUEUE_CHUNK, len(jobs) - start), reply, found)
        return found

    async def claim(
        self,
        client: Client,
        worker: str,
        queues: Sequence[str],
        limit: int,
        now: float,
        lease_until: float,
        idle: tuple[float, float, bool] | None = None,
    ) -> tuple[list[bytes], list[tuple[bytes, list[Any]]]]:
        """The rows in the worker's inbox (``codec.handed``; only with ``idle``), then per
        claimed job its id and its row, in claim.lua's order (``codec.ClaimRow``).

        ``idle`` = (seconds, lease_until, withdraw): claim in idle mode (claim.lua), first
        withdrawing the worker's registration if ``withdraw``, and registering the worker idle
        for that long when nothing is claimed; a job handed to it gets that lease.
        """
        k = self.keys
        idle_args: tuple[Value, Value, Value] = ("", "", "")
        if idle is not None:
            seconds, handed_lease, withdraw = idle
            idle_args = (
                max(1, round(seconds * 1000)),
                float(handed_lease),
                "1" if withdraw else "",
            )
        reply = await self._call(
            self.claim_script,
            client,
            (k.running, k.queue_counts, k.unique),
            [k.prefix, worker, limit, float(now), float(lease_until), *idle_args, *queues],
        )
        handed: list[bytes] = []
        if idle is not None:
            handed, reply = reply
        return handed, list(zip(reply[::2], reply[1::2], strict=True))

    async def heartbeat(
        self, client: Client, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[bytes]:
        k = self.keys
        reply: list[bytes] = await self._call(
            self.heartbeat_script,
            client,
            (k.running, k.workers),
            [k.prefix, worker, float(now), float(lease_until), *job_ids],
        )
        return reply

    async def finish(
        self, client: Client, worker: str, outcomes: Sequence[Outcome], now: float
    ) -> list[bool]:
        k = self.keys
        minute = int(now // 60)
        args: list[Value] = [k.prefix, worker, float(now), minute, COUNTER_TTL, k.wake]
        for o in outcomes:
            args += (
                o.job_id,
                o.kind,
                o.result or b"",
                o.errors or b"",
                _opt(o.run_at),
                _opt(o.expire_at),
                _opt(o.rate_slot),
            )
        reply = await self._call(
            self.finish_script,
            client,
            (
                k.running,
                k.due,
                k.expiry,
                k.queue_counts,
                k.counter_minutes,
                k.counters(minute),
                k.unique,
            ),
            args,
        )
        return [flag == 1 for flag in reply]

    async def promote_due(self, client: Client, now: float, limit: int) -> tuple[int, bytes | None]:
        k = self.keys
        moved, first = await self._call(
            self.promote_script,
            client,
            (k.due, k.queue_counts),
            [k.prefix, float(now), limit, k.wake],
        )
        return int(moved), first

    async def recover(
        self, client: Client, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[tuple[bytes, int]]:
        k = self.keys
        minute = int(now // 60)
        reply = await self._call(
            self.recover_script,
            client,
            (
                k.running,
                k.expiry,
                k.queue_counts,
                k.counter_minutes,
                k.counters(minute),
                k.unique,
            ),
            [
                k.prefix,
                float(now),
                max_lost,
                limit,
                float(failed_expire_at),
                minute,
                COUNTER_TTL,
                k.wake,
            ],
        )
        return [(job_id, int(flag)) for job_id, flag in zip(reply[::2], reply[1::2], strict=True)]

    async def cancel(
        self, client: Client, job_id: str, now: float, expire_at: float | None
    ) -> bool:
        k = self.keys
        reply = await self._call(
            self.cancel_script,
            client,
            (k.running, k.due, k.expiry, k.queue_counts, k.unique),
            [k.prefix, job_id, float(now), _opt(expire_at), k.wake],
        )
        return bool(reply == 1)

    async def retry(self, client: Client, job_id: str, now: float) -> bool:
        k = self.keys
        reply = await self._call(
            self.retry_script, client, (k.expiry, k.unique), [k.prefix, job_id, k.wake, float(now)]
        )
        return bool(reply == 1)

    async def reserve_rate(
        self, client: Client, requests: Sequence[RateRequest], now: float
    ) -> list[bytes]:
        args: list[Value] = [self.keys.prefix, float(now)]
        for r in requests:
            args += (r.key, float(r.interval), r.burst, float(r.not_before))
        # KEYS[1] only routes the call to the namespace's slot (on a cluster).
        route = (self.keys.rate(requests[0].key),)
        reply: list[bytes] = await self._call(self.rate_script, client, route, args)
        return reply

    async def purge(
        self,
        client: Client,
        now: float,
        limit: int,
        counter_cutoff: float,
        worker_cutoff: float,
        events_keep: float,
    ) -> int:
        k = self.keys
        reply = await self._call(
            self.purge_script,
            client,
            (k.expiry, k.all, k.counter_minutes, k.workers, k.worker_info),
            [
                k.prefix,
                float(now),
                limit,
                float(counter_cutoff),
                float(worker_cutoff),
                float(events_keep),
            ],
        )
        return int(reply)

    async def list_jobs(
        self,
        client: Client,
        index: str,
        sort: bool,
        limit: int,
        bound: int,
        status: str | None,
        task: str | None,
        queue: str | None,
        before: str | None = None,
    ) -> list[tuple[bytes, RawHash]]:
        reply = await self._call(
            self.list_script,
            client,
            (index,),
            [
                self.keys.prefix,
                "sort" if sort else "lex",
                limit,
                bound,
                status or "",
                task or "",
                queue or "",
                before or "",
            ],
        )
        return list(zip(reply[::2], reply[1::2], strict=True))

    async def freshness(
        self, client: Client, requests: Sequence[FreshnessRequest], now: float
    ) -> list[list[Any]]:
        """Per request, the scope's row as freshness.lua returns it."""
        k = self.keys
        args: list[Value] = [k.prefix, k.wake, float(now)]
        for r in requests:
            job = r.job
            args += (
                r.name,
                r.scope,
                r.reason,
                "1" if r.active else "0",
                float(r.max_staleness),
                float(r.full_every),
                float(r.max_backoff),
                float(r.offset),
                float(r.jitter),
                job.id,
                job.task,
                job.queue,
                job.max_attempts,
                job.key or "",
                job.priority,
                job.payload,
                r.delta_payload,
            )
        reply: list[list[Any]] = await self._call(
            self.freshness_script, client, (k.all, k.queues), args
        )
        return reply

    async def freshness_scopes(
        self, client: Client, mode: str, name: str, now: float, stale_only: bool, limit: int
    ) -> list[Any]:
        """freshness_scopes.lua's reply: scope rows (mode ``scopes``) or due scopes (``due``)."""
        k = self.keys
        args: list[Value] = [k.prefix, mode, name, float(now), "1" if stale_only else "0", limit]
        # KEYS[1] only routes the call to the namespace's slot (on a cluster).
        route = (k.fresh_index(name),)
        reply: list[Any] = await self._call(self.freshness_scopes_script, client, route, args)
        return reply

    async def queue_ages(self, client: Client, queues: Sequence[str]) -> list[bytes | None]:
        """Per queue: the ready time of its longest-waiting claimable job, or None."""
        # KEYS[1] only routes the call to the namespace's slot (on a cluster).
        route = (self.keys.queues,)
        args: list[Value] = [self.keys.prefix, AGES_BUDGET, *queues]
        reply = await self._call(self.ages_script, client, route, args)
        return [raw or None for raw in reply]
