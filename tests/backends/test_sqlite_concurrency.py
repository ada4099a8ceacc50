"""SQLite specifics of the concurrency primitives (unique holds, gates, rate slots).

The behaviour every backend shares is in ``tests/conformance/test_protocol_concurrency.py``; this
file covers the SQLite schema (migration 0002 on a database made by 0001, the indexes the new
statements read, what the database itself refuses) and the gate invariants under a long random
mix of operations.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from duly._ids import new_id
from duly._records import NewJob, Outcome, RateRequest
from duly.backends._sql import load_migrations, load_query_folder
from duly.backends.sqlite import SqliteBackend
from duly.backends.sqlite._connection import statements

T = TypeVar("T")
NOW = 1_700_000_000.0


def job(
    queue: str = "default",
    *,
    gate: str | None = None,
    limit: int = 1,
    unique: str | None = None,
    priority: int = 0,
    at: float = NOW,
) -> NewJob:
    new = NewJob(new_id(), "t", queue, b"[[],{}]", 3, None, priority, at, at)
    if gate is not None:
        new = replace(new, gate=gate, gate_limit=limit)
    return replace(new, unique_key=unique)


def with_backend(path: Path, fn: Callable[[SqliteBackend], Awaitable[T]]) -> T:
    async def main() -> T:
        backend = SqliteBackend(f"sqlite:///{path}")
        await backend.open()
        try:
            return await fn(backend)
        finally:
            await backend.close()

    return asyncio.run(main())


def rows(path: Path, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "duly.db"


# -- schema ------------------------------------------------------------------------------------
def test_migration_0002_upgrades_a_database_made_by_0001(db: Path) -> None:
    first = load_migrations("duly.backends.sqlite")[0]
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(load_query_folder("duly.backends.sqlite")["migrations_table"])
    for statement in statements(first.sql):
        conn.execute(statement)
    conn.execute("INSERT INTO duly_migrations VALUES (1, 'initial', 0)")
    old_id = new_id()
    conn.execute(
        "INSERT INTO jobs (id, task, queue, payload, status, max_attempts, priority, enqueued_at,"
        " scheduled_for, position) VALUES (?, 't', 'default', x'5b5d', 'queued', 3, 0, ?, ?, ?)",
        (old_id, NOW, NOW, NOW),
    )
    conn.close()

    async def scenario(b: SqliteBackend) -> list[str]:
        assert await b.migrate() == []  # open() applied 0002 already
        gated = job(gate="g")
        await b.enqueue([gated, job(gate="g")])
        claimed = await b.claim("w", ["default"], 5, NOW + 1, NOW + 30)
        return [j.id for j in claimed]

    assert with_backend(db, scenario)[0] == old_id  # the old job is claimable, first in line
    versions = [(m.version,) for m in load_migrations("duly.backends.sqlite")]
    assert rows(db, "SELECT version FROM duly_migrations ORDER BY version") == versions
    assert rows(db, "SELECT parked, unique_until, gate FROM jobs WHERE id = ?", (old_id,)) == [
        (0, "finish", None)
    ]
    assert rows(db, "SELECT count(*) FROM jobs WHERE parked = 1") == [(1,)]
    plan = rows(db, "EXPLAIN QUERY PLAN SELECT id FROM jobs INDEXED BY jobs_claim "
                    "WHERE status = 'queued' AND parked = 0 AND queue = 'default'")  # fmt: skip
    assert "jobs_claim" in str(plan)


def test_new_statements_read_their_indexes(db: Path) -> None:
    with_backend(db, lambda b: b.ping())
    queries = load_query_folder("duly.backends.sqlite")
    params: dict[str, Any] = {
        "queue": "q", "limit": 10, "now": NOW, "worker": "w", "lease_until": NOW, "may_lead": 1,
        "gate": "g", "gate_limit": 2, "unique_key": "k", "id": "x", "keys": '["k"]',
    }  # fmt: skip
    expected = {
        "claim": {"jobs_claim", "jobs_gate"},
        "unpark": {"jobs_parked", "jobs_gate"},
        "unique_holder": {"jobs_unique"},
        "retry_candidate": {"PRIMARY KEY"},
        "rate_states": {"PRIMARY KEY"},
    }
    conn = sqlite3.connect(db)
    for name, indexes in expected.items():
        plan = " ".join(
            str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + queries[name], params)
        )
        assert all(index in plan for index in indexes), (name, plan)
        assert "SCAN jobs" not in plan and "SCAN ahead" not in plan, (name, plan)
    conn.close()


def test_the_database_refuses_a_second_active_holder(db: Path) -> None:
    holder = job(unique="k")
    with_backend(db, lambda b: b.enqueue([holder]))
    columns = [row[1] for row in rows(db, "PRAGMA table_info(jobs)")]
    copy = list(rows(db, "SELECT * FROM jobs WHERE id = ?", (holder.id,))[0])
    copy[columns.index("id")] = new_id()
    insert = f"INSERT INTO jobs VALUES ({', '.join('?' for _ in columns)})"
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError, match="unique_key"):
        conn.execute(insert, copy)
    copy[columns.index("status")] = "succeeded"  # a finished job keeps its key, outside the hold
    conn.execute(insert, copy)
    conn.close()


def test_drop_forgets_parked_jobs_and_rate_state(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        await b.enqueue([job(gate="g"), job(gate="g"), job(unique="u")])
        await b.claim("w", ["default"], 5, NOW, NOW + 30)
        await b.reserve_rate([RateRequest("api", 1.0, 1)], NOW)
        await b.drop()

    with_backend(db, scenario)
    assert rows(db, "SELECT count(*) FROM jobs") == [(0,)]
    assert rows(db, "SELECT count(*) FROM rate_limits") == [(0,)]


def test_purge_forgets_rate_state_whose_tat_has_passed(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> list[float]:
        await b.reserve_rate([RateRequest("short", 1.0, 1)], NOW)  # tat NOW + 1
        await b.reserve_rate([RateRequest("long", 60.0, 1)] * 2, NOW)  # tat NOW + 120
        await b.purge(NOW + 1, 10)
        return await b.reserve_rate([RateRequest("long", 60.0, 1)], NOW + 1)

    assert with_backend(db, scenario) == [NOW + 120]  # the live key kept its schedule
    assert rows(db, "SELECT key FROM rate_limits") == [("long",)]


def test_not_before_holds_for_every_slot_of_a_burst(db: Path) -> None:
    fast = RateRequest("api", interval=1.0, burst=3)
    paused = replace(fast, not_before=NOW + 30)

    async def scenario(b: SqliteBackend) -> list[float]:
        return await b.reserve_rate([paused, fast, fast, fast, fast], NOW)

    # the burst is there again at not_before, and nothing starts before it
    assert with_backend(db, scenario) == [NOW + 30, NOW + 30, NOW + 30, NOW + 31, NOW + 32]


# -- gates -------------------------------------------------------------------------------------
def test_one_claim_looks_past_parked_jobs_up_to_its_limit(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        gated = [job(gate="g", at=NOW + i) for i in range(6)]
        plain = [job(at=NOW + 10 + i) for i in range(3)]
        await b.enqueue([*gated, *plain])
        got = await b.claim("w", ["default"], 4, NOW + 20, NOW + 50)
        assert [j.id for j in got] == [gated[0].id] + [j.id for j in plain]
        assert rows(db, "SELECT count(*) FROM jobs WHERE parked = 1") == [(5,)]

    with_backend(db, scenario)


def test_a_claim_ranks_a_gate_s_candidates_in_claim_order(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        low = job(gate="g", limit=2, at=NOW)
        high = [job(gate="g", limit=2, priority=5, at=NOW + i) for i in (1, 2)]
        other = job(gate="h", limit=2, at=NOW + 3)
        await b.enqueue([low, *high, other])
        got = await b.claim("w", ["default"], 10, NOW + 5, NOW + 30)
        assert [j.id for j in got] == [high[0].id, high[1].id, other.id]
        assert await b.finish("w", [Outcome(high[1].id, "succeeded")], NOW + 6) == [True]
        assert [j.id for j in await b.claim("w", ["default"], 10, NOW + 7, NOW + 30)] == [low.id]

    with_backend(db, scenario)


def test_cancelling_a_ready_gated_job_unparks_the_next(db: Path) -> None:
    """An unparked job cancelled before it ran must not strand the jobs parked behind it."""

    async def scenario(b: SqliteBackend) -> None:
        jobs = [job(gate="g", at=NOW + i) for i in range(3)]
        await b.enqueue(jobs)
        assert [j.id for j in await b.claim("w", ["default"], 5, NOW, NOW + 30)] == [jobs[0].id]
        assert await b.finish("w", [Outcome(jobs[0].id, "succeeded")], NOW + 1) == [True]
        assert await b.cancel(jobs[1].id, NOW + 2, NOW + 99)  # unparked, then cancelled
        got = await b.claim("w", ["default"], 5, NOW + 3, NOW + 30)
        assert [j.id for j in got] == [jobs[2].id]

    with_backend(db, scenario)


def test_gate_invariants_hold_under_a_random_mix(db: Path) -> None:
    """Hundreds of random operations over three gates and two queues; after each one, every
    gate runs at most its limit, and a gate with parked jobs has its free slots spoken for by
    ready jobs (so no parked job is stranded)."""
    limits = {"a": 1, "b": 2, "c": 3}
    rng = random.Random(7)

    def check(step: int) -> None:
        for gate, limit in limits.items():
            counts = dict(
                rows(
                    db,
                    "SELECT iif(parked, 'parked', status), count(*) FROM jobs WHERE gate = ? "
                    "AND status IN ('queued', 'running') GROUP BY 1",
                    (gate,),
                )
            )
            running, ready = counts.get("running", 0), counts.get("queued", 0)
            assert running <= limit, (step, gate, counts)
            if counts.get("parked", 0):
                assert running + ready >= limit, (step, gate, counts)

    async def scenario(b: SqliteBackend) -> None:
        now = NOW
        running: dict[str, str] = {}  # job id -> worker
        for step in range(400):
            now += 1
            action = rng.random()
            if action < 0.3:
                gate = rng.choice([*limits, None])
                new = job(rng.choice(["q1", "q2"]), priority=rng.randint(0, 2), at=now)
                if gate is not None:
                    new = replace(new, gate=gate, gate_limit=limits[gate])
                await b.enqueue([new])
            elif action < 0.6:
                worker = rng.choice(["w1", "w2"])
                queues = rng.sample(["q1", "q2"], 2)
                claimed = await b.claim(worker, queues, rng.randint(1, 4), now, now + 5)
                running.update((j.id, worker) for j in claimed)
            elif action < 0.85 and running:
                job_id = rng.choice(sorted(running))
                kind: Any = rng.choice(["succeeded", "failed", "retry", "release", "again"])
                outcome = Outcome(job_id, kind, errors=b"[]", run_at=now + rng.choice([0, 3]))
                await b.finish(running.pop(job_id), [outcome], now)
            elif action < 0.92:
                victims = rows(db, "SELECT id FROM jobs WHERE status IN ('queued', 'running')")
                if victims:
                    victim = rng.choice(victims)[0]
                    await b.cancel(victim, now, now + 99)
                    running.pop(victim, None)
            else:
                for recovered in await b.recover(now, 3, 10, now + 99):
                    running.pop(recovered.id, None)
            await b.promote_due(now, 100)
            check(step)

    with_backend(db, scenario)
