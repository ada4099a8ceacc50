"""PostgreSQL-only behaviour of paused queues: a claim orders itself with a pause by an
advisory lock (in memory), never a lock on the queue's row (a tuple dirtied, WAL written by
every poll), and a pause waits for the claims under way."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator

import psycopg
import pytest

from duly._ids import new_id
from duly._records import NewJob
from duly.backends.pausing import PAUSING
from duly.backends.postgres import PostgresBackend

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000.0


def _job(queue: str) -> NewJob:
    return NewJob(
        id=new_id(),
        task="tests.add",
        queue=queue,
        payload=b'{"args":[1,2],"kwargs":{}}',
        max_attempts=3,
        key=None,
        priority=0,
        enqueued_at=T0,
        scheduled_for=T0,
    )


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema name, dropped after the test whatever happened."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


def _run(url: str, schema: str, test: Callable[[PostgresBackend], Awaitable[None]]) -> None:
    async def main() -> None:
        backend = PostgresBackend(url, schema)
        await backend.open()
        try:
            await test(backend)
        finally:
            await backend.close()

    asyncio.run(main())


async def _xmax(url: str, schema: str, queue: str) -> str:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        query = f'SELECT xmax::text FROM "{schema}".queues WHERE name = %s'.encode()
        row = await (await conn.execute(query, [queue])).fetchone()
        assert row is not None
        return str(row[0])


def test_an_empty_poll_locks_no_queue_row(postgres_url: str, schema: str) -> None:
    _run(postgres_url, schema, lambda backend: _empty_poll(backend, postgres_url))


async def _empty_poll(backend: PostgresBackend, postgres_url: str) -> None:
    pausing = PAUSING.of(backend)
    assert await pausing.pause("idle", T0)
    assert await pausing.resume("idle")  # the queue's row exists, not paused
    before = await _xmax(postgres_url, backend._db.schema, "idle")
    for _ in range(3):
        assert await backend.claim("w1", ["idle"], 5, T0, T0 + 60) == []
    assert await _xmax(postgres_url, backend._db.schema, "idle") == before  # no row lock


def test_a_pause_waits_for_a_claim_under_way_and_later_claims_see_it(
    postgres_url: str, schema: str
) -> None:
    _run(postgres_url, schema, lambda backend: _pause_waits(backend, postgres_url))


async def _pause_waits(backend: PostgresBackend, postgres_url: str) -> None:
    db = backend._db
    await backend.enqueue([_job("hot"), _job("hot")])
    async with await psycopg.AsyncConnection.connect(postgres_url) as claimer:
        # A claim's transaction holding its queues' lock (claim_lock), not committed yet.
        params = {"queues": ["hot"], "schema": db.schema}
        await claimer.execute(db.q["claim_lock"], params)
        pause = asyncio.create_task(PAUSING.of(backend).pause("hot", T0))
        await _until_waiting_for_an_advisory_lock(postgres_url)
        assert not pause.done()
        await claimer.commit()
        assert await pause
    assert await backend.claim("w1", ["hot"], 5, T0, T0 + 60) == []


async def _until_waiting_for_an_advisory_lock(url: str) -> None:
    query = b"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(500):
            row = await (await conn.execute(query)).fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.01)
    raise AssertionError("the pause never waited for the claim's lock")
