"""Helpers of the scale tests (Redis Cluster, Sentinel): an in-process worker in a thread,
and a task that records which jobs ran. A module of its own, not conftest.py: a test run
given several test folders would import another folder's conftest under that name."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import duly


class Ran:
    """The arguments of every run of the ``scale.record`` task (thread-safe)."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def add(self, value: int) -> None:
        with self._changed:
            self.values.append(value)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[set[int]], bool], timeout: float) -> bool:
        """Wait until ``predicate(set of values)`` holds; False after ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(set(self.values)), timeout)


def recording_app(url: str, namespace: str, ran: Ran, ms: float = 0.0) -> duly.App:
    """An App with one task, ``scale.record(n)``, that notes ``n`` in ``ran``."""
    app = duly.App(url, namespace=namespace)

    @app.task(name="scale.record")
    async def record(n: int) -> None:
        if ms:
            await asyncio.sleep(ms / 1000)
        ran.add(n)

    return app


class WorkerThread:
    """``app``'s worker in a thread of its own until ``stop``."""

    def __init__(self, app: duly.App, **options: Any) -> None:
        options.setdefault("install_signal_handlers", False)
        options.setdefault("lease", 2.0)
        options.setdefault("poll", 0.2)
        self.app = app
        self.worker = app.worker(**options)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True, name="scale-worker")

    def _main(self) -> None:
        async def main() -> None:
            try:
                await self.worker.run()
            finally:
                await self.app.aclose()

        try:
            asyncio.run(main())
        except BaseException as exc:
            self.error = exc

    def start(self) -> WorkerThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.worker.stop()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the worker did not stop within 30 s"
        if self.error is not None:
            raise self.error


def enqueue_until_accepted(task: Any, value: int, timeout: float = 30.0) -> tuple[str, int]:
    """Enqueue ``task(value)``, retrying while the backend is unavailable (a failover);
    returns the job id and how many tries raised ``BackendUnavailable``."""
    deadline = time.monotonic() + timeout
    refused = 0
    while True:
        try:
            return task.enqueue(value).id, refused
        except duly.BackendUnavailable:
            refused += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def enqueue_through_failover(
    task: Any, values: range, timeout: float = 60.0
) -> tuple[list[str], int]:
    """``enqueue_until_accepted`` for each of ``values``: the job ids, and how many tries
    raised ``BackendUnavailable`` in all."""
    ids, refused = [], 0
    for n in values:
        job_id, tries = enqueue_until_accepted(task, n, timeout)
        ids.append(job_id)
        refused += tries
    return ids, refused


def ride_out_failover(
    app: duly.App, ran: Ran, replicated: Callable[[], None], kill: Callable[[], None]
) -> tuple[int, float]:
    """The failover drill of the cluster and Sentinel tests on ``recording_app`` ``app``: 200
    jobs enqueued and ``replicated()``, a worker started, ``kill()`` (the primary) once 40 have
    run, 30 more enqueued through the failover; every one of the 230 runs and succeeds.
    Returns how many enqueue tries were refused and when the last one was accepted (seconds
    after the kill)."""
    task = app.tasks["scale.record"]
    first = [job.id for job in app.enqueue_many([task.s(n) for n in range(200)])]
    replicated()
    worker = WorkerThread(app, concurrency=4).start()
    try:
        assert ran.wait_for(lambda seen: len(seen) >= 40, 30)
        killed_at = time.monotonic()
        kill()
        later, refused = enqueue_through_failover(task, range(200, 230))
        accepted_after = time.monotonic() - killed_at
        assert ran.wait_for(lambda seen: seen >= set(range(230)), 90), (
            f"not run: {sorted(set(range(230)) - set(ran.values))[:20]}"
        )
    finally:
        worker.stop()
    statuses = {app.get_job(i).status for i in first + later}  # type: ignore[union-attr]
    assert statuses == {"succeeded"}
    return refused, accepted_after
