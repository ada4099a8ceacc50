"""SQLite backend specifics: schema, indexes, locking, multi-process claims, wake-ups.

The backend-agnostic contract lives in ``tests/conformance``; this file covers what only SQLite
has (files, WAL, BEGIN IMMEDIATE, data_version polling) and the races across processes.
"""

from __future__ import annotations

import asyncio
import gc
import json
import multiprocessing
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from stored import write_raw_payload

import duly.backends.sqlite._connection as sqlite_connection
import duly.backends.sqlite._thread as sqlite_thread
from duly._errors import BackendUnavailable, ConfigurationError
from duly._ids import new_id
from duly._records import EnqueueResult, JobFilter, NewJob, Outcome
from duly.backends import backend_from_url
from duly.backends._sql import load_migrations, load_query_folder
from duly.backends.base import Backend
from duly.backends.sqlite import SqliteBackend

T = TypeVar("T")
NOW = 1_700_000_000.0


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def job(
    queue: str = "default",
    *,
    priority: int = 0,
    delay: float = 0.0,
    key: str | None = None,
    at: float = NOW,
    task: str = "t",
) -> NewJob:
    return NewJob(new_id(), task, queue, b"[[],{}]", 3, key, priority, at, at + delay)


def with_backend(path: Path, fn: Callable[[SqliteBackend], Awaitable[T]]) -> T:
    async def main() -> T:
        backend = SqliteBackend(f"sqlite:///{path}")
        await backend.open()
        try:
            return await fn(backend)
        finally:
            await backend.close()

    return asyncio.run(main())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "duly.db"


# -- construction, files, migrations ----------------------------------------------------------
def test_url_forms() -> None:
    assert SqliteBackend("sqlite:///rel/dir/x.db").path == "rel/dir/x.db"
    assert SqliteBackend("sqlite:////abs/x.db").path == "/abs/x.db"
    assert SqliteBackend("sqlite:///my%20jobs.db").path == "my jobs.db"
    for bad in ("sqlite://host/x.db", "sqlite:///", "redis:///x.db"):
        with pytest.raises(ConfigurationError):
            SqliteBackend(bad)
    backend = backend_from_url("sqlite:///rel/y.db?namespace=x")
    assert isinstance(backend, SqliteBackend) and backend.path == "rel/y.db"
    backend = backend_from_url("sqlite:////abs/y.db")
    assert isinstance(backend, SqliteBackend) and backend.path == "/abs/y.db"
    assert isinstance(backend, Backend)


def test_package_data_is_found() -> None:
    queries = load_query_folder("duly.backends.sqlite")
    assert {"claim", "enqueue", "finish_succeeded", "quarantine_lost"} - {"enqueue"} <= set(queries)
    assert next(m.version for m in load_migrations("duly.backends.sqlite")) == 1


def test_open_sets_wal_and_migrates_once(db: Path) -> None:
    async def scenario(backend: SqliteBackend) -> list[int]:
        again = await backend.migrate()
        await backend.open()  # idempotent
        await backend.ping()
        return again

    assert with_backend(db, scenario) == []
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    versions = [m.version for m in load_migrations("duly.backends.sqlite")]
    assert [r[0] for r in conn.execute("SELECT version FROM duly_migrations")] == versions
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"jobs", "stats", "workers", "queues", "duly_migrations"} <= tables
    conn.close()


def test_fresh_file_reports_applied_versions(db: Path) -> None:
    async def scenario() -> list[int]:
        backend = SqliteBackend(f"sqlite:///{db}")
        try:
            return await backend.migrate()  # opens lazily, which applies everything
        finally:
            await backend.close()

    assert asyncio.run(scenario()) == []
    assert with_backend(db, lambda b: b.migrate()) == []


