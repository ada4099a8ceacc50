"""PostgreSQL-only behaviour of the concurrency primitives (unique holds, gates, rate slots).

The contract shared with the other backends lives in
``tests/conformance/test_protocol_concurrency.py``. Here: the migration on a schema built by the
previous version, the interleavings READ COMMITTED makes possible (a park committed while a
release waits for the gate row, an insert that waits for an uncommitted holder), the invariant
``gates.running == running jobs of the gate`` under concurrent workers, retention of the new
state, and that plain jobs never pay for any of it. Each test works in a schema of its own.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from psycopg import sql

from duly._ids import new_id
from duly._records import NewJob, Outcome, RateRequest
from duly.backends._sql import load_migrations
from duly.backends.postgres import PostgresBackend

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000.0
_PKG = "duly.backends.postgres"


def new_job(**fields: Any) -> NewJob:
    values: dict[str, Any] = {
        "id": new_id(),
        "task": "tests.add",
        "queue": "default",
        "payload": b"{}",
        "max_attempts": 3,
        "key": None,
        "priority": 0,
        "enqueued_at": T0,
        "scheduled_for": T0,
    }
    values.update(fields)
    return NewJob(**values)


def gated(gate: str = "g", limit: int = 1, **fields: Any) -> NewJob:
    return replace(new_job(**fields), gate=gate, gate_limit=limit)


def unique(key: str = "u", **fields: Any) -> NewJob:
    return replace(new_job(**fields), unique_key=key)


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def with_backend(url: str, schema: str, body: Callable[[PostgresBackend], Awaitable[None]]) -> None:
    async def main() -> None:
        backend = PostgresBackend(url, schema)
        await backend.open()
        try:
            await body(backend)
        finally:
            await backend.close()

    asyncio.run(main())


def query(url: str, schema: str, text: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``text`` with ``{s}`` replaced by the quoted schema; its rows (none for DDL/DML)."""
    quoted = sql.Identifier(schema).as_string()
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(text.replace("{s}", quoted).encode(), params)
        return cur.fetchall() if cur.description else []


async def claim_ids(backend: PostgresBackend, worker: str = "w", limit: int = 10) -> list[str]:
    return [r.id for r in await backend.claim(worker, ["default"], limit, T0, T0 + 30)]


async def succeed(backend: PostgresBackend, job_id: str, worker: str = "w") -> bool:
    outcome = Outcome(job_id, "succeeded", result=b"1", expire_at=T0 + 3600)
    [applied] = await backend.finish(worker, [outcome], T0 + 1)
    return applied


# -- schema ------------------------------------------------------------------------------------


def test_migration_applies_to_a_schema_of_the_previous_version(
    postgres_url: str, schema: str
) -> None:
    """A schema built by 0001+0002 with jobs in it: 0003 keeps them working."""
    before = [m for m in load_migrations(_PKG) if m.version < 3]
    quoted = sql.Identifier(schema).as_string()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {quoted}".encode())
        conn.execute(
            f"CREATE TABLE {quoted}.schema_version (version integer PRIMARY KEY, "
            "title text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())".encode()
        )
        for migration in before:
            with conn.transaction():
                conn.execute(migration.sql.replace("{schema}", quoted).encode())
                conn.execute(
                    f"INSERT INTO {quoted}.schema_version VALUES (%s, %s)".encode(),
                    [migration.version, migration.title],
                )
        # What version 2 stored: a queued job, a running one, a finished one.
        for job_id, status, worker in (("q", "queued", None), ("r", "running", "old")):
            conn.execute(
                f"INSERT INTO {quoted}.jobs (id, task, queue, payload, status, max_attempts, "
                "enqueued_at, position, worker, lease_until, attempts) "
                "VALUES (%s, 't', 'default', '{}', %s, 3, %s, %s, %s, %s, 1)".encode(),
                [job_id, status, T0, T0, worker, T0 + 30 if worker else None],
            )

    async def body(backend: PostgresBackend) -> None:
        assert await backend.migrate() == []  # open() applied 0003
        [claimed] = await backend.claim("w", ["default"], 5, T0, T0 + 30)
        assert (claimed.id, claimed.rate_slot) == ("q", None)
        assert await succeed(backend, "r", worker="old")  # a plain job: no gate to free
        assert await succeed(backend, "q")
        # The new primitives work on the old rows' table.
        [first] = await backend.enqueue([unique()])
        [second] = await backend.enqueue([unique()])
        assert (second.id, second.deduplicated) == (first.id, True)
        mutex = [gated(), gated(enqueued_at=T0 + 1)]
        await backend.enqueue(mutex)
        assert await claim_ids(backend) == [first.id, mutex[0].id]

    with_backend(postgres_url, schema, body)
    versions = query(postgres_url, schema, "SELECT version FROM {s}.schema_version ORDER BY 1")
    assert [v for (v,) in versions] == [m.version for m in load_migrations(_PKG)]


