"""Failure handling (PRODUCT §3, §12): retries with backoff, ``retry_on``, ``duly.Retry``,
timeouts for async and sync jobs, ``on_failure``, unknown tasks and corrupt payloads."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime
from typing import Any

import pytest
from stored import write_raw_payload

import duly

pytestmark = pytest.mark.timeout(60)


def info_of(app: duly.App, job_id: str) -> duly.JobInfo:
    info = app.get_job(job_id)
    assert info is not None, f"job {job_id} vanished"
    return info


def finished(app: duly.App, *jobs: duly.Job) -> bool:
    return all(info_of(app, job.id).finished for job in jobs)


def test_retries_with_backoff_then_failed(app: duly.App, worker_thread, wait) -> None:
    @app.task(name="t.doomed", retries=2, backoff=duly.Backoff(base=0.05, cap=0.1))
    def doomed(x: int) -> None:
        raise ValueError(f"boom on attempt {duly.current_job().attempt}")

    job = doomed.enqueue(1)
    with worker_thread(app):
        wait(lambda: finished(app, job))
    info = info_of(app, job.id)
    assert info.status == "failed"
    assert info.attempts == 3
    assert info.max_attempts == 3
    assert len(info.errors) == 3
    for n, entry in enumerate(info.errors, start=1):
        assert entry["type"] == "ValueError"
        assert entry["message"] == f"boom on attempt {n}"
        assert "Traceback" in entry["traceback"] and "boom on attempt" in entry["traceback"]
        assert entry["attempt"] == n
    assert info.error == info.errors[-1]
    assert {"type", "message", "traceback"} <= set(info.error)
    times = [entry["at"] for entry in info.errors]
    assert times == sorted(times)
    assert info.finished_at is not None and info.started_at is not None


def test_a_failure_then_success_on_retry(app: duly.App, worker_thread, wait) -> None:
    @app.task(name="t.flaky", retries=3, backoff=duly.Backoff(base=0.05, cap=0.1))
    async def flaky() -> str:
        if duly.current_job().attempt == 1:
            raise ConnectionError("upstream down")
        return "ok"

    job = flaky.enqueue()
    with worker_thread(app):
        wait(lambda: finished(app, job))
    info = info_of(app, job.id)
    assert (info.status, info.result, info.attempts) == ("succeeded", "ok", 2)
    assert [e["type"] for e in info.errors] == ["ConnectionError"]
    assert info.errors[0]["message"] == "upstream down"


def test_retrying_status_waits_for_the_backoff(make_app, worker_thread, wait) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock)

    @app.task(name="t.doomed", retries=1, backoff=duly.Backoff(base=1000, cap=1000))
    def doomed() -> None:
        raise ValueError("no")

    job = doomed.enqueue()
    with worker_thread(app):
        retrying = wait(lambda: (i := info_of(app, job.id)).status == "retrying" and i)
        assert retrying.attempts == 1
        assert retrying.error is not None and retrying.error["message"] == "no"
        assert retrying.scheduled_for is not None
        assert retrying.scheduled_for.timestamp() > clock.now()
        assert retrying.scheduled_for.timestamp() <= clock.now() + 1000
        assert retrying.finished_at is None
        time.sleep(0.5)  # nothing happens while the clock stands still
        assert info_of(app, job.id).status == "retrying"
        clock.advance(1001)
        wait(lambda: finished(app, job))
    info = info_of(app, job.id)
    assert (info.status, info.attempts, len(info.errors)) == ("failed", 2, 2)


def test_retry_on_limits_which_errors_are_retried(app: duly.App, worker_thread, wait) -> None:
    @app.task(name="t.picky", retries=3, retry_on=(ConnectionError,))
    def picky() -> None:
        raise ValueError("not worth retrying")

    @app.task(
        name="t.transient", retries=3, retry_on=ConnectionError, backoff=duly.Backoff(0.05, 0.1)
    )
    def transient() -> str:
        if duly.current_job().attempt < 3:
            raise ConnectionError("try again")
        return "done"

    a, b = picky.enqueue(), transient.enqueue()
    with worker_thread(app):
        wait(lambda: finished(app, a, b))
    info = info_of(app, a.id)
    assert (info.status, info.attempts, len(info.errors)) == ("failed", 1, 1)
    assert info.error is not None and info.error["type"] == "ValueError"
    info = info_of(app, b.id)
    assert (info.status, info.attempts, info.result) == ("succeeded", 3, "done")
    assert [e["type"] for e in info.errors] == ["ConnectionError", "ConnectionError"]


def test_retry_exception_reschedules_without_charging_an_attempt(
    make_app, worker_thread, wait
) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock)
    runs: list[int] = []

    @app.task(name="t.patient", retries=0)
    def patient() -> str:
        runs.append(duly.current_job().attempt)
        if len(runs) < 3:
            raise duly.Retry(after=100)
        return "finally"

    job = patient.enqueue()
    with worker_thread(app):
        for expected_runs in (1, 2):
            info = wait(
                lambda n=expected_runs: (
                    len(runs) == n and (i := info_of(app, job.id)).status == "scheduled" and i
                )
            )
            assert info.attempts == 0, "Retry must not charge an attempt"
            assert info.errors == [] and info.error is None
            assert info.scheduled_for is not None
            assert abs(info.scheduled_for.timestamp() - (clock.now() + 100)) < 0.01
            clock.advance(100)
        wait(lambda: finished(app, job))
    info = info_of(app, job.id)
    assert (info.status, info.result, info.attempts) == ("succeeded", "finally", 1)
    assert runs == [1, 1, 1]
    rows = [r for r in app.stats() if r.task == "t.patient"]
    assert sum(r.succeeded for r in rows) == 1
    assert sum(r.retried for r in rows) == 0
    assert sum(r.failed for r in rows) == 0


def test_async_timeout_cancels_the_job(app: duly.App, worker_thread, wait) -> None:
    cancelled = threading.Event()

    @app.task(name="t.slow", timeout=0.3, retries=0)
    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = slow.enqueue()
    started = time.monotonic()
    with worker_thread(app):
        wait(lambda: finished(app, job), 10)
    assert time.monotonic() - started < 10
    assert cancelled.is_set()
    info = info_of(app, job.id)
    assert info.status == "failed"
    assert info.error is not None and info.error["type"] == "JobTimeout"
    assert "0.3" in info.error["message"]
    assert info.finished_at is not None and info.started_at is not None
    assert (info.finished_at - info.started_at).total_seconds() < 5


def test_sync_timeout_gives_the_slot_back(app: duly.App, worker_thread, wait) -> None:
    """A sync job stuck in C code past its timeout fails with JobTimeout, and a worker with
    concurrency=1 still runs the next job while that thread is stuck."""
    unblock = threading.Event()

    @app.task(name="t.stuck", timeout=0.5, retries=0)
    def stuck() -> None:
        unblock.wait(30)  # blocked in C: cannot be interrupted

    @app.task(name="t.quick")
    def quick() -> str:
        return "quick"

    hung = stuck.enqueue()
    next_job = quick.enqueue()
    try:
        with worker_thread(app, concurrency=1):
            wait(lambda: finished(app, hung, next_job), 15)
            assert not unblock.is_set()
    finally:
        unblock.set()
    info = info_of(app, hung.id)
    assert info.status == "failed"
    assert info.error is not None and info.error["type"] == "JobTimeout"
    done = info_of(app, next_job.id)
    assert (done.status, done.result) == ("succeeded", "quick")


def test_sync_timeout_stops_a_pure_python_loop(app: duly.App, worker_thread, wait) -> None:
    ended = threading.Event()
    looped = threading.Event()

    @app.task(name="t.spin", timeout=0.3, retries=0)
    def spin() -> None:
        try:
            while True:
                looped.set()
                time.sleep(0.01)
        finally:
            ended.set()

    job = spin.enqueue()
    with worker_thread(app, concurrency=1):
        wait(lambda: finished(app, job), 10)
        assert looped.is_set()
        assert ended.wait(5), "the timed-out thread was never asked to stop"
    info = info_of(app, job.id)
    assert info.status == "failed"
    assert info.error is not None and info.error["type"] == "JobTimeout"


def test_timeout_counts_as_a_failure_and_is_retried(app: duly.App, worker_thread, wait) -> None:
    @app.task(name="t.slow", timeout=0.2, retries=1, backoff=duly.Backoff(0.05, 0.1))
    async def slow() -> None:
        await asyncio.sleep(10)

    job = slow.enqueue()
    with worker_thread(app):
        wait(lambda: finished(app, job), 15)
    info = info_of(app, job.id)
    assert (info.status, info.attempts) == ("failed", 2)
    assert [e["type"] for e in info.errors] == ["JobTimeout", "JobTimeout"]


def test_on_failure_called_once_with_the_final_failure(app: duly.App, worker_thread, wait) -> None:
    sync_calls: list[tuple[duly.JobInfo, BaseException]] = []
    async_calls: list[tuple[duly.JobInfo, BaseException]] = []

    def on_fail(info: duly.JobInfo, error: BaseException) -> None:
        sync_calls.append((info, error))

    assert app.on_failure(on_fail) is on_fail

    @app.on_failure
    async def on_fail_async(info: duly.JobInfo, error: BaseException) -> None:
        await asyncio.sleep(0)
        async_calls.append((info, error))

    @app.on_failure
    def broken_callback(info: duly.JobInfo, error: BaseException) -> None:
        raise RuntimeError("a callback bug must not hurt the worker")

    @app.task(name="t.doomed", retries=1, backoff=duly.Backoff(0.05, 0.1))
    def doomed(order: int) -> None:
        raise ValueError(f"declined {order}")

    @app.task(name="t.flaky", retries=1, backoff=duly.Backoff(0.05, 0.1))
    def flaky() -> str:
        if duly.current_job().attempt == 1:
            raise ValueError("once")
        return "ok"

    @app.task(name="t.fine")
    async def fine() -> int:
        return 1

    bad, meh, good = doomed.enqueue(7), flaky.enqueue(), fine.enqueue()
    with worker_thread(app):
        wait(lambda: finished(app, bad, meh, good))
        time.sleep(0.3)  # a late duplicate call would show up here
    assert len(sync_calls) == 1
    assert len(async_calls) == 1
    for info, error in (sync_calls[0], async_calls[0]):
        assert info.id == bad.id
        assert info.task == "t.doomed"
        assert info.status == "failed"
        assert info.attempts == 2
        assert info.args == [7]
        assert info.error is not None and info.error["message"] == "declined 7"
        assert len(info.errors) == 2
        assert isinstance(error, ValueError) and str(error) == "declined 7"
    assert info_of(app, meh.id).status == "succeeded"
    assert info_of(app, good.id).status == "succeeded"


def test_current_job_inside_sync_and_async_tasks(app: duly.App, run_burst) -> None:
    seen: dict[str, duly.JobContext] = {}

    @app.task(name="t.sync", retries=4)
    def sync_task() -> None:
        seen["sync"] = duly.current_job()

    @app.task(name="t.async", queue="other")
    async def async_task() -> None:
        await asyncio.sleep(0)
        seen["async"] = duly.current_job()

    a = sync_task.options(key="user:1").enqueue()
    b = async_task.enqueue()
    worker = run_burst(app, queues=["default", "other"])
    ctx = seen["sync"]
    assert (ctx.id, ctx.task, ctx.queue, ctx.key) == (a.id, "t.sync", "default", "user:1")
    assert (ctx.attempt, ctx.max_attempts, ctx.last_attempt) == (1, 5, False)
    assert ctx.worker == worker.id
    ctx = seen["async"]
    assert (ctx.id, ctx.task, ctx.queue, ctx.key) == (b.id, "t.async", "other", None)
    assert (ctx.attempt, ctx.max_attempts, ctx.last_attempt) == (1, 4, False)
    with pytest.raises(RuntimeError):
        duly.current_job()


def test_unknown_task_fails_and_the_worker_keeps_running(make_app, run_burst) -> None:
    producer, consumer = make_app(), make_app()
    reported: list[tuple[duly.JobInfo, BaseException]] = []
    consumer.on_failure(lambda info, error: reported.append((info, error)))

    @producer.task(name="t.ghost", retries=3)
    def ghost_stub() -> None:
        return None

    @producer.task(name="t.real")
    def real_stub(n: int) -> None:
        return None

    @consumer.task(name="t.real")
    def real(n: int) -> int:
        return n * 10

    ghost = ghost_stub.enqueue()
    after = real_stub.enqueue(4)
    run_burst(consumer, concurrency=1)
    info = info_of(consumer, ghost.id)
    assert info.status == "failed"
    assert info.attempts == 1
    assert info.error is not None and "unknown task" in info.error["message"]
    assert "t.ghost" in info.error["message"]
    done = info_of(consumer, after.id)
    assert (done.status, done.result) == ("succeeded", 40)
    assert [(i.id, type(e).__name__) for i, e in reported] == [(ghost.id, "TaskNotFound")]


@pytest.mark.parametrize("garbage", [b"garbage", b'{"args": 1}', b"\xff\xfe\x00"])
def test_corrupt_payload_fails_that_job_only(app: duly.App, run_burst, garbage: bytes) -> None:
    @app.task(name="t.double", retries=3)
    def double(n: int) -> int:
        return 2 * n

    jobs = [double.enqueue(n) for n in range(3)]

    async def corrupt() -> None:
        try:
            backend: Any = await app.backend()
            await write_raw_payload(backend, jobs[1].id, garbage)
        finally:
            await app.aclose()

    asyncio.run(corrupt())
    looked_up = info_of(app, jobs[1].id)  # reading a corrupt job never raises
    assert looked_up.status == "queued"
    run_burst(app, concurrency=1)
    bad = info_of(app, jobs[1].id)
    assert bad.status == "failed"
    assert bad.attempts == 1, "a payload that cannot be decoded is not retried"
    assert bad.error is not None and "corrupt" in bad.error["message"]
    for n in (0, 2):
        info = info_of(app, jobs[n].id)
        assert (info.status, info.result, info.args) == ("succeeded", 2 * n, [n])


def test_a_result_that_does_not_serialize_fails_the_job(app: duly.App, run_burst) -> None:
    @app.task(name="t.weird", retries=0)
    def weird() -> Any:
        return datetime  # a class is not JSON

    job = weird.enqueue()
    run_burst(app)
    info = info_of(app, job.id)
    assert info.status == "failed"
    assert info.error is not None and "t.weird" in info.error["message"]


@pytest.mark.parametrize("timeout", [None, 30.0], ids=["no-timeout", "timeout"])
def test_a_task_s_own_timeout_error_is_its_error_not_the_job_timeout(
    app: duly.App, worker_thread: Any, wait: Any, timeout: float | None
) -> None:
    """A TimeoutError the task raises (a socket's, an upstream's) is reported as itself and
    retried as any error; only the job's own deadline is a JobTimeout."""

    @app.task(name="t.sync_socket", retries=0, timeout=timeout)
    def sync_socket() -> None:
        raise TimeoutError("upstream read timed out")

    @app.task(name="t.async_socket", retries=0, timeout=timeout)
    async def async_socket() -> None:
        raise TimeoutError("upstream read timed out")

    jobs = [sync_socket.enqueue(), async_socket.enqueue()]
    with worker_thread(app):
        wait(lambda: all(finished(app, job) for job in jobs), 10)
    for job in jobs:
        info = info_of(app, job.id)
        assert info.status == "failed"
        assert info.error is not None
        assert (info.error["type"], info.error["message"]) == (
            "TimeoutError",
            "upstream read timed out",
        )
