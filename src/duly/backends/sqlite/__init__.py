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

This module is the facade: lifecycle and the hop to the backend's thread. The transactions
themselves are functions of the connection, one module per seam: ``_enqueue`` (producing),
``_claim`` (claim, heartbeat), ``_outcomes`` (finish, cancel, retry), ``_maintenance``
(promote, recover, purge, drop) and ``_introspection`` (reads, workers); ``_concurrency`` holds
the primitives (unique holds, gates, rate slots), ``_tx`` the write transaction and migrations,
``_wakeup`` what ``wait_for_work`` waits for. SQL lives in ``queries.sql`` (named queries) and
``migrations/`` (applied by ``migrate()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from duly._errors import BackendUnavailable, ConfigurationError
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
    _connection,
    _enqueue,
    _introspection,
    _maintenance,
    _outcomes,
)
from duly.backends.sqlite._connection import (
    Checkpointer,
    connect,
    is_unavailable,
    path_from_url,
    unavailable,
)
from duly.backends.sqlite._events import SqliteEvents
from duly.backends.sqlite._freshness import SqliteFreshness
from duly.backends.sqlite._groups import SqliteGroups
from duly.backends.sqlite._thread import SqliteThread
from duly.backends.sqlite._tx import QUERIES as _QUERIES
from duly.backends.sqlite._tx import migrate as _migrate
from duly.backends.sqlite._tx import storage_format as _storage_format
from duly.backends.sqlite._tx import write as _write
from duly.backends.sqlite._wakeup import WorkSignal
from duly.backends.sqlite._webhooks import SqliteWebhooks

__all__ = ["SqliteBackend"]

T = TypeVar("T")

#: ``UPDATE ... RETURNING`` appeared in SQLite 3.35.
MIN_SQLITE: Final = (3, 35, 0)


