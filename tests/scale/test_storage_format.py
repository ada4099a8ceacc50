"""Storage formats beyond the contract (tests/conformance/test_protocol_storage_format.py):
Redis data written before formats were recorded (duly 0.1.0) is upgraded in place, and what
a user sees when a duly meets data of a newer one: the App and the CLI refuse it with one
clear line."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import pytest
import redis
from services import REDIS_URL, require_service

import duly
from duly._records import JobFilter, NewJob
from duly.backends.redis import RedisBackend
from duly.backends.redis._migrate import FORMAT, STEPS

pytestmark = pytest.mark.timeout(60)


def _job(n: int) -> NewJob:
    return NewJob(
        id=f"job{n}",
        task="t",
        queue="default",
        payload=b'{"args":[],"kwargs":{}}',
        max_attempts=1,
        key=None,
        priority=0,
        enqueued_at=1.0,
        scheduled_for=1.0,
    )


def test_the_formats_are_numbered_in_order() -> None:
    assert [step.to for step in STEPS] == list(range(2, FORMAT + 1))


def test_redis_data_without_a_format_is_format_1_and_upgraded_on_open() -> None:
    """duly 0.1.0 recorded no format: a namespace holding data without the key is format 1;
    opening it runs the steps and records the current format; the jobs are untouched."""
    require_service("redis")
    namespace = f"t{uuid4().hex[:12]}"

    async def scenario() -> None:
        old = RedisBackend(REDIS_URL, namespace)
        await old.open()
        try:
            await old.enqueue([_job(1), _job(2)])
            await old._conn.client.delete(old.keys.format)  # as duly 0.1.0 left it
            assert (await old.storage_format()).stored == 1
            new = old.clone()
            await new.open()
            try:
                assert (await new.storage_format()).stored == FORMAT
                stored = await new.list_jobs(JobFilter(), 10)
                assert {r.id for r in stored} == {"job1", "job2"}
            finally:
                await new.close()
        finally:
            await old.drop()
            await old.close()

    asyncio.run(scenario())


def test_an_empty_redis_namespace_stays_empty_until_opened() -> None:
    """Reading the format writes nothing: only ``open`` (and a first enqueue) records it."""
    require_service("redis")
    namespace = f"t{uuid4().hex[:12]}"

    async def scenario() -> None:
        backend = RedisBackend(REDIS_URL, namespace)
        try:
            assert (await backend.storage_format()).stored == 0
            assert await backend._conn.client.exists(backend.keys.format) == 0
        finally:
            await backend.close()

    asyncio.run(scenario())


def _newer(db: Path) -> int:
    """Record in ``db`` a migration of a newer duly; its number."""
    with sqlite3.connect(db) as conn:
        newest = conn.execute("SELECT max(version) FROM duly_migrations").fetchone()[0]
        conn.execute(
            "INSERT INTO duly_migrations (version, title, applied_at) VALUES (?, 'newer', 0)",
            (newest + 1,),
        )
    conn.close()
    return int(newest) + 1


def test_an_app_refuses_data_of_a_newer_duly(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    app = duly.App(f"sqlite:///{db}")

    @app.task()
    def noop() -> None:
        pass

    noop.enqueue()
    app.close()
    newer = _newer(db)
    again = duly.App(f"sqlite:///{db}")

    @again.task(name=noop.name)
    def noop_again() -> None:
        pass

    task = noop_again
    try:
        with pytest.raises(duly.StorageTooNew) as refused:
            task.enqueue()
        assert refused.value.stored == newer
        with pytest.raises(duly.StorageTooNew):
            again.jobs(limit=1)
    finally:
        again.close()


def test_the_cli_says_upgrade_duly_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    url = f"sqlite:///{db}"
    app = duly.App(url)
    app.migrate()
    app.close()
    newer = _newer(db)
    for command in (["migrate"], ["jobs"]):
        done = subprocess.run(
            [sys.executable, "-m", "duly", *command, "--url", url],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 2, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert (
            f"stored by format {newer}, this duly reads up to {newer - 1}: upgrade duly"
            in (lines[0])
        )


def test_a_sync_enqueue_on_newer_redis_data_is_refused() -> None:
    """The blocking enqueue opens nothing: it checks the format on its first call."""
    require_service("redis")
    namespace = f"t{uuid4().hex[:12]}"
    client = redis.Redis.from_url(REDIS_URL)
    client.set(f"{{{namespace}}}:format", FORMAT + 1)
    backend = RedisBackend(REDIS_URL, namespace)
    try:
        with pytest.raises(duly.StorageTooNew):
            backend.enqueue_blocking([_job(1)])
        assert client.exists(f"{{{namespace}}}:j:job1") == 0
    finally:
        backend.close_blocking()
        client.delete(f"{{{namespace}}}:format")
        client.close()
