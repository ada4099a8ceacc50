"""Connections of the PostgreSQL backend: the queries bound to a schema, the pools, outages as
BackendUnavailable, retries.

Every connection is in autocommit (each statement is its own transaction); ``transaction``
opens one only for work of several statements. A pooled connection the server cut since it
was opened (restart, ``pg_terminate_backend``, a proxy) is dropped and replaced at once, on
the async pool and on the sync pool of blocking enqueue alike, and an idempotent statement that
met one is sent again on a fresh connection (``retry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from duly._errors import BackendUnavailable, ConfigurationError
from duly._records import JobRecord
from duly.backends._sql import load_query_folder
from duly.backends.postgres._rows import Rows

__all__ = [
    "CONNECT_TIMEOUT",
    "NOT_OUTAGES",
    "PACKAGE",
    "Connection",
    "Queries",
    "bind",
    "dead_connection",
]

T = TypeVar("T")
R = TypeVar("R")

#: The package that holds ``queries/`` and ``migrations/``.
PACKAGE: Final = __name__.rpartition(".")[0]
#: The ``jobs`` columns in ``JobRecord`` field order, read through the alias ``j``.
_COLUMNS: Final = ", ".join(f"j.{field.name}" for field in dataclasses.fields(JobRecord))
#: Seconds to wait for a connection (connect, or a free one from the pool) before giving up.
CONNECT_TIMEOUT: Final = 5.0
#: Connection failures: the server is down, restarting, or unreachable. Deadlocks and
#: cancelled statements are OperationalErrors too, but they are bugs, not outages.
NOT_OUTAGES: Final = (psycopg.errors.TransactionRollback, psycopg.errors.QueryCanceled)
#: How many times a transaction of several statements is run again after a deadlock. Locks are
#: taken in one order everywhere (jobs, then stats, then gates by key), so this is a safety net.
_DEADLOCK_RETRIES: Final = 3


@functools.cache
def _raw_queries() -> dict[str, str]:
    """The query files, comment lines removed (so ``%(x)s`` in a comment is not a parameter)."""
    return {
        name: "\n".join(
            line for line in body.splitlines() if not line.lstrip().startswith("--")
        ).strip()
        for name, body in load_query_folder(PACKAGE).items()
    }


def bind(text: str, schema: sql.Identifier) -> bytes:
    """Substitute ``{schema}`` and ``{columns}`` in one query; bytes are a psycopg query."""
    quoted = schema.as_string()
    return text.replace("{schema}", quoted).replace("{columns}", _COLUMNS).encode()


class Queries:
    """Every named query of ``queries/*.sql``, bound to one schema."""

    def __init__(self, schema: str) -> None:
        identifier = sql.Identifier(schema)
        self._bound = {name: bind(text, identifier) for name, text in _raw_queries().items()}

    def __getitem__(self, name: str) -> bytes:
        return self._bound[name]


def dead_connection(exc: BaseException) -> bool:
    """True when ``exc`` came from a connection that broke (not from waiting for one)."""
    cause = exc.__cause__
    return isinstance(cause, psycopg.OperationalError) and not isinstance(cause, PoolTimeout)


async def _live_connection(
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
) -> psycopg.AsyncConnection[Any]:
    """A pooled connection that answers. One cut by the server (restart,
    pg_terminate_backend, a proxy) is given back (the pool discards it) and the next one
    is taken at once."""
    deadline = time.monotonic() + CONNECT_TIMEOUT
    task = asyncio.current_task()
    cancelling = task.cancelling() if task is not None else 0
    while True:
        conn = await pool.getconn(max(deadline - time.monotonic(), 0.01))
        if task is not None and task.cancelling() > cancelling:
            # Cancelled while the pool handed the connection over: Python 3.11's wait_for
            # (in psycopg_pool's getconn) then returns it instead of raising. Measured: 2 to 3
            # of 300 cancelled event reads went on as if never cancelled.
            await pool.putconn(conn)
            raise asyncio.CancelledError
        try:
            await conn.execute("")  # what AsyncConnectionPool.check_connection does
        except psycopg.OperationalError:
            await pool.putconn(conn)
            if time.monotonic() >= deadline:
                raise
            continue
        return conn


def _live_connection_blocking(
    pool: ConnectionPool[psycopg.Connection[Any]],
) -> psycopg.Connection[Any]:
    """``_live_connection`` for the sync pool: nothing of the caller's is sent on a pooled
    connection before it has answered an empty query."""
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while True:
        conn = pool.getconn(max(deadline - time.monotonic(), 0.01))
        try:
            conn.execute("")
        except psycopg.OperationalError:
            pool.putconn(conn)
            if time.monotonic() >= deadline:
                raise
            continue
        return conn


class Connection:
    """The server, the schema's bound queries (``q``), the async pool and the sync pool of the
    blocking calls. ``prepare`` runs once before the async pool opens (the backend migrates or
    checks its schema there)."""

    def __init__(
        self,
        url: str,
        schema: str,
        *,
        max_connections: int,
        prepare: Callable[[], Awaitable[None]],
    ) -> None:
        try:
            info = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"invalid PostgreSQL URL: {exc}") from None
        if not schema or len(schema.encode()) > 58:
            raise ConfigurationError(f"invalid PostgreSQL schema name {schema!r}")
        self.url = url
        self.schema = schema
        self.channel = f"duly_{schema}"
        self.max_connections = max_connections
        host = info.get("host") or info.get("hostaddr") or "localhost"
        self.where = f"{host}:{info.get('port') or 5432}/{info.get('dbname') or '?'}"
        # Connection options: autocommit (each statement is its own transaction), a bounded
        # connect time, and a name that shows in pg_stat_activity unless the URL sets one.
        self._options: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": int(CONNECT_TIMEOUT),
        }
        if "application_name" not in info:
            self._options["application_name"] = f"duly/{schema}"
        self.q = Queries(schema)
        self._prepare = prepare
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._open_lock: asyncio.Lock | None = None
        self._sync: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._sync_lock = threading.Lock()

    def unavailable(self, exc: BaseException) -> BackendUnavailable:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return BackendUnavailable(f"PostgreSQL at {self.where} is unavailable: {detail}")

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """A new connection outside the pool (migrations, LISTEN, drop)."""
        try:
            return await psycopg.AsyncConnection.connect(self.url, **self._options)
        except psycopg.OperationalError as exc:
            raise self.unavailable(exc) from exc

    def _pool_settings(self, name: str) -> dict[str, Any]:
        """What both pools (async for the protocol, sync for blocking enqueue) are built with.

        No ``check=``: after a failed check psycopg_pool waits 1 s, 2 s, ... before the next
        attempt, so under repeated cuts no connection survives the wait. ``conn`` and
        ``conn_blocking`` check each connection they hand out and retry at once instead.
        """
        return {
            "min_size": 1,
            "max_size": self.max_connections,
            "open": False,
            "kwargs": self._options,
            "timeout": CONNECT_TIMEOUT,
            "name": name,
        }

    async def open(self) -> None:
        """Open the pool (once; concurrent callers wait for the first) after ``prepare``."""
        if self._pool is not None:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._pool is not None:
                return
            await self._prepare()
            pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
                self.url, **self._pool_settings(f"duly-{self.schema}")
            )
            try:
                await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
            except (PoolTimeout, psycopg.OperationalError) as exc:
                await pool.close()
                raise self.unavailable(exc) from exc
            self._pool = pool

    async def close(self) -> None:
        """Close the async pool (``open`` or any call opens it again)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @contextlib.asynccontextmanager
    async def conn(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled autocommit connection; outages become BackendUnavailable."""
        if self._pool is None:
            await self.open()
        assert self._pool is not None
        pool = self._pool
        try:
            conn = await _live_connection(pool)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self.unavailable(exc) from exc
        try:
            yield conn
        except NOT_OUTAGES:
            raise
        except psycopg.OperationalError as exc:
            raise self.unavailable(exc) from exc
        finally:
            await pool.putconn(conn)

    async def one(
        self, name: str, params: dict[str, object] | None = None, *, retry: bool = False
    ) -> tuple[Any, ...] | None:
        """Run one named statement and return its first row (or None).

        With ``retry``, a statement that met a dead pooled connection (the server restarted
        since it was opened) is sent once more on a fresh one. Only idempotent statements ask
        for it: re-running them after an unknown outcome changes nothing.
        """
        for attempt in (1, 2):
            try:
                async with self.conn() as conn:
                    cur = await conn.execute(self.q[name], params)
                    return await cur.fetchone() if cur.description else None
            except BackendUnavailable as exc:
                if not retry or attempt == 2 or not dead_connection(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def all(
        self, name: str, params: dict[str, object] | None = None, *, rows: Rows[R]
    ) -> list[R]:
        """Run one named read-only statement and return every row, as ``rows`` (the query's
        own codec, see ``_rows``) makes it (retried once, see ``one``)."""
        for attempt in (1, 2):
            try:
                async with self.conn() as conn:
                    cur = conn.cursor(row_factory=rows)
                    return await (await cur.execute(self.q[name], params)).fetchall()
            except BackendUnavailable as exc:
                if attempt == 2 or not dead_connection(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def transaction(
        self,
        work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
        *,
        retry: bool = False,
        atomic: bool = True,
        pipeline: bool = False,
    ) -> T:
        """Run ``work`` (several statements) in one transaction on a pooled connection, or in
        autocommit when it is one statement (``atomic=False``: no BEGIN/COMMIT round trips).
        With ``pipeline``, in pipeline mode: BEGIN goes out with the first statement and
        COMMIT with the last, and statements whose results ``work`` does not read before the
        next one share a round trip (the transaction is as atomic as without).

        After a deadlock the whole transaction runs again (a safety net: see
        ``_DEADLOCK_RETRIES``). With ``retry``, as in ``one``, once more on a fresh connection
        after a dead one (idempotent work only).
        """
        deadlocks = 0
        resent = not retry
        while True:
            try:
                async with self.conn() as conn:
                    if not atomic:
                        return await work(conn)
                    if pipeline:
                        async with conn.pipeline(), conn.transaction():
                            return await work(conn)
                    async with conn.transaction():
                        return await work(conn)
            except psycopg.errors.DeadlockDetected:
                deadlocks += 1
                if deadlocks > _DEADLOCK_RETRIES:
                    raise
            except BackendUnavailable as exc:
                if resent or not dead_connection(exc):
                    raise
                resent = True

    # -- the sync pool of the blocking calls ------------------------------------------------
    def sync_pool(
        self, ready: Callable[[ConnectionPool[psycopg.Connection[Any]]], None]
    ) -> ConnectionPool[psycopg.Connection[Any]]:
        """The sync pool, opened on first use; ``ready(pool)`` then readies the schema."""
        with self._sync_lock:
            if self._sync is not None:
                return self._sync
            pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                self.url, **self._pool_settings(f"duly-sync-{self.schema}")
            )
            try:
                pool.open(wait=True, timeout=CONNECT_TIMEOUT)
                ready(pool)
            except (PoolTimeout, psycopg.OperationalError) as exc:
                pool.close()
                raise self.unavailable(exc) from exc
            except BaseException:
                pool.close()
                raise
            self._sync = pool
            return pool

    @contextlib.contextmanager
    def conn_blocking(
        self, pool: ConnectionPool[psycopg.Connection[Any]]
    ) -> Iterator[psycopg.Connection[Any]]:
        """A live connection of the sync pool (see ``_live_connection_blocking``); waiting
        for one and connecting become BackendUnavailable."""
        try:
            conn = _live_connection_blocking(pool)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self.unavailable(exc) from exc
        try:
            yield conn
        finally:
            pool.putconn(conn)

    def close_blocking(self) -> None:
        """Close the sync pool."""
        with self._sync_lock:
            pool, self._sync = self._sync, None
        if pool is not None:
            pool.close()