def test_drop_removes_gates_and_rate_limits(postgres_url: str, schema: str) -> None:
    async def body(backend: PostgresBackend) -> None:
        await backend.enqueue([gated()])
        assert len(await claim_ids(backend)) == 1
        await backend.reserve_rate([RateRequest("api", 1.0, 1)], T0)
        await backend.drop()

    with_backend(postgres_url, schema, body)
    found = query(
        postgres_url,
        schema,
        "SELECT to_regclass(%s), to_regclass(%s)",
        [f"{schema}.gates", f"{schema}.rate_limits"],
    )
    assert found == [(None, None)]


def test_claim_plans_keep_to_their_indexes(postgres_url: str, schema: str) -> None:
    """Among many finished rows: a claim reads jobs_ready (never a parked job, never a table
    scan); waking a parked job reads jobs_gated."""

    async def body(backend: PostgresBackend) -> None:
        query(
            postgres_url,
            schema,
            "INSERT INTO {s}.jobs (id, task, queue, payload, status, max_attempts, priority, "
            "enqueued_at, position, finished_at, expire_at) "
            "SELECT 'old' || n, 't', 'default', '', 'succeeded', 1, 0, 0, 0, 0, 10 "
            "FROM generate_series(1, 20000) n",
        )
        await backend.enqueue([new_job() for _ in range(50)] + [gated() for _ in range(50)])
        query(postgres_url, schema, "ANALYZE {s}.jobs")
        plans = {}
        params: dict[str, Any] = {
            "queues": ["default"],
            "limit": 10,
            "first": True,
            "now": T0,
            "worker": "w",
            "lease_until": T0 + 30,
            "gates": ["g"],
            "channel": backend.channel,
        }
        async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
            for name in ("claim", "gate_unpark"):
                cur = await conn.execute(b"EXPLAIN " + backend._db.q[name], params)
                plans[name] = "\n".join(row[0] for row in await cur.fetchall())
            await conn.rollback()
        # (q or q_1: the planner renames the unnest of the queues when it is read twice)
        ready = r"Index Cond: \(\(queue = q(_\d+)?\.name\) AND \(parked = false\)\)"
        assert re.search(ready, plans["claim"])
        assert "using jobs_ready" in plans["claim"]
        assert "Index Cond: ((gate = f.gate) AND (parked = true))" in plans["gate_unpark"]
        for plan in plans.values():
            assert "Seq Scan on jobs" not in plan

    with_backend(postgres_url, schema, body)


# -- retention ---------------------------------------------------------------------------------


def test_purge_forgets_passed_rate_state_and_idle_gates(postgres_url: str, schema: str) -> None:
    async def body(backend: PostgresBackend) -> None:
        await backend.reserve_rate([RateRequest("soon", 1.0, 1)], T0)  # tat T0 + 1
        await backend.reserve_rate([RateRequest("later", 100.0, 1)], T0)  # tat T0 + 100
        idle, busy = gated("idle"), gated("busy")
        await backend.enqueue([idle, busy])
        assert len(await claim_ids(backend)) == 2
        assert await succeed(backend, idle.id)
        await backend.purge(T0 + 50, 100)
        rates = query(postgres_url, schema, "SELECT key FROM {s}.rate_limits ORDER BY 1")
        gates = query(postgres_url, schema, "SELECT key, running FROM {s}.gates ORDER BY 1")
        assert (rates, gates) == ([("later",)], [("busy", 1)])
        # Forgotten state is no state: the key starts afresh, the gate grants its slot.
        assert await backend.reserve_rate([RateRequest("soon", 1.0, 1)], T0 + 50) == [T0 + 50]
        await backend.enqueue([gated("idle")])
        assert len(await claim_ids(backend)) == 1

    with_backend(postgres_url, schema, body)


