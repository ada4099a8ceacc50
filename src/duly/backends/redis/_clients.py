"""How the Redis backend talks to Redis: the async client and its pool, the blocking callers'
per-thread connections (made again in a forked child), the auto-pipeline, and the error guard.

Nothing here knows a key or a job: ``scripts.py`` says what to send, this module sends it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from redis import Connection as SyncConnection
from redis import ConnectionPool as SyncConnectionPool
from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster as SyncRedisCluster
from redis.exceptions import NoScriptError, ResponseError
from redis.retry import Retry as SyncRetry

from duly._errors import BackendUnavailable
from duly.backends.redis._topology import Topology

if TYPE_CHECKING:
    from duly.backends.redis._scripts import Script, Value

__all__ = [
    "UNAVAILABLE",
    "AutoPipeline",
    "BlockingConnections",
    "Client",
    "guard",
    "make_client",
    "reply_of",
]

_MAX_CONNECTIONS: Final = 64
_POOL_WAIT: Final = 20.0  # seconds a caller waits for a free pooled connection
#: The errors that mean "Redis cannot be reached", turned into ``BackendUnavailable``. On a
#: cluster: the slot's primary is down or being failed over (CLUSTERDOWN, MASTERDOWN, TRYAGAIN,
#: no node serves the slot yet, or redirections kept failing); the client refreshes its slot
#: map and a later call goes to the new primary.
UNAVAILABLE: Final = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.ClusterError,
    redis_errors.TryAgainError,
    redis_errors.SlotNotCoveredError,
    TimeoutError,
    OSError,
)
#: An async client of one server (or of a Sentinel-managed primary), or of a cluster.
Client = Redis | RedisCluster


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


@contextmanager
def guard(url: str, doing: str) -> Iterator[None]:
    """Turn an unreachable Redis into ``BackendUnavailable`` naming ``url`` (a safe one)."""
    try:
        yield
    except UNAVAILABLE as exc:
        raise BackendUnavailable(f"Redis at {url} is unavailable ({doing}): {exc}") from exc
    except redis_errors.RedisClusterException as exc:
        # The cluster client's "cannot be connected" (no startup node answered) chains the
        # connection error; its other RedisClusterExceptions are misuse, not an outage.
        if not isinstance(exc.__cause__, UNAVAILABLE):
            raise
        raise BackendUnavailable(f"Redis at {url} is unavailable ({doing}): {exc}") from exc


def make_client(topology: Topology) -> Client:
    """The async client of ``topology``: for one server, a ``redis.asyncio`` client owning a
    blocking pool (many concurrent callers wait for a connection instead of failing with "Too
    many connections"); for a cluster or Sentinel, redis-py's own clients (``topology.py``)."""
    if topology.kind == "cluster":
        return topology.cluster_client()
    if topology.kind == "sentinel":
        return topology.sentinel_client()
    url = topology.url
    extra: dict[str, Any] = {}
    connection_class = _connection_class(url)
    if connection_class is not None:
        extra["connection_class"] = connection_class
    pool = BlockingConnectionPool.from_url(
        url,
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
    return Redis.from_pool(pool)  # the client owns (and closes) the pool


class BlockingConnections:
    """One sync connection per thread for the blocking calls. Not from a pool: a pool's
    checkout asks the OS for the pid and polls the socket on every call (a third of a one-job
    enqueue's client time). A connection closes when its thread ends (garbage) or at
    ``close``; a forked child makes its own. On a cluster, one thread-safe sync cluster
    client instead (it keeps a pool per node and follows redirections)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.url = topology.url
        self.connections: weakref.WeakSet[SyncConnection] = weakref.WeakSet()
        self._factory: SyncConnectionPool | None = None  # only to make connections
        self._cluster: tuple[SyncRedisCluster, int] | None = None  # and its fork generation
        self._local = threading.local()
        self._lock = threading.Lock()

    def cluster(self) -> SyncRedisCluster:
        """The sync cluster client (made on first use, and again after a fork)."""
        held = self._cluster
        if held is None or held[1] != _fork_generation:
            with self._lock:
                held = self._cluster
                if held is None or held[1] != _fork_generation:
                    held = (self.topology.sync_cluster_client(), _fork_generation)
                    self._cluster = held
        return held[0]

    def _make_factory(self) -> SyncConnectionPool:
        if self.topology.kind == "sentinel":
            return self.topology.sync_sentinel_pool()
        return SyncConnectionPool.from_url(
            self.url,
            decode_responses=False,
            retry=SyncRetry(ExponentialBackoff(cap=0.2, base=0.02), 2),
            socket_connect_timeout=5,
        )

    def connection(self) -> SyncConnection:
        """This thread's own connection (made on first use, and again after a fork)."""
        local = self._local
        conn: SyncConnection | None = getattr(local, "conn", None)
        if conn is None or local.generation != _fork_generation:
            with self._lock:
                if self._factory is None:
                    self._factory = self._make_factory()
                factory = self._factory
                conn = factory.connection_class(**factory.connection_kwargs)
                self.connections.add(conn)
            local.conn, local.generation = conn, _fork_generation
        return conn

    def evaluate(self, source: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the Lua ``source`` once (EVAL: for rare calls, no script to register) on this
        thread's connection, or through the cluster client on a cluster."""
        if self.topology.kind == "cluster":
            return self.cluster().eval(source, len(keys), *keys, *args)
        conn: Any = self.connection()  # redis-py: untyped
        try:
            conn.send_command("EVAL", source, len(keys), *keys, *args)
            return conn.read_response()
        except BaseException:
            conn.disconnect()
            raise

    def close(self) -> None:
        """Close every thread's connection (a later call makes a new one)."""
        with self._lock:
            connections: list[Any] = list(self.connections)  # redis-py: untyped
            self.connections.clear()
            self._local = threading.local()
            cluster, self._cluster = self._cluster, None
        for conn in connections:
            conn.disconnect()
        if cluster is not None:
            cluster[0].close()


async def reply_of(pending: Awaitable[Any]) -> Any:
    """A reply read from a connection, an error reply returned rather than raised."""
    try:
        return await pending
    except ResponseError as error:  # read on: the next replies are in the socket
        return error


class AutoPipeline:
    """Script calls made in the same event-loop turn travel to Redis together: one write, one
    round trip (as ioredis's and Lettuce's auto-pipelining). A worker's finish and claim wake
    together when jobs end, so each such pair costs one round trip instead of two; each
    call still runs as its own script, atomically, in the order made.

    The first call of a turn schedules a flush task; calls made before it runs join it. A
    connection error fails every call of the flush (after the client's retries: a repeated
    call is safe, as for any retried call); an error reply fails its own call only.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[Script, Sequence[str], Sequence[Value], asyncio.Future[Any]]]
        self._pending = []
        self._flushes: set[asyncio.Task[None]] = set()

    def call(
        self, client: Redis, script: Script, keys: Sequence[str], args: Sequence[Value]
    ) -> asyncio.Future[Any]:
        """Queue one script call for this turn's flush; its future gets the reply."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            flush = loop.create_task(self._flush(client))
            self._flushes.add(flush)
            flush.add_done_callback(self._flushes.discard)
        self._pending.append((script, keys, args, future))
        return future

    async def _flush(self, client: Redis) -> None:
        # A call whose caller was cancelled before this turn is not sent at all.
        batch = [call for call in self._pending if not call[3].cancelled()]
        self._pending = []
        if not batch:
            return
        try:
            replies = await self._send(client, batch)
        except BaseException as error:
            for *_, future in batch:
                if future.done():
                    continue
                if isinstance(error, Exception):
                    future.set_exception(error)
                else:
                    future.cancel()
            if not isinstance(error, Exception):
                raise
            return
        for (script, keys, args, future), reply in zip(batch, replies, strict=True):
            if future.done():
                continue  # its caller is gone (cancelled)
            if isinstance(reply, NoScriptError):
                try:
                    reply = await script(client, keys, args)  # loads, then runs
                except Exception as error:
                    reply = error
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    @staticmethod
    async def _send(
        client: Redis,
        batch: list[tuple[Script, Sequence[str], Sequence[Value], asyncio.Future[Any]]],
    ) -> list[Any]:
        pool: Any = client.connection_pool  # redis-py leaves pools and connections untyped
        conn = await pool.get_connection()
        commands = [
            ("EVALSHA", script.sha, len(keys), *keys, *args) for script, keys, args, _ in batch
        ]

        async def send_all() -> list[Any]:
            await conn.send_packed_command(conn.pack_commands(commands))
            return [await reply_of(conn.read_response()) for _ in commands]

        async def disconnect(_error: Exception) -> None:
            await conn.disconnect()

        try:
            replies: list[Any] = await conn.retry.call_with_retry(send_all, disconnect)
            return replies
        except BaseException:
            await conn.disconnect()
            raise
        finally:
            await pool.release(conn)
