"""PostgreSQL-only behaviour: migrations, SKIP LOCKED under real concurrency, LISTEN/NOTIFY,
transactional enqueue on the caller's connection (psycopg sync and async, SQLAlchemy).

The backend contract shared with the other backends lives in ``tests/conformance``. Each test
here works in a schema of its own (``t_<hex>``), dropped afterwards; sync tests drive the async
backend with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from duly.backends.base import Backend
from duly.backends.postgres import PostgresBackend
from duly.errors import BackendUnavailable, ConfigurationError
from duly.ids import new_id
from duly.records import JobFilter, NewJob, Outcome

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000.0


def _q(text: str) -> bytes:
    """A query built at run time (schema names), as psycopg accepts it."""
    return text.encode()


def new_job(queue: str = "default", **fields: Any) -> NewJob:
    values: dict[str, Any] = {
        "id": new_id(),
        "task": "tests.add",
        "queue": queue,
        "payload": b'{"args":[1,2],"kwargs":{}}',
        "max_attempts": 3,
        "key": None,
        "priority": 0,
        "enqueued_at": T0,
        "scheduled_for": T0,
    }
    values.update(fields)
    return NewJob(**values)


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema name, dropped after the test whatever happened."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(_q(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


def test_implements_the_protocol(postgres_url: str, schema: str) -> None:
    assert isinstance(PostgresBackend(postgres_url, schema), Backend)


def test_round_trip_and_claim_order(postgres_url: str, schema: str) -> None:
    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            low, high = new_job(priority=0), new_job(priority=5)
            later = new_job(scheduled_for=T0 + 60)
            results = await backend.enqueue([low, high, later])
            assert [r.id for r in results] == [low.id, high.id, later.id]
            again = await backend.enqueue([low])  # same id: stored once
            assert again[0].deduplicated
            claimed = await backend.claim("w", ["default"], 10, T0 + 1, T0 + 31)
            assert [r.id for r in claimed] == [high.id, low.id]
            # Release one: it goes back to the head of its priority, attempt not charged.
            assert await backend.finish("w", [Outcome(low.id, "release")], T0 + 2) == [True]
            assert await backend.enqueue([new_job(priority=0, enqueued_at=T0 - 50)])
            (head,) = await backend.claim("w", ["default"], 1, T0 + 3, T0 + 33)
            assert (head.id, head.attempts) == (low.id, 1)
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())


def test_concurrent_claims_from_many_connections(postgres_url: str, schema: str) -> None:
    """Eight backends (eight pools) in eight threads drain one queue: each job exactly once."""
    total = 2_000

    async def setup() -> list[str]:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        ids = [r.id for r in await backend.enqueue([new_job() for _ in range(total)])]
        await backend.close()
        return ids

    ids = asyncio.run(setup())
    taken: list[list[str]] = [[] for _ in range(8)]

    def drain(slot: int) -> None:
        async def main() -> None:
            backend = PostgresBackend(postgres_url, schema, max_connections=3)
            await backend.open()
            try:

                async def loop() -> None:
                    while batch := await backend.claim(f"w{slot}", ["default"], 7, T0 + 1, T0 + 99):
                        taken[slot].extend(r.id for r in batch)

                await asyncio.gather(loop(), loop(), loop())  # three connections each
            finally:
                await backend.close()

        asyncio.run(main())

    threads = [threading.Thread(target=drain, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = Counter(job_id for slot in taken for job_id in slot)
    assert sorted(counts) == sorted(ids)
    assert set(counts.values()) == {1}
    assert sum(1 for slot in taken if slot) > 1  # the work really was shared


def test_transactional_enqueue_sync(postgres_url: str, schema: str) -> None:
    backend = PostgresBackend(postgres_url, schema)
    asyncio.run(backend.migrate())  # enqueue_on needs the schema, not an opened backend
    kept, dropped = new_job(), new_job()
    with psycopg.connect(postgres_url) as conn:
        with conn.transaction():
            assert [r.id for r in backend.enqueue_on(conn, [kept])] == [kept.id]
            assert asyncio.run(_get(postgres_url, schema, kept.id)) is None  # not committed yet
        assert asyncio.run(_get(postgres_url, schema, kept.id)) == "queued"
        with pytest.raises(ZeroDivisionError), conn.transaction():
            backend.enqueue_on(conn, [dropped])
            raise ZeroDivisionError  # the application fails: its transaction rolls back
    assert asyncio.run(_get(postgres_url, schema, dropped.id)) is None


def test_transactional_enqueue_async(postgres_url: str, schema: str) -> None:
    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            kept, dropped = new_job(), new_job()
            async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
                async with conn.transaction():
                    await backend.enqueue_on_async(conn, [kept])
                    assert await backend.get_job(kept.id) is None
                assert (await backend.get_job(kept.id)) is not None
                async with conn.transaction(force_rollback=True):
                    await backend.enqueue_on_async(conn, [dropped])
                    assert await backend.get_job(dropped.id) is None
            assert await backend.get_job(dropped.id) is None
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())


def test_notify_is_delivered_at_commit(postgres_url: str, schema: str) -> None:
    """An idle worker wakes within milliseconds of the producer's COMMIT, not before."""

    async def main() -> None:
        worker = PostgresBackend(postgres_url, schema)
        await worker.open()
        try:
            await worker.wait_for_work(["default"], 0.01)  # starts listening
            async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
                async with conn.transaction():
                    await worker.enqueue_on_async(conn, [new_job()])
                    waiting = asyncio.ensure_future(worker.wait_for_work(["default"], 5))
                    await asyncio.sleep(0.2)
                    assert not waiting.done()  # uncommitted: nothing to wake for
                    committed = time.perf_counter()
                await waiting
                assert time.perf_counter() - committed < 0.5
            # A notification for another queue does not wake this waiter.
            started = time.perf_counter()
            other = PostgresBackend(postgres_url, schema)
            await other.enqueue([new_job(queue="other")])
            await worker.wait_for_work(["default"], 0.3)
            assert time.perf_counter() - started >= 0.3
            await other.close()
            # ... but it is remembered for the next wait on that queue.
            started = time.perf_counter()
            await worker.wait_for_work(["other"], 5)
            assert time.perf_counter() - started < 0.1
        finally:
            await worker.drop()
            await worker.close()

    asyncio.run(main())


