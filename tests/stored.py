"""Raw writes to a backend's storage, for tests of corrupt or unusual stored data (a payload
duly itself never writes). They bypass every check on purpose, so they live here rather than
on the production backends. Importable from every test folder (``tests/`` is on sys.path
through the root conftest).
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import psycopg
from psycopg import sql

from duly.backends.postgres import PostgresBackend
from duly.backends.redis import RedisBackend
from duly.backends.sqlite import SqliteBackend

__all__ = ["write_raw_payload"]


async def write_raw_payload(backend: Any, job_id: str, payload: bytes) -> None:
    """Overwrite the stored payload of job ``job_id`` as is (no validation, no encoding);
    nothing happens if there is no such job."""
    if isinstance(backend, SqliteBackend):
        await asyncio.to_thread(_sqlite_write_payload, backend.path, job_id, payload)
        return
    if isinstance(backend, PostgresBackend):
        query = sql.SQL("UPDATE {}.jobs SET payload = %s WHERE id = %s").format(
            sql.Identifier(backend.schema)
        )
        async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
            await conn.execute(query, [bytes(payload), job_id])
        return
    if isinstance(backend, RedisBackend):
        client, key = backend._conn.client, backend.keys.job(job_id)
        # EXISTS then HSET, not a script: the test is the only writer of this job.
        if await client.exists(key):
            await client.hset(key, "p", payload)
        return
    raise TypeError(f"no raw write for {type(backend).__name__}")


def _sqlite_write_payload(path: str, job_id: str, payload: bytes) -> None:
    # A connection of its own: another writer of the file, as any process may be.
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    try:
        conn.execute("UPDATE jobs SET payload = ? WHERE id = ?", (payload, job_id))
    finally:
        conn.close()
