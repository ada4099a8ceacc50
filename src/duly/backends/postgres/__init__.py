"""The PostgreSQL backend: one transaction per state change, SKIP LOCKED claims, LISTEN/NOTIFY.

Layout of the schema (``schema``, default ``duly``): ``jobs`` (one row per job, partial indexes
per hot path), ``stats`` (per-minute counters), ``workers``, ``queues``, ``gates`` (running count
per gate), ``rate_limits`` (GCRA state per key), ``freshness``, ``groups``, ``events``,
``webhooks`` and ``schema_version``: ``schema.sql`` shows it whole, ``migrations/`` build it.
Every query lives in ``queries/`` (one file per capability); ``{schema}`` in it is replaced by
the quoted schema name once, so the same text also runs on a caller's own connection for
transactional enqueue (``backend.transactional``).

Plain jobs (no unique key, no gate) take one statement per call, in autocommit. Concurrency
control adds statements only for the batches that need them, in one transaction: a batch with
unique jobs (``_enqueue``), a gated job leaving ``running`` (``_concurrency.free_gates``),
``reserve_rate``. Wake-ups: every change that may make a job claimable calls
``pg_notify('duly_<schema>', queue)`` inside its transaction; ``wait_for_work`` listens on one
dedicated connection (``_wake``).

This module is the facade: ``PostgresBackend`` owns a ``Connection`` (``_connection``: the
queries, the pools, outages) and a ``Schema`` (``_migrate``), and hands them to the seam
module of each step: ``_enqueue``, ``_claim``, ``_finish``, ``_recover``, ``_operator``,
``_lookups``, ``_workers``, ``_maintenance``, ``_concurrency``, ``_wake``, with ``_rows`` for
the records. Each capability is an object of its own module (``_freshness``, ``_groups``,
``_events``, ``_webhooks``, ``_progress``, ``_schedules``, ``_transactional``, ``_pausing``)
under its key's attribute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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
from duly.backends.base import Backend
from duly.backends.postgres import (
    _claim,
    _concurrency,
    _enqueue,
    _finish,
    _lookups,
    _maintenance,
    _operator,
    _recover,
    _workers,
)
from duly.backends.postgres._bulk import PostgresBulk
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._dependencies import PostgresDependencies
from duly.backends.postgres._events import PostgresEvents
from duly.backends.postgres._freshness import PostgresFreshness
from duly.backends.postgres._groups import PostgresGroups
from duly.backends.postgres._migrate import Schema
from duly.backends.postgres._pausing import PostgresPausing
from duly.backends.postgres._progress import PostgresProgress
from duly.backends.postgres._schedules import PostgresSchedules
from duly.backends.postgres._transactional import PostgresTransactional
from duly.backends.postgres._wake import Listener
from duly.backends.postgres._watches import PostgresWatches
from duly.backends.postgres._webhooks import PostgresWebhooks

__all__ = ["PostgresBackend"]


class PostgresBackend:
    """duly's storage in one PostgreSQL schema (``schema``, created if missing).

    ``url`` is a libpq URL or DSN (``postgresql://user@host:5432/db``). ``open()`` applies the
    pending migrations unless ``auto_migrate`` is False (then run ``duly migrate`` first).
    ``max_connections`` bounds each pool.
    """

    def __init__(
        self,
        url: str,
        schema: str = "duly",
        *,
        auto_migrate: bool = True,
        max_connections: int = 10,
    ) -> None:
        self._db = db = Connection(
            url, schema, max_connections=max_connections, prepare=self._before_open
        )
        self._schema = Schema(db, auto_migrate)
        self._wake = Listener(db.connect, db.channel)
        self.url = url
        self.schema = self.namespace = schema
        # Capabilities (duly.backends.capability): one object each, over this connection.
        self.freshness = PostgresFreshness(db)
        self.groups = PostgresGroups(db)
        self.dependencies = PostgresDependencies(db)
        self.events = PostgresEvents(db)
        self.webhooks = PostgresWebhooks(db)
        self.pausing = PostgresPausing(db)
        self.bulk = PostgresBulk(db)
        self.watches = PostgresWatches(db)
        self.progress = PostgresProgress(db)
        self.schedules = PostgresSchedules(db)
        self.transactional = PostgresTransactional(db, self._schema)

    def __repr__(self) -> str:
        return f"PostgresBackend({self._db.where!r}, schema={self.schema!r})"

    @property
    def auto_migrate(self) -> bool:
        return self._schema.auto_migrate

    @property
    def channel(self) -> str:
        """The NOTIFY channel of wake-ups (``duly_<schema>``)."""
        return self._db.channel

    # -- lifecycle ---------------------------------------------------------------------------
    def clone(self) -> PostgresBackend:
        """A new, unopened backend on the same database, schema and settings."""
        return PostgresBackend(
            self.url,
            self.schema,
            auto_migrate=self.auto_migrate,
            max_connections=self._db.max_connections,
        )

    async def _before_open(self) -> None:
        await self._schema.before_open()

    async def open(self) -> None:
        """Migrate (or check) the schema, then open the pool. Idempotent."""
        await self._db.open()

    async def close(self) -> None:
        """Close the LISTEN connections and the pool (``open`` or any call opens them again)."""
        await self.events.close()
        await self._wake.stop()
        await self._db.close()

    async def migrate(self) -> list[int]:
        return await self._schema.migrate()

    async def storage_format(self) -> StorageFormat:
        return await self._schema.storage_format()

    async def drop(self) -> None:
        await self._schema.drop()

    async def ping(self) -> None:
        await self._db.one("ping", retry=True)

    # -- producing ---------------------------------------------------------------------------
    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        return await _enqueue.enqueue(self._db, jobs)

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        return _enqueue.enqueue_blocking(self._db, self._schema, jobs)

    def close_blocking(self) -> None:
        self._db.close_blocking()

    # -- consuming ---------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        return await _claim.claim(self._db, worker, queues, limit, now, lease_until)

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        return await _claim.promote_due(self._db, now, limit)

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        return await _finish.heartbeat(self._db, worker, job_ids, now, lease_until)

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        return await _finish.finish(self._db, worker, outcomes, now)

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        return await _recover.recover(self._db, now, max_lost, limit, failed_expire_at)

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        await self._wake.wait_for_work(queues, timeout)

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        return await _concurrency.reserve_rate(self._db, requests, now)

    # -- workers -----------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        await _workers.register_worker(self._db, worker, now, info)

    async def unregister_worker(self, worker: str) -> None:
        await _workers.unregister_worker(self._db, worker)

    async def workers(self) -> list[WorkerRecord]:
        return await _workers.workers(self._db)

    # -- operator actions and retention --------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        return await _operator.cancel(self._db, job_id, now, expire_at)

    async def retry(self, job_id: str, now: float) -> bool:
        return await _operator.retry(self._db, job_id, now)

    async def purge(self, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
        return await _maintenance.purge(self._db, now, limit, keep)

    # -- lookups -----------------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        return await _lookups.get_job(self._db, job_id)

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        return await _lookups.list_jobs(self._db, where, limit)

    async def queue_stats(self) -> list[QueueStats]:
        return await _lookups.queue_stats(self._db)

    async def stats(self, since: float) -> list[StatRow]:
        return await _lookups.stats(self._db, since)


if TYPE_CHECKING:

    def _conforms(backend: PostgresBackend) -> Backend:
        return backend  # mypy proves PostgresBackend implements the protocol
