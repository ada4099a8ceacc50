"""The PostgreSQL backend: one transaction per state change, SKIP LOCKED claims, LISTEN/NOTIFY.

Layout of the schema (``schema``, default ``duly``): ``jobs`` (one row per job, partial indexes
per hot path), ``stats`` (per-minute counters), ``workers``, ``queues``, ``gates`` (running count
per gate), ``rate_limits`` (GCRA state per key) and ``schema_version``; see ``migrations/``.
Every query lives in ``queries.sql``; ``{schema}`` in it is replaced by the quoted schema name
once, here, so the same text also runs on a caller's own connection for transactional enqueue
(:meth:`PostgresBackend.enqueue_on`).

Plain jobs (no unique key, no gate) take one statement per call, in autocommit. Enqueue there
is a plain insert (``enqueue_fresh``): a resent batch makes it fail and store nothing, and only
then does the insert that skips stored ids (``ON CONFLICT DO NOTHING``) run (see
``_enqueue_plan``). Concurrency control adds statements only for the batches that need them,
in one transaction:

- a batch with unique jobs: insert, then look up the holders of the keys that were taken (see
  ``_enqueue_plan``);
- a gated job leaving ``running`` (finish, recover, cancel): the state change, then
  ``gate_release`` (slot counts, gate rows locked in key order), then ``gate_unpark`` in a fresh
  snapshot that sees every job parked by a claim that held the gate row meanwhile. Claiming
  needs no transaction: one statement takes a slot or parks (``claim`` in ``queries.sql``);
- ``reserve_rate``: lock the keys' rows, compute the slots, store the new state.

Wake-ups: every change that may make a job claimable calls ``pg_notify('duly_<schema>', queue)``
inside its transaction; :meth:`PostgresBackend.wait_for_work` listens on one dedicated
connection (outside the pool) and returns as soon as one of its queues is named.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import math
import threading
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from duly.backends._sql import load_migrations, load_queries
from duly.backends.base import Backend
from duly.backends.postgres._first_use import FirstUse, run_blocking
from duly.errors import BackendUnavailable, ConfigurationError
from duly.limits import gcra_slots
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

__all__ = ["PostgresBackend"]

T = TypeVar("T")

#: The ``jobs`` columns in ``JobRecord`` field order, read through the alias ``j``.
_COLUMNS: Final = ", ".join(f"j.{field.name}" for field in dataclasses.fields(JobRecord))
#: Seconds to wait for a connection (connect, or a free one from the pool) before giving up.
_CONNECT_TIMEOUT: Final = 5.0
#: Connection failures: the server is down, restarting, or unreachable. Deadlocks and
#: cancelled statements are OperationalErrors too, but they are bugs, not outages.
_NOT_OUTAGES: Final = (psycopg.errors.TransactionRollback, psycopg.errors.QueryCanceled)
#: How many times a transaction of several statements is run again after a deadlock. Locks are
#: taken in one order everywhere (jobs, then stats, then gates by key), so this is a safety net.
_DEADLOCK_RETRIES: Final = 3
#: Rounds of insert-then-look-up for a unique job whose holder keeps vanishing (see
#: ``_enqueue_plan``); each round needs another job to take and lose the key meanwhile.
_UNIQUE_ROUNDS: Final = 10


@functools.cache
def _raw_queries() -> dict[str, str]:
    """The query file, comment lines removed (so ``%(x)s`` in a comment is not a parameter)."""
    return {
        name: "\n".join(
            line for line in body.splitlines() if not line.lstrip().startswith("--")
        ).strip()
        for name, body in load_queries(__name__).items()
    }


def _bind(text: str, schema: sql.Identifier) -> bytes:
    """Substitute ``{schema}`` and ``{columns}`` in one query; bytes are a psycopg query."""
    quoted = schema.as_string()
    return text.replace("{schema}", quoted).replace("{columns}", _COLUMNS).encode()


class _Queries:
    """Every named query of ``queries.sql``, bound to one schema."""

    def __init__(self, schema: str) -> None:
        identifier = sql.Identifier(schema)
        self._bound = {name: _bind(text, identifier) for name, text in _raw_queries().items()}

    def __getitem__(self, name: str) -> bytes:
        return self._bound[name]


def _dead_connection(exc: BaseException) -> bool:
    """True when ``exc`` came from a connection that broke (not from waiting for one)."""
    cause = exc.__cause__
    return isinstance(cause, psycopg.OperationalError) and not isinstance(cause, PoolTimeout)


def _column(values: list[Any], convert: Callable[[Any], Any] | None) -> tuple[list[Any], Any]:
    """One column of a batch as the enqueue statements take it (``a_<column>``,
    ``v_<column>``): ``([], value)`` when every job has the same value, else every job's value
    (through ``convert``, None kept) and None."""
    first = values[0]
    if values.count(first) == len(values):
        return [], first if first is None or convert is None else convert(first)
    if convert is not None:
        values = [None if v is None else convert(v) for v in values]
    return values, None


def _enqueue_params(jobs: Sequence[NewJob], channel: str) -> dict[str, Any]:
    """The parameters of both enqueue statements (``enqueue_fresh``, ``enqueue``).

    A column whose value every job of the batch shares is sent once (see ``_column``): a bulk
    batch of one task costs its ids and payloads, not 15 arrays. The options of a unique key
    or a gate are stored only with it. Values are converted to the column's Python type (one
    array never mixes types). Each job's status, and the queues to register and to wake, are
    computed here (``enqueue_fresh`` stores every row or none).
    """
    params: dict[str, Any] = {"a_id": [j.id for j in jobs], "channel": channel}

    def put(name: str, values: list[Any], convert: Callable[[Any], Any] | None = None) -> bool:
        """Send one column; True when every job has the same value."""
        params[f"a_{name}"], params[f"v_{name}"] = array, _ = _column(values, convert)
        return not array

    def every(name: str) -> list[Any]:
        values: list[Any] = params[f"a_{name}"] or [params[f"v_{name}"]] * len(jobs)
        return values

    # One comprehension per field: faster than a generic getattr loop over 15 fields.
    put("task", [j.task for j in jobs])
    one_queue = put("queue", [j.queue for j in jobs])
    put("payload", [j.payload for j in jobs], bytes)
    put("max_attempts", [j.max_attempts for j in jobs], int)
    put("key", [j.key for j in jobs])
    put("priority", [j.priority for j in jobs], int)
    one_enqueued_at = put("enqueued_at", [j.enqueued_at for j in jobs], float)
    one_scheduled_for = put("scheduled_for", [j.scheduled_for for j in jobs], float)
    # scheduled when due after its enqueue (compared as doubles, as SQL would)
    if one_enqueued_at and one_scheduled_for:
        put(
            "status",
            ["scheduled" if params["v_scheduled_for"] > params["v_enqueued_at"] else "queued"],
        )
    else:
        put(
            "status",
            [
                "scheduled" if due > at else "queued"
                for due, at in zip(every("scheduled_for"), every("enqueued_at"), strict=True)
            ],
        )
    if one_queue and not params["a_status"]:
        params["queues"] = [params["v_queue"]]
        params["wake"] = [params["v_queue"]] if params["v_status"] == "queued" else []
    else:
        queues = every("queue")
        params["queues"] = sorted(set(queues))
        params["wake"] = sorted(
            {q for q, status in zip(queues, every("status"), strict=True) if status == "queued"}
        )
    if put("gate", [j.gate for j in jobs]) and params["v_gate"] is None:
        put("gate_limit", [None])
    else:
        put("gate_limit", [None if j.gate is None else j.gate_limit for j in jobs], int)
    if put("unique_key", [j.unique_key for j in jobs]) and params["v_unique_key"] is None:
        put("unique_until", [None])
        put("unique_expires_at", [None])
    else:
        put("unique_until", [None if j.unique_key is None else j.unique_until for j in jobs])
        put(
            "unique_expires_at",
            [None if j.unique_key is None else j.unique_expires_at for j in jobs],
            float,
        )
    return params


#: One step of a plan: the name of a query and its parameters. The plan is sent the rows.
_Step = tuple[str, dict[str, object]]
_Plan = Generator[_Step, list[tuple[Any, ...]], T]


def _enqueue_plan(
    jobs: Sequence[NewJob], channel: str, *, fresh: bool
) -> _Plan[list[EnqueueResult]]:
    """The statements of one enqueue, for every way of running them (pooled connection, the
    caller's own, blocking): yields ``(query, params)`` and is sent each statement's rows, or
    thrown the ``UniqueViolation`` a statement raised.

    With ``fresh`` (the connection is in autocommit with no transaction open, so a failed
    statement leaves nothing behind), a batch without unique jobs is one ``enqueue_fresh``: a
    plain insert of every job. An id already stored (a resend) makes it fail and store nothing;
    ``enqueue`` then runs, which skips the ids already stored. Otherwise a batch without
    unique jobs is one ``enqueue`` statement. A unique job left out by it (its key is held)
    needs ``unique_holders`` in the same transaction: a later statement, whose snapshot sees
    the holder the insert waited for. A holder gone since (finished, started) or past its
    expiry (taken over) means inserting that job again.
    """
    params = _enqueue_params(jobs, channel)
    if fresh and params["a_unique_key"] == [] and params["v_unique_key"] is None:
        try:
            yield "enqueue_fresh", params
        except psycopg.errors.UniqueViolation:
            pass  # stored nothing: an id is stored already, or twice in the batch
        else:
            return list(map(EnqueueResult, params["a_id"]))
    results: list[EnqueueResult | None] = [None] * len(jobs)
    pending = list(range(len(jobs)))
    for round_ in range(_UNIQUE_ROUNDS):
        if round_:
            params = _enqueue_params([jobs[i] for i in pending], channel)
        [row] = yield "enqueue", params
        inserted = set(row[0])
        held = []
        for i in pending:
            job = jobs[i]
            if job.id in inserted:
                results[i] = EnqueueResult(job.id)
            elif job.unique_key is None:  # its id is already stored (a resend)
                results[i] = EnqueueResult(job.id, deduplicated=True)
            else:
                held.append(i)
        if not held:
            return [r for r in results if r is not None]
        rows = yield (
            "unique_holders",
            {
                "ids": [jobs[i].id for i in held],
                "unique_keys": [jobs[i].unique_key for i in held],
                "enqueued_at": [float(jobs[i].enqueued_at) for i in held],
            },
        )
        pending = []
        for i, (_, stored, holder, expired) in zip(held, rows, strict=True):
            if stored:
                results[i] = EnqueueResult(jobs[i].id, deduplicated=True)
            elif holder is not None and not expired:
                results[i] = EnqueueResult(holder, deduplicated=True)
            else:
                pending.append(i)
        if not pending:
            return [r for r in results if r is not None]
    raise RuntimeError(f"unique enqueue: the holders of {len(pending)} keys kept changing")


def _run_plan(conn: psycopg.Connection[Any], queries: _Queries, plan: _Plan[T]) -> T:
    """Run ``plan`` on a sync connection, in whatever transaction it is in."""
    try:
        name, params = next(plan)
        while True:
            try:
                rows = conn.execute(queries[name], params).fetchall()
            except psycopg.errors.UniqueViolation as exc:
                name, params = plan.throw(exc)
            else:
                name, params = plan.send(rows)
    except StopIteration as done:
        result: T = done.value
        return result


async def _run_plan_async(
    conn: psycopg.AsyncConnection[Any], queries: _Queries, plan: _Plan[T]
) -> T:
    """Run ``plan`` on an async connection, in whatever transaction it is in."""
    try:
        name, params = next(plan)
        while True:
            try:
                cur = await conn.execute(queries[name], params)
                rows = await cur.fetchall()
            except psycopg.errors.UniqueViolation as exc:
                name, params = plan.throw(exc)
            else:
                name, params = plan.send(rows)
    except StopIteration as done:
        result: T = done.value
        return result


def _outside_transaction(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when each statement on ``conn`` commits on its own (autocommit, no transaction
    open, no pipeline): one that fails there leaves nothing behind, the connection included."""
    info = conn.info
    return (
        conn.autocommit
        and info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        and info.pipeline_status == psycopg.pq.PipelineStatus.OFF
    )


def _any_unique(jobs: Sequence[NewJob]) -> bool:
    return any(j.unique_key is not None for j in jobs)


class PostgresBackend:
    """duly's storage in one PostgreSQL schema (``schema``, created if missing).

    ``url`` is a libpq URL or DSN (``postgresql://user@host:5432/db``). ``open()`` applies the
    pending migrations unless ``auto_migrate`` is False (then run ``duly migrate`` first).
    """

    def __init__(
        self,
        url: str,
        schema: str = "duly",
        *,
        auto_migrate: bool = True,
        max_connections: int = 10,
    ) -> None:
        try:
            info = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"invalid PostgreSQL URL: {exc}") from None
        if not schema or len(schema.encode()) > 58:
            raise ConfigurationError(f"invalid PostgreSQL schema name {schema!r}")
        self.url = url
        self.schema = schema
        self.auto_migrate = auto_migrate
        self.channel = f"duly_{schema}"
        self._sync: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._sync_lock = threading.Lock()
        host = info.get("host") or info.get("hostaddr") or "localhost"
        self._where = f"{host}:{info.get('port') or 5432}/{info.get('dbname') or '?'}"
        self._max_connections = max_connections
        # Connection options: autocommit (each statement is its own transaction), a bounded
        # connect time, and a name that shows in pg_stat_activity unless the URL sets one.
        self._options: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": int(_CONNECT_TIMEOUT),
        }
        if "application_name" not in info:
            self._options["application_name"] = f"duly/{schema}"
        self._q = _Queries(schema)
        self._first_use = FirstUse(
            lambda: self.migrate() if self.auto_migrate else self._check_schema()
        )
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._open_lock: asyncio.Lock | None = None
        # LISTEN side: one connection, one reader task, the waiters it wakes, and the queues
        # notified while nobody waited on them (the next wait returns at once for those).
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiters: dict[asyncio.Event, frozenset[str]] = {}
        self._missed: set[str] = set()
        self._listen_lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"PostgresBackend({self._where!r}, schema={self.schema!r})"

    # -- errors and connections --------------------------------------------------------------
    def _unavailable(self, exc: BaseException) -> BackendUnavailable:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return BackendUnavailable(f"PostgreSQL at {self._where} is unavailable: {detail}")

    def _not_migrated(self, exc: BaseException) -> ConfigurationError:
        return ConfigurationError(
            f"PostgreSQL schema {self.schema!r} at {self._where} lacks duly tables or columns "
            f"({exc}): run `duly migrate` (or open the app once) before enqueueing on your own "
            "connection"
        )

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        """A new connection outside the pool (migrations, LISTEN, drop)."""
        try:
            return await psycopg.AsyncConnection.connect(self.url, **self._options)
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def _pool_settings(self, name: str) -> dict[str, Any]:
        """What both pools (async for the protocol, sync for blocking enqueue) are built with.

        No ``check=``: after a failed check psycopg_pool waits 1 s, 2 s, ... before the next
        attempt, so under repeated cuts no connection survives the wait. ``_conn`` checks each
        connection it hands out and retries at once instead.
        """
        return {
            "min_size": 1,
            "max_size": self._max_connections,
            "open": False,
            "kwargs": self._options,
            "timeout": _CONNECT_TIMEOUT,
            "name": name,
        }

    async def open(self) -> None:
        if self._pool is not None:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._pool is not None:
                return
            if self.auto_migrate:
                await self.migrate()
            else:
                await self._check_schema()
            self._first_use.ready = True
            pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
                self.url, **self._pool_settings(f"duly-{self.schema}")
            )
            try:
                await pool.open(wait=True, timeout=_CONNECT_TIMEOUT)
            except (PoolTimeout, psycopg.OperationalError) as exc:
                await pool.close()
                raise self._unavailable(exc) from exc
            self._pool = pool

    async def close(self) -> None:
        await self._stop_listener()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled autocommit connection; outages become BackendUnavailable."""
        if self._pool is None:
            await self.open()
        assert self._pool is not None
        pool = self._pool
        try:
            conn = await self._live_connection(pool)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._unavailable(exc) from exc
        try:
            yield conn
        except _NOT_OUTAGES:
            raise
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        finally:
            await pool.putconn(conn)

    @staticmethod
    async def _live_connection(
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
    ) -> psycopg.AsyncConnection[Any]:
        """A pooled connection that answers. One cut by the server (restart,
        pg_terminate_backend, a proxy) is given back (the pool discards it) and the next one
        is taken at once."""
        deadline = time.monotonic() + _CONNECT_TIMEOUT
        while True:
            conn = await pool.getconn(max(deadline - time.monotonic(), 0.01))
            try:
                await conn.execute("")  # what AsyncConnectionPool.check_connection does
            except psycopg.OperationalError:
                await pool.putconn(conn)
                if time.monotonic() >= deadline:
                    raise
                continue
            return conn

    async def _one(
        self, name: str, params: dict[str, object] | None = None, *, retry: bool = False
    ) -> tuple[Any, ...] | None:
        """Run one named statement and return its first row (or None).

        With ``retry``, a statement that met a dead pooled connection (the server restarted
        since it was opened) is sent once more on a fresh one. Only idempotent statements ask
        for it: re-running them after an unknown outcome changes nothing.
        """
        for attempt in (1, 2):
            try:
                async with self._conn() as conn:
                    cur = await conn.execute(self._q[name], params)
                    return await cur.fetchone() if cur.description else None
            except BackendUnavailable as exc:
                if not retry or attempt == 2 or not _dead_connection(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _all(
        self, name: str, params: dict[str, object] | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one named read-only statement and return every row (retried once, see _one)."""
        for attempt in (1, 2):
            try:
                async with self._conn() as conn:
                    cur = await conn.execute(self._q[name], params)
                    return await cur.fetchall()
            except BackendUnavailable as exc:
                if attempt == 2 or not _dead_connection(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _transaction(
        self,
        work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
        *,
        retry: bool = False,
        atomic: bool = True,
    ) -> T:
        """Run ``work`` (several statements) in one transaction on a pooled connection, or in
        autocommit when it is one statement (``atomic=False``: no BEGIN/COMMIT round trips).

        After a deadlock the whole transaction runs again (a safety net: see
        ``_DEADLOCK_RETRIES``). With ``retry``, as in ``_one``, once more on a fresh connection
        after a dead one (idempotent work only).
        """
        deadlocks = 0
        resent = not retry
        while True:
            try:
                async with self._conn() as conn:
                    if not atomic:
                        return await work(conn)
                    async with conn.transaction():
                        return await work(conn)
            except psycopg.errors.DeadlockDetected:
                deadlocks += 1
                if deadlocks > _DEADLOCK_RETRIES:
                    raise
            except BackendUnavailable as exc:
                if resent or not _dead_connection(exc):
                    raise
                resent = True

    async def _free_gates(
        self,
        conn: psycopg.AsyncConnection[Any],
        released: Sequence[str],
        passed_on: Sequence[str] = (),
    ) -> None:
        """In the caller's transaction, once gated jobs left ``running`` (``released``: a gate
        per job) or a woken job was cancelled before it ran (``passed_on``): give the slots
        back, then wake one parked job per entry in a statement of its own (fresh snapshot)."""
        if released:
            await conn.execute(self._q["gate_release"], {"gates": list(released)})
        gates = [*released, *passed_on]
        await conn.execute(self._q["gate_unpark"], {"gates": gates, "channel": self.channel})

    # -- lifecycle ---------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        """Apply the pending migrations, one transaction each; return the versions applied.

        Runs under a session advisory lock keyed by the schema name, so processes starting
        together apply each migration once (the others wait, then find nothing to do).
        """
        lock_key = zlib.crc32(f"duly.migrate:{self.schema}".encode())
        applied: list[int] = []
        conn = await self._connect()
        try:
            await conn.execute("SELECT pg_advisory_lock(%s)", [lock_key])
            try:
                await conn.execute(self._q["create_version_table"])
                cur = await conn.execute(self._q["applied_versions"])
                done = {row[0] for row in await cur.fetchall()}
                for migration in load_migrations(__name__):
                    if migration.version in done:
                        continue
                    async with conn.transaction():
                        await conn.execute(_bind(migration.sql, sql.Identifier(self.schema)))
                        await conn.execute(
                            self._q["record_version"],
                            {"version": migration.version, "title": migration.title},
                        )
                    applied.append(migration.version)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", [lock_key])
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        finally:
            await conn.close()
        return applied

    async def _check_schema(self) -> None:
        """With auto_migrate off: fail clearly when the schema is missing or behind."""
        conn = await self._connect()
        try:
            table = f"{sql.Identifier(self.schema).as_string()}.schema_version"
            cur = await conn.execute(self._q["schema_exists"], {"table": table})
            row = await cur.fetchone()
            done: set[int] = set()
            if row and row[0]:
                cur = await conn.execute(self._q["applied_versions"])
                done = {r[0] for r in await cur.fetchall()}
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        finally:
            await conn.close()
        missing = [m.version for m in load_migrations(__name__) if m.version not in done]
        if missing:
            raise ConfigurationError(
                f"PostgreSQL schema {self.schema!r} at {self._where} lacks migrations "
                f"{missing}: run `duly migrate` (or let duly migrate with auto_migrate=True)"
            )

    async def ping(self) -> None:
        await self._one("ping", retry=True)

    async def drop(self) -> None:
        """Drop the whole schema (``DROP SCHEMA ... CASCADE``): every job, counter, worker."""
        conn = await self._connect()
        try:
            await conn.execute(self._q["drop_schema"])
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        finally:
            await conn.close()

    async def write_raw_payload(self, job_id: str, payload: bytes) -> None:
        """Testing aid: overwrite a stored payload as is (no validation, no encoding)."""
        await self._one("write_raw_payload", {"id": job_id, "payload": bytes(payload)})

    # -- producing ---------------------------------------------------------------------------
    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        if not jobs:
            return []

        async def run(conn: psycopg.AsyncConnection[Any]) -> list[EnqueueResult]:
            return await _run_plan_async(
                conn, self._q, _enqueue_plan(jobs, self.channel, fresh=_outside_transaction(conn))
            )

        # Idempotent: a job id already stored is left alone, so a resend after a lost answer
        # cannot double a job. Without unique jobs the plan is one statement.
        return await self._transaction(run, retry=True, atomic=_any_unique(jobs))

    def enqueue_on(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob]
    ) -> list[EnqueueResult]:
        """Insert ``jobs`` with the caller's connection, inside its current transaction.

        Nothing is committed here: the jobs become visible (and idle workers are woken) when
        the caller commits, and never exist if it rolls back. Needs no opened backend: the
        first call readies the schema on a connection of its own (see ``_first_use``). A batch
        with unique jobs may take more than one statement: run it in a transaction (an
        autocommit connection would commit each one on its own).
        """
        if not jobs:
            return []
        self._first_use.ensure_blocking()
        try:
            return _run_plan(
                conn, self._q, _enqueue_plan(jobs, self.channel, fresh=_outside_transaction(conn))
            )
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
            raise self._not_migrated(exc) from exc
        except _NOT_OUTAGES:
            raise
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue`` for sync callers: one transaction on a pooled sync
        connection (thread-safe; no event loop)."""
        if not jobs:
            return []
        pool = self._sync_pool()
        try:
            with pool.connection() as conn:
                if not _any_unique(jobs):  # one statement: autocommit
                    return self.enqueue_on(conn, jobs)
                with conn.transaction():
                    return self.enqueue_on(conn, jobs)
        except PoolTimeout as exc:
            raise self._unavailable(exc) from exc
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def _sync_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        with self._sync_lock:
            if self._sync is not None:
                return self._sync
            pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                self.url, **self._pool_settings(f"duly-sync-{self.schema}")
            )
            try:
                pool.open(wait=True, timeout=_CONNECT_TIMEOUT)
                if self.auto_migrate and not self._migrated_blocking(pool):
                    self._migrate_blocking()
                self._first_use.ready |= self.auto_migrate
            except (PoolTimeout, psycopg.OperationalError) as exc:
                pool.close()
                raise self._unavailable(exc) from exc
            except BaseException:
                pool.close()
                raise
            self._sync = pool
            return pool

    def _migrated_blocking(self, pool: ConnectionPool[psycopg.Connection[Any]]) -> bool:
        """True when every migration is applied already, as it is once the app or a worker
        has opened the schema: two reads on the pool's first connection, where ``migrate``
        needs a connection of its own, a thread and the advisory lock (the first blocking
        enqueue of a process waited for all of that)."""
        table = f"{sql.Identifier(self.schema).as_string()}.schema_version"
        with pool.connection() as conn:
            row = conn.execute(self._q["schema_exists"], {"table": table}).fetchone()
            if not row or not row[0]:
                return False
            done = {r[0] for r in conn.execute(self._q["applied_versions"]).fetchall()}
        return all(m.version in done for m in load_migrations(__name__))

    def _migrate_blocking(self) -> None:
        """Run ``migrate`` from sync code, even from inside a running event loop."""
        run_blocking(self.migrate)

    def close_blocking(self) -> None:
        """Close the connections of the blocking calls."""
        with self._sync_lock:
            pool, self._sync = self._sync, None
        if pool is not None:
            pool.close()

    async def enqueue_on_async(
        self, conn: psycopg.AsyncConnection[Any], jobs: Sequence[NewJob]
    ) -> list[EnqueueResult]:
        """The async twin of :meth:`enqueue_on`, for a ``psycopg.AsyncConnection``."""
        if not jobs:
            return []
        await self._first_use.ensure()
        try:
            return await _run_plan_async(
                conn, self._q, _enqueue_plan(jobs, self.channel, fresh=_outside_transaction(conn))
            )
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
            raise self._not_migrated(exc) from exc
        except _NOT_OUTAGES:
            raise
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    # -- consuming ---------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        if limit <= 0 or not queues:
            return []
        taken: list[JobRecord] = []
        try:
            async with self._conn() as conn:
                # Each statement is a claim of its own (autocommit). Another one follows only
                # when the last one met gated jobs and there is room left: each such round
                # takes a gated job or parks one, so this ends; plain jobs take one round.
                while len(taken) < limit:
                    params: dict[str, object] = {
                        "queues": list(queues),
                        "limit": limit - len(taken),
                        "first": not taken,
                        "now": float(now),
                        "worker": worker,
                        "lease_until": float(lease_until),
                    }
                    cur = await conn.execute(self._q["claim"], params)
                    rows = await cur.fetchall()
                    # RETURNING has no order: restore it (queue, priority, position, id).
                    run = sorted(
                        (r for r in rows if r[0]), key=lambda r: (r[1], -r[13], r[2], r[5])
                    )
                    claimed = [JobRecord(*row[5:]) for row in run]
                    taken.extend(claimed)
                    full = {row[3]: row[4] for row in rows if not row[0]}
                    if full:
                        await conn.execute(
                            self._q["gate_park"],
                            {"gates": list(full), "limits": list(full.values())},
                        )
                    if not any(row[3] is not None for row in rows):
                        break  # no gated job met: nothing left behind one
                    if any(record.lost for record in claimed):
                        break  # a job that lost a worker runs alone
        except BackendUnavailable:
            if not taken:
                raise
            # The jobs of the first rounds are committed as running under this worker: hand
            # them out (the next call meets the outage) rather than let their leases lapse.
        return taken

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        params: dict[str, object] = {
            "worker": worker,
            "ids": list(job_ids),
            "now": float(now),
            "lease_until": float(lease_until),
        }
        row = await self._one("heartbeat", params, retry=True)
        assert row is not None
        alive = set(row[0])
        return [job_id for job_id in job_ids if job_id not in alive]

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        if not outcomes:
            return []

        def params(batch: Sequence[Outcome], with_gates: bool) -> dict[str, object]:
            return {
                "worker": worker,
                "now": float(now),
                "minute": int(now // 60),
                "channel": self.channel,
                "with_gates": with_gates,
                "ids": [o.job_id for o in batch],
                "kinds": [o.kind for o in batch],
                "results": [o.result for o in batch],
                "errors": [o.errors for o in batch],
                "run_at": [None if o.run_at is None else float(o.run_at) for o in batch],
                "expire_at": [None if o.expire_at is None else float(o.expire_at) for o in batch],
                # Empty when no outcome has one: unnest pads it with NULLs (see _enqueue_params).
                "rate_slots": [None if o.rate_slot is None else float(o.rate_slot) for o in batch]
                if any(o.rate_slot is not None for o in batch)
                else [],
            }

        # Plain jobs: one autocommit statement, which leaves gated jobs alone.
        row = await self._one("finish", params(outcomes, False))
        assert row is not None
        applied = set(row[0])
        rest = [o for o in outcomes if o.job_id not in applied]
        if rest:  # gated jobs (or outcomes to drop): the outcome and its freed slot together

            async def gated(conn: psycopg.AsyncConnection[Any]) -> list[str]:
                cur = await conn.execute(self._q["finish"], params(rest, True))
                row = await cur.fetchone()
                assert row is not None
                if row[1]:
                    await self._free_gates(conn, row[1])
                return list(row[0])

            applied.update(await self._transaction(gated))
        return [o.job_id in applied for o in outcomes]

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        params: dict[str, object] = {
            "now": float(now),
            "limit": max(int(limit), 0),
            "channel": self.channel,
        }
        row = await self._one("promote_due", params, retry=True)
        assert row is not None
        return int(row[0]), row[1]

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        limit = max(int(limit), 0)
        params: dict[str, object] = {
            "now": float(now),
            "max_lost": int(max_lost),
            "limit": limit,
            "failed_expire_at": float(failed_expire_at),
            "minute": int(now // 60),
            "channel": self.channel,
            "with_gates": False,
        }
        # Plain jobs: one autocommit statement, which leaves gated jobs alone (see finish).
        row = await self._one("recover", params)
        assert row is not None
        rows = [row]
        left = limit - len(row[0]) - len(row[1]) - len(row[5])
        if row[3] and left > 0:

            async def gated(conn: psycopg.AsyncConnection[Any]) -> Any:
                cur = await conn.execute(
                    self._q["recover"], {**params, "limit": left, "with_gates": True}
                )
                row = await cur.fetchone()
                assert row is not None
                if row[2]:
                    await self._free_gates(conn, row[2])
                return row

            rows.append(await self._transaction(gated))
        # requeued, quarantined, cancelled (columns 0, 1, 5)
        kinds = ((0, True, False), (1, False, False), (5, False, True))
        return [Recovered(i, q, c) for r in rows for n, q, c in kinds for i in r[n]]

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        wanted = frozenset(queues)
        if self._missed & wanted:
            self._missed -= wanted
            return
        started = await self._start_listener()
        if started is None:  # cannot listen (server down?): the poll interval is the fallback
            await asyncio.sleep(timeout)
            return
        if started:  # notifications sent before LISTEN are lost: let the caller look again
            return
        event = asyncio.Event()
        self._waiters[event] = wanted
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            del self._waiters[event]

    async def _start_listener(self) -> bool | None:
        """Make sure the LISTEN connection runs: True if just started, None if it cannot."""
        if self._reader is not None and not self._reader.done():
            return False
        if self._listen_lock is None:
            self._listen_lock = asyncio.Lock()
        async with self._listen_lock:
            if self._reader is not None and not self._reader.done():
                return False
            try:
                conn = await self._connect()
            except BackendUnavailable:
                return None
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            except psycopg.Error:
                await conn.close()
                return None
            self._listener = conn
            self._reader = asyncio.create_task(self._read_notifies(conn))
            return True

    async def _read_notifies(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            async for notify in conn.notifies():
                queue = notify.payload
                woken = False
                for event, wanted in self._waiters.items():
                    if queue in wanted:
                        event.set()
                        woken = True
                if not woken:
                    self._missed.add(queue)
        except psycopg.Error:
            pass  # connection lost: waiters wake below, the next wait reconnects
        finally:
            for event in self._waiters:
                event.set()
            if self._listener is conn:
                self._listener = None
            await conn.close()

    async def _stop_listener(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await reader
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()

    # -- workers -----------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        params: dict[str, object] = {"worker": worker, "now": float(now), "info": Jsonb(info)}
        await self._one("register_worker", params, retry=True)

    async def unregister_worker(self, worker: str) -> None:
        await self._one("unregister_worker", {"worker": worker}, retry=True)

    async def workers(self) -> list[WorkerRecord]:
        rows = await self._all("workers")
        return [WorkerRecord(r[0], r[1], r[2], dict(r[3])) for r in rows]

    # -- operator actions --------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        params: dict[str, object] = {
            "id": job_id,
            "now": float(now),
            "expire_at": float(expire_at),
        }

        async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(self._q["cancel"], params)
            row = await cur.fetchone()
            if row is None:
                return False
            gate, _was_running, was_waiting = row  # a running job keeps its slot for now
            if gate is not None and was_waiting:
                await self._free_gates(conn, [], [gate])
            return True

        return await self._transaction(run)

    async def retry(self, job_id: str, now: float) -> bool:
        params: dict[str, object] = {"id": job_id, "now": float(now), "channel": self.channel}

        async def run(conn: psycopg.AsyncConnection[Any]) -> bool:
            await conn.execute(self._q["retry_take_over"], params)
            cur = await conn.execute(self._q["retry"], params)
            row = await cur.fetchone()
            assert row is not None
            return bool(row[0])

        try:
            return await self._transaction(run)
        except psycopg.errors.UniqueViolation:
            return False  # a holder of its key committed meanwhile: rolled back, unchanged

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        if not requests:
            return []

        async def run(conn: psycopg.AsyncConnection[Any]) -> list[float]:
            keys = [r.key for r in requests]
            cur = await conn.execute(self._q["rate_lock"], {"keys": keys, "now": float(now)})
            state = {key: (tat, not_before) for key, tat, not_before in await cur.fetchall()}
            starts = gcra_slots(requests, float(now), state)
            params = {
                "keys": list(state),
                "tats": [tat for tat, _ in state.values()],
                "not_before": [not_before for _, not_before in state.values()],
            }
            await conn.execute(self._q["rate_store"], params)
            return starts

        return await self._transaction(run)

    async def purge(self, now: float, limit: int) -> int:
        params: dict[str, object] = {
            "now": float(now),
            "limit": max(int(limit), 0),
            "oldest_minute": int((now - 86_400) // 60),
            "worker_cutoff": float(now - 86_400),
        }
        row = await self._one("purge", params, retry=True)
        assert row is not None
        return int(row[0])

    # -- introspection -----------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        row = await self._one("get_job", {"id": job_id}, retry=True)
        return None if row is None else JobRecord(*row)

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        params: dict[str, object] = {
            "key": where.key,
            "status": where.status,
            "task": where.task,
            "queue": where.queue,
            "limit": max(int(limit), 0),
        }
        rows = await self._all("list_jobs" if where.key is None else "list_jobs_by_key", params)
        return [JobRecord(*row) for row in rows]

    async def queue_stats(self) -> list[QueueStats]:
        rows = await self._all("queue_stats")
        return [QueueStats(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]

    async def stats(self, since: float) -> list[StatRow]:
        first_minute = math.ceil(since / 60)
        rows = await self._all("stats", {"first_minute": first_minute})
        return [StatRow(int(r[0]), r[1], r[2], int(r[3]), int(r[4]), int(r[5])) for r in rows]


if TYPE_CHECKING:

    def _conforms(backend: PostgresBackend) -> Backend:
        return backend  # mypy proves PostgresBackend implements the protocol