def test_unopenable_file_is_backend_unavailable_then_recovers(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "duly.db"

    async def scenario() -> None:
        backend = SqliteBackend(f"sqlite:///{path}")
        with pytest.raises(BackendUnavailable, match="missing-dir"):
            await backend.open()
        with pytest.raises(BackendUnavailable, match="missing-dir"):
            await backend.enqueue([job()])
        path.parent.mkdir()  # the file becomes reachable: the same instance carries on
        assert len(await backend.enqueue([job()])) == 1
        await backend.close()

    asyncio.run(scenario())


def test_not_a_database_is_backend_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite" * 500)
    backend = SqliteBackend(f"sqlite:///{path}")
    with pytest.raises(BackendUnavailable, match=r"garbage\.db"):
        run(backend.open())
    run(backend.close())


def test_lock_held_beyond_busy_timeout(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_connection, "BUSY_TIMEOUT_MS", 200)

    async def scenario() -> None:
        backend = SqliteBackend(f"sqlite:///{db}")
        await backend.open()
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(BackendUnavailable) as raised:
                await backend.enqueue([job()])
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert_waited_for_lock(str(raised.value), "enqueue")
        assert len(await backend.enqueue([job()])) == 1  # usable again once released
        await backend.close()

    asyncio.run(scenario())


def assert_waited_for_lock(message: str, doing: str) -> None:
    """The message names the file and the operation, and says SQLite waited its busy timeout."""
    found = re.search(
        rf"duly\.db' unavailable \({doing}\): database is locked by another connection "
        r"\(SQLITE_BUSY\): gave up after ([\d.]+) s waiting for its lock \(busy timeout 0\.2 s\)",
        message,
    )
    assert found is not None, message
    assert float(found[1]) >= 0.19  # it did wait (a sleep may end a tick early)


def test_first_open_of_a_locked_file_says_what_it_waited_for(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_connection, "BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE other (x)")  # a file in rollback mode: the open must switch it
    holder.execute("BEGIN EXCLUSIVE")
    backend = SqliteBackend(f"sqlite:///{db}")
    try:
        with pytest.raises(BackendUnavailable) as raised:
            run(backend.open())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert_waited_for_lock(str(raised.value), "opening")
    run(backend.open())  # opens (switches to WAL, migrates) once released
    assert run(backend.migrate()) == []
    run(backend.close())


def test_event_loop_keeps_running_while_sqlite_waits(db: Path) -> None:
    async def scenario() -> int:
        backend = SqliteBackend(f"sqlite:///{db}")
        await backend.open()
        holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        threading.Timer(0.3, lambda: holder.execute("ROLLBACK")).start()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        await backend.enqueue([job()])  # waits ~0.3 s on the lock, off the loop
        task.cancel()
        holder.close()
        await backend.close()
        return ticks

    assert asyncio.run(scenario()) >= 10


# -- the job lifecycle -------------------------------------------------------------------------
def test_enqueue_states_and_dedupe_by_id(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        now_job, later = job(), job(delay=60)
        results = await b.enqueue([now_job, later, now_job])
        assert [r.deduplicated for r in results] == [False, False, True]
        assert (await b.enqueue([later]))[0].deduplicated
        first = await b.get_job(now_job.id)
        second = await b.get_job(later.id)
        assert first is not None and first.status == "queued" and first.attempts == 0
        assert second is not None and second.status == "scheduled"
        assert second.scheduled_for == NOW + 60
        assert await b.get_job("nope") is None
        stats = await b.queue_stats()
        assert [(s.name, s.queued, s.scheduled, s.running) for s in stats] == [("default", 1, 1, 0)]

    with_backend(db, scenario)


def test_claim_order_priority_fifo_and_queue_order(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        low1, high, low2 = job("a"), job("a", priority=5), job("a")
        other = job("b", priority=9)
        await b.enqueue([low1, high, low2, other])
        got = await b.claim("w", ["a", "b"], 3, NOW, NOW + 30)
        assert [j.id for j in got] == [high.id, low1.id, low2.id]
        assert all(j.status == "running" and j.attempts == 1 for j in got)
        assert all(j.worker == "w" and j.lease_until == NOW + 30 for j in got)
        assert all(j.started_at == NOW for j in got)
        times = [(j.enqueued_at, j.scheduled_for, j.started_at, j.lease_until) for j in got]
        assert all(type(t) is float for row in times for t in row)  # not int, though whole
        rest = await b.claim("w", ["a", "b"], 3, NOW, NOW + 30)
        assert [j.id for j in rest] == [other.id]
        assert await b.claim("w", ["a", "b"], 3, NOW, NOW + 30) == []
        assert await b.claim("w", [], 3, NOW, NOW + 30) == []

    with_backend(db, scenario)


def test_handed_back_jobs_go_to_the_head(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        jobs = [job() for _ in range(4)]
        await b.enqueue(jobs)
        first = await b.claim("w", ["default"], 2, NOW, NOW + 10)
        # released: head of the queue, attempt not charged
        assert await b.finish("w", [Outcome(first[1].id, "release")], NOW) == [True]
        # recovered: lease lapsed, head of the queue, attempt kept
        assert [r.requeued for r in await b.recover(NOW + 11, 3, 10, NOW + 99)] == [True]
        # the recovered job (it lost a worker) comes first, alone in its claim
        got = await b.claim("w2", ["default"], 4, NOW + 12, NOW + 40)
        assert [j.id for j in got] == [jobs[0].id]
        got += await b.claim("w2", ["default"], 4, NOW + 12, NOW + 40)
        assert [j.id for j in got] == [jobs[0].id, jobs[1].id, jobs[2].id, jobs[3].id]
        assert [j.attempts for j in got] == [2, 1, 1, 1]
        recovered = await b.get_job(jobs[0].id)
        assert recovered is not None and recovered.lost == 1

    with_backend(db, scenario)


def test_finish_outcomes_counters_and_foreign_worker(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        jobs = [job(task=f"t{i % 2}") for i in range(5)]
        await b.enqueue(jobs)
        ids = [j.id for j in await b.claim("w", ["default"], 5, NOW, NOW + 30)]
        errors = b'[{"type":"E","message":"m","traceback":"","at":1,"attempt":1}]'
        outcomes = [
            Outcome(ids[0], "succeeded", result=b"42", expire_at=NOW + 86400),
            Outcome(ids[1], "failed", errors=errors, expire_at=NOW + 7 * 86400),
            Outcome(ids[2], "retry", errors=errors, run_at=NOW + 5),
            Outcome(ids[3], "release", run_at=NOW + 50),
            Outcome(ids[0], "failed"),  # second outcome for one job: dropped
            Outcome("unknown", "succeeded"),
        ]
        assert await b.finish("other", outcomes[:1], NOW) == [False]
        assert await b.finish("w", outcomes, NOW + 1) == [True, True, True, True, False, False]
        states = {i: await b.get_job(i) for i in ids}
        s, f, r, rel, run_ = (states[i] for i in ids)
        assert s and s.status == "succeeded" and s.result == b"42" and s.finished_at == NOW + 1
        assert s.expire_at == NOW + 86400 and s.lease_until is None
        assert f and f.status == "failed" and f.errors == errors
        assert r and r.status == "retrying" and r.scheduled_for == NOW + 5 and r.worker is None
        assert rel and rel.status == "scheduled" and rel.attempts == 0
        assert rel.scheduled_for == NOW + 50
        assert run_ and run_.status == "running"
        rows = await b.stats(NOW - 60)
        totals = {(row.task, row.succeeded, row.failed, row.retried) for row in rows}
        assert totals == {("t0", 1, 0, 1), ("t1", 0, 1, 0)}
        assert {row.minute for row in rows} == {int((NOW + 1) // 60)}
        assert await b.stats(NOW + 3600) == []
        # retrying/scheduled jobs come back when due, not before
        assert await b.promote_due(NOW + 4, 10) == (0, NOW + 5)
        assert await b.promote_due(NOW + 60, 10) == (2, None)
        again = await b.claim("w", ["default"], 5, NOW + 60, NOW + 90)
        assert {j.id for j in again} == {ids[2], ids[3]}

    with_backend(db, scenario)


def test_heartbeat_extends_and_reports_lost_jobs(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        await b.enqueue([job(), job()])
        a, c = await b.claim("w", ["default"], 2, NOW, NOW + 10)
        assert await b.cancel(c.id, NOW + 1, NOW + 100)
        assert await b.heartbeat("w", [a.id, c.id, "gone"], NOW + 2, NOW + 40) == [c.id, "gone"]
        extended = await b.get_job(a.id)
        assert extended is not None and extended.lease_until == NOW + 40
        assert await b.recover(NOW + 20, 3, 10, NOW + 99) == []  # lease was extended
        assert await b.finish("w", [Outcome(c.id, "succeeded")], NOW + 3) == [False]
        cancelled = await b.get_job(c.id)
        assert cancelled is not None and cancelled.status == "cancelled"
        (worker,) = await b.workers()
        assert worker.id == "w" and worker.last_seen == NOW + 2

    with_backend(db, scenario)


def test_recover_quarantines_at_max_lost(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        poison = job()
        await b.enqueue([poison])
        t = NOW
        for round_ in (1, 2):
            (claimed,) = await b.claim("w", ["default"], 1, t, t + 5)
            assert claimed.attempts == round_
            (rec,) = await b.recover(t + 6, 3, 10, t + 999)
            assert rec.requeued and rec.id == poison.id
            t += 10
        (claimed,) = await b.claim("w", ["default"], 1, t, t + 5)
        # an earlier error stays in the history
        errors = b'[{"type":"Boom","message":"x","traceback":"","at":1.0,"attempt":2}]'
        await write_raw_payload(b, poison.id, b"still opaque")
        conn = sqlite3.connect(db)
        conn.execute("UPDATE jobs SET errors = ? WHERE id = ?", (errors, poison.id))
        conn.commit()
        conn.close()
        (rec,) = await b.recover(t + 6, 3, 10, t + 999)
        assert not rec.requeued
        dead = await b.get_job(poison.id)
        assert dead is not None and dead.status == "failed" and dead.lost == 3
        assert dead.expire_at == t + 999 and dead.finished_at == t + 6
        assert dead.payload == b"still opaque"
        assert dead.errors is not None
        history = json.loads(dead.errors)
        assert history[0]["type"] == "Boom"
        assert history[1] == {
            "type": "LostWorker",
            "message": "lost its worker 3 times",
            "traceback": "",
            "at": t + 6,
            "attempt": 3,
        }
        assert sum(row.failed for row in await b.stats(0)) == 1
        assert await b.recover(t + 100, 3, 10, t + 999) == []

    with_backend(db, scenario)


def test_cancel_retry_purge(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        a, c = job(), job(delay=30)
        await b.enqueue([a, c])
        assert await b.cancel(c.id, NOW, NOW + 100)
        assert not await b.cancel(c.id, NOW, NOW + 100)
        assert not await b.cancel("nope", NOW, NOW + 100)
        assert not await b.retry(a.id, NOW)  # queued: nothing to retry
        assert await b.retry(c.id, NOW + 1)
        again = await b.get_job(c.id)
        assert again is not None and again.status == "queued" and again.expire_at is None
        assert again.attempts == 0 and again.finished_at is None
        got = await b.claim("w", ["default"], 5, NOW + 2, NOW + 30)
        assert [j.id for j in got] == [a.id, c.id]  # retried job joins the tail
        await b.finish(
            "w",
            [Outcome(a.id, "succeeded", expire_at=NOW + 10), Outcome(c.id, "succeeded")],
            NOW + 3,
        )
        assert await b.purge(NOW + 9, 10) == 0
        assert await b.purge(NOW + 10, 10) == 1
        assert await b.get_job(a.id) is None and await b.get_job(c.id) is not None
        assert await b.stats(0) != []
        await b.purge(NOW + 3 + 86_400 + 120, 10)
        assert await b.stats(0) == []

    with_backend(db, scenario)


def test_list_jobs_filters_newest_first(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        keyed = [job(key="team:7") for _ in range(3)]
        await b.enqueue([*keyed, job(key="team:8"), job("other", task="x")])
        got = await b.list_jobs(JobFilter(key="team:7"), 10)
        assert [j.id for j in got] == [j.id for j in reversed(keyed)]
        assert len(await b.list_jobs(JobFilter(key="team:7"), 2)) == 2
        assert len(await b.list_jobs(JobFilter(status="queued"), 10)) == 5
        assert len(await b.list_jobs(JobFilter(status="queued", queue="other"), 10)) == 1
        assert len(await b.list_jobs(JobFilter(task="x"), 10)) == 1
        assert await b.list_jobs(JobFilter(key="team:7", status="failed"), 10) == []
        await b.drop()
        assert await b.list_jobs(JobFilter(), 10) == [] and await b.queue_stats() == []

    with_backend(db, scenario)


def test_workers_register_and_unregister(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        await b.register_worker("w1", NOW, {"pid": 1, "queues": ["a"]})
        await b.register_worker("w0", NOW, {})
        assert [(w.id, w.info) for w in await b.workers()] == [
            ("w0", {}),
            ("w1", {"pid": 1, "queues": ["a"]}),
        ]
        await b.unregister_worker("w1")
        assert [w.id for w in await b.workers()] == ["w0"]

    with_backend(db, scenario)


def test_hot_queries_use_their_partial_indexes(db: Path) -> None:
    run_ = with_backend(db, lambda b: b.ping())
    assert run_ is None
    queries = load_query_folder("duly.backends.sqlite")
    conn = sqlite3.connect(db)
    params: dict[str, Any] = {
        "queue": "q", "limit": 10, "now": NOW, "worker": "w", "lease_until": NOW, "may_lead": 1,
        "key": "k", "status": None, "task": None, "before": "01M8AQY4EYGF2A4AVGWYD3D93F",
    }  # fmt: skip
    expected = {
        "claim": "jobs_claim",
        "claim_candidates": "jobs_claim",
        "promote_due": "jobs_due",
        "next_due": "jobs_due",
        "lapsed": "jobs_lease",
        "purge_jobs": "jobs_expire",
        "list_jobs_by_key": "jobs_key",
        "list_jobs_by_status": "jobs_status",
    }
    for name, index in expected.items():
        plan = " ".join(
            str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + queries[name], params)
        )
        assert index in plan, (name, plan)
        assert "SCAN jobs" not in plan.replace(f"SCAN jobs USING INDEX {index}", ""), plan
        if name != "claim":  # claim's window sorts only the <= :limit candidates it read
            assert "TEMP B-TREE" not in plan, plan
    conn.close()


# -- wake-ups ----------------------------------------------------------------------------------
def test_wait_for_work_wakes_on_other_connection_and_local_enqueue(db: Path) -> None:
    async def scenario() -> tuple[float, float, float]:
        waiter, producer = SqliteBackend(f"sqlite:///{db}"), SqliteBackend(f"sqlite:///{db}")
        await waiter.open()
        await producer.open()
        await waiter.claim("w", ["default"], 1, NOW, NOW + 1)

        t0 = time.perf_counter()
        await waiter.wait_for_work(["default"], 0.2)
        idle = time.perf_counter() - t0

        async def later(backend: SqliteBackend) -> None:
            await asyncio.sleep(0.1)
            await backend.enqueue([job()])

        t0 = time.perf_counter()
        await asyncio.gather(waiter.wait_for_work(["default"], 5), later(producer))
        other = time.perf_counter() - t0
        await waiter.claim("w", ["default"], 1, NOW, NOW + 1)

        t0 = time.perf_counter()
        await asyncio.gather(waiter.wait_for_work(["default"], 5), later(waiter))
        local = time.perf_counter() - t0
        await waiter.close()
        await producer.close()
        return idle, other, local

    idle, other, local = asyncio.run(scenario())
    assert 0.18 <= idle < 2.0
    assert other < 2.0  # the wait was 5 s: it woke on the other connection's commit
    assert local < 2.0


def test_wait_for_work_does_not_spin_after_a_wake(db: Path) -> None:
    async def scenario() -> float:
        waiter, producer = SqliteBackend(f"sqlite:///{db}"), SqliteBackend(f"sqlite:///{db}")
        await waiter.open()
        await producer.open()
        await waiter.claim("w", ["default"], 1, NOW, NOW + 1)
        await producer.enqueue([job()])
        await waiter.wait_for_work(["default"], 5)  # wakes at once: a commit happened
        t0 = time.perf_counter()
        await waiter.wait_for_work(["default"], 0.2)  # nothing new: waits the full time
        elapsed = time.perf_counter() - t0
        await waiter.close()
        await producer.close()
        return elapsed

    assert asyncio.run(scenario()) >= 0.18


# -- races -------------------------------------------------------------------------------------
_CLAIMER = textwrap.dedent(
    """
    import asyncio, json, sys
    from duly.backends.sqlite import SqliteBackend
    from duly._records import Outcome

    async def main(url, name):
        backend = SqliteBackend(url)
        await backend.open()
        seen = []
        while True:
            jobs = await backend.claim(name, ["default"], 7, 1.0, 100.0)
            if not jobs:
                break
            seen.extend(j.id for j in jobs)
            flags = await backend.finish(name, [Outcome(j.id, "succeeded") for j in jobs], 2.0)
            assert all(flags), flags
        await backend.close()
        print(json.dumps(seen))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_processes_racing_claims_take_each_job_once(db: Path) -> None:
    total = 1500
    ids = with_backend(db, lambda b: b.enqueue([job() for _ in range(total)]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CLAIMER, f"sqlite:///{db}", f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    claimed: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        claimed.extend(json.loads(out))
    assert len(claimed) == total
    assert set(claimed) == {r.id for r in ids}
    conn = sqlite3.connect(db)
    rows = dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())
    (done,) = conn.execute("SELECT sum(succeeded) FROM stats").fetchone()
    conn.close()
    assert rows == {"succeeded": total} and done == total


def test_threads_racing_claims_and_recovery(db: Path) -> None:
    total = 400
    with_backend(db, lambda b: b.enqueue([job() for _ in range(total)]))
    claimed: list[list[str]] = [[] for _ in range(4)]
    recovered: list[list[str]] = [[] for _ in range(4)]

    def claimer(i: int) -> None:
        async def loop(b: SqliteBackend) -> None:
            while jobs := await b.claim(f"t{i}", ["default"], 5, NOW, NOW + 10):
                claimed[i].extend(j.id for j in jobs)

        with_backend(db, loop)

    def recoverer(i: int) -> None:
        async def loop(b: SqliteBackend) -> None:
            while found := await b.recover(NOW + 11, 3, 7, NOW + 99):
                recovered[i].extend(r.id for r in found)

        with_backend(db, loop)

    for target in (claimer, recoverer):
        threads = [threading.Thread(target=target, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    flat = [i for part in claimed for i in part]
    assert len(flat) == len(set(flat)) == total
    flat_rec = [i for part in recovered for i in part]
    assert len(flat_rec) == len(set(flat_rec)) == total


def test_idle_wait_does_not_burn_cpu(db: Path) -> None:
    """A regression guard against a spinning wait (the measured figure is about 1 % of a core;
    the bound is loose because this is not a benchmark)."""

    async def scenario() -> float:
        backend = SqliteBackend(f"sqlite:///{db}")
        await backend.open()
        await backend.claim("w", ["default"], 1, NOW, NOW + 1)
        await backend.wait_for_work(["default"], 0.05)  # starts the watcher
        cpu, wall = time.process_time(), time.perf_counter()
        await backend.wait_for_work(["default"], 1.0)
        used = (time.process_time() - cpu) / (time.perf_counter() - wall)
        await backend.close()
        return used

    assert asyncio.run(scenario()) < 0.15


def test_concurrent_first_opens_migrate_once(db: Path) -> None:
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            applied.append(with_backend(db, lambda b: b.migrate()))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and applied == [[]] * 6  # open() applied it; migrate() finds nothing
    conn = sqlite3.connect(db)
    applied_count = conn.execute("SELECT count(*) FROM duly_migrations").fetchone()[0]
    assert applied_count == len(load_migrations("duly.backends.sqlite"))
    conn.close()


def _open_fresh_files(paths: list[str], barrier: Any, results: Any) -> None:
    """In a child process: open each (new) file right as every racer is ready; report errors."""
    errors = []
    for path in paths:
        barrier.wait(60)
        try:
            with_backend(Path(path), lambda b: b.migrate())
        except BaseException as exc:  # reported to the parent
            errors.append(f"{path}: {exc!r}")
    results.put(errors)


def test_processes_opening_fresh_files_at_once_all_succeed(tmp_path: Path) -> None:
    # Each round, six processes open one new file at the same instant: the first open switches
    # it to WAL mode and migrates it, which SQLite lets only one connection do at a time.
    racers, rounds = 6, 40
    paths = [str(tmp_path / f"fresh{i}.db") for i in range(rounds)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(racers), ctx.Queue()
    procs = [
        ctx.Process(target=_open_fresh_files, args=(paths, barrier, results)) for _ in range(racers)
    ]
    for proc in procs:
        proc.start()
    errors = [error for _ in procs for error in results.get(timeout=120)]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    assert errors == []
    versions = sorted(m.version for m in load_migrations("duly.backends.sqlite"))
    for path in paths:
        conn = sqlite3.connect(path)
        applied = [row[0] for row in conn.execute("SELECT version FROM duly_migrations")]
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        conn.close()
        assert sorted(applied) == versions and mode == "wal"


# -- the backend's thread: group commit, checkpoints, the claim's fast path --------------------
def test_transactions_queued_together_share_a_commit_and_fail_alone(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        assert b._db.thread is not None
        release = threading.Event()
        blocked = asyncio.ensure_future(b._db.run(lambda conn: release.wait(5), "block"))
        await asyncio.sleep(0.05)  # the thread is now busy: what follows queues up

        def broken(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO jobs (id) VALUES ('x')")  # violates NOT NULL

        a, c = job(), job()
        commits = b._db.thread._commits
        calls = [
            asyncio.ensure_future(b.enqueue([a])),
            asyncio.ensure_future(b._db.transaction(broken, "broken")),
            asyncio.ensure_future(b.enqueue([c])),
        ]
        await asyncio.sleep(0.05)
        release.set()
        await blocked
        first, failed, last = await asyncio.gather(*calls, return_exceptions=True)
        assert isinstance(failed, sqlite3.IntegrityError)
        assert first == [EnqueueResult(a.id)] and last == [EnqueueResult(c.id)]
        assert await b.get_job(a.id) is not None and await b.get_job(c.id) is not None
        # the group rolled back, then each call ran alone: two commits, not three
        assert b._db.thread._commits == commits + 2

        # without a failure, calls queued together commit once
        release.clear()
        blocked = asyncio.ensure_future(b._db.run(lambda conn: release.wait(5), "block"))
        await asyncio.sleep(0.05)
        commits = b._db.thread._commits
        more = [asyncio.ensure_future(b.enqueue([job()])) for _ in range(3)]
        await asyncio.sleep(0.05)
        release.set()
        await blocked
        await asyncio.gather(*more)
        assert b._db.thread._commits == commits + 1
        assert sum(s.queued for s in await b.queue_stats()) == 5

    with_backend(db, scenario)


def test_a_checkpointer_thread_checkpoints_beside_the_writer(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_thread, "CHECKPOINT_EVERY", 2)

    async def scenario() -> None:
        backend = SqliteBackend(f"sqlite:///{db}")
        await backend.open()
        thread = backend._db.thread
        assert thread is not None and thread._checkpointer is not None
        checkpointer = thread._checkpointer
        pages = await backend._db.run(
            lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone(), "read"
        )
        assert pages == (sqlite_connection.WAL_AUTOCHECKPOINT,)
        for _ in range(4):
            await backend.enqueue([job()])
        for _ in range(200):
            if checkpointer.checkpoints:
                break
            await asyncio.sleep(0.01)
        assert checkpointer.checkpoints >= 1
        await backend.close()
        assert checkpointer._thread is not None
        checkpointer._thread.join(5)
        assert not checkpointer._thread.is_alive()

    asyncio.run(scenario())


def test_a_backend_dropped_without_close_stops_its_thread(db: Path) -> None:
    async def scenario() -> threading.Thread:
        backend = SqliteBackend(f"sqlite:///{db}")
        await backend.enqueue([job()])
        assert backend._db.thread is not None
        thread = backend._db.thread._thread
        del backend
        gc.collect()
        return thread

    thread = asyncio.run(scenario())
    thread.join(5)
    assert not thread.is_alive()


def test_plain_claims_take_the_fast_path_until_a_gate_shows(db: Path) -> None:
    async def scenario(b: SqliteBackend) -> None:
        plain = [job(), job(priority=3)]
        await b.enqueue(plain)
        # a job that lost its worker before: alone, first of its claim
        [lost] = await b.claim("w", ["default"], 1, NOW, NOW + 1)
        assert [r.requeued for r in await b.recover(NOW + 2, 3, 10, NOW + 99)] == [True]
        claimed = await b.claim("w", ["default"], 5, NOW + 3, NOW + 30)
        assert [j.id for j in claimed] == [lost.id] and claimed[0].lost == 1
        assert b._gated_queues == set()
        # the records built by the fast path are the stored rows
        rest = await b.claim("w", ["default"], 5, NOW + 3, NOW + 30)
        for record in claimed + rest:
            assert record == await b.get_job(record.id)
            times = (record.enqueued_at, record.scheduled_for, record.started_at)
            assert all(type(t) is float for t in times)

        gated = replace(job(), gate="g", gate_limit=1)
        gated2 = replace(job(), gate="g", gate_limit=1)
        await b.enqueue([gated, gated2, job()])
        got = await b.claim("w", ["default"], 5, NOW + 4, NOW + 30)
        assert len(got) == 2 and got[0].id == gated.id  # gated2 parked
        assert b._gated_queues == {"default"}
        assert await b.finish("w", [Outcome(gated.id, "succeeded")], NOW + 5) == [True]
        [unparked] = await b.claim("w", ["default"], 5, NOW + 6, NOW + 30)
        assert unparked.id == gated2.id
        assert await b.claim("w", ["default"], 5, NOW + 6, NOW + 30) == []
        assert b._gated_queues == {"default"}
        await b.enqueue([job()])
        assert len(await b.claim("w", ["default"], 5, NOW + 7, NOW + 30)) == 1
        assert b._gated_queues == set()  # only plain jobs taken: the fast path again

    with_backend(db, scenario)


def test_finish_batches_beyond_one_statement(db: Path) -> None:
    """More outcomes of one kind than one batched statement binds, every kind at once."""

    async def scenario(b: SqliteBackend) -> None:
        jobs = [job() for _ in range(300)]
        await b.enqueue(jobs)
        ids = [j.id for j in await b.claim("w", ["default"], 300, NOW, NOW + 30)]
        assert len(ids) == 300
        errors = b'[{"type":"E","message":"m","traceback":"","at":1,"attempt":1}]'
        kinds: list[Outcome] = []
        for i, job_id in enumerate(ids):
            if i < 200:
                result = str(i).encode()
                kinds.append(Outcome(job_id, "succeeded", result=result, expire_at=NOW + i))
            elif i < 250:
                kinds.append(Outcome(job_id, "failed", errors=errors, expire_at=NOW + 9))
            elif i < 270:
                kinds.append(Outcome(job_id, "retry", errors=errors, run_at=NOW + 5))
            elif i < 285:
                kinds.append(Outcome(job_id, "release"))
            else:
                kinds.append(Outcome(job_id, "release", run_at=NOW + 60))
        assert await b.finish("w", [*kinds, kinds[0]], NOW + 1) == [True] * 300 + [False]
        got = [await b.get_job(j) for j in ids]
        assert [r.status if r else None for r in got] == (
            ["succeeded"] * 200 + ["failed"] * 50 + ["retrying"] * 20
            + ["queued"] * 15 + ["scheduled"] * 15
        )  # fmt: skip
        first = got[199]
        assert first is not None and first.result == b"199" and first.expire_at == NOW + 199
        assert first.finished_at == NOW + 1 and first.lease_until is None
        retried = got[260]
        assert retried is not None and retried.scheduled_for == NOW + 5
        assert retried.errors == errors and retried.worker is None
        [row] = await b.stats(NOW - 60)
        assert (row.succeeded, row.failed, row.retried) == (200, 50, 20)

    with_backend(db, scenario)
