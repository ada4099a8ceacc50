"""Raw writes to a backend's storage, for tests that need data duly itself never writes
(a corrupt payload...). They live here, not on the production backends.

Each backend's part writes its own store directly; one not written here yet falls back to the
backend's own testing aid.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from duly.backends.postgres import PostgresBackend

__all__ = ["write_raw_payload"]


async def write_raw_payload(backend: Any, job_id: str, payload: bytes) -> None:
    """Overwrite job ``job_id``'s stored payload with ``payload`` as is (no validation, no
    encoding); a job that is not stored stays so."""
    if isinstance(backend, PostgresBackend):
        query = sql.SQL("UPDATE {}.jobs SET payload = %s WHERE id = %s").format(
            sql.Identifier(backend.schema)
        )
        async with await psycopg.AsyncConnection.connect(backend.url, autocommit=True) as conn:
            await conn.execute(query, [bytes(payload), job_id])
        return
    await backend.write_raw_payload(job_id, payload)
