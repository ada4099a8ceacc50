"""``src/duly/backends/postgres/schema.sql`` is the schema the migrations give.

Both are built in empty schemas of their own and compared through the catalog (tables,
columns with their types, collations, defaults and nullability, constraints, indexes,
functions, triggers, sequences, and the rows each table starts with: ``event_trim``'s one),
every schema name replaced by ``<schema>``: a difference of formatting or comments is no
difference, a missing index or a changed function body is.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from importlib import resources

import psycopg
import pytest
from psycopg import sql

from duly.backends.postgres import PostgresBackend

pytestmark = pytest.mark.timeout(60)

_CATALOG = {
    "table": """
        SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = %(s)s::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')""",
    "column": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
               a.attnotnull, coalesce(co.collname, ''),
               coalesce(pg_get_expr(d.adbin, d.adrelid), '')
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_collation co ON co.oid = a.attcollation
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = %(s)s::regnamespace AND c.relkind = 'r'
          AND a.attnum > 0 AND NOT a.attisdropped""",
    "constraint": """
        SELECT c.conrelid::regclass::text, c.conname, c.contype, pg_get_constraintdef(c.oid)
        FROM pg_constraint c WHERE c.connamespace = %(s)s::regnamespace""",
    "index": """
        SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(n)s""",
    "function": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid),
               pg_get_function_result(p.oid), l.lanname, p.provolatile, p.prosrc
        FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = %(s)s::regnamespace""",
    "trigger": """
        SELECT t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = %(s)s::regnamespace AND NOT t.tgisinternal""",
    "sequence": """
        SELECT sequencename, data_type::text, start_value, min_value, max_value, increment_by,
               cycle, cache_size
        FROM pg_sequences WHERE schemaname = %(n)s""",
}


def catalog(url: str, schema: str) -> list[tuple[str, ...]]:
    """The shape of ``schema`` as sorted rows of text: the schema's name is ``<schema>`` and
    runs of whitespace (function bodies) are one space."""
    quoted = sql.Identifier(schema).as_string()
    rows: list[tuple[str, ...]] = []
    with psycopg.connect(url) as conn:
        for kind, query in _CATALOG.items():
            for row in conn.execute(query.encode(), {"s": quoted, "n": schema}).fetchall():
                rows.append((kind, *(str(value) for value in row)))
        tables = conn.execute(_CATALOG["table"].encode(), {"s": quoted}).fetchall()
        # the migrations' own record (schema_version) holds times: not compared
        for (table,) in tables:
            if table == "schema_version":
                continue
            name = f"{quoted}.{sql.Identifier(table).as_string()}"
            for row in conn.execute(f"SELECT * FROM {name}".encode()).fetchall():
                rows.append(("row", table, *(str(value) for value in row)))

    def normal(value: str) -> str:
        value = value.replace(quoted, "<schema>").replace(schema, "<schema>")
        return re.sub(r"\s+", " ", value).strip()

    return sorted(tuple(normal(value) for value in row) for row in rows)


def _schema_sql() -> str:
    return resources.files("duly.backends.postgres").joinpath("schema.sql").read_text("utf-8")


@pytest.fixture
def two_schemas(postgres_url: str) -> Iterator[tuple[str, str]]:
    names = (f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}")
    yield names
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


def _build_from_file(url: str, schema: str) -> None:
    text = _schema_sql().replace("{schema}", sql.Identifier(schema).as_string())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(text.encode())


def test_migrating_an_empty_schema_gives_schema_sql(
    postgres_url: str, two_schemas: tuple[str, str]
) -> None:
    migrated, from_file = two_schemas
    asyncio.run(PostgresBackend(postgres_url, migrated)._schema.migrate(replay=True))
    _build_from_file(postgres_url, from_file)
    expected = catalog(postgres_url, migrated)
    kinds = {row[0] for row in expected}
    assert kinds >= {"table", "column", "constraint", "index", "function", "trigger", "sequence"}
    assert catalog(postgres_url, from_file) == expected
    # The freshness decision is Python's now: migration 0009 dropped its PL/pgSQL copy.
    functions = {row[1] for row in expected if row[0] == "function"}
    assert "fresh_request" not in functions and "fresh_after" in functions


def test_the_comparison_sees_a_difference(postgres_url: str, two_schemas: tuple[str, str]) -> None:
    migrated, from_file = two_schemas
    asyncio.run(PostgresBackend(postgres_url, migrated)._schema.migrate(replay=True))
    _build_from_file(postgres_url, from_file)
    quoted = sql.Identifier(from_file).as_string()
    changes = [
        f"DROP INDEX {quoted}.jobs_status",
        f'ALTER TABLE {quoted}.webhooks ALTER COLUMN key TYPE text COLLATE "default"',
        f"CREATE OR REPLACE FUNCTION {quoted}.fresh_backoff(failures integer, "
        "cap double precision, jitter double precision) RETURNS double precision "
        "LANGUAGE sql IMMUTABLE AS $$ SELECT cap $$",
    ]
    expected = catalog(postgres_url, migrated)
    assert catalog(postgres_url, from_file) == expected
    for change in changes:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {quoted} CASCADE".encode())
        _build_from_file(postgres_url, from_file)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(change.encode())
        assert catalog(postgres_url, from_file) != expected, change


def test_an_empty_schema_is_built_from_schema_sql_as_every_migration_applied(
    postgres_url: str, two_schemas: tuple[str, str]
) -> None:
    replayed, built = two_schemas
    asyncio.run(PostgresBackend(postgres_url, replayed)._schema.migrate(replay=True))
    backend = PostgresBackend(postgres_url, built)
    applied = asyncio.run(backend.migrate())
    fmt = asyncio.run(backend.storage_format())
    assert applied == sorted(applied) and fmt.stored == fmt.readable == applied[-1]
    assert asyncio.run(backend.migrate()) == []  # now an upgrade: nothing left to apply
    assert catalog(postgres_url, built) == catalog(postgres_url, replayed)
