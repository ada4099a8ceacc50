"""What every part of SqliteBackend shares: its named queries, the write transaction, migrations.

Every state change runs in one ``BEGIN IMMEDIATE`` transaction (``write``), which takes the
database's write lock before the first read; the functions of the other modules take the
connection and run inside the caller's transaction.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable
from typing import Final, TypeVar

from duly._records import StorageFormat
from duly.backends._sql import check_format, format_of, load_migrations, load_queries
from duly.backends.sqlite._connection import statements

__all__ = ["MIGRATIONS", "QUERIES", "migrate", "storage_format", "write"]

T = TypeVar("T")

QUERIES: Final = load_queries("duly.backends.sqlite")
MIGRATIONS: Final = load_migrations("duly.backends.sqlite")


def write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
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


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply the pending migrations in one transaction; the versions applied.
    ``StorageTooNew`` (nothing applied) when a newer duly migrated the database further."""

    def apply(conn: sqlite3.Connection) -> list[int]:
        conn.execute(QUERIES["migrations_table"])
        done = {row[0] for row in conn.execute(QUERIES["migrations_applied"])}
        check_format(MIGRATIONS, done, lambda: _where(conn))
        applied = []
        for migration in MIGRATIONS:
            if migration.version in done:
                continue
            for statement in statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                QUERIES["migration_record"],
                {"version": migration.version, "title": migration.title, "applied_at": time.time()},
            )
            applied.append(migration.version)
        return applied

    return write(conn, apply)


def storage_format(conn: sqlite3.Connection) -> StorageFormat:
    """The storage format of the database ``conn`` is open on (see ``_sql.format_of``)."""
    return format_of(MIGRATIONS, [row[0] for row in conn.execute(QUERIES["migrations_applied"])])


def _where(conn: sqlite3.Connection) -> str:
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    return f"SQLite database {path or ':memory:'}"