def _opened(conn: sqlite3.Connection) -> None:
    """Nothing: the backend's thread opened (and migrated) ``conn`` to pass it here."""


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
        self._thread: SqliteThread | None = None
        self._open_lock = threading.Lock()
        self._local = threading.local()  # per-thread connections of the blocking calls
        self._thread_connections: list[sqlite3.Connection] = []
        self._signal = WorkSignal(self.path)  # wait_for_work's wake-ups
        #: Queues whose last claim met a gated job: their claims take the claim statement.
        self._gated_queues: set[str] = set()
        # Capabilities (duly.backends.capability): one object each, over this connection.
        self.freshness = SqliteFreshness(self)
        self.groups = SqliteGroups(self)
        self.events = SqliteEvents(self)
        self.webhooks = SqliteWebhooks(self)

    def __repr__(self) -> str:
        return f"SqliteBackend({self.url!r})"

    def clone(self) -> SqliteBackend:
        """A new, unopened backend on the same database file."""
        return SqliteBackend(self.url)

    # -- plumbing --------------------------------------------------------------------------
    def _unavailable(self, exc: sqlite3.Error, doing: str) -> BackendUnavailable:
        return unavailable(exc, self.path, doing, _connection.BUSY_TIMEOUT_MS)

    async def _run(
        self, fn: Callable[[sqlite3.Connection], T], doing: str, *, write: bool = False
    ) -> T:
        """Run ``fn(connection)`` on the backend's thread, inside one write transaction if
        ``write`` (see ``_thread``); map an unusable database."""
        thread = self._thread
        if thread is None:
            await self.open()
            thread = self._thread
            assert thread is not None
        try:
            future = thread.submit(fn, write=write)
        except RuntimeError as exc:  # thread closed by a concurrent close()
            raise BackendUnavailable(f"SQLite backend for {self.path!r} is closed") from exc
        try:
            result: T = await future
        except sqlite3.Error as exc:
            if is_unavailable(exc):
                raise self._unavailable(exc, doing) from exc
            raise
        return result

    async def _transaction(self, fn: Callable[[sqlite3.Connection], T], doing: str) -> T:
        """Run ``fn`` in a BEGIN IMMEDIATE transaction (shared with the other transactions
        queued at the same time, see ``_thread``: ``fn`` must only act through the connection
        it is given, so that it can run again should the shared transaction roll back)."""
        return await self._run(fn, doing, write=True)

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        """Open the connection (on the backend's thread) and apply pending migrations."""
        with self._open_lock:
            if self._thread is None:
                self._thread = SqliteThread(self._opener(self.path), Checkpointer(self.path))
                weakref.finalize(self, self._thread.stop_soon)
            thread = self._thread
        try:
            await thread.submit(_opened, write=False)
        except RuntimeError as exc:  # closed meanwhile
            raise BackendUnavailable(f"SQLite backend for {self.path!r} is closed") from exc
        except sqlite3.Error as exc:
            if is_unavailable(exc):
                raise self._unavailable(exc, "opening") from exc
            raise

    @staticmethod
    def _opener(path: str) -> Callable[[], sqlite3.Connection]:
        """Opens a migrated connection to ``path`` (a closure holding no backend: a backend
        dropped without close() lets its thread stop, see open())."""

        def open_connection() -> sqlite3.Connection:
            conn = connect(path, _connection.BUSY_TIMEOUT_MS)
            try:
                # Its Checkpointer checkpoints (see there); past this many pages, it does.
                conn.execute(f"PRAGMA wal_autocheckpoint = {_connection.WAL_AUTOCHECKPOINT}")
                _migrate(conn)
            except BaseException:
                conn.close()
                raise
            return conn

        return open_connection

    async def close(self) -> None:
        """Close the connection and stop the thread (once the calls queued before ran).
        Idempotent."""
        with self._open_lock:
            thread, self._thread = self._thread, None
        self._signal.stop()
        if thread is None:
            return
        with contextlib.suppress(RuntimeError):  # already closing
            await thread.close()

    async def migrate(self) -> list[int]:
        """Apply pending migrations in one transaction; return the versions applied."""
        return await self._run(_migrate, "migrating")

    async def storage_format(self) -> StorageFormat:
        """The highest migration applied (the format) and the last one this duly has."""
        return await self._run(_storage_format, "reading the storage format")

    async def ping(self) -> None:
        """Read the database file; raise BackendUnavailable if it cannot be read."""
        await self._run(lambda conn: conn.execute(_QUERIES["ping"]).fetchone(), "ping")

    async def drop(self) -> None:
        """Delete every job, counter, worker, queue name and rate-limit state (the schema
        stays)."""
        await self._transaction(_maintenance.drop, "drop")

    # -- producing -------------------------------------------------------------------------
    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Store a batch in one transaction; an id already stored is reported deduplicated, a
        unique key held by an active job reports that job (see ``Backend.enqueue``)."""
        if not jobs:
            return []
        results = await self._transaction(_enqueue.enqueue_tx(jobs), "enqueue")
        self._signal.note_local_change()
        return results

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue``: runs on the caller's thread, on its own connection
        (SQLite connections are per thread), so a sync caller pays no thread hop."""
        if not jobs:
            return []
        try:
            conn = self._thread_connection()
            return _write(conn, _enqueue.enqueue_tx(jobs))
        except sqlite3.Error as exc:
            if is_unavailable(exc):
                raise self._unavailable(exc, "enqueueing") from exc
            raise

    def _thread_connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = connect(self.path, _connection.BUSY_TIMEOUT_MS)
            try:
                _migrate(conn)
            except BaseException:
                conn.close()
                raise
            self._local.conn, self._local.pid = conn, os.getpid()
            with self._open_lock:
                self._thread_connections.append(conn)
        return conn

    def close_blocking(self) -> None:
        """Close the connections of the blocking calls (every thread's)."""
        with self._open_lock:
            conns, self._thread_connections = self._thread_connections, []
            self._local = threading.local()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    # -- consuming -------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        """Take up to ``limit`` queued jobs, ``queues`` in order, in one transaction; park the
        jobs found with their gate full."""
        began = self._signal.claim_began()
        if limit > 0 and queues:
            gated = self._gated_queues
            version, claimed = await self._transaction(
                lambda conn: _claim.claim(conn, gated, worker, queues, limit, now, lease_until),
                "claim",
            )
        else:
            version, claimed = await self._run(_claim.data_version, "claim"), []
        self._signal.claim_ended(began, version)
        return claimed

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        """Mark the worker alive, extend its leases; return the ids it no longer runs."""
        beat = _claim.heartbeat_tx(worker, job_ids, now, lease_until)
        alive = await self._transaction(beat, "heartbeat")
        return [job_id for job_id in job_ids if job_id not in alive]

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """Apply outcomes of jobs still running under ``worker``, in one transaction."""
        if not outcomes:
            return []
        finish = _outcomes.finish_tx(worker, outcomes, now)
        flags, unparked = await self._transaction(finish, "finish")
        requeued = any(
            o.kind in ("release", "again") for o, ok in zip(outcomes, flags, strict=True) if ok
        )
        if requeued or unparked:
            self._signal.note_local_change()
        return flags

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        """Queue up to ``limit`` due scheduled/retrying jobs; return (moved, next due time)."""
        promote = _maintenance.promote_tx(now, limit)
        moved, earliest = await self._transaction(promote, "promote_due")
        if moved:
            self._signal.note_local_change()
        return moved, earliest

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        """Recover running jobs whose lease lapsed, each exactly once (one transaction)."""
        if limit <= 0:
            return []
        recover = _maintenance.recover_tx(now, max_lost, limit, failed_expire_at)
        recovered, unparked = await self._transaction(recover, "recover")
        if unparked or any(item.requeued for item in recovered):
            self._signal.note_local_change()
        return recovered

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        """Return once another connection committed since the last claim began, or this
        instance made jobs claimable, or after ``timeout``.

        A watcher thread polls ``PRAGMA data_version`` every ``POLL_INTERVAL`` (no server to
        notify us); the event loop just sleeps on a future. Queues are not told apart and any
        commit counts, so a wake-up may be spurious; each change wakes one wait, not every
        later one, so waiting again without claiming does not spin.
        """
        deadline = asyncio.get_running_loop().time() + max(timeout, 0.0)
        if self._thread is None:
            await self.open()  # the watcher must never be the one creating the file
        await self._signal.wait(deadline, self._data_version)

    async def _data_version(self) -> int:
        return await self._run(_claim.data_version, "wait_for_work")

    # -- workers ---------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        """Announce (or re-announce) a worker process."""
        register = _introspection.register_worker_tx(worker, now, info)
        await self._transaction(register, "register_worker")

    async def unregister_worker(self, worker: str) -> None:
        """Remove a worker that stopped cleanly."""
        unregister = _introspection.unregister_worker_tx(worker)
        await self._transaction(unregister, "unregister_worker")

    async def workers(self) -> list[WorkerRecord]:
        """Registered workers by id."""
        return await self._run(_introspection.workers, "workers")

    # -- operator actions ------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        """Cancel an active job (parked or not); False if it is finished or unknown. A gated
        job frees its slot (or its turn, if queued) for the best parked job of its gate."""
        cancel = _outcomes.cancel_tx(job_id, now, expire_at)
        cancelled, unparked = await self._transaction(cancel, "cancel")
        if unparked:
            self._signal.note_local_change()
        return cancelled

    async def retry(self, job_id: str, now: float) -> bool:
        """Re-queue a failed or cancelled job with fresh attempts; it takes its unique key
        again, or stays as it is (False) if another active job holds that key."""
        retried = await self._transaction(_outcomes.retry_tx(job_id, now), "retry")
        if retried:
            self._signal.note_local_change()
        return retried

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        """Reserve one GCRA slot per request, in order, in one transaction; their start times."""
        if not requests:
            return []
        return await self._transaction(
            lambda conn: _concurrency.reserve_rate(conn, requests, now), "reserve_rate"
        )

    async def purge(self, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
        """Delete up to ``limit`` expired finished jobs, counter buckets older than ``keep``
        seconds, workers not seen for as long and rate-limit state whose tat has passed."""
        return await self._transaction(_maintenance.purge_tx(now, limit, keep), "purge")

    async def write_raw_payload(self, job_id: str, payload: bytes) -> None:
        """Testing aid: overwrite a stored payload as is (to test corrupt input)."""
        params = {"id": job_id, "payload": payload}
        await self._transaction(
            lambda conn: conn.execute(_QUERIES["write_raw_payload"], params), "write_raw_payload"
        )

    # -- introspection ---------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        """One job by id, or None."""
        return await self._run(_introspection.get_job(job_id), "get_job")

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        """Jobs matching ``where``, newest first; by key or status through their index."""
        if limit <= 0:
            return []
        return await self._run(_introspection.list_jobs(where, limit), "list_jobs")

    async def queue_stats(self) -> list[QueueStats]:
        """Every queue ever enqueued to, with its active counts, by name."""
        return await self._run(_introspection.queue_stats, "queue_stats")

    async def stats(self, since: float) -> list[StatRow]:
        """Per-minute counters of minutes starting at or after ``since``."""
        return await self._run(_introspection.stats(since), "stats")