async def _get(url: str, schema: str, job_id: str) -> str | None:
    backend = PostgresBackend(url, schema, auto_migrate=False)
    try:
        record = await backend.get_job(job_id)
        return None if record is None else record.status
    finally:
        await backend.close()


def test_sqlalchemy_session_recipe(postgres_url: str, schema: str) -> None:
    """The docs/postgres.md recipe: enqueue on the connection a SQLAlchemy Session uses."""
    import sqlalchemy  # in the dev extra: a missing install fails, never skips
    from sqlalchemy.orm import Session

    backend = PostgresBackend(postgres_url, schema)
    asyncio.run(backend.migrate())
    engine = sqlalchemy.create_engine(
        postgres_url.replace("postgresql://", "postgresql+psycopg://")
    )
    kept, dropped = new_job(), new_job()
    try:
        with Session(engine) as session, session.begin():
            session.execute(sqlalchemy.text("SELECT 1"))  # the application's own writes
            conn = session.connection().connection.driver_connection
            backend.enqueue_on(conn, [kept])
        with Session(engine) as session, session.begin():
            backend.enqueue_on(session.connection().connection.driver_connection, [dropped])
            session.rollback()
    finally:
        engine.dispose()
    assert asyncio.run(_get(postgres_url, schema, kept.id)) == "queued"
    assert asyncio.run(_get(postgres_url, schema, dropped.id)) is None


def _catalog(url: str, schema: str) -> list[tuple[object, ...]]:
    """Everything that defines a schema's shape, with its name blanked out."""
    queries = [
        """SELECT 'column', table_name, column_name, ordinal_position, data_type, is_nullable,
                  column_default
           FROM information_schema.columns WHERE table_schema = %(s)s""",
        """SELECT 'index', tablename, indexname, replace(indexdef, %(s)s, '<schema>')
           FROM pg_indexes WHERE schemaname = %(s)s""",
        """SELECT 'constraint', c.conrelid::regclass::text, c.conname,
                  pg_get_constraintdef(c.oid)
           FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
           WHERE n.nspname = %(s)s""",
        """SELECT 'version', version, title FROM {}.schema_version""",
    ]
    rows: list[tuple[object, ...]] = []
    with psycopg.connect(url) as conn:
        for query in queries:
            text = query.format(sql.Identifier(schema).as_string())
            rows += conn.execute(_q(text), {"s": schema}).fetchall()
    return sorted(
        (tuple(str(v).replace(schema, "<schema>") for v in row) for row in rows), key=repr
    )


