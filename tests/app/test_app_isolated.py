"""``@app.task(isolated=True)``: each run in a child process (PRODUCT §15, issue 29 item 7).

A crash (segfault, ``os._exit``, a kill as the out-of-memory killer does), a timeout or a cancel
ends that run's child only: the job fails with a clear error (retried per its policy) or ends
cancelled, while the worker and its other jobs go on. The functions are defined at module level
(a child imports them by name); each test registers them on its own app.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import duly
from duly.testing import run_jobs


def where(a: int, b: int) -> dict[str, Any]:
    job = duly.current_job()
    return {"sum": a + b, "pid": os.getpid(), "job": job.id, "attempt": job.attempt}


async def where_async(a: int) -> int:
    return a * 2


def segfault() -> None:
    ctypes.string_at(0)


def exit_three() -> None:
    os._exit(3)


def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer does


def raises(message: str) -> None:
    raise LookupError(message)


def retry_once(marker: str) -> str:
    if not Path(marker).exists():
        Path(marker).touch()
        raise duly.Retry(after=0)
    return "again"


def sleeps(pid_file: str, seconds: float) -> None:
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(seconds)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_run_happens_in_another_process_with_its_job_context(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    add = app.task(isolated=True, name="iso.where")(where)
    double = app.task(isolated=True, name="iso.where_async")(where_async)
    jobs = [add.enqueue(n, 1) for n in range(3)]
    doubled = double.enqueue(21)
    run_burst(app)
    results = [job.result(timeout=5) for job in jobs]
    assert [r["sum"] for r in results] == [1, 2, 3]
    assert [r["job"] for r in results] == [job.id for job in jobs]
    assert {r["attempt"] for r in results} == {1}
    assert os.getpid() not in {r["pid"] for r in results}
    assert doubled.result(timeout=5) == 42


def test_a_crashing_run_fails_its_job_only_and_is_retried(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    backoff = duly.Backoff(base=0.01, cap=0.01)
    crash = app.task(isolated=True, retries=1, backoff=backoff, name="iso.segfault")(segfault)
    exits = app.task(isolated=True, retries=0, name="iso.exit")(exit_three)
    kill = app.task(isolated=True, retries=0, name="iso.killed")(killed)
    add = app.task(isolated=True, name="iso.where")(where)

    @app.task(name="iso.plain")
    def plain() -> int:
        return os.getpid()

    crashed, exited, was_killed = crash.enqueue(), exits.enqueue(), kill.enqueue()
    others = [add.enqueue(1, 2), plain.enqueue()]
    run_burst(app, settle=[crashed])  # the worker lives through them all
    info = crashed.info()
    assert (info.status, info.attempts) == ("failed", 2)
    assert [(e["type"], e["message"]) for e in info.errors] == [
        ("JobProcessDied", "the job's process died: signal 11 (SIGSEGV)")
    ] * 2
    error = exited.info().error
    assert error is not None and error["message"] == "the job's process died: exit code 3"
    error = was_killed.info().error
    assert error is not None and error["message"] == "the job's process died: signal 9 (SIGKILL)"
    assert others[0].result(timeout=5)["sum"] == 3
    assert others[1].result(timeout=5) == os.getpid()  # not isolated: in the worker's process


def test_the_tasks_own_errors_and_retries_cross_back(
    app: duly.App, run_burst: Callable[..., Any], tmp_path: Path
) -> None:
    backoff = duly.Backoff(base=0.01, cap=0.01)
    fails = app.task(isolated=True, retries=1, backoff=backoff, name="iso.raises")(raises)
    again = app.task(isolated=True, retries=0, name="iso.retry_once")(retry_once)
    failed, retried = fails.enqueue("no such row"), again.enqueue(str(tmp_path / "retried"))
    run_burst(app, settle=[failed, retried])
    info = failed.info()
    assert (info.status, info.attempts) == ("failed", 2)
    assert info.error is not None and info.error["type"] == "LookupError"
    assert info.error["message"] == "no such row"
    assert "in raises" in info.error["traceback"]  # the child's own frames
    assert retried.result(timeout=5) == "again"  # Retry: run again, no attempt charged
    assert retried.info().attempts == 1


def test_a_run_past_its_timeout_is_killed(
    app: duly.App, run_burst: Callable[..., Any], tmp_path: Path, wait: Callable[..., Any]
) -> None:
    slow = app.task(isolated=True, timeout=0.5, retries=0, name="iso.sleeps")(sleeps)
    pid_file = tmp_path / "pid"
    job = slow.enqueue(str(pid_file), 60.0)
    run_burst(app)
    info = job.info()
    assert info.status == "failed" and info.error is not None
    assert info.error["type"] == "JobTimeout"
    assert "its process was killed" in info.error["message"]
    wait(lambda: not _alive(int(pid_file.read_text())))


def test_cancelling_a_run_kills_its_process(
    app: duly.App, worker_thread: Any, tmp_path: Path, wait: Callable[..., Any]
) -> None:
    slow = app.task(isolated=True, name="iso.sleeps")(sleeps)
    pid_file = tmp_path / "pid"
    job = slow.enqueue(str(pid_file), 60.0)
    with worker_thread(app, grace=1.0):
        wait(pid_file.exists, 60)  # a child's first start may take seconds on a busy machine
        pid = int(pid_file.read_text())
        app.cancel(job.id)
        wait(lambda: job.info().status == "cancelled", 30)
        wait(lambda: not _alive(pid), 30)


def test_isolated_needs_a_module_level_function(app: duly.App) -> None:
    def local() -> None: ...

    with pytest.raises(duly.ConfigurationError, match="module level"):
        app.task(isolated=True)(local)
    with pytest.raises(TypeError, match="isolated"):
        app.task(isolated="yes")(where)  # type: ignore[call-overload]
    run_jobs  # noqa: B018 - the testing helper works with isolated tasks too (see the docs)


def test_around_run_wraps_an_isolated_run_in_the_workers_process(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    entered: list[tuple[str, int]] = []

    class Scope(duly.Hook):
        @contextlib.contextmanager
        def _scope(self, ctx: duly.RunContext) -> Iterator[None]:
            entered.append((ctx.job.id, os.getpid()))
            yield

        def around_run(self, ctx: duly.RunContext) -> Any:
            return self._scope(ctx)

    app.add_hook(Scope())
    add = app.task(isolated=True, name="iso.where")(where)
    job = add.enqueue(1, 1)
    run_burst(app)
    assert job.result(timeout=5)["sum"] == 2
    assert entered == [(job.id, os.getpid())]
