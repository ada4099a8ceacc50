"""The schema of the PostgreSQL backend: migrations, the check with auto_migrate off, the
storage format (the highest migration applied; a newer one than this duly's is refused with
``StorageTooNew``), the schema's first use, drop.

``schema.sql`` beside this module is the schema every migration applied gives
(``tests/backends/test_postgres_schema.py`` checks it through the catalog); an empty schema is
built from it in one transaction, an existing one upgraded by the migrations it lacks.

First use on the caller's connection: ``enqueue_on`` runs inside the caller's transaction. On a
fresh schema the first such call (``task.options(connection=conn).enqueue(...)`` as an app's
very first use) would meet missing tables there, and a failed statement aborts the caller's
whole transaction. Migrating on the caller's connection would be no better: the DDL would
commit or roll back with the caller's work, and hold its locks until then. So before its first
enqueue on a caller's connection, a backend readies the schema on a connection of its own
(``Schema.ensure`` / ``ensure_blocking``); later calls cost one attribute read.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Callable, Coroutine
from importlib import resources
from typing import Any, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from duly._errors import ConfigurationError
from duly._records import StorageFormat
from duly.backends._sql import check_format, format_of, load_migrations
from duly.backends.postgres._connection import PACKAGE, Connection, bind

__all__ = ["Schema", "run_blocking"]

T = TypeVar("T")

_MIGRATIONS: Final = load_migrations(PACKAGE)
#: The current schema in one script (see the module docstring): what an empty schema gets.
_CURRENT: Final = resources.files(PACKAGE).joinpath("schema.sql").read_text("utf-8")


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` to its end from sync code, even from inside a running
    event loop (on a thread of its own, with a loop of its own); re-raise its error."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(make()))
        except BaseException as exc:  # re-raised on the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="duly-migrate")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


class Schema:
    """Brings the schema up to date (``auto_migrate``) or checks it is, once per backend."""

    def __init__(self, db: Connection, auto_migrate: bool) -> None:
        self._db = db
        self.auto_migrate = auto_migrate
        #: Set once the schema was seen complete (by ``prepare`` or the backend's ``open``).
        #: Two first uses at once may both prepare: migrating is idempotent and serialised by
        #: an advisory lock, so that costs a few statements, never a wrong schema.
        self.ready = False

    async def before_open(self) -> None:
        """Run by ``Connection.open`` before the pool opens."""
        await self._prepare()
        self.ready = True

    async def _prepare(self) -> None:
        if self.auto_migrate:
            await self.migrate()
        else:
            await self._check()

    def ensure_blocking(self) -> None:
        """Ready the schema from sync code (a no-op once ready)."""
        if not self.ready:
            run_blocking(self._prepare)
            self.ready = True

    async def ensure(self) -> None:
        """Ready the schema from async code (a no-op once ready)."""
        if not self.ready:
            await self._prepare()
            self.ready = True

    def not_migrated(self, exc: BaseException) -> ConfigurationError:
        db = self._db
        return ConfigurationError(
            f"PostgreSQL schema {db.schema!r} at {db.where} lacks duly tables or columns "
            f"({exc}): run `duly migrate` (or open the app once) before enqueueing on your own "
            "connection"
        )

    async def migrate(self, *, replay: bool = False) -> list[int]:
        """Apply the pending migrations, one transaction each; return the versions applied.

        A schema without duly's tables gets ``schema.sql`` (every migration's result) in one
        transaction, recorded as every migration applied: a third of the time of replaying
        the history, which ``replay=True`` does instead (the schema test compares the two).
        Runs under a session advisory lock keyed by the schema name, so processes starting
        together apply each migration once (the others wait, then find nothing to do).
        """
        db = self._db
        lock_key = zlib.crc32(f"duly.migrate:{db.schema}".encode())
        applied: list[int] = []
        conn = await db.connect()
        try:
            await conn.execute("SELECT pg_advisory_lock(%s)", [lock_key])
            try:
                if not replay and not await self._has_version_table(conn):
                    return await self._create_current(conn)
                await conn.execute(db.q["create_version_table"])
                cur = await conn.execute(db.q["applied_versions"])
                done = {row[0] for row in await cur.fetchall()}
                check_format(_MIGRATIONS, done, self._format_where)
                for migration in _MIGRATIONS:
                    if migration.version in done:
                        continue
                    async with conn.transaction():
                        await conn.execute(bind(migration.sql, sql.Identifier(db.schema)))
                        await conn.execute(
                            db.q["record_version"],
                            {"version": migration.version, "title": migration.title},
                        )
                    applied.append(migration.version)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", [lock_key])
        except psycopg.OperationalError as exc:
            raise db.unavailable(exc) from exc
        finally:
            await conn.close()
        return applied

    async def _has_version_table(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        cur = await conn.execute(self._db.q["schema_exists"], {"table": self._version_table})
        row = await cur.fetchone()
        return bool(row and row[0])

    async def _create_current(self, conn: psycopg.AsyncConnection[Any]) -> list[int]:
        """The current schema on an empty one, recorded as every migration applied."""
        db = self._db
        async with conn.transaction():
            await conn.execute(bind(_CURRENT, sql.Identifier(db.schema)))
            async with conn.cursor() as cur:
                await cur.executemany(
                    db.q["record_version"],
                    [{"version": m.version, "title": m.title} for m in _MIGRATIONS],
                )
        return [migration.version for migration in _MIGRATIONS]

    @property
    def _format_where(self) -> str:
        return f"PostgreSQL schema {self._db.schema!r} at {self._db.where}"

    @property
    def _version_table(self) -> str:
        return f"{sql.Identifier(self._db.schema).as_string()}.schema_version"

    async def _applied(self) -> set[int]:
        """The migrations applied to the schema (none when it does not exist)."""
        db = self._db
        conn = await db.connect()
        try:
            if not await self._has_version_table(conn):
                return set()
            cur = await conn.execute(db.q["applied_versions"])
            return {r[0] for r in await cur.fetchall()}
        except psycopg.OperationalError as exc:
            raise db.unavailable(exc) from exc
        finally:
            await conn.close()

    async def storage_format(self) -> StorageFormat:
        """The highest migration applied (the format) and the last one this duly has."""
        return format_of(_MIGRATIONS, await self._applied())

    async def _check(self) -> None:
        """With auto_migrate off: fail clearly when the schema is missing, behind or newer."""
        done = await self._applied()
        check_format(_MIGRATIONS, done, self._format_where)
        missing = [m.version for m in _MIGRATIONS if m.version not in done]
        if missing:
            db = self._db
            raise ConfigurationError(
                f"PostgreSQL schema {db.schema!r} at {db.where} lacks migrations "
                f"{missing}: run `duly migrate` (or let duly migrate with auto_migrate=True)"
            )

    def ready_blocking(self, pool: ConnectionPool[psycopg.Connection[Any]]) -> None:
        """Once the sync pool opened: migrate unless every migration is applied already."""
        if self.auto_migrate and not self._migrated_blocking(pool):
            self._migrate_blocking()
        self.ready |= self.auto_migrate

    def _migrate_blocking(self) -> None:
        """Run ``migrate`` from sync code, even from inside a running event loop."""
        run_blocking(self.migrate)

    def _migrated_blocking(self, pool: ConnectionPool[psycopg.Connection[Any]]) -> bool:
        """True when every migration is applied already (``StorageTooNew`` when a newer duly
        applied more), as it is once the app or a worker has opened the schema: two reads on
        the pool's first connection, where ``migrate`` needs a connection of its own, a thread
        and the advisory lock (the first blocking enqueue of a process waited for all of
        that)."""
        q = self._db.q
        with pool.connection() as conn:
            row = conn.execute(q["schema_exists"], {"table": self._version_table}).fetchone()
            if not row or not row[0]:
                return False
            done = {r[0] for r in conn.execute(q["applied_versions"]).fetchall()}
        check_format(_MIGRATIONS, done, self._format_where)
        return all(m.version in done for m in _MIGRATIONS)

    async def drop(self) -> None:
        """Drop the whole schema (``DROP SCHEMA ... CASCADE``): every job, counter, worker."""
        db = self._db
        conn = await db.connect()
        try:
            await conn.execute(db.q["drop_schema"])
        except psycopg.OperationalError as exc:
            raise db.unavailable(exc) from exc
        finally:
            await conn.close()