def test_fresh_schema_equals_migrations_applied_in_order(postgres_url: str, schema: str) -> None:
    """migrate() on an empty schema == every migration file run by hand, in order."""
    from duly.backends._sql import load_migrations

    by_hand = f"{schema}_m"
    fresh = PostgresBackend(postgres_url, schema)
    assert asyncio.run(fresh.migrate()) == [m.version for m in load_migrations(_PKG)]
    assert asyncio.run(fresh.migrate()) == []  # idempotent
    try:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            quoted = sql.Identifier(by_hand).as_string()
            conn.execute(_q(f"CREATE SCHEMA {quoted}"))
            conn.execute(
                _q(
                    f"CREATE TABLE {quoted}.schema_version (version integer PRIMARY KEY, "
                    "title text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                )
            )
            for migration in load_migrations(_PKG):
                with conn.transaction():
                    conn.execute(_q(migration.sql.replace("{schema}", quoted)))
                    conn.execute(
                        _q(f"INSERT INTO {quoted}.schema_version VALUES (%s, %s)"),
                        [migration.version, migration.title],
                    )
        expected = _catalog(postgres_url, by_hand)
        assert len(expected) > 30
        assert _catalog(postgres_url, schema) == expected
        # The comparison sees a difference when there is one.
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(_q(f"DROP INDEX {quoted}.jobs_status"))
        assert _catalog(postgres_url, schema) != _catalog(postgres_url, by_hand)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(_q(f'DROP SCHEMA IF EXISTS "{by_hand}" CASCADE'))


_PKG = "duly.backends.postgres"


def test_concurrent_starters_migrate_once(postgres_url: str, schema: str) -> None:
    async def main() -> list[list[int]]:
        backends = [PostgresBackend(postgres_url, schema) for _ in range(5)]
        return list(await asyncio.gather(*(b.migrate() for b in backends)))

    from duly.backends._sql import load_migrations

    results = asyncio.run(main())
    assert sorted(results) == [[], [], [], [], [m.version for m in load_migrations(_PKG)]]


def test_auto_migrate_off_needs_a_migrated_schema(postgres_url: str, schema: str) -> None:
    backend = PostgresBackend(postgres_url, schema, auto_migrate=False)
    with pytest.raises(ConfigurationError, match="duly migrate"):
        asyncio.run(backend.open())
    asyncio.run(backend.migrate())

    async def open_and_close() -> None:
        await backend.open()
        await backend.ping()
        await backend.close()

    asyncio.run(open_and_close())


def test_unreachable_server_is_backend_unavailable(schema: str) -> None:
    backend = PostgresBackend("postgresql://postgres:s3cret@127.0.0.1:1/nowhere", schema)
    with pytest.raises(BackendUnavailable, match=r"127\.0\.0\.1:1/nowhere") as info:
        asyncio.run(backend.open())
    assert "s3cret" not in str(info.value)
    with pytest.raises(BackendUnavailable):
        asyncio.run(backend.enqueue([new_job()]))


def test_claim_reads_the_ready_index_among_many_finished_rows(
    postgres_url: str, schema: str
) -> None:
    """Bounded growth: finished rows never enter the claim path (partial index)."""

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            quoted = sql.Identifier(schema).as_string()
            async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
                await conn.execute(
                    _q(
                        f"INSERT INTO {quoted}.jobs (id, task, queue, payload, status, "
                        "max_attempts, priority, enqueued_at, position, finished_at, expire_at) "
                        "SELECT 'old' || n, 't', 'default', '', 'succeeded', 1, 0, 0, 0, 0, 10 "
                        "FROM generate_series(1, 50000) n"
                    )
                )
                await conn.execute(_q(f"ANALYZE {quoted}.jobs"))
                await conn.commit()
            await backend.enqueue([new_job() for _ in range(10)])
            started = time.perf_counter()
            assert len(await backend.claim("w", ["default"], 10, T0, T0 + 30)) == 10
            assert time.perf_counter() - started < 0.5
            # Retention deletes in batches and reports how many went.
            assert await backend.purge(T0, 20_000) == 20_000
            assert await backend.purge(T0, 40_000) == 30_000
            assert await backend.purge(T0, 40_000) == 0
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())