# -- gates under READ COMMITTED ----------------------------------------------------------------


def test_a_park_committed_while_a_release_waits_is_woken(postgres_url: str, schema: str) -> None:
    """The lost wake-up: a claim finds the gate full and parks a job, holding the gate row;
    the running job finishes meanwhile and waits for that row. Its unpark statement runs after
    the park committed, so it must see (and wake) the parked job."""

    async def body(backend: PostgresBackend) -> None:
        holder, waiting = gated(), gated(enqueued_at=T0 + 1)
        await backend.enqueue([holder, waiting])
        assert await claim_ids(backend, limit=1) == [holder.id]
        params: dict[str, Any] = {
            "queues": ["default"],
            "limit": 5,
            "first": True,
            "now": T0,
            "worker": "other",
            "lease_until": T0 + 30,
        }
        async with await psycopg.AsyncConnection.connect(postgres_url) as claimer:
            cur = await claimer.execute(backend._db.q["claim"], params)
            assert [row[0] for row in await cur.fetchall()] == [False]  # parked, not taken
            finishing = asyncio.ensure_future(succeed(backend, holder.id))
            await asyncio.sleep(0.3)
            assert not finishing.done()  # waiting for the gate row the claim holds
            await claimer.commit()
        assert await finishing
        assert await claim_ids(backend) == [waiting.id]

    with_backend(postgres_url, schema, body)


def test_cancelling_a_woken_job_passes_its_turn_on(postgres_url: str, schema: str) -> None:
    """A freed slot wakes one parked job; if that one is cancelled before any claim reaches it,
    the next parked job is woken instead (else it would wait for a slot that is free)."""

    async def body(backend: PostgresBackend) -> None:
        a, b, c = (gated(enqueued_at=T0 + i) for i in range(3))
        await backend.enqueue([a, b, c])
        assert await claim_ids(backend) == [a.id]  # b and c parked
        assert await succeed(backend, a.id)  # wakes b
        assert await backend.cancel(b.id, T0 + 2, T0 + 99)
        assert await claim_ids(backend) == [c.id]

    with_backend(postgres_url, schema, body)


def test_a_full_gates_backlog_is_set_aside_in_one_claim(postgres_url: str, schema: str) -> None:
    async def body(backend: PostgresBackend) -> None:
        holder = gated()
        await backend.enqueue([holder])
        assert await claim_ids(backend) == [holder.id]
        backlog = [gated(enqueued_at=T0 + 1) for _ in range(300)]
        plain = new_job(enqueued_at=T0 + 2)
        await backend.enqueue([*backlog, plain])
        assert await claim_ids(backend, limit=2) == [plain.id]
        [(parked,)] = query(postgres_url, schema, "SELECT count(*) FROM {s}.jobs WHERE parked")
        assert parked == len(backlog)

    with_backend(postgres_url, schema, body)


