"""Migrations of SqliteBackend: the SQL files of ``migrations/``, the storage format, and the
file's page handling (incremental auto_vacuum).

``schema.sql`` beside this module is what every migration applied gives (a test keeps it
true): an empty file is built from it in one transaction, an existing one upgraded by the
migrations it lacks. The migrations themselves are never edited once released: a change is a
new file (and the same change to ``schema.sql``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from importlib import resources
from typing import Final

from duly._records import StorageFormat
from duly.backends._sql import check_format, format_of, load_migrations
from duly.backends.sqlite._connection import QUERIES, statements, write

__all__ = ["MIGRATIONS", "VACUUM_ON_OPEN_MAX_BYTES", "migrate", "storage_format"]

MIGRATIONS: Final = load_migrations("duly.backends.sqlite")
#: The current schema (see the module docstring): what an empty file gets.
_CURRENT: Final = tuple(
    statements(resources.files("duly.backends.sqlite").joinpath("schema.sql").read_text("utf-8"))
)

#: A file made before duly set incremental auto_vacuum is converted with one VACUUM (which
#: rewrites the whole file) when it opens, if it is at most this big: about a second of work.
#: A bigger one keeps its freed pages until converted by hand (see docs/backends.md).
VACUUM_ON_OPEN_MAX_BYTES: Final = 64 * 1024 * 1024

_INCREMENTAL: Final = 2  # PRAGMA auto_vacuum's value for INCREMENTAL


def migrate(conn: sqlite3.Connection, *, replay: bool = False) -> list[int]:
    """Apply the pending migrations in one transaction; the versions applied.
    ``StorageTooNew`` (nothing applied) when a newer duly migrated the database further.
    Then convert a small file of an older duly to incremental auto_vacuum.

    A file without duly's tables gets ``schema.sql`` instead, recorded as every migration
    applied (a fifth of the time of replaying the history, which ``replay=True`` does; the
    schema test compares the two)."""

    def apply(conn: sqlite3.Connection) -> list[int]:
        if not replay and conn.execute(QUERIES["migrations_table_exists"]).fetchone() is None:
            return _create_current(conn)
        conn.execute(QUERIES["migrations_table"])
        done = {row[0] for row in conn.execute(QUERIES["migrations_applied"])}
        check_format(MIGRATIONS, done, lambda: _where(conn))
        applied = []
        for migration in MIGRATIONS:
            if migration.version in done:
                continue
            for statement in statements(migration.sql):
                conn.execute(statement)
            _record(conn, [migration.version])
            applied.append(migration.version)
        return applied

    applied = write(conn, apply)
    _incremental_vacuum(conn)
    return applied


def _create_current(conn: sqlite3.Connection) -> list[int]:
    """The current schema on an empty file, recorded as every migration applied."""
    for statement in _CURRENT:
        conn.execute(statement)
    versions = [migration.version for migration in MIGRATIONS]
    _record(conn, versions)
    return versions


def _record(conn: sqlite3.Connection, versions: list[int]) -> None:
    titles = {migration.version: migration.title for migration in MIGRATIONS}
    now = time.time()
    conn.executemany(
        QUERIES["migration_record"],
        [{"version": v, "title": titles[v], "applied_at": now} for v in versions],
    )


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