def test_quarantine_appends_lost_worker_error(postgres_url: str, schema: str) -> None:
    import json

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            job = new_job()
            await backend.enqueue([job])
            await backend.claim("w", ["default"], 1, T0, T0 + 10)
            history = json.dumps([{"type": "E", "message": "m", "traceback": "", "at": T0}])
            assert await backend.finish(
                "w", [Outcome(job.id, "retry", errors=history.encode(), run_at=T0)], T0 + 1
            ) == [True]
            assert await backend.promote_due(T0 + 1, 10) == (1, None)
            await backend.claim("w", ["default"], 1, T0 + 2, T0 + 10)
            (recovered,) = await backend.recover(T0 + 11, 1, 10, T0 + 999)
            assert not recovered.requeued
            record = await backend.get_job(job.id)
            assert record is not None and record.errors is not None
            assert (record.status, record.lost, record.expire_at) == ("failed", 1, T0 + 999)
            errors = json.loads(record.errors)
            assert [e["type"] for e in errors] == ["E", "LostWorker"]
            assert errors[1] == {
                "type": "LostWorker",
                "message": "lost its worker 1 times",
                "traceback": "",
                "at": T0 + 11,
                "attempt": 2,
            }
            assert [(r.failed, r.retried) for r in await backend.stats(0)] == [(1, 1)]
            assert [j.id for j in await backend.list_jobs(JobFilter(status="failed"), 5)] == [
                job.id
            ]
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())


def test_resumes_after_its_connections_are_killed(postgres_url: str, schema: str) -> None:
    """As after a server restart: every pooled and LISTEN connection dies at once."""

    async def kill_connections() -> None:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [f"duly/{schema}"],
            )

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            job = new_job()
            await backend.enqueue([job])
            await backend.wait_for_work(["default"], 0.01)  # listening
            await kill_connections()
            await asyncio.sleep(0.1)
            # Idempotent calls resend once on a fresh connection: the caller sees nothing.
            assert (await backend.get_job(job.id)) is not None
            await backend.enqueue([new_job()])
            # The listener reconnects by itself; a wake-up may be spurious, never lost.
            await backend.wait_for_work(["default"], 0.5)
            waiting = asyncio.ensure_future(backend.wait_for_work(["default"], 5))
            await asyncio.sleep(0.05)
            started = time.perf_counter()
            await backend.enqueue([new_job()])
            await waiting
            assert time.perf_counter() - started < 0.5
            # A claim is not resent (it is not idempotent): at worst one BackendUnavailable.
            for _ in range(3):
                try:
                    claimed = await backend.claim("w", ["default"], 10, T0, T0 + 30)
                    break
                except BackendUnavailable:
                    continue
            assert len(claimed) == 3
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())


def test_idle_wake_up_latency(postgres_url: str, schema: str) -> None:
    """An idle waiter returns within milliseconds of an enqueue by another process."""

    async def main() -> list[float]:
        worker, producer = (
            PostgresBackend(postgres_url, schema),
            PostgresBackend(postgres_url, schema),
        )
        await worker.open()
        await producer.open()
        latencies = []
        try:
            await worker.wait_for_work(["default"], 0.01)
            for _ in range(20):
                waiting = asyncio.ensure_future(worker.wait_for_work(["default"], 5))
                await asyncio.sleep(0.01)
                started = time.perf_counter()
                await producer.enqueue([new_job()])
                await waiting
                latencies.append(time.perf_counter() - started)
        finally:
            await producer.close()
            await worker.drop()
            await worker.close()
        return sorted(latencies)

    latencies = asyncio.run(main())
    assert latencies[len(latencies) // 2] < 0.1  # p50, including the producer's commit


def test_app_enqueue_inside_the_callers_transaction(postgres_url: str, schema: str) -> None:
    """The public spelling: ``task.options(connection=conn).enqueue(...)`` (PRODUCT §0)."""
    import duly

    with duly.App(f"{postgres_url}?namespace={schema}") as app:

        @app.task
        def add(a: int, b: int) -> int:
            return a + b

        assert app.get_job("nope") is None  # opens the backend: the schema is migrated
        with psycopg.connect(postgres_url) as conn:
            with conn.transaction():
                kept = add.options(connection=conn).enqueue(1, 2)
                assert app.get_job(kept.id) is None
            with conn.transaction(force_rollback=True):
                dropped = add.options(connection=conn).enqueue(3, 4)
        info = app.get_job(kept.id)
        assert info is not None and info.status == "queued"
        assert app.get_job(dropped.id) is None


def test_enqueue_on_an_unmigrated_schema_says_so(postgres_url: str, schema: str) -> None:
    backend = PostgresBackend(postgres_url, schema)
    with psycopg.connect(postgres_url) as conn, pytest.raises(ConfigurationError, match="migrate"):
        backend.enqueue_on(conn, [new_job()])
