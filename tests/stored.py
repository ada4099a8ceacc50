"""Raw writes into a backend's storage, for tests of corrupt or foreign data (never part of a
backend's production API). Importable from every test folder (``tests/`` is on sys.path)."""

from __future__ import annotations

from typing import Any


async def write_raw_payload(backend: Any, job_id: str, payload: bytes) -> None:
    """Overwrite job ``job_id``'s stored payload without any check; a missing job is left
    missing."""
    from duly.backends.redis import RedisBackend

    if isinstance(backend, RedisBackend):
        client, key = backend._conn.client, backend.keys.job(job_id)
        # EXISTS then HSET, not a script: the test is the only writer of this job.
        if await client.exists(key):
            await client.hset(key, "p", payload)
        return
    # SQLite and PostgreSQL still carry their own raw write (their shape tasks move it here).
    await backend.write_raw_payload(job_id, payload)
