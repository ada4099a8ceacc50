"""Fixtures of the app-level tests: the public surface of duly on every backend.

Every test that takes ``url_and_namespace``, ``make_app`` or ``app`` runs once per backend, with
ids ``sqlite``, ``redis`` and ``postgres`` (``pytest -k redis`` selects one). Each test gets its
own data: a SQLite file in ``tmp_path``, a Redis key prefix ``t<hex12>``, a PostgreSQL schema
``t_<hex12>``; so the suite runs under ``pytest -n auto``. Teardown drops that data.

A backend that is not reachable skips its tests locally and fails them when ``CI`` is set.

Workers run in-process, either to completion (``run_burst``) or in a thread for the length of a
``with`` block (``worker_thread``).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import gc
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from services import BACKENDS, backend_url

import duly
from duly._records import JobRecord


def kind_of(url: str) -> str:
    """``sqlite``, ``redis`` or ``postgres`` for a backend URL."""
    return url.split(":", 1)[0].replace("postgresql", "postgres")


@pytest.fixture(params=BACKENDS)
def url_and_namespace(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A backend URL and a namespace of its own for this test."""
    return backend_url(request.param, tmp_path)


@pytest.fixture
def backend_kind(url_and_namespace: tuple[str, str]) -> str:
    """The backend of this test: ``sqlite``, ``redis`` or ``postgres``."""
    return kind_of(url_and_namespace[0])


async def _drop(app: duly.App) -> None:
    await (await app.backend()).drop()
    await app.aclose()


@pytest.fixture
def make_app(url_and_namespace: tuple[str, str]) -> Iterator[Callable[..., duly.App]]:
    """``make_app(**App options)``: Apps on this test's backend and namespace (they share data).

    Teardown closes them all, then drops the namespace's data from a fresh event loop.
    """
    url, namespace = url_and_namespace
    apps: list[duly.App] = []

    def make(**options: Any) -> duly.App:
        app = duly.App(url, namespace=namespace, **options)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()
    if apps:
        asyncio.run(_drop(apps[0]))
        apps[0].close()


@pytest.fixture
def app(make_app: Callable[..., duly.App]) -> duly.App:
    """A fresh App on this test's backend."""
    return make_app()


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, poll: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(poll)


@pytest.fixture
def wait() -> Callable[..., Any]:
    """``wait(predicate, timeout=10)``: poll until truthy (returns the value) or fail."""
    return wait_until


def read_records(app: duly.App, *job_ids: str) -> list[JobRecord]:
    """The backend's records of ``job_ids`` as stored (payload bytes and all), read from an
    event loop of their own (the App's async side is closed after)."""

    async def read() -> list[JobRecord]:
        try:
            backend = await app.backend()
            found = [await backend.get_job(job_id) for job_id in job_ids]
        finally:
            await app.aclose()
        assert None not in found, f"not stored: {job_ids}"
        return [record for record in found if record is not None]

    return asyncio.run(read())


@pytest.fixture
def stored() -> Callable[..., list[JobRecord]]:
    """``stored(app, *job_ids)``: the backend's records of these jobs, as stored."""
    return read_records


def collect_garbage() -> None:
    """Collect now, so that what abandoned futures log when they are finalized is logged
    here and not in the middle of pytest's own work (on Python 3.11 a traceback logged during
    pytest's ``ast`` conversion breaks it with "AST constructor recursion depth mismatch")."""
    gc.collect()


def _worker_options(options: dict[str, Any]) -> dict[str, Any]:
    options.setdefault("install_signal_handlers", False)
    options.setdefault("lease", 2.0)
    options.setdefault("poll", 0.1)
    return options


def run_burst_worker(
    app: duly.App, limit: float = 60.0, settle: Sequence[Any] = (), **options: Any
) -> duly.Worker:
    """Run a burst worker to completion in a fresh event loop; returns it (for its stats).

    A burst leaves a retry that is not due yet for later, however soon it comes (a worker
    that reached its last look 5 ms before a 10 ms backoff ended exited): with ``settle``
    (jobs), bursts run again until none of them is waiting for a retry. Fails the test if
    the worker has not stopped by itself within ``limit`` seconds."""
    worker = _one_burst(app, limit, options)
    deadline = time.monotonic() + limit
    while any(app.get_job(job.id).status in ("retrying", "scheduled") for job in settle):
        if time.monotonic() > deadline:
            pytest.fail(f"the jobs did not settle within {limit}s of bursts")
        time.sleep(0.01)
        worker = _one_burst(app, limit, options)
    return worker


def _one_burst(app: duly.App, limit: float, options: dict[str, Any]) -> duly.Worker:
    worker = app.worker(burst=True, **_worker_options(options))

    async def main() -> None:
        try:
            try:
                await asyncio.wait_for(worker.run(), limit)
            except TimeoutError:
                pytest.fail(f"the burst worker did not stop within {limit}s")
        finally:
            await app.aclose()

    asyncio.run(main())
    collect_garbage()
    return worker


@pytest.fixture
def run_burst() -> Callable[..., duly.Worker]:
    """``run_burst(app, **worker options)``: run a burst worker until no work is left."""
    return run_burst_worker


class WorkerThread:
    """A ``duly.Worker`` running in its own thread and event loop while the block runs."""

    def __init__(self, app: duly.App, options: dict[str, Any]) -> None:
        self.app = app
        self.worker = app.worker(**_worker_options(options))
        self.error: BaseException | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="test-worker", daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            try:
                running = asyncio.ensure_future(self.worker.run())
                await asyncio.sleep(0)  # run() has begun: stop() now reaches it
                self._started.set()
                await running
            finally:
                await self.app.aclose()

        try:
            asyncio.run(main())
        except BaseException as exc:
            self.error = exc
        finally:
            self._started.set()

    def __enter__(self) -> duly.Worker:
        self._thread.start()
        self._started.wait(10)
        return self.worker

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()
        self._thread.join(timeout=20)
        collect_garbage()
        if self._thread.is_alive():
            faulthandler.dump_traceback(all_threads=True)  # where it hangs, in the report
            pytest.fail("the worker did not stop within 20 s of worker.stop()", pytrace=False)
        if self.error is not None:
            raise self.error


@pytest.fixture
def worker_thread() -> Iterator[Callable[..., WorkerThread]]:
    """``with worker_thread(app, **worker options) as worker:`` runs a worker in a thread."""
    started: list[WorkerThread] = []

    def start(app: duly.App, **options: Any) -> WorkerThread:
        thread = WorkerThread(app, options)
        started.append(thread)
        return thread

    yield start
    for thread in started:  # a test that failed inside its block still stops its worker
        with contextlib.suppress(BaseException):
            thread.worker.stop()
