"""Migrations of SqliteBackend: the SQL files of ``migrations/``, the storage format, and the
file's page handling (incremental auto_vacuum).

``schema.sql`` beside this module shows what migrating an empty file gives (a test keeps it
true); the migrations themselves are never edited once released: a change is a new file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from typing import Final

from duly._records import StorageFormat
from duly.backends._sql import check_format, format_of, load_migrations
from duly.backends.sqlite._connection import QUERIES, statements, write

__all__ = ["MIGRATIONS", "VACUUM_ON_OPEN_MAX_BYTES", "migrate", "storage_format"]

MIGRATIONS: Final = load_migrations("duly.backends.sqlite")

#: A file made before duly set incremental auto_vacuum is converted with one VACUUM (which
#: rewrites the whole file) when it opens, if it is at most this big: about a second of work.
#: A bigger one keeps its freed pages until converted by hand (see docs/backends.md).
VACUUM_ON_OPEN_MAX_BYTES: Final = 64 * 1024 * 1024

_INCREMENTAL: Final = 2  # PRAGMA auto_vacuum's value for INCREMENTAL


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply the pending migrations in one transaction; the versions applied.
    ``StorageTooNew`` (nothing applied) when a newer duly migrated the database further.
    Then convert a small file of an older duly to incremental auto_vacuum."""

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

    applied = write(conn, apply)
    _incremental_vacuum(conn)
    return applied


def _incremental_vacuum(conn: sqlite3.Connection) -> None:
    """Switch the file to incremental auto_vacuum if it is not yet and small enough.

    Not a numbered migration: an older duly reads such a file as well, so the storage format
    must not change. The setting only takes with a VACUUM, which cannot run in a transaction;
    another process converting at the same time just waits for the lock and finds it done.
    """
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == _INCREMENTAL:
        return
    path = _path(conn)
    if path is None or os.path.getsize(path) > VACUUM_ON_OPEN_MAX_BYTES:
        return
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    with contextlib.suppress(sqlite3.OperationalError):  # busy: the next open tries again
        conn.execute("VACUUM")


def storage_format(conn: sqlite3.Connection) -> StorageFormat:
    """The storage format of the database ``conn`` is open on (see ``_sql.format_of``)."""
    return format_of(MIGRATIONS, [row[0] for row in conn.execute(QUERIES["migrations_applied"])])


def _path(conn: sqlite3.Connection) -> str | None:
    path: str = conn.execute("PRAGMA database_list").fetchone()[2]
    return path or None  # "" for an in-memory or temporary database


def _where(conn: sqlite3.Connection) -> str:
    return f"SQLite database {_path(conn) or ':memory:'}"