def test_gate_counts_equal_running_jobs_under_concurrent_workers(
    postgres_url: str, schema: str
) -> None:
    """Four instances claim, finish (every kind), cancel and recover jobs of three gates while a
    checker reads one snapshot after another: in each, every gate's count equals its running
    jobs and stays within its limit. In the end every job finished and nothing is parked."""
    limits = {"one": 1, "two": 2, "three": 3}
    gates = list(limits)
    jobs = [gated(gates[i % 3], limits[gates[i % 3]], enqueued_at=T0 + i) for i in range(120)]
    jobs += [new_job(enqueued_at=T0 + i) for i in range(30)]
    stop = threading.Event()
    failures: list[str] = []
    check = (
        "SELECT g.key, g.running, count(j.id) FROM {s}.gates g "
        "LEFT JOIN {s}.jobs j ON j.gate = g.key AND j.status = 'running' GROUP BY 1, 2"
    )

    def checker() -> int:
        snapshots = 0
        while not stop.is_set():
            for key, running, actual in query(postgres_url, schema, check):
                if running != actual or running > limits[key]:
                    failures.append(f"gate {key}: count {running}, running jobs {actual}")
            snapshots += 1
        return snapshots

    async def setup(backend: PostgresBackend) -> None:
        await backend.enqueue(jobs)

    async def work(n: int) -> None:
        rng = random.Random(n)
        backend = PostgresBackend(postgres_url, schema, max_connections=3)
        await backend.open()
        try:
            idle = 0
            while idle < 30:
                now = T0 + 100
                await backend.promote_due(now, 100)
                if n == 0 and rng.random() < 0.2:  # as if every lease had lapsed
                    await backend.recover(now + 10, 2, 100, now + 999)
                records = await backend.claim(f"w{n}", ["default"], 3, now, now + 5)
                if not records:
                    idle += 1
                    await asyncio.sleep(0.02)
                    continue
                idle = 0
                outcomes = []
                for record in records:
                    roll = rng.random()
                    if roll < 0.1:
                        await backend.cancel(record.id, now, now + 999)
                    if roll < 0.5 or record.attempts >= 3:
                        outcomes.append(Outcome(record.id, "succeeded", expire_at=now + 999))
                    elif roll < 0.65:
                        outcomes.append(Outcome(record.id, "retry", errors=b"[]", run_at=now))
                    elif roll < 0.8:
                        outcomes.append(Outcome(record.id, "release", run_at=now))
                    elif roll < 0.9:
                        outcomes.append(Outcome(record.id, "again", result=b"1", run_at=now))
                    else:
                        outcomes.append(Outcome(record.id, "failed", errors=b"[]", expire_at=now))
                await asyncio.sleep(rng.random() * 0.005)
                await backend.finish(f"w{n}", outcomes, now + 1)
        finally:
            await backend.close()

    def run_worker(n: int) -> None:
        try:
            asyncio.run(work(n))
        except BaseException as exc:  # reported below: a thread's exception is not raised
            failures.append(f"worker {n}: {exc!r}")

    with_backend(postgres_url, schema, setup)
    result: list[int] = []
    watcher = threading.Thread(target=lambda: result.append(checker()))
    watcher.start()
    try:
        workers = [threading.Thread(target=run_worker, args=(n,)) for n in range(4)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
    finally:
        stop.set()
        watcher.join()
    assert failures == []
    assert result[0] > 10
    active = query(
        postgres_url,
        schema,
        "SELECT status, parked, count(*) FROM {s}.jobs "
        "WHERE status IN ('scheduled', 'queued', 'running', 'retrying') GROUP BY 1, 2",
    )
    assert active == []
    assert set(query(postgres_url, schema, "SELECT running FROM {s}.gates")) <= {(0,)}


# -- unique holds under READ COMMITTED ---------------------------------------------------------


@pytest.mark.parametrize("holder_commits", [True, False])
def test_unique_enqueue_waits_for_an_uncommitted_holder(
    postgres_url: str, schema: str, holder_commits: bool
) -> None:
    """A holder inserted in another open transaction: enqueue waits for it, then returns it
    (it committed) or stores the new job (it rolled back)."""

    async def body(backend: PostgresBackend) -> None:
        holder, late = unique(), unique(enqueued_at=T0 + 1)
        async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
            assert (await backend.transactional.enqueue_async(conn, [holder]))[0].id == holder.id
            waiting = asyncio.ensure_future(backend.enqueue([late]))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await (conn.commit() if holder_commits else conn.rollback())
        [result] = await waiting
        expected = (holder.id, True) if holder_commits else (late.id, False)
        assert (result.id, result.deduplicated) == expected

    with_backend(postgres_url, schema, body)


def test_retry_refuses_when_a_holder_commits_meanwhile(postgres_url: str, schema: str) -> None:
    """retry's check passes while the new holder is uncommitted; its UPDATE then waits on the
    unique index and fails when the holder commits: refused, the job left as it was."""

    async def body(backend: PostgresBackend) -> None:
        old = unique()
        await backend.enqueue([old])
        assert await claim_ids(backend) == [old.id]
        failed = Outcome(old.id, "failed", errors=b"[]", expire_at=T0 + 999)
        assert await backend.finish("w", [failed], T0 + 1) == [True]
        async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
            await backend.transactional.enqueue_async(conn, [unique(enqueued_at=T0 + 2)])
            retrying = asyncio.ensure_future(backend.retry(old.id, T0 + 3))
            await asyncio.sleep(0.3)
            assert not retrying.done()
            await conn.commit()
        assert await retrying is False
        record = await backend.get_job(old.id)
        assert record is not None and record.status == "failed"

    with_backend(postgres_url, schema, body)


def test_unique_jobs_on_the_callers_connection_and_blocking(postgres_url: str, schema: str) -> None:
    backend = PostgresBackend(postgres_url, schema)
    try:
        first, dup = unique(), unique()
        results = backend.enqueue_blocking([first, dup])
        assert [(r.id, r.deduplicated) for r in results] == [(first.id, False), (first.id, True)]
        with psycopg.connect(postgres_url) as conn:
            with conn.transaction(force_rollback=True):
                other = unique("v")
                assert backend.transactional.enqueue(conn, [other, unique("v")])[1].id == other.id
            # Rolled back: the key is free again.
            again = unique("v")
            with conn.transaction():
                assert backend.transactional.enqueue(conn, [again])[0].deduplicated is False
    finally:
        backend.close_blocking()

    async def body(backend: PostgresBackend) -> None:
        assert (await backend.enqueue([unique("v")]))[0].id == again.id

    with_backend(postgres_url, schema, body)


# -- the hot path ------------------------------------------------------------------------------


def test_plain_jobs_never_open_a_transaction(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain batches take one autocommit statement per call: no BEGIN/COMMIT round trips."""

    async def body(backend: PostgresBackend) -> None:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a plain batch opened a transaction")

        monkeypatch.setattr(psycopg.AsyncConnection, "transaction", refuse)
        kinds = ["succeeded", "failed", "retry", "release", "again"]
        await backend.enqueue([new_job() for _ in range(len(kinds) + 1)])
        records = await backend.claim("w", ["default"], 10, T0, T0 + 30)
        outcomes = [
            Outcome(r.id, kind, errors=b"[]", run_at=T0 + 5, expire_at=T0 + 99)  # type: ignore[arg-type]
            for r, kind in zip(records, kinds, strict=False)
        ]
        assert await backend.finish("w", outcomes, T0 + 1) == [True] * len(kinds)
        assert len(await backend.recover(T0 + 31, 3, 10, T0 + 999)) == 1
        monkeypatch.undo()
        # A gated job does take one (the sanity check of this test's trap).
        await backend.enqueue([gated(queue="gated")])
        [record] = await backend.claim("w", ["gated"], 10, T0, T0 + 30)
        monkeypatch.setattr(psycopg.AsyncConnection, "transaction", refuse)
        with pytest.raises(AssertionError, match="opened a transaction"):
            await succeed(backend, record.id)

    with_backend(postgres_url, schema, body)


def test_a_freshness_check_is_one_pipelined_transaction(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check's statements go out in pipeline mode (issue 31.6b): BEGIN with fresh_lock,
    fresh_store with COMMIT, so a check is 2 round trips (3 when it enqueues), not 4-5; its
    transaction stays atomic (the conformance suite's storms check that)."""
    from duly._freshness_state import FreshnessRequest

    def check(scope: str, job_id: str) -> FreshnessRequest:
        job = new_job(id=job_id, key=f"freshness:envs:{scope}")
        return FreshnessRequest(
            "envs", scope, "check", False, 600.0, 3600.0, 300.0, 0.0, 0.5, job, b"{}"
        )

    async def body(backend: PostgresBackend) -> None:
        modes: list[str] = []
        execute = psycopg.AsyncConnection.execute

        async def recording(
            self: psycopg.AsyncConnection[Any], query: Any, *args: Any, **kw: Any
        ) -> Any:
            if query != "":  # the pool's liveness probe of every checkout, before the work
                modes.append(self.info.pipeline_status.name)
            return await execute(self, query, *args, **kw)

        monkeypatch.setattr(psycopg.AsyncConnection, "execute", recording)
        first = new_id()
        [state] = await backend.freshness.sync([check("s", first)], T0)
        assert state.enqueued and state.job_id == first
        [again] = await backend.freshness.sync([check("s", new_id())], T0 + 1)
        assert not again.enqueued and again.job_id == first
        monkeypatch.undo()
        assert modes and set(modes) == {"ON"}, modes
        assert (await backend.get_job(first)) is not None

    with_backend(postgres_url, schema, body)
