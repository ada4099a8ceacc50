"""Contract: every backend records the storage format its data is in, and a duly that reads
only older formats refuses newer data (``StorageTooNew``) instead of running on it.

A newer duly's data is made here by recording a format one past this duly's with the
backend's own driver (the version table of a SQL schema, the ``format`` key of a Redis
namespace): exactly what that newer duly's migration or format step would leave.
"""

from __future__ import annotations

import sqlite3

import pytest
from contract import BackendFactory, new_job

from duly._errors import StorageTooNew
from duly._records import JobFilter
from duly.backends.base import Backend


async def _record_format(backend: Backend, version: int) -> None:
    """Record ``version`` as the format of ``backend``'s data, as a newer duly would."""
    from duly.backends.postgres import PostgresBackend
    from duly.backends.redis import RedisBackend
    from duly.backends.sqlite import SqliteBackend

    if isinstance(backend, SqliteBackend):
        with sqlite3.connect(backend.path) as conn:
            conn.execute(
                "INSERT INTO duly_migrations (version, title, applied_at) VALUES (?, ?, 0)",
                (version, "from a newer duly"),
            )
        conn.close()
    elif isinstance(backend, PostgresBackend):
        import psycopg
        from psycopg import sql

        async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("INSERT INTO {}.schema_version (version, title) VALUES (%s, %s)").format(
                    sql.Identifier(backend.schema)
                ),
                [version, "from a newer duly"],
            )
    else:
        assert isinstance(backend, RedisBackend)
        client = backend._conn.client
        await client.set(backend.keys.format, version)


async def test_an_opened_backend_records_the_format_this_duly_writes(backend: Backend) -> None:
    found = await backend.storage_format()
    assert found.readable >= 1
    assert found.stored == found.readable
    await backend.enqueue([new_job()])
    assert await backend.storage_format() == found


async def test_a_newer_format_is_refused_with_what_to_do(
    backend: Backend, make_backend: BackendFactory
) -> None:
    readable = (await backend.storage_format()).readable
    await _record_format(backend, readable + 1)
    assert (await backend.storage_format()).stored == readable + 1

    older = make_backend()  # this duly, meeting the newer data
    try:
        with pytest.raises(StorageTooNew) as refused:
            await older.open()
        assert (refused.value.stored, refused.value.readable) == (readable + 1, readable)
        message = str(refused.value)
        assert f"stored by format {readable + 1}, this duly reads up to {readable}" in message
        assert message.endswith(": upgrade duly")
        with pytest.raises(StorageTooNew):
            await older.migrate()
        with pytest.raises(StorageTooNew):  # the sync enqueue opens nothing: it checks too
            older.enqueue_blocking([new_job()])
    finally:
        older.close_blocking()
        await older.close()
    assert await backend.list_jobs(JobFilter(), 10) == []  # nothing was stored
    assert (await backend.storage_format()).stored == readable + 1  # not written over


async def test_a_fresh_namespace_records_the_current_format(make_backend: BackendFactory) -> None:
    fresh = make_backend.fresh()
    try:
        fresh.enqueue_blocking([new_job()])  # the first use may be a sync enqueue
        found = await fresh.storage_format()
        assert found.stored == found.readable
    finally:
        fresh.close_blocking()
        await fresh.drop()
        await fresh.close()
