"""Real worker processes (PRODUCT §1): SIGKILL mid-job, two workers racing, graceful SIGTERM,
and the ``--processes`` supervisor (restarts; a burst in several processes)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from e2e_harness import E2E, pid_alive, wait_until

from duly._worker.supervisor import Supervisor


@pytest.mark.timeout(90)
def test_sigkilled_worker_loses_no_job(e2e: E2E) -> None:
    jobs = e2e.app.enqueue_many([e2e.tasks.slow.s(n, 1.5) for n in range(4)])
    first = e2e.start_worker("--concurrency", "2")
    # two jobs are running in the first worker (mid-job: each sleeps 1.5 s)

    def started() -> list[int]:
        return [n for n in range(4) if e2e.mark_lines(f"slow-{n}")]

    running = wait_until(lambda: len(started()) == 2 and started(), 30)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    killed_at = time.monotonic()
    assert not any(e2e.mark_lines(f"slow-{n}.done") for n in running), "not mid-job"

    second = e2e.start_worker("--concurrency", "4")
    wait_until(lambda: all(e2e.info(j.id).finished for j in jobs), 40)
    recovered_in = time.monotonic() - killed_at
    for n, job in enumerate(jobs):
        info = e2e.info(job.id)
        assert (info.status, info.result) == ("succeeded", n), info
        if n in running:
            assert info.attempts >= 2, f"the lost run must show: {info}"
            assert info.lost >= 1, info
            pids = e2e.mark_lines(f"slow-{n}")
            assert pids[0] == str(first.pid) and str(second.pid) in pids[1:]
        else:
            assert (info.attempts, info.lost) == (1, 0), info
        assert e2e.mark_lines(f"slow-{n}.done") == [str(second.pid)]
    # lease 2 s + a recovery pass + the 1.5 s run, with slack for a busy machine
    assert recovered_in < 20
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0


@pytest.mark.timeout(90)
def test_two_workers_race_and_each_job_runs_once(e2e: E2E) -> None:
    workers = [e2e.start_worker("--concurrency", "2") for _ in range(2)]
    e2e.wait_workers(2)
    jobs = e2e.app.enqueue_many([e2e.tasks.mark.s(n) for n in range(200)])
    wait_until(
        lambda: len(e2e.app.jobs(task="e2e.mark", status="succeeded", limit=1000)) == 200, 60
    )
    lines = e2e.mark_lines("marks")
    ran = [line.split()[0] for line in lines]
    assert len(ran) == 200, "a job ran twice (or was lost)"
    assert sorted(ran) == sorted(j.id for j in jobs)
    pids = {line.split()[1] for line in lines}
    assert pids == {str(w.pid) for w in workers}, "both workers should have taken jobs"
    for info in e2e.app.jobs(task="e2e.mark", limit=1000):
        assert (info.status, info.attempts) == ("succeeded", 1)
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(20) == 0


def _start_two_long_jobs(e2e: E2E) -> list:
    jobs = [e2e.tasks.slow.enqueue(0, 3.0), e2e.tasks.slow_async.enqueue(1, 3.0)]
    return jobs


@pytest.mark.timeout(90)
def test_sigterm_lets_running_jobs_finish_within_the_grace(e2e: E2E) -> None:
    jobs = _start_two_long_jobs(e2e)
    worker = e2e.start_worker("--concurrency", "2", "--grace", "10")
    wait_until(lambda: e2e.mark_lines("slow-0") and e2e.mark_lines("slow-1"), 30)
    worker.send_signal(signal.SIGTERM)
    asked = time.monotonic()
    assert worker.wait(20) == 0
    assert time.monotonic() - asked < 12
    for job in jobs:
        info = e2e.info(job.id)
        assert (info.status, info.attempts, info.errors) == ("succeeded", 1, []), info
    assert e2e.mark_lines("slow-0.done") == [str(worker.pid)]
    assert e2e.mark_lines("slow-1.done") == [str(worker.pid)]
    rows = e2e.app.stats()
    assert sum(r.failed for r in rows) == 0
    assert sum(r.retried for r in rows) == 0
    assert sum(r.succeeded for r in rows) == 2
    log = e2e.log_of(worker)
    assert "Traceback" not in log, log


@pytest.mark.timeout(90)
def test_sigterm_past_the_grace_hands_jobs_back(e2e: E2E) -> None:
    jobs = _start_two_long_jobs(e2e)
    worker = e2e.start_worker("--concurrency", "2", "--grace", "1")
    wait_until(lambda: e2e.mark_lines("slow-0") and e2e.mark_lines("slow-1"), 30)
    worker.send_signal(signal.SIGTERM)
    asked = time.monotonic()
    assert worker.wait(20) == 0
    assert time.monotonic() - asked < 2.8, "it should not wait for the 3 s jobs"
    for job in jobs:
        info = e2e.info(job.id)
        assert info.status == "queued", info
        assert info.attempts == 0, "a hand-back must not charge an attempt"
        assert info.errors == [] and info.worker is None
    assert not e2e.mark_lines("slow-0.done") and not e2e.mark_lines("slow-1.done")
    assert sum(r.failed + r.retried for r in e2e.app.stats()) == 0
    log = e2e.log_of(worker)
    assert "Traceback" not in log and "never retrieved" not in log, log

    other = e2e.start_worker("--concurrency", "2")
    wait_until(lambda: all(e2e.info(j.id).finished for j in jobs), 30)
    for n, job in enumerate(jobs):
        info = e2e.info(job.id)
        assert (info.status, info.result, info.attempts) == ("succeeded", n, 1), info
        assert e2e.mark_lines(f"slow-{n}") == [str(worker.pid), str(other.pid)]
    assert sum(r.failed for r in e2e.app.stats()) == 0
    other.send_signal(signal.SIGTERM)
    assert other.wait(20) == 0


def _child_pids(e2e: E2E) -> set[int]:
    return {int(w["info"]["pid"]) for w in e2e.cli_json("workers")}


@pytest.mark.timeout(120)
def test_supervisor_restarts_a_killed_child(e2e: E2E) -> None:
    supervisor = e2e.start_worker("--processes", "2", "--grace", "5")
    e2e.wait_workers(2, 30)
    children = _child_pids(e2e)
    assert len(children) == 2 and supervisor.pid not in children
    assert all(pid_alive(pid) for pid in children)
    for pid in children:  # the first children are forks of the supervisor (a fast start)
        assert f"(pid {pid}, forked)" in e2e.log_of(supervisor)

    victim = min(children)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: not pid_alive(victim), 10)
    new = wait_until(
        lambda: {w.info["pid"] for w in e2e.app.workers()} - children - {supervisor.pid}, 30
    )
    listed = _child_pids(e2e)  # `duly workers --json` shows the new process
    assert set(new) <= listed
    for pid in new:  # a replacement is spawned fresh: the supervisor runs threads by now
        assert f"(pid {pid})" in e2e.log_of(supervisor)
    survivor = (children - {victim}).pop()
    alive = {survivor, *new}
    assert all(pid_alive(pid) for pid in alive)

    jobs = e2e.app.enqueue_many([e2e.tasks.mark.s(n) for n in range(20)])
    wait_until(lambda: all(e2e.info(j.id).status == "succeeded" for j in jobs), 30)
    assert supervisor.poll() is None

    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0
    wait_until(lambda: not any(pid_alive(pid) for pid in alive), 10)


@pytest.mark.timeout(120)
def test_supervisor_burst_drains_with_every_child_then_exits(e2e: E2E) -> None:
    # 8 jobs of 0.5 s, one at a time per process: both children take part before the queue empties.
    jobs = e2e.app.enqueue_many([e2e.tasks.slow.s(n, 0.5) for n in range(8)])
    supervisor = e2e.start_worker("--processes", "2", "--burst", "--concurrency", "1")
    assert supervisor.wait(60) == 0, e2e.log_of(supervisor)
    for n, job in enumerate(jobs):
        info = e2e.info(job.id)
        assert (info.status, info.result, info.attempts) == ("succeeded", n, 1), info
    ran_in = {pid for n in range(8) for pid in e2e.mark_lines(f"slow-{n}.done")}
    assert len(ran_in) == 2 and str(supervisor.pid) not in ran_in, ran_in
    assert not any(pid_alive(int(pid)) for pid in ran_in)
    assert e2e.app.workers() == [], "both children unregistered"
    log = e2e.log_of(supervisor)
    assert "restarting" not in log and "Traceback" not in log, log


def test_burst_supervisor_exits_with_the_worst_code_and_restarts_none(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # The first child to start exits 0, the other 3; neither may be started again.
    child = (
        "import os, sys\n"
        f"with open({str(runs)!r}, 'a') as f: f.write('run\\n')\n"
        f"try: os.open({str(tmp_path / 'first')!r}, os.O_CREAT | os.O_EXCL)\n"
        "except FileExistsError: sys.exit(3)\n"
    )
    supervisor = Supervisor([], 2, grace=1, burst=True)
    supervisor.child_argv = [sys.executable, "-c", child]
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert supervisor.run() == 3
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert runs.read_text().splitlines() == ["run", "run"]
