"""The Redis backend: every state change is one Lua script call (see ``_keys.py``, ``lua/``).

One ``RedisBackend`` belongs to one event loop. It holds a ``redis.asyncio`` client (hiredis
parser when installed) and, once a worker waits for work, one pub/sub connection subscribed to
the namespace's wake channel; waiting never holds a pooled connection.

This module is the facade: each protocol method is a call of the seam module that does it,
given the backend's ``RedisConnection`` (``_connection.py``: client, scripts, keys, errors).
The seams: ``_migrate`` (storage format, checked and upgraded at ``open``), ``_enqueue``,
``_claim``, ``_finish`` (heartbeat and outcomes), ``_recover``, ``_operator`` (cancel, retry),
``_lookups``, ``_workers``, ``_maintenance`` (purge), ``_concurrency`` (rate slots), ``_wake``
(waiting), ``_codec`` (replies to records); one module per capability: ``_freshness``,
``_groups``, ``_events``, ``_webhooks``, ``_progress``, ``_schedules``, ``_handoff``, ``_pausing``.
Transport and layout: ``_clients``, ``_topology``, ``_durable``, ``_keys``, ``_scripts`` (the
Lua and its includes).
"""

from __future__ import annotations

from collections.abc import Sequence

from duly._records import (
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
from duly.backends.redis import (
    _claim,
    _concurrency,
    _connection,
    _enqueue,
    _finish,
    _lookups,
    _maintenance,
    _operator,
    _recover,
    _workers,
)
from duly.backends.redis._bulk import RedisBulk
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._dependencies import RedisDependencies
from duly.backends.redis._durable import Durability
from duly.backends.redis._events import RedisEvents
from duly.backends.redis._freshness import RedisFreshness
from duly.backends.redis._groups import RedisGroups
from duly.backends.redis._handoff import RedisHandoff
from duly.backends.redis._lookups import LIST_SCAN_BOUND
from duly.backends.redis._migrate import Formats, open_namespace
from duly.backends.redis._pausing import RedisPausing
from duly.backends.redis._progress import RedisProgress
from duly.backends.redis._schedules import RedisSchedules
from duly.backends.redis._watches import RedisWatches
from duly.backends.redis._webhooks import RedisWebhooks

__all__ = ["LIST_SCAN_BOUND", "RedisBackend"]


class RedisBackend:
    """Jobs in Redis under ``{namespace}:`` keys (one cluster slot per namespace): one server,
    a Redis Cluster (``redis+cluster://``) or a Sentinel-managed primary (``redis+sentinel://``;
    see ``_topology.py``)."""

    def __init__(
        self, url: str, namespace: str = "duly", durability: Durability | None = None
    ) -> None:
        self._conn = conn = RedisConnection(url, namespace, durability)
        self.url = url
        self.namespace = namespace
        #: ``?wait_replicas=``: every enqueue waits for that many replicas (``_durable.py``).
        self.durability = durability
        self.keys = conn.keys
        self.topology = conn.topology
        self._formats = Formats(conn.keys, f"Redis namespace {namespace!r} at {conn.safe_url}")
        # Capabilities (duly.backends.capability): one object each, over this connection.
        self.freshness = RedisFreshness(conn)
        self.groups = RedisGroups(conn)
        self.dependencies = RedisDependencies(conn)
        self.events = RedisEvents(conn)
        self.webhooks = RedisWebhooks(conn)
        self.pausing = RedisPausing(conn)
        self.bulk = RedisBulk(conn)
        self.watches = RedisWatches(conn)
        self.progress = RedisProgress(conn)
        self.schedules = RedisSchedules(conn)
        #: Direct hand-off (``_handoff.py``) on one server; a cluster or Sentinel only wakes.
        self.handoff = RedisHandoff(conn) if conn.topology.kind == "server" else None

    def __repr__(self) -> str:
        return f"RedisBackend({self._conn.safe_url!r}, namespace={self.namespace!r})"

    def clone(self) -> RedisBackend:
        """A new, unopened backend on the same server and namespace."""
        return RedisBackend(self.url, self.namespace, self.durability)

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        await open_namespace(self._conn, self._formats)

    async def migrate(self) -> list[int]:
        """Redis keeps no schema: check the server answers, load the scripts, and check (and
        upgrade) the storage format (``_migrate.py``)."""
        await self.open()
        return []

    async def storage_format(self) -> StorageFormat:
        with self._conn.guard("storage_format"):
            return await self._formats.read(self._conn.client)

    async def close(self) -> None:
        await self._conn.wake.stop()
        if self.handoff is not None:
            await self.handoff.close()
        await self._conn.close_client()

    async def ping(self) -> None:
        await _connection.ping(self._conn)

    async def drop(self) -> None:
        await _connection.drop(self._conn)

    # -- producing -------------------------------------------------------------------------
    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        return await _enqueue.enqueue(self._conn, jobs)

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue`` for sync callers (thread-safe; no event loop)."""
        return _enqueue.enqueue_blocking(self._conn, self._formats, jobs)

    def close_blocking(self) -> None:
        """Close the connections of the blocking calls."""
        self._conn.blocking.close()

    # -- consuming -------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        return await _claim.claim(self._conn, worker, queues, limit, now, lease_until)

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        return await _finish.heartbeat(self._conn, worker, job_ids, now, lease_until)

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        return await _finish.finish(self._conn, worker, outcomes, now)

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        return await _claim.promote_due(self._conn, now, limit)

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        return await _recover.recover(self._conn, now, max_lost, limit, failed_expire_at)

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        await self._conn.wake.wait(self._conn.client, queues, timeout)

    # -- workers ---------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        await _workers.register_worker(self._conn, worker, now, info)

    async def unregister_worker(self, worker: str) -> None:
        await _workers.unregister_worker(self._conn, worker)

    async def workers(self) -> list[WorkerRecord]:
        return await _workers.workers(self._conn)

    # -- operator actions ------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        return await _operator.cancel(self._conn, job_id, now, expire_at)

    async def retry(self, job_id: str, now: float) -> bool:
        return await _operator.retry(self._conn, job_id, now)

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        return await _concurrency.reserve_rate(self._conn, requests, now)

    async def purge(self, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
        return await _maintenance.purge(self._conn, now, limit, keep)

    # -- introspection ---------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        return await _lookups.get_job(self._conn, job_id)

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        return await _lookups.list_jobs(self._conn, where, limit)

    async def queue_stats(self) -> list[QueueStats]:
        return await _lookups.queue_stats(self._conn)

    async def stats(self, since: float) -> list[StatRow]:
        return await _lookups.stats(self._conn, since)
