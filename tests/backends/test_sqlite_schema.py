"""``src/duly/backends/sqlite/schema.sql`` is exactly what replaying every migration on an
empty file gives (an empty file is built from it, an older one migrated).

Compared through the catalog, not as text: each ``sqlite_master`` entry with its SQL normalised
(comments dropped, whitespace collapsed, none around brackets and commas: ``ALTER TABLE ... ADD
COLUMN`` leaves its own spacing in a table's text), and each table's and index's columns as
SQLite reports them (``table_xinfo``, ``index_list``, ``index_xinfo``), and the rows each table
starts with (``event_trim``'s one row).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any

from duly._records import StorageFormat
from duly.backends.sqlite import SqliteBackend
from duly.backends.sqlite._connection import QUERIES, statements
from duly.backends.sqlite._migrate import MIGRATIONS, migrate

_COMMENT = re.compile(r"--[^\n]*")
_SPACE = re.compile(r"\s+")
_AROUND = re.compile(r"\s*([(),])\s*")


def normalised(sql: str) -> str:
    """``sql`` without comments, with one space between words and none around ( ) ,."""
    return _AROUND.sub(r"\1", _SPACE.sub(" ", _COMMENT.sub("", sql))).strip()


def catalog(path: Path) -> dict[tuple[str, str], Any]:
    """The schema of the file at ``path``: every entry and the columns of each table/index."""
    conn = sqlite3.connect(path)
    try:
        found: dict[tuple[str, str], Any] = {}
        tables = []
        for kind, name, table, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master"
        ):
            # sqlite_sequence (from AUTOINCREMENT) and autoindexes: SQLite's own, checked below
            if not name.startswith("sqlite_"):
                found[(kind, name)] = (table, normalised(sql))
            if kind == "table":
                tables.append(name)
        for table in tables:
            # rows a migration seeds (event_trim's one row) are part of the schema; the
            # migrations' own record holds times and is checked by the tests themselves
            if table != "duly_migrations":
                found[("rows", table)] = sorted(conn.execute(f"SELECT * FROM {table}").fetchall())
            found[("columns", table)] = conn.execute(f"PRAGMA table_xinfo({table})").fetchall()
            indexes = sorted(row[1:] for row in conn.execute(f"PRAGMA index_list({table})"))
            found[("indexes", table)] = indexes
            for index, *_ in indexes:
                found[("index columns", index)] = conn.execute(
                    f"PRAGMA index_xinfo({index})"
                ).fetchall()
        return found
    finally:
        conn.close()


def test_an_empty_file_is_built_from_schema_sql_as_every_migration_applied(
    tmp_path: Path,
) -> None:
    built = tmp_path / "built.db"

    async def open_and_close() -> tuple[list[int], StorageFormat]:
        backend = SqliteBackend(f"sqlite:///{built}")
        await backend.open()
        try:
            return await backend.migrate(), await backend.storage_format()
        finally:
            await backend.close()

    again, storage = asyncio.run(open_and_close())
    assert again == []
    assert storage == StorageFormat(stored=MIGRATIONS[-1].version, readable=MIGRATIONS[-1].version)
    recorded = sqlite3.connect(built).execute("SELECT version FROM duly_migrations").fetchall()
    assert [row[0] for row in recorded] == [migration.version for migration in MIGRATIONS]

    replayed = tmp_path / "replayed.db"
    conn = sqlite3.connect(replayed, isolation_level=None)
    assert migrate(conn, replay=True) == [migration.version for migration in MIGRATIONS]
    conn.close()

    want, got = catalog(built), catalog(replayed)
    assert got.keys() == want.keys(), "entries only in one of them: " + repr(
        sorted(got.keys() ^ want.keys())
    )
    for entry in sorted(want):
        assert got[entry] == want[entry], entry
    assert ("table", "jobs") in want and ("trigger", "jobs_event_update") in want


def test_an_older_file_gets_only_the_migrations_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(QUERIES["migrations_table"])
    for migration in MIGRATIONS[:3]:
        for statement in statements(migration.sql):
            conn.execute(statement)
        conn.execute(
            QUERIES["migration_record"],
            {"version": migration.version, "title": migration.title, "applied_at": 0.0},
        )
    assert migrate(conn) == [migration.version for migration in MIGRATIONS[3:]]
    assert migrate(conn) == []
    conn.close()


def test_normalised_ignores_layout_only() -> None:
    assert normalised("CREATE TABLE t (\n  a INT -- why\n, b  TEXT )") == (
        "CREATE TABLE t(a INT,b TEXT)"
    )
    assert normalised("CREATE TABLE t (a INT)") != normalised("CREATE TABLE t (a TEXT)")
