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

Hot statements fetch few rows: each SQLite step releases and retakes the GIL, which costs a
wait whenever the event loop's thread is busy, so finish reads the jobs it applies to as one
JSON row and updates each kind of outcome in one statement over a VALUES list.

SQL lives in ``queries.sql`` (named queries) and ``migrations/`` (applied by ``migrate()``); the
concurrency primitives (unique holds, gates, rate slots) in ``_concurrency``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from duly.backends._sql import load_migrations, load_queries
from duly.backends.sqlite import _concurrency, _connection
from duly.backends.sqlite._connection import (
    ChangeWatcher,
    Checkpointer,
    connect,
    is_unavailable,
    path_from_url,
    statements,
    unavailable,
)
from duly.backends.sqlite._thread import SqliteThread
from duly.errors import BackendUnavailable, ConfigurationError
from duly.records import (
    EnqueueResult,
    JobFilter,
    JobRecord,
    NewJob,
    Outcome,
    QueueStats,
    RateRequest,
    Recovered,
    StatRow,
    WorkerRecord,
)

__all__ = ["SqliteBackend"]

T = TypeVar("T")
Row = tuple[Any, ...]

#: ``UPDATE ... RETURNING`` appeared in SQLite 3.35.
MIN_SQLITE: Final = (3, 35, 0)
_QUERIES: Final = load_queries(__name__)
_STATS_KIND: Final = {"succeeded": 0, "again": 0, "failed": 1, "retry": 2}


#: The most rows one batched statement binds: 4 values each at most, so 512 parameters, within
#: even the 999 that SQLite builds before 3.32 allowed by default.
_MAX_ROWS: Final = 128


@functools.cache
def _batched(name: str, rows: int, width: int) -> str:
    """Query ``name`` with ``rows`` VALUES rows of ``width`` parameters (see queries.sql)."""
    values = ", ".join(["(" + ", ".join("?" * width) + ")"] * rows)
    return _QUERIES[name].replace("/* rows */", values)


def _record(row: Row) -> JobRecord:
    return JobRecord(*row[:20])


