"""wait_for_work() wake-ups, and BackendUnavailable when the storage cannot be reached."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from contract import KINDS, BackendFactory, enqueue, in_own_thread, new_job, opened

from duly._errors import BackendUnavailable
from duly.backends.base import Backend

#: A wake-up must come this soon after the enqueue that caused it (the timeout is 5 s).
#: Generous on purpose: two slow cores; it only has to be well before the timeout.
WAKE_WITHIN = 1.5


async def _enqueue_when_told(
    instance: Backend, queue: str, ready: threading.Event, go: threading.Event
) -> float:
    """Open (slow: connections, migrations), then enqueue one job as soon as told."""
    async with opened(instance):
        ready.set()
        await asyncio.to_thread(go.wait, 20)
        await enqueue(instance, new_job(queue))
        return time.monotonic()


@pytest.mark.timeout(30)
async def test_wait_for_work_wakes_up_after_an_enqueue(
    backend: Backend, make_backend: BackendFactory
) -> None:
    ready, go = threading.Event(), threading.Event()
    producer = asyncio.create_task(
        in_own_thread(_enqueue_when_told(make_backend(), "mail", ready, go))
    )
    assert await asyncio.to_thread(ready.wait, 20)
    started = time.monotonic()
    waiter = asyncio.create_task(backend.wait_for_work(["other", "mail"], timeout=5))
    await asyncio.sleep(0.3)
    go.set()
    enqueued = await producer
    await asyncio.wait_for(waiter, timeout=10)
    woke = time.monotonic()
    assert woke - enqueued < WAKE_WITHIN, f"woke {woke - enqueued:.2f}s after the enqueue"
    assert woke - started < 4.5, "slept until the timeout"


@pytest.mark.timeout(30)
async def test_wait_for_work_returns_after_the_timeout(backend: Backend) -> None:
    started = time.monotonic()
    await asyncio.wait_for(backend.wait_for_work(["idle"], timeout=0.5), timeout=10)
    assert time.monotonic() - started < 3.0


def _unreachable(kind: str, tmp_path: Path) -> Backend:
    if kind == "sqlite":
        from duly.backends.sqlite import SqliteBackend

        return SqliteBackend(f"sqlite:///{tmp_path}/no/such/directory/duly.db")
    if kind == "redis":
        from duly.backends.redis import RedisBackend

        return RedisBackend("redis://127.0.0.1:1/0", namespace="unreachable")
    if kind == "redis-cluster":
        from duly.backends.redis import RedisBackend

        return RedisBackend("redis+cluster://127.0.0.1:1,127.0.0.1:2", namespace="unreachable")
    from duly.backends.postgres import PostgresBackend

    return PostgresBackend("postgresql://postgres@127.0.0.1:1/test", schema="unreachable")


async def _open_and_enqueue(instance: Backend) -> None:
    try:
        await instance.open()
        await instance.enqueue([new_job()])
    finally:
        await instance.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", KINDS)
async def test_unreachable_backend_raises_backend_unavailable(kind: str, tmp_path: Path) -> None:
    instance = _unreachable(kind, tmp_path)
    with pytest.raises(BackendUnavailable) as raised:
        await _open_and_enqueue(instance)
    assert raised.value.__cause__ is not None, "chain the driver's exception"


@pytest.mark.timeout(30)
async def test_sqlite_path_under_a_file_raises_backend_unavailable(tmp_path: Path) -> None:
    from duly.backends.sqlite import SqliteBackend

    (tmp_path / "a-file").write_text("not a directory")
    instance = SqliteBackend(f"sqlite:///{tmp_path}/a-file/duly.db")
    with pytest.raises(BackendUnavailable):
        await _open_and_enqueue(instance)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", KINDS)
async def test_migrate_on_an_unreachable_backend_raises_backend_unavailable(
    kind: str, tmp_path: Path
) -> None:
    """Even a backend with no schema (Redis) checks it is reached: `duly migrate` must never
    say "up to date" about a server it could not talk to."""
    instance = _unreachable(kind, tmp_path)
    try:
        with pytest.raises(BackendUnavailable):
            await instance.migrate()
    finally:
        await instance.close()


async def test_a_clone_is_a_new_unopened_backend_on_the_same_data(
    backend: Backend, make_backend: BackendFactory
) -> None:
    twin = backend.clone()
    assert twin is not backend and type(twin) is type(backend)
    assert (twin.url, twin.namespace) == (backend.url, backend.namespace)
    [stored] = await backend.enqueue([new_job("mail")])
    async with opened(twin):
        assert (await twin.migrate()) == []  # the original's open() applied them all
        record = await twin.get_job(stored.id)
        assert record is not None and record.queue == "mail"
