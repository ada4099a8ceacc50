"""The schema of the PostgreSQL backend: migrations, the check with auto_migrate off, the
storage format (the highest migration applied; a newer one than this duly's is refused with
``StorageTooNew``), drop."""

from __future__ import annotations

import functools
import zlib
from typing import Any, Final

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from duly._errors import ConfigurationError
from duly._records import StorageFormat
from duly.backends._sql import check_format, format_of, load_migrations
from duly.backends.postgres._first_use import FirstUse, run_blocking
from duly.backends.postgres._pool import Connections
from duly.backends.postgres._queries import PACKAGE, bind

__all__ = ["Migrations"]

_MIGRATIONS: Final = load_migrations(PACKAGE)


class Migrations(Connections):
    """Bring the schema up to date before the first pool opens (or check it is)."""

    async def _before_open(self) -> None:
        await self._prepare_schema()
        self._first_use.ready = True

    async def _prepare_schema(self) -> None:
        if self.auto_migrate:
            await self.migrate()
        else:
            await self._check_schema()

    @functools.cached_property
    def _first_use(self) -> FirstUse:
        """Readies the schema before the first enqueue on a caller's connection."""
        return FirstUse(self._prepare_schema)

    def _not_migrated(self, exc: BaseException) -> ConfigurationError:
        return ConfigurationError(
            f"PostgreSQL schema {self.schema!r} at {self._where} lacks duly tables or columns "
            f"({exc}): run `duly migrate` (or open the app once) before enqueueing on your own "
            "connection"
        )

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
                check_format(_MIGRATIONS, done, self._format_where)
                for migration in _MIGRATIONS:
                    if migration.version in done:
                        continue
                    async with conn.transaction():
                        await conn.execute(bind(migration.sql, sql.Identifier(self.schema)))
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

    @property
    def _format_where(self) -> str:
        return f"PostgreSQL schema {self.schema!r} at {self._where}"

    async def _applied(self) -> set[int]:
        """The migrations applied to the schema (none when it does not exist)."""
        conn = await self._connect()
        try:
            table = f"{sql.Identifier(self.schema).as_string()}.schema_version"
            cur = await conn.execute(self._q["schema_exists"], {"table": table})
            row = await cur.fetchone()
            if not row or not row[0]:
                return set()
            cur = await conn.execute(self._q["applied_versions"])
            return {r[0] for r in await cur.fetchall()}
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        finally:
            await conn.close()

    async def storage_format(self) -> StorageFormat:
        """The highest migration applied (the format) and the last one this duly has."""
        return format_of(_MIGRATIONS, await self._applied())

    async def _check_schema(self) -> None:
        """With auto_migrate off: fail clearly when the schema is missing, behind or newer."""
        done = await self._applied()
        check_format(_MIGRATIONS, done, self._format_where)
        missing = [m.version for m in _MIGRATIONS if m.version not in done]
        if missing:
            raise ConfigurationError(
                f"PostgreSQL schema {self.schema!r} at {self._where} lacks migrations "
                f"{missing}: run `duly migrate` (or let duly migrate with auto_migrate=True)"
            )

    def _migrated_blocking(self, pool: ConnectionPool[psycopg.Connection[Any]]) -> bool:
        """True when every migration is applied already (``StorageTooNew`` when a newer duly
        applied more), as it is once the app or a worker has opened the schema: two reads on
        the pool's first connection, where ``migrate`` needs a connection of its own, a thread
        and the advisory lock (the first blocking enqueue of a process waited for all of
        that)."""
        table = f"{sql.Identifier(self.schema).as_string()}.schema_version"
        with pool.connection() as conn:
            row = conn.execute(self._q["schema_exists"], {"table": table}).fetchone()
            if not row or not row[0]:
                return False
            done = {r[0] for r in conn.execute(self._q["applied_versions"]).fetchall()}
        check_format(_MIGRATIONS, done, self._format_where)
        return all(m.version in done for m in _MIGRATIONS)

    def _migrate_blocking(self) -> None:
        """Run ``migrate`` from sync code, even from inside a running event loop."""
        run_blocking(self.migrate)

    async def drop(self) -> None:
        """Drop the whole schema (``DROP SCHEMA ... CASCADE``): every job, counter, worker."""
        conn = await self._connect()
        try:
            await conn.execute(self._q["drop_schema"])
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc
        finally:
            await conn.close()
