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

from duly._errors import BackendUnavailable, ConfigurationError
from duly._ids import new_id
from duly._records import JobFilter, NewJob, Outcome
from duly.backends.base import Backend
from duly.backends.postgres import PostgresBackend
from duly.backends.postgres._migrate import Schema

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
            assert [r.id for r in backend.transactional.enqueue(conn, [kept])] == [kept.id]
            assert asyncio.run(_get(postgres_url, schema, kept.id)) is None  # not committed yet
        assert asyncio.run(_get(postgres_url, schema, kept.id)) == "queued"
        with pytest.raises(ZeroDivisionError), conn.transaction():
            backend.transactional.enqueue(conn, [dropped])
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
                    await backend.transactional.enqueue_async(conn, [kept])
                    assert await backend.get_job(kept.id) is None
                assert (await backend.get_job(kept.id)) is not None
                async with conn.transaction(force_rollback=True):
                    await backend.transactional.enqueue_async(conn, [dropped])
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
                    await worker.transactional.enqueue_async(conn, [new_job()])
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
            backend.transactional.enqueue(conn, [kept])
        with Session(engine) as session, session.begin():
            backend.transactional.enqueue(
                session.connection().connection.driver_connection, [dropped]
            )
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


def _kill_idle_pooled(url: str, schema: str) -> int:
    """pg_terminate_backend every idle connection of the schema's pools: how many."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND state = 'idle' AND pid <> pg_backend_pid()",
            [f"duly/{schema}"],
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("unique", [False, True], ids=["plain", "unique"])
def test_a_killed_pooled_connection_never_fails_an_enqueue(
    postgres_url: str, schema: str, unique: bool
) -> None:
    """Issue 28 item 9: an idle pooled connection the server cut (pg_terminate_backend, a
    proxy's idle timeout) is replaced before anything is sent on it, on the sync pool of
    blocking enqueue as on the async pool: the server is up, so no BackendUnavailable."""

    def job() -> NewJob:
        if not unique:
            return new_job()
        return new_job(unique_key=f"u-{uuid.uuid4().hex}", unique_until="finish")

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            stored = [await backend.enqueue([job()])]
            stored.append(backend.enqueue_blocking([job()]))  # both pools hold a connection
            assert _kill_idle_pooled(postgres_url, schema) >= 2
            stored.append(backend.enqueue_blocking([job()]))
            stored.append(await backend.enqueue([job()]))
            assert [len(r) for r in stored] == [1, 1, 1, 1]
            assert not any(r[0].deduplicated for r in stored)
            for results in stored:
                assert await backend.get_job(results[0].id) is not None
        finally:
            backend.close_blocking()
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
    """With auto_migrate off, the missing schema is found on a connection of the backend's own:
    the caller's transaction is not aborted by a failed insert."""
    backend = PostgresBackend(postgres_url, schema, auto_migrate=False)
    with psycopg.connect(postgres_url) as conn, conn.transaction():
        with pytest.raises(ConfigurationError, match="duly migrate"):
            backend.transactional.enqueue(conn, [new_job()])
        assert conn.execute(b"SELECT 1").fetchone() == (1,)  # still usable


def _versions(url: str, schema: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        table = f'"{schema}".schema_version'
        return [r[0] for r in conn.execute(_q(f"SELECT version FROM {table} ORDER BY 1"))]


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
def test_first_use_may_be_a_transactional_enqueue(
    postgres_url: str, schema: str, commit: bool
) -> None:
    """On a fresh schema, the app's very first use is an enqueue inside the caller's
    transaction: the schema is migrated on the app's own connection (kept whatever the caller
    does), and the job exists iff the caller commits."""
    import duly
    from duly.backends._sql import load_migrations

    with duly.App(f"{postgres_url}?namespace={schema}") as app:

        @app.task
        def add(a: int, b: int) -> int:
            return a + b

        with psycopg.connect(postgres_url) as conn, conn.transaction(force_rollback=not commit):
            job = add.options(connection=conn).enqueue(1, 2)
            # the caller's transaction went on: its own statements still run
            assert conn.execute(b"SELECT 1").fetchone() == (1,)
        info = app.get_job(job.id)
        assert (info is not None and info.status == "queued") if commit else info is None
    assert _versions(postgres_url, schema) == [m.version for m in load_migrations(_PKG)]


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
def test_first_use_may_be_a_transactional_enqueue_async(
    postgres_url: str, schema: str, commit: bool
) -> None:
    """The async twin: ``enqueue_async`` / ``enqueue_many_async`` on a
    ``psycopg.AsyncConnection`` as the app's first use."""
    import duly
    from duly.backends._sql import load_migrations

    app = duly.App(f"{postgres_url}?namespace={schema}")

    @app.task
    async def add(a: int, b: int) -> int:
        return a + b

    async def main() -> None:
        try:
            conn = await psycopg.AsyncConnection.connect(postgres_url)
            async with conn, conn.transaction(force_rollback=not commit):
                one = await add.options(connection=conn).enqueue_async(1, 2)
                on_conn = add.options(connection=conn)
                two, three = await app.enqueue_many_async([on_conn.s(3, 4), on_conn.s(5, 6)])
                cur = await conn.execute(b"SELECT 1")
                assert await cur.fetchone() == (1,)
            for job in (one, two, three):
                info = await app.get_job_async(job.id)
                assert (info is not None and info.status == "queued") if commit else info is None
        finally:
            await app.aclose()

    asyncio.run(main())
    app.close()
    assert _versions(postgres_url, schema) == [m.version for m in load_migrations(_PKG)]


# -- bulk enqueue: a plain insert, each column sent once when the batch shares it -----------------

_STORED = (
    "id, task, queue, payload, status, max_attempts, key, priority, enqueued_at, "
    "scheduled_for, position, unique_key, unique_until, unique_expires_at, gate, gate_limit, "
    "attempts, parked"
)


def _stored(url: str, schema: str) -> dict[str, tuple[Any, ...]]:
    """Every stored job's columns as enqueue wrote them, by id."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(_q(f'SELECT {_STORED} FROM "{schema}".jobs')).fetchall()
    return {
        row[0]: tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows
    }


def _expected(job: NewJob) -> tuple[Any, ...]:
    unique = job.unique_key is not None
    return (
        job.id,
        job.task,
        job.queue,
        job.payload,
        "scheduled" if job.scheduled_for > job.enqueued_at else "queued",
        job.max_attempts,
        job.key,
        job.priority,
        job.enqueued_at,
        job.scheduled_for,
        job.enqueued_at,
        job.unique_key,
        job.unique_until if unique else None,
        job.unique_expires_at if unique else None,
        job.gate,
        job.gate_limit if job.gate is not None else None,
        0,
        False,
    )


def _mixed_batches() -> list[list[NewJob]]:
    """Batches whose columns are all shared, or differ in one job only, or in every job."""
    from dataclasses import replace

    def same(n: int = 4) -> list[NewJob]:
        return [new_job() for _ in range(n)]

    def one_differs(**fields: Any) -> list[NewJob]:
        jobs = same()
        jobs[2] = replace(jobs[2], **fields)
        return jobs

    return [
        same(1),
        same(),
        one_differs(task="tests.other"),
        one_differs(queue="other"),
        one_differs(payload=b'{"args":[3],"kwargs":{}}'),
        one_differs(max_attempts=1),
        one_differs(key="user:7"),
        one_differs(priority=-3),
        one_differs(enqueued_at=T0 - 5, scheduled_for=T0 - 5),
        one_differs(scheduled_for=T0 + 60),  # scheduled among queued
        [new_job(scheduled_for=T0 + 60) for _ in range(3)],  # all scheduled
        one_differs(gate="g", gate_limit=2),
        [replace(new_job(), gate="g", gate_limit=1 + i % 2) for i in range(4)],
        [new_job(key=f"k{i}", priority=i, queue=f"q{i % 2}") for i in range(5)],
        one_differs(unique_key="u1", unique_expires_at=T0 + 10),
        one_differs(unique_key="u2", unique_until="start"),
        [replace(new_job(), unique_key=f"each{i}") for i in range(3)],
        [new_job(enqueued_at=T0 + i, scheduled_for=T0 + 2 * i) for i in range(4)],
    ]


@pytest.mark.parametrize("way", ["enqueue", "blocking", "caller_transaction", "caller_autocommit"])
def test_enqueue_stores_every_column_of_mixed_batches(
    postgres_url: str, schema: str, way: str
) -> None:
    """Each column is sent once for the batch or once per job: either way, what is stored is
    every job's own value, on every path (plain insert, or the statement with ON CONFLICT)."""
    backend = PostgresBackend(postgres_url, schema)
    asyncio.run(backend.migrate())
    batches = _mixed_batches()
    try:
        for jobs in batches:
            if way == "enqueue":

                async def run(jobs: list[NewJob] = jobs) -> list[Any]:
                    try:
                        return await backend.enqueue(jobs)
                    finally:
                        await backend.close()

                results = asyncio.run(run())
            elif way == "blocking":
                results = backend.enqueue_blocking(jobs)
            else:
                autocommit = way == "caller_autocommit"
                with psycopg.connect(postgres_url, autocommit=autocommit) as conn:
                    if autocommit:
                        results = backend.transactional.enqueue(conn, jobs)
                    else:
                        with conn.transaction():
                            results = backend.transactional.enqueue(conn, jobs)
            assert [(r.id, r.deduplicated) for r in results] == [(j.id, False) for j in jobs]
    finally:
        backend.close_blocking()
    stored = _stored(postgres_url, schema)
    every = [job for jobs in batches for job in jobs]
    assert stored == {job.id: _expected(job) for job in every}


def test_a_resent_batch_stores_nothing_twice_and_resets_nothing(
    postgres_url: str, schema: str
) -> None:
    """The plain insert fails on an id already stored and stores nothing; the batch then goes
    through ON CONFLICT DO NOTHING, which skips the stored ids (PRODUCT: idempotent enqueue)."""

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            first = [new_job() for _ in range(50)]
            assert not any(r.deduplicated for r in await backend.enqueue(first))
            claimed = await backend.claim("w", ["default"], 10, T0 + 1, T0 + 31)
            assert len(claimed) == 10
            # A resend (async, then blocking), with new jobs among the stored ones.
            more = [new_job() for _ in range(10)]
            results = await backend.enqueue([*more[:5], *first, *more[5:]])
            assert [(r.id, r.deduplicated) for r in results] == [
                *((j.id, False) for j in more[:5]),
                *((j.id, True) for j in first),
                *((j.id, False) for j in more[5:]),
            ]
            again = await asyncio.to_thread(backend.enqueue_blocking, [*first, *more])
            assert all(r.deduplicated for r in again)
            assert [r.id for r in again] == [j.id for j in [*first, *more]]
            # One id twice in a batch: stored once, as the first one.
            twice = new_job()
            results = await asyncio.to_thread(
                backend.enqueue_blocking, [twice, new_job(), replace_payload(twice)]
            )
            assert [r.id for r in results][::2] == [twice.id, twice.id]
            stats = {q.name: q for q in await backend.queue_stats()}
            assert (stats["default"].queued, stats["default"].running) == (52, 10)
            running = {r.id for r in claimed}
            for job in first:
                record = await backend.get_job(job.id)
                assert record is not None
                assert record.status == ("running" if job.id in running else "queued")
                assert record.attempts == (1 if job.id in running else 0)
            record = await backend.get_job(twice.id)
            assert record is not None and record.payload == twice.payload
        finally:
            await backend.drop()
            await backend.close()
            backend.close_blocking()

    asyncio.run(main())


def replace_payload(job: NewJob) -> NewJob:
    from dataclasses import replace

    return replace(job, payload=b'{"args":["second"],"kwargs":{}}')


def test_a_stored_id_on_the_callers_connection(postgres_url: str, schema: str) -> None:
    """In the caller's transaction, an id already stored is skipped without failing (and so
    without aborting) that transaction; in autocommit the plain insert's failure is hidden."""
    backend = PostgresBackend(postgres_url, schema)
    asyncio.run(backend.migrate())
    stored = new_job()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert [r.deduplicated for r in backend.transactional.enqueue(conn, [stored])] == [False]
        fresh = new_job()
        results = backend.transactional.enqueue(conn, [stored, fresh])
        assert [(r.id, r.deduplicated) for r in results] == [(stored.id, True), (fresh.id, False)]
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with psycopg.connect(postgres_url) as conn:
        with conn.transaction():
            later = new_job()
            results = backend.transactional.enqueue(conn, [later, stored])
            assert [r.deduplicated for r in results] == [False, True]
            assert conn.execute("SELECT 1").fetchone() == (1,)  # the transaction goes on
        assert asyncio.run(_get(postgres_url, schema, later.id)) == "queued"


def test_bulk_enqueue_registers_every_queue_and_wakes_those_with_queued_jobs(
    postgres_url: str, schema: str
) -> None:
    backend = PostgresBackend(postgres_url, schema)
    asyncio.run(backend.migrate())
    jobs = [
        *(new_job(queue="now") for _ in range(3)),
        *(new_job(queue="later", scheduled_for=T0 + 60) for _ in range(3)),
        new_job(queue="mixed"),
        new_job(queue="mixed", scheduled_for=T0 + 60),
    ]
    try:
        with psycopg.connect(postgres_url, autocommit=True) as listener:
            listener.execute(_q(f'LISTEN "{backend.channel}"'))
            backend.enqueue_blocking(jobs)
            backend.enqueue_blocking([new_job(queue="idle", scheduled_for=T0 + 60)])
            woken = sorted(n.payload for n in listener.notifies(timeout=0.5))
        assert woken == ["mixed", "now"]

        async def stats() -> list[tuple[str, int, int]]:
            try:
                return [(q.name, q.queued, q.scheduled) for q in await backend.queue_stats()]
            finally:
                await backend.close()

        assert asyncio.run(stats()) == [
            ("idle", 0, 1),
            ("later", 0, 3),
            ("mixed", 1, 1),
            ("now", 3, 0),
        ]
    finally:
        backend.close_blocking()


def test_blocking_enqueue_migrates_only_a_schema_that_needs_it(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first blocking enqueue of a process reads the applied versions on its pool's first
    connection, and runs ``migrate`` (its own connection, the advisory lock) only when one is
    missing."""
    from duly.backends._sql import load_migrations

    # A schema never migrated: the first blocking enqueue migrates it.
    backend = PostgresBackend(postgres_url, schema)
    try:
        assert not backend.enqueue_blocking([new_job()])[0].deduplicated
    finally:
        backend.close_blocking()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table = f'"{schema}".schema_version'
        versions = [r[0] for r in conn.execute(_q(f"SELECT version FROM {table}")).fetchall()]
        assert sorted(versions) == [m.version for m in load_migrations(_PKG)]
    # Migrated: no migration run at all.
    runs: list[str] = []
    monkeypatch.setattr(Schema, "_migrate_blocking", lambda self: runs.append("m"))
    backend = PostgresBackend(postgres_url, schema)
    try:
        backend.enqueue_blocking([new_job()])
        assert runs == []
    finally:
        backend.close_blocking()
    # A version missing (as after an upgrade of duly): migrate runs first.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(_q(f"DELETE FROM {table} WHERE version = {max(versions)}"))
    backend = PostgresBackend(postgres_url, schema)
    try:
        backend.enqueue_blocking([new_job()])
        assert runs == ["m"]
    finally:
        backend.close_blocking()


def test_events_are_notified_only_while_a_reader_waits(postgres_url: str, schema: str) -> None:
    """A status change takes PostgreSQL's global notify lock at commit only while an events
    reader waits (the claims and finishes of a busy drain do not, migration 0007); a waiting
    reader still wakes at once."""

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        channel = f"duly_ev_{schema}"
        try:
            async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as ear:
                await ear.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                heard: list[str] = []
                ear.add_notify_handler(lambda n: heard.append(n.channel))
                await backend.enqueue([new_job()])
                claimed = await backend.claim("w", ["default"], 10, T0 + 1, T0 + 31)
                await ear.execute("SELECT 1")  # delivers what was notified meanwhile
                assert len(claimed) == 1 and heard == []
                _, cursor = await backend.events.read(None, None, 0)
                await backend.events.wait(cursor, None, 0.01)  # starts listening
                waiting = asyncio.ensure_future(backend.events.wait(cursor, None, 10))
                await asyncio.sleep(0.2)
                assert not waiting.done()
                outcome = Outcome(claimed[0].id, "succeeded", b"null", None, None, T0 + 99)
                finished = time.perf_counter()
                await backend.finish("w", [outcome], T0 + 2)
                await waiting
                assert time.perf_counter() - finished < 1.0
                await ear.execute("SELECT 1")
                assert heard == [channel]
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())


def test_event_readers_wait_only_for_transactions_that_wrote_events(
    postgres_url: str, schema: str
) -> None:
    """A transaction open elsewhere on the cluster (another database, or this one without
    events) does not hold event readers back; one holding an uncommitted event does."""

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        try:
            _, start = await backend.events.read(None, None, 0)
            elsewhere = await psycopg.AsyncConnection.connect(
                postgres_url.rsplit("/", 1)[0] + "/postgres"
            )
            await elsewhere.execute("SELECT txid_current()")  # an xid, held open
            await backend.enqueue([new_job()])
            began = time.monotonic()
            events, _ = await backend.events.read(start, None, 10)
            assert len(events) == 1 and time.monotonic() - began < 1.0
            await elsewhere.rollback()
            await elsewhere.close()
            _, start = await backend.events.read(None, None, 0)
            writer = await psycopg.AsyncConnection.connect(postgres_url)
            async with writer, writer.transaction(force_rollback=True):
                await backend.transactional.enqueue_async(writer, [new_job()])
                await backend.enqueue([new_job()])  # committed, after the open one
                # Its id is above the open transaction's: not final yet, not returned.
                assert (await backend.events.read(start, None, 10))[0] == []
            events, _ = await backend.events.read(start, None, 10)
            assert len(events) == 1
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())


def test_a_cancel_the_pool_swallowed_still_cancels(postgres_url: str, schema: str) -> None:
    """Python 3.11's wait_for (in psycopg_pool's getconn) may hand a connection over to a task
    cancelled meanwhile instead of raising: the task must still end cancelled (an SSE reader
    went on reading after its client left), and the connection go back to the pool."""
    from duly.backends.postgres._connection import _live_connection

    async def main() -> None:
        backend = PostgresBackend(postgres_url, schema)
        await backend.open()
        pool = backend._db._pool
        assert pool is not None
        real_getconn = pool.getconn

        async def getconn_then_cancelled(timeout: float | None = None) -> Any:
            conn = await real_getconn(timeout)
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # as the race leaves it: a cancel requested, no CancelledError raised
            return conn

        try:
            idle = pool.get_stats()["pool_available"]
            pool.getconn = getconn_then_cancelled  # type: ignore[method-assign]
            taking = asyncio.create_task(_live_connection(pool))
            with pytest.raises(asyncio.CancelledError):
                await taking
            assert taking.cancelled()
            pool.getconn = real_getconn  # type: ignore[method-assign]
            assert pool.get_stats()["pool_available"] == idle  # given back
            assert await backend.get_job("none") is None  # the pool still works
        finally:
            await backend.drop()
            await backend.close()

    asyncio.run(main())
