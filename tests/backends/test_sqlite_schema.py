"""``src/duly/backends/sqlite/schema.sql`` is exactly what migrating an empty file gives.

Compared through the catalog, not as text: each ``sqlite_master`` entry with its SQL normalised
(comments dropped, whitespace collapsed, none around brackets and commas: ``ALTER TABLE ... ADD
COLUMN`` leaves its own spacing in a table's text), and each table's and index's columns as
SQLite reports them (``table_xinfo``, ``index_list``, ``index_xinfo``).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

from duly.backends.sqlite import SqliteBackend
from duly.backends.sqlite._connection import statements

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


def test_migrating_an_empty_file_gives_schema_sql(tmp_path: Path) -> None:
    migrated = tmp_path / "migrated.db"

    async def open_and_close() -> None:
        backend = SqliteBackend(f"sqlite:///{migrated}")
        await backend.open()
        await backend.close()

    asyncio.run(open_and_close())
    written = tmp_path / "written.db"
    schema = resources.files("duly.backends.sqlite").joinpath("schema.sql").read_text("utf-8")
    conn = sqlite3.connect(written, isolation_level=None)
    for statement in statements(schema):
        conn.execute(statement)
    conn.close()

    want, got = catalog(written), catalog(migrated)
    assert got.keys() == want.keys(), "entries only in one of them: " + repr(
        sorted(got.keys() ^ want.keys())
    )
    for entry in sorted(want):
        assert got[entry] == want[entry], entry
    assert ("table", "jobs") in want and ("trigger", "jobs_event_update") in want


def test_normalised_ignores_layout_only() -> None:
    assert normalised("CREATE TABLE t (\n  a INT -- why\n, b  TEXT )") == (
        "CREATE TABLE t(a INT,b TEXT)"
    )
    assert normalised("CREATE TABLE t (a INT)") != normalised("CREATE TABLE t (a TEXT)")
