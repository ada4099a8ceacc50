"""The SQLite backend: duly's embedded default, safe for several processes on one machine.

Every instance owns one connection, created and used only on one dedicated thread (``_thread``),
so the event loop never waits on SQLite; a worker that waits for work adds a watcher thread with
its own connection (see ``wait_for_work``), and a busy writer a checkpointer thread with its own
(``_connection.Checkpointer``). The connection is in autocommit mode (``isolation_level=None``)
and every state change runs inside an explicit ``BEGIN IMMEDIATE`` transaction: the write lock
is taken before the first read, so two processes can never claim, finish or recover the same
job. State changes queued together (a worker's finish and its next claim) share one transaction
(group commit, see ``_thread``). The database runs in WAL mode (readers never block the writer)
with ``synchronous=NORMAL`` (durable against process crashes; a power cut may lose the last
commits) and a 10 s ``busy_timeout``, beyond which a locked database is reported as
``BackendUnavailable``.

This module is the facade: each method hands over to its seam, a module of functions of the
``SqliteConnection`` (``_connection``: the connection, its thread, the write transaction):
``_enqueue``, ``_claim``, ``_finish`` (finish, heartbeat), ``_recover``, ``_operator`` (cancel,
retry, drop), ``_lookups``, ``_workers``, ``_maintenance`` (promote, purge, stats rows),
``_concurrency`` (unique holds, gates, rate slots), ``_wake`` (what ``wait_for_work`` waits
for), ``_migrate`` and ``_rows``; each capability is an object over the same connection
(``_freshness``, ``_groups``, ``_dependencies``, ``_events``, ``_webhooks``, ``_progress``,
``_schedules``, ``_pausing``). SQL lives in ``queries/`` (named queries, a file per capability) and
``migrations/`` (applied by ``migrate()``; ``schema.sql`` shows the result).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from duly._errors import ConfigurationError
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
from duly.backends.sqlite import (
    _claim,
    _concurrency,
    _enqueue,
    _finish,
    _lookups,
    _maintenance,
    _migrate,
    _operator,
    _recover,
    _wake,
    _workers,
)
from duly.backends.sqlite._bulk import SqliteBulk
from duly.backends.sqlite._connection import QUERIES, SqliteConnection, path_from_url
from duly.backends.sqlite._dependencies import SqliteDependencies
from duly.backends.sqlite._events import SqliteEvents
from duly.backends.sqlite._freshness import SqliteFreshness
from duly.backends.sqlite._groups import SqliteGroups
from duly.backends.sqlite._pausing import SqlitePausing
from duly.backends.sqlite._progress import SqliteProgress
from duly.backends.sqlite._schedules import SqliteSchedules
from duly.backends.sqlite._watches import SqliteWatches
from duly.backends.sqlite._webhooks import SqliteWebhooks

__all__ = ["SqliteBackend", "path_from_url"]

#: ``UPDATE ... RETURNING`` appeared in SQLite 3.35.
MIN_SQLITE: Final = (3, 35, 0)


class SqliteBackend:
    """Jobs in one SQLite file (see the module docstring for the concurrency model)."""

    def __init__(self, url: str) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise ConfigurationError(
                f"the SQLite backend needs SQLite >= 3.35 (UPDATE ... RETURNING); this Python "
                f"links SQLite {sqlite3.sqlite_version}"
            )
        self.url = url
        #: One database file holds one app's data: the file is the namespace.
        self.namespace = "duly"
        self.path = path_from_url(url)
        self._db = SqliteConnection(self.path, _migrate.migrate)
        self._signal = _wake.WorkSignal(self.path)  # wait_for_work's wake-ups
        #: Queues whose last claim met a gated job: their claims take the claim statement.
        self._gated_queues: set[str] = set()
        # Capabilities (duly.backends.capability): one object each, over this connection.
        self.freshness = SqliteFreshness(self._db, self._signal)
        self.groups = SqliteGroups(self._db, self._signal)
        self.dependencies = SqliteDependencies(self._db, self._signal)
        self.events = SqliteEvents(self._db)
        self.webhooks = SqliteWebhooks(self._db)
        self.pausing = SqlitePausing(self._db, self._signal)
        self.bulk = SqliteBulk(self._db, self._signal)
        self.watches = SqliteWatches(self._db)
        self.progress = SqliteProgress(self._db)
        self.schedules = SqliteSchedules(self._db)

    def __repr__(self) -> str:
        return f"SqliteBackend({self.url!r})"

    def clone(self) -> SqliteBackend:
        """A new, unopened backend on the same database file."""
        return SqliteBackend(self.url)

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        """Open the connection (on the backend's thread) and apply pending migrations."""
        await self._db.open()

    async def close(self) -> None:
        """Close the connection and stop the thread (once the calls queued before ran).
        Idempotent."""
        self._signal.stop()
        await self._db.close()

    async def migrate(self) -> list[int]:
        """Apply pending migrations in one transaction; return the versions applied."""
        return await self._db.run(_migrate.migrate, "migrating")

    async def storage_format(self) -> StorageFormat:
        """The highest migration applied (the format) and the last one this duly has."""
        return await self._db.run(_migrate.storage_format, "reading the storage format")

    async def ping(self) -> None:
        """Read the database file; raise BackendUnavailable if it cannot be read."""
        await self._db.run(lambda conn: conn.execute(QUERIES["ping"]).fetchone(), "ping")

    async def drop(self) -> None:
        """Delete every job, counter, worker, queue name and rate-limit state (the schema
        stays)."""
        await self._db.transaction(_operator.drop, "drop")

    # -- producing -------------------------------------------------------------------------
    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Store a batch in one transaction; an id already stored is reported deduplicated, a
        unique key held by an active job reports that job (see ``Backend.enqueue``)."""
        return await _enqueue.enqueue(self._db, self._signal, jobs)

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue``: runs on the caller's thread, on its own connection
        (SQLite connections are per thread), so a sync caller pays no thread hop."""
        return _enqueue.enqueue_blocking(self._db, jobs)

    def close_blocking(self) -> None:
        """Close the connections of the blocking calls (every thread's)."""
        self._db.close_blocking()

    # -- consuming -------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        """Take up to ``limit`` queued jobs, ``queues`` in order, in one transaction; park the
        jobs found with their gate full."""
        return await _claim.claim(
            self._db, self._signal, self._gated_queues, worker, queues, limit, now, lease_until
        )

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        """Mark the worker alive, extend its leases; return the ids it no longer runs."""
        return await _finish.heartbeat(self._db, worker, job_ids, now, lease_until)

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """Apply outcomes of jobs still running under ``worker``, in one transaction."""
        return await _finish.finish(self._db, self._signal, worker, outcomes, now)

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        """Queue up to ``limit`` due scheduled/retrying jobs; return (moved, next due time)."""
        return await _maintenance.promote(self._db, self._signal, now, limit)

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        """Recover running jobs whose lease lapsed, each exactly once (one transaction)."""
        return await _recover.recover(
            self._db, self._signal, now, max_lost, limit, failed_expire_at
        )

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        """Return once another connection committed since the last claim began, or this
        instance made jobs claimable, or after ``timeout`` (any commit counts: see ``_wake``)."""
        await _wake.wait_for_work(self._db, self._signal, timeout)

    # -- workers ---------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        """Announce (or re-announce) a worker process."""
        register = _workers.register_worker_tx(worker, now, info)
        await self._db.transaction(register, "register_worker")

    async def unregister_worker(self, worker: str) -> None:
        """Remove a worker that stopped cleanly."""
        await self._db.transaction(_workers.unregister_worker_tx(worker), "unregister_worker")

    async def workers(self) -> list[WorkerRecord]:
        """Registered workers by id."""
        return await self._db.run(_workers.workers, "workers")

    # -- operator actions ------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        """Cancel an active job (parked or not); False if it is finished or unknown. A gated
        job frees its slot (or its turn, if queued) for the best parked job of its gate."""
        return await _operator.cancel(self._db, self._signal, job_id, now, expire_at)

    async def retry(self, job_id: str, now: float) -> bool:
        """Re-queue a failed or cancelled job with fresh attempts; it takes its unique key
        again, or stays as it is (False) if another active job holds that key."""
        return await _operator.retry(self._db, self._signal, job_id, now)

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        """Reserve one GCRA slot per request, in order, in one transaction; their start times."""
        return await _concurrency.reserve_rate(self._db, requests, now)

    async def purge(self, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
        """Delete up to ``limit`` expired finished jobs, counter buckets older than ``keep``
        seconds, workers not seen for as long and rate-limit state whose tat has passed; then
        give the file's freed pages back."""
        return await _maintenance.purge(self._db, now, limit, keep)

    # -- lookups ---------------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        """One job by id, or None."""
        return await self._db.run(_lookups.get_job(job_id), "get_job")

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        """Jobs matching ``where``, newest first; by key or status through their index."""
        if limit <= 0:
            return []
        return await self._db.run(_lookups.list_jobs(where, limit), "list_jobs")

    async def queue_stats(self) -> list[QueueStats]:
        """Every queue ever enqueued to, with its active counts, by name."""
        return await self._db.run(_lookups.queue_stats, "queue_stats")

    async def stats(self, since: float) -> list[StatRow]:
        """Per-minute counters of minutes starting at or after ``since``."""
        return await self._db.run(_lookups.stats(since), "stats")
