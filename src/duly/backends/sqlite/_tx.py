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

from duly.backends._sql import load_migrations, load_queries
from duly.backends.sqlite._connection import statements

__all__ = ["QUERIES", "migrate", "write"]

T = TypeVar("T")

QUERIES: Final = load_queries("duly.backends.sqlite")


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
    """Apply the pending migrations in one transaction; the versions applied."""
    migrations = load_migrations("duly.backends.sqlite")

    def apply(conn: sqlite3.Connection) -> list[int]:
        conn.execute(QUERIES["migrations_table"])
        done = {row[0] for row in conn.execute(QUERIES["migrations_applied"])}
        applied = []
        for migration in migrations:
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