def _migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply the pending migrations in one transaction; the versions applied."""
    migrations = load_migrations(__name__)

    def apply(conn: sqlite3.Connection) -> list[int]:
        conn.execute(_QUERIES["migrations_table"])
        done = {row[0] for row in conn.execute(_QUERIES["migrations_applied"])}
        applied = []
        for migration in migrations:
            if migration.version in done:
                continue
            for statement in statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                _QUERIES["migration_record"],
                {"version": migration.version, "title": migration.title, "applied_at": time.time()},
            )
            applied.append(migration.version)
        return applied

    return SqliteBackend._write(conn, apply)


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
        self.path = path_from_url(url)
        self._thread: SqliteThread | None = None
        self._open_lock = threading.Lock()
        self._local = threading.local()  # per-thread connections of the blocking calls
        self._thread_connections: list[sqlite3.Connection] = []
        # wait_for_work: what had changed when the last claim started (see wait_for_work).
        self._watcher: ChangeWatcher | None = None
        self._claim_generation: int | None = None
        self._claim_version: int | None = None
        self._local_changes = 0
        self._claim_local_changes = 0
        self._waiters: set[asyncio.Future[None]] = set()
        #: Queues whose last claim met a gated job: their claims take the claim statement.
        self._gated_queues: set[str] = set()

    def __repr__(self) -> str:
        return f"SqliteBackend({self.url!r})"

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

    @staticmethod
    def _write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one BEGIN IMMEDIATE transaction (the database's write lock)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back
                    conn.execute("ROLLBACK")
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
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher, self._claim_generation = None, None
        if thread is None:
            return
        with contextlib.suppress(RuntimeError):  # already closing
            await thread.close()

    async def migrate(self) -> list[int]:
        """Apply pending migrations in one transaction; return the versions applied."""
        return await self._run(_migrate, "migrating")

    async def ping(self) -> None:
        """Read the database file; raise BackendUnavailable if it cannot be read."""
        await self._run(lambda conn: conn.execute(_QUERIES["ping"]).fetchone(), "ping")

    async def drop(self) -> None:
        """Delete every job, counter, worker, queue name and rate-limit state (the schema
        stays)."""

        def drop(conn: sqlite3.Connection) -> None:
            for statement in statements(_QUERIES["drop"]):
                conn.execute(statement)

        await self._transaction(drop, "drop")

    # -- producing -------------------------------------------------------------------------
    @staticmethod
    def _enqueue_tx(
        jobs: Sequence[NewJob],
    ) -> Callable[[sqlite3.Connection], list[EnqueueResult]]:
        """The enqueue transaction's body (shared by ``enqueue`` and ``enqueue_blocking``)."""
        rows = []
        for job in jobs:
            scheduled = job.scheduled_for > job.enqueued_at
            rows.append(
                {
                    "id": job.id,
                    "task": job.task,
                    "queue": job.queue,
                    "payload": job.payload,
                    "max_attempts": job.max_attempts,
                    "key": job.key,
                    "priority": job.priority,
                    "enqueued_at": job.enqueued_at,
                    "scheduled_for": job.scheduled_for,
                    "status": "scheduled" if scheduled else "queued",
                    "position": job.scheduled_for if scheduled else job.enqueued_at,
                    "unique_key": job.unique_key,
                    "unique_until": job.unique_until,
                    "unique_expires_at": job.unique_expires_at,
                    "gate": job.gate,
                    "gate_limit": job.gate_limit,
                }
            )
        ids = json.dumps([job.id for job in jobs])
        queues = [{"name": name} for name in sorted({job.queue for job in jobs})]

        def enqueue(conn: sqlite3.Connection) -> list[EnqueueResult]:
            seen = {row[0] for row in conn.execute(_QUERIES["existing_ids"], {"ids": ids})}
            results, plain = [], []
            for job, row in zip(jobs, rows, strict=True):
                if job.id in seen:  # an id stored already (or earlier in this batch)
                    results.append(EnqueueResult(job.id, deduplicated=True))
                    continue
                if job.unique_key is None:
                    plain.append(row)  # inserted together below: the hot path stays one batch
                else:
                    holder = _concurrency.unique_holder(conn, job.unique_key, job.enqueued_at)
                    if holder is not None:
                        results.append(EnqueueResult(holder, deduplicated=True))
                        continue
                    # At once, so a duplicate later in this batch finds it as the holder.
                    conn.execute(_QUERIES["insert_job"], row)
                seen.add(job.id)
                results.append(EnqueueResult(job.id))
            conn.executemany(_QUERIES["insert_job"], plain)
            conn.executemany(_QUERIES["insert_queue"], queues)
            return results

        return enqueue

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Store a batch in one transaction; an id already stored is reported deduplicated, a
        unique key held by an active job reports that job (see ``Backend.enqueue``)."""
        if not jobs:
            return []
        results = await self._transaction(self._enqueue_tx(jobs), "enqueue")
        self._note_local_change()
        return results

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue``: runs on the caller's thread, on its own connection
        (SQLite connections are per thread), so a sync caller pays no thread hop."""
        if not jobs:
            return []
        try:
            conn = self._thread_connection()
            return self._write(conn, self._enqueue_tx(jobs))
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
        local = self._local_changes
        generation = None if self._watcher is None else self._watcher.generation
        if limit > 0 and queues:
            version, claimed = await self._transaction(
                lambda conn: self._claim(conn, worker, queues, limit, now, lease_until), "claim"
            )
        else:
            version, claimed = await self._run(self._data_version, "claim"), []
        self._claim_version, self._claim_local_changes = version, local
        self._claim_generation = generation
        return claimed

    def _claim(
        self,
        conn: sqlite3.Connection,
        worker: str,
        queues: Sequence[str],
        limit: int,
        now: float,
        lease_until: float,
    ) -> tuple[int, list[JobRecord]]:
        """The claim transaction's body: (data_version, claimed jobs in claim order).

        Plain jobs (no gate) take the fast path: read the candidates (claim_candidates), start
        them (claim_start) and build their records here. A queue whose candidates include a
        gated job takes the claim statement, which decides which to start and which to park;
        it keeps taking it (``_gated_queues``) until that statement takes only plain jobs.
        """
        claimed: list[JobRecord] = []
        version: int | None = None
        for queue in dict.fromkeys(queues):
            while len(claimed) < limit:
                if queue not in self._gated_queues:
                    rows = conn.execute(
                        _QUERIES["claim_candidates"],
                        {"queue": queue, "limit": limit - len(claimed)},
                    ).fetchall()
                    if rows and version is None:
                        version = rows[0][21]
                    if all(row[20] is None for row in rows):
                        lead = not claimed
                        claimed.extend(self._start(conn, rows, lead, worker, now, lease_until))
                        if claimed and claimed[0].lost > 0:
                            return self._version(conn, version), claimed  # alone, see below
                        break  # nothing parked: this queue gave what it had
                    self._gated_queues.add(queue)
                rows = conn.execute(
                    _QUERIES["claim"],
                    {
                        "queue": queue,
                        "limit": limit - len(claimed),
                        "may_lead": not claimed,
                        "now": now,
                        "worker": worker,
                        "lease_until": lease_until,
                    },
                ).fetchall()
                if rows and all(row[21] is None for row in rows):
                    self._gated_queues.discard(queue)
                started = [row for row in rows if row[4] == "running"]  # the others parked
                started.sort(key=lambda row: (-row[8], row[20], row[0]))
                claimed.extend(_record(row) for row in started)
                if claimed and claimed[0].lost > 0:
                    # A job that lost a worker before runs alone in its claim.
                    return self._version(conn, version), claimed
                if len(started) == len(rows):
                    break  # nothing parked: this queue gave what it had
                # Parked jobs left the ready index: look at the ones behind them.
        return self._version(conn, version), claimed

    @staticmethod
    def _start(
        conn: sqlite3.Connection,
        rows: list[Row],
        may_lead: bool,
        worker: str,
        now: float,
        lease_until: float,
    ) -> list[JobRecord]:
        """Start plain candidate ``rows`` (claim order) as the claim statement would: up to the
        first one that lost a worker before, which is taken only alone, as the first job of the
        claim (``may_lead``)."""
        take = rows
        for i, row in enumerate(rows):
            if row[17] > 0:  # lost
                take = rows[:1] if i == 0 and may_lead else rows[:i]
                break
        if not take:
            return []
        started_at, until = float(now), float(lease_until)
        conn.execute(
            _QUERIES["claim_start"],
            {
                "ids": json.dumps([row[0] for row in take]),
                "now": started_at,
                "worker": worker,
                "lease_until": until,
            },
        )
        # fmt: off
        return [
            JobRecord(
                row[0], row[1], row[2], row[3], "running", row[5] + 1, row[6], row[7], row[8],
                row[9], row[10], started_at, None, row[13], row[14], worker, until, row[17],
                row[18], row[19],
            )
            for row in take
        ]
        # fmt: on

    @staticmethod
    def _version(conn: sqlite3.Connection, version: int | None) -> int:
        """``version`` if a candidate row carried it, else read now."""
        if version is not None:
            return version
        value: int = conn.execute(_QUERIES["data_version"]).fetchone()[0]
        return value

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        """Mark the worker alive, extend its leases; return the ids it no longer runs."""
        ids = json.dumps(list(job_ids))

        def beat(conn: sqlite3.Connection) -> set[str]:
            conn.execute(_QUERIES["touch_worker"], {"worker": worker, "now": now})
            if not job_ids:
                return set()
            rows = conn.execute(
                _QUERIES["extend_leases"],
                {"ids": ids, "worker": worker, "lease_until": lease_until},
            ).fetchall()
            return {job_id for job_id, cancelling in rows if cancelling is None}

        alive = await self._transaction(beat, "heartbeat")
        return [job_id for job_id in job_ids if job_id not in alive]

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """Apply outcomes of jobs still running under ``worker``, in one transaction."""
        if not outcomes:
            return []
        ids = json.dumps([outcome.job_id for outcome in outcomes])
        minute = int(now // 60)

        def finish(conn: sqlite3.Connection) -> tuple[list[bool], bool]:
            [(found,)] = conn.execute(_QUERIES["running_under"], {"ids": ids, "worker": worker})
            running = {job[0]: job for job in json.loads(found)}
            batches: dict[str, list[tuple[Any, ...]]] = {}
            counters: dict[tuple[str, str], list[int]] = {}
            gates: dict[str, int] = {}
            flags = []
            for outcome in outcomes:
                job = running.pop(outcome.job_id, None)  # pop: an id applies once
                flags.append(job is not None)
                if job is None:
                    continue
                _, task, queue, gate, gate_limit, cancelling = job
                if cancelling is not None:  # its cancel was requested: cancelled, not applied
                    flags[-1], name, row = False, "finish_cancelled", (outcome.job_id, now)
                else:
                    name, row = self._outcome_row(outcome, now)
                    if (column := _STATS_KIND.get(outcome.kind)) is not None:
                        counters.setdefault((task, queue), [0, 0, 0])[column] += 1
                batches.setdefault(name, []).append(row)
                if gate is not None:
                    gates[gate] = max(gates.get(gate, 0), gate_limit)
            for name, rows in batches.items():
                self._apply(conn, name, rows)
            self._bump_stats(conn, minute, counters)
            unparked = _concurrency.free_gate_slots(conn, gates)
            return flags, bool(unparked)

        flags, unparked = await self._transaction(finish, "finish")
        requeued = any(
            o.kind in ("release", "again") for o, ok in zip(outcomes, flags, strict=True) if ok
        )
        if requeued or unparked:
            self._note_local_change()
        return flags

    @staticmethod
    def _outcome_row(outcome: Outcome, now: float) -> tuple[str, tuple[Any, ...]]:
        """The finish_* statement of ``outcome`` and its row of ``o`` (see queries.sql)."""
        job_id, kind = outcome.job_id, outcome.kind
        if kind == "succeeded":
            return "finish_succeeded", (job_id, now, outcome.result, outcome.expire_at)
        if kind == "failed":
            return "finish_failed", (job_id, now, outcome.errors, outcome.expire_at)
        run_at = now if outcome.run_at is None else outcome.run_at
        if kind == "retry":
            return "finish_retry", (job_id, outcome.errors, run_at, outcome.expire_at)
        if kind == "release":
            if run_at <= now:
                return "finish_release_now", (job_id, outcome.rate_slot)
            return "finish_release_later", (job_id, run_at, outcome.rate_slot)
        if kind == "again":
            return "finish_again", (job_id, now, run_at, outcome.result)
        raise ValueError(f"unknown outcome kind {kind!r}")

    @staticmethod
    def _apply(conn: sqlite3.Connection, name: str, rows: list[tuple[Any, ...]]) -> None:
        """Run the batched statement ``name`` over ``rows`` (one statement per _MAX_ROWS)."""
        width = len(rows[0])
        for start in range(0, len(rows), _MAX_ROWS):
            chunk = rows[start : start + _MAX_ROWS]
            size = 1 << (len(chunk) - 1).bit_length()  # padded to a power of two
            params = [value for row in chunk for value in row]
            params.extend([None] * ((size - len(chunk)) * width))
            conn.execute(_batched(name, size, width), params)

    @staticmethod
    def _bump_stats(
        conn: sqlite3.Connection, minute: int, counters: dict[tuple[str, str], list[int]]
    ) -> None:
        if counters:
            conn.executemany(
                _QUERIES["bump_stats"],
                [
                    {
                        "minute": minute,
                        "task": task,
                        "queue": queue,
                        "succeeded": counts[0],
                        "failed": counts[1],
                        "retried": counts[2],
                    }
                    for (task, queue), counts in counters.items()
                ],
            )

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        """Queue up to ``limit`` due scheduled/retrying jobs; return (moved, next due time)."""

        def promote(conn: sqlite3.Connection) -> tuple[int, float | None]:
            moved = 0
            if limit > 0:
                moved = conn.execute(_QUERIES["promote_due"], {"now": now, "limit": limit}).rowcount
            earliest = conn.execute(_QUERIES["next_due"]).fetchone()[0]
            return moved, earliest

        moved, earliest = await self._transaction(promote, "promote_due")
        if moved:
            self._note_local_change()
        return moved, earliest

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        """Recover running jobs whose lease lapsed, each exactly once (one transaction)."""
        minute = int(now // 60)

        def recover(conn: sqlite3.Connection) -> tuple[list[Recovered], bool]:
            rows = conn.execute(_QUERIES["lapsed"], {"now": now, "limit": limit}).fetchall()
            requeue, quarantine, cancel, recovered = [], [], [], []
            counters: dict[tuple[str, str], list[int]] = {}
            gates: dict[str, int] = {}
            for job_id, task, queue, lost, gate, gate_limit, cancelling in rows:
                if gate is not None:
                    gates[gate] = max(gates.get(gate, 0), gate_limit)
                if cancelling is not None:  # its cancel was requested: never run again
                    cancel.append({"id": job_id, "now": now})
                    recovered.append(Recovered(job_id, requeued=False, cancelled=True))
                elif lost + 1 < max_lost:
                    requeue.append({"id": job_id})
                    recovered.append(Recovered(job_id, requeued=True))
                else:
                    quarantine.append(
                        {
                            "id": job_id,
                            "now": now,
                            "expire_at": failed_expire_at,
                            "message": f"lost its worker {lost + 1} times",
                        }
                    )
                    recovered.append(Recovered(job_id, requeued=False))
                    counters.setdefault((task, queue), [0, 0, 0])[1] += 1
            conn.executemany(_QUERIES["requeue_lost"], requeue)
            conn.executemany(_QUERIES["quarantine_lost"], quarantine)
            conn.executemany(_QUERIES["cancel_lost"], cancel)
            self._bump_stats(conn, minute, counters)
            unparked = _concurrency.free_gate_slots(conn, gates)
            return recovered, bool(unparked)

        if limit <= 0:
            return []
        recovered, unparked = await self._transaction(recover, "recover")
        if unparked or any(item.requeued for item in recovered):
            self._note_local_change()
        return recovered

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        """Return once another connection committed since the last claim began, or this
        instance made jobs claimable, or after ``timeout``.

        A watcher thread polls ``PRAGMA data_version`` every ``POLL_INTERVAL`` (no server to
        notify us); the event loop just sleeps on a future. Queues are not told apart and any
        commit counts, so a wake-up may be spurious; each change wakes one wait, not every
        later one, so waiting again without claiming does not spin.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        if self._thread is None:
            await self.open()  # the watcher must never be the one creating the file
        watcher = self._watcher
        if watcher is None:
            watcher = self._watcher = ChangeWatcher(self.path)
            await loop.run_in_executor(None, watcher.start)
        baseline, local = self._claim_generation, self._claim_local_changes
        if baseline is None:  # the last claim (if any) predates the watcher: ask the writer
            baseline = watcher.generation
            if self._claim_version is not None:
                version = await self._run(self._data_version, "wait_for_work")
                if version != self._claim_version:
                    baseline = -1
        while self._local_changes == local and watcher.generation == baseline:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.add(future)
            watcher.listen(loop, future)
            try:
                if self._local_changes == local and watcher.generation == baseline:
                    await asyncio.wait({future}, timeout=remaining)
            finally:
                self._waiters.discard(future)
                watcher.unlisten(loop, future)
        # Consume what woke us: the next wait (without a claim) waits for something newer.
        self._claim_generation, self._claim_version = watcher.generation, None
        self._claim_local_changes = self._local_changes

    @staticmethod
    def _data_version(conn: sqlite3.Connection) -> int:
        value: int = conn.execute(_QUERIES["data_version"]).fetchone()[0]
        return value

    def _note_local_change(self) -> None:
        """This instance made jobs claimable: wake its own waiters at once."""
        self._local_changes += 1
        for future in self._waiters:
            if not future.done():
                future.set_result(None)

    # -- workers ---------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        """Announce (or re-announce) a worker process."""
        params = {"worker": worker, "now": now, "info": json.dumps(info, default=str)}
        await self._transaction(
            lambda conn: conn.execute(_QUERIES["register_worker"], params), "register_worker"
        )

    async def unregister_worker(self, worker: str) -> None:
        """Remove a worker that stopped cleanly."""
        await self._transaction(
            lambda conn: conn.execute(_QUERIES["unregister_worker"], {"worker": worker}),
            "unregister_worker",
        )

    async def workers(self) -> list[WorkerRecord]:
        """Registered workers by id."""
        rows = await self._run(
            lambda conn: conn.execute(_QUERIES["list_workers"]).fetchall(), "workers"
        )
        return [WorkerRecord(row[0], row[1], row[2], json.loads(row[3])) for row in rows]

    # -- operator actions ------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        """Cancel an active job (parked or not); False if it is finished or unknown. A gated
        job frees its slot (or its turn, if queued) for the best parked job of its gate."""
        params = {"id": job_id, "now": now, "expire_at": expire_at}

        def cancel(conn: sqlite3.Connection) -> tuple[bool, bool]:
            rows = conn.execute(_QUERIES["cancel"], params).fetchall()
            if not rows:
                return False, False
            [(gate, gate_limit, running)] = rows
            if gate is None or running:  # a running job keeps its slot until its run ends
                return True, False
            return True, bool(_concurrency.free_gate_slots(conn, {gate: gate_limit}))

        cancelled, unparked = await self._transaction(cancel, "cancel")
        if unparked:
            self._note_local_change()
        return cancelled

    async def retry(self, job_id: str, now: float) -> bool:
        """Re-queue a failed or cancelled job with fresh attempts; it takes its unique key
        again, or stays as it is (False) if another active job holds that key."""

        def retry(conn: sqlite3.Connection) -> bool:
            row = conn.execute(_QUERIES["retry_candidate"], {"id": job_id}).fetchone()
            if row is None:
                return False
            unique_key = row[0]  # the key it takes again, if any
            holder = (
                None if unique_key is None else _concurrency.unique_holder(conn, unique_key, now)
            )
            if holder is not None:  # another active job holds the key
                return False
            params = {"id": job_id, "now": now, "unique_key": unique_key}
            return conn.execute(_QUERIES["retry"], params).rowcount > 0

        retried = await self._transaction(retry, "retry")
        if retried:
            self._note_local_change()
        return retried

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        """Reserve one GCRA slot per request, in order, in one transaction; their start times."""
        if not requests:
            return []
        return await self._transaction(
            lambda conn: _concurrency.reserve_rate(conn, requests, now), "reserve_rate"
        )

    async def purge(self, now: float, limit: int) -> int:
        """Delete up to ``limit`` expired finished jobs, counter buckets older than 24 h, workers
        not seen for 24 h and rate-limit state whose tat has passed."""
        old_minute = math.floor((now - 86_400) / 60)

        def purge(conn: sqlite3.Connection) -> int:
            deleted = 0
            if limit > 0:
                deleted = conn.execute(
                    _QUERIES["purge_jobs"], {"now": now, "limit": limit}
                ).rowcount
            conn.execute(_QUERIES["purge_stats"], {"minute": old_minute})
            conn.execute(_QUERIES["purge_workers"], {"cutoff": now - 86_400})
            conn.execute(_QUERIES["purge_rates"], {"now": now})
            return deleted

        return await self._transaction(purge, "purge")

    async def write_raw_payload(self, job_id: str, payload: bytes) -> None:
        """Testing aid: overwrite a stored payload as is (to test corrupt input)."""
        params = {"id": job_id, "payload": payload}
        await self._transaction(
            lambda conn: conn.execute(_QUERIES["write_raw_payload"], params), "write_raw_payload"
        )

    # -- introspection ---------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        """One job by id, or None."""
        row = await self._run(
            lambda conn: conn.execute(_QUERIES["get_job"], {"id": job_id}).fetchone(), "get_job"
        )
        return None if row is None else _record(row)

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        """Jobs matching ``where``, newest first; by key or status through their index."""
        if limit <= 0:
            return []
        params: dict[str, Any] = {
            "key": where.key,
            "status": where.status,
            "task": where.task,
            "queue": where.queue,
            "limit": limit,
        }
        if where.key is not None:
            name = "list_jobs_by_key"
        elif where.status is not None:
            name = "list_jobs_by_status"
        else:
            name = "list_jobs"
        query = _QUERIES[name]
        rows = await self._run(lambda conn: conn.execute(query, params).fetchall(), "list_jobs")
        return [_record(row) for row in rows]

    async def queue_stats(self) -> list[QueueStats]:
        """Every queue ever enqueued to, with its active counts, by name."""

        def read(conn: sqlite3.Connection) -> tuple[list[Row], list[Row]]:
            conn.execute("BEGIN")  # one snapshot for both reads
            try:
                names = conn.execute(_QUERIES["queue_names"]).fetchall()
                counts = conn.execute(_QUERIES["queue_counts"]).fetchall()
            finally:
                conn.execute("COMMIT")
            return names, counts

        names, counts = await self._run(read, "queue_stats")
        by_name = {row[0]: QueueStats(row[0]) for row in names}
        for queue, status, count in counts:
            stats = by_name.setdefault(queue, QueueStats(queue))
            if status == "queued":
                stats.queued += count
            elif status == "running":
                stats.running += count
            else:
                stats.scheduled += count
        return [by_name[name] for name in sorted(by_name)]

    async def stats(self, since: float) -> list[StatRow]:
        """Per-minute counters of minutes starting at or after ``since``."""
        first = math.ceil(since / 60)
        rows = await self._run(
            lambda conn: conn.execute(_QUERIES["stats_since"], {"minute": first}).fetchall(),
            "stats",
        )
        return [StatRow(*row) for row in rows]
