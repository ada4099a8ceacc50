"""A supervisor keeps the leases of its live children's jobs (PRODUCT §1; issue 28, item 7).

A task holding the GIL past the lease stops its process's heartbeats; the supervisor, another
process, renews the leases of the jobs that child holds, so no job of a live process is
recovered and run twice. A child that dies (or a supervisor dying with its children) still
loses its jobs' leases: they are recovered.
"""

from __future__ import annotations

import os
import signal

import pytest
from e2e_harness import E2E, wait_until

LEASE = "2"


def _ran_once(e2e: E2E, mark: str, n: int) -> None:
    starts, ends = e2e.mark_lines(f"{mark}-{n}"), e2e.mark_lines(f"{mark}-{n}.done")
    assert len(starts) == 1 and ends == starts, (mark, n, starts, ends)


@pytest.mark.timeout(120)
def test_a_task_holding_the_gil_past_the_lease_runs_once_and_so_do_its_neighbours(
    e2e: E2E,
) -> None:
    # Queued before the workers start: the first child to claim takes all four (concurrency
    # 4), so the slow jobs run beside the one holding the GIL; the other child is the one that
    # would recover them. The GIL is held for twice the lease.
    hold = e2e.tasks.hold_gil.s(0, 4.0)
    beside = [e2e.tasks.slow.s(n, 1.0) for n in range(3)]
    jobs = e2e.app.enqueue_many([hold, *beside])
    supervisor = e2e.start_worker("--processes", "2", "--concurrency", "4", "--lease", LEASE)
    wait_until(lambda: all(e2e.info(j.id).finished for j in jobs), 60)
    for job in jobs:
        info = e2e.info(job.id)
        assert (info.status, info.attempts, info.lost) == ("succeeded", 1, 0), info
    _ran_once(e2e, "gil", 0)
    for n in range(3):
        _ran_once(e2e, "slow", n)
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0, e2e.log_of(supervisor)
    assert e2e.app.workers() == [], "no child left registered (nor re-registered)"


@pytest.mark.timeout(120)
def test_a_dead_childs_jobs_are_recovered_though_its_supervisor_lives(e2e: E2E) -> None:
    job = e2e.tasks.slow.enqueue(0, 30.0)
    supervisor = e2e.start_worker("--processes", "2", "--lease", LEASE)
    [victim] = wait_until(lambda: e2e.mark_lines("slow-0"), 30)
    os.kill(int(victim), signal.SIGKILL)
    wait_until(lambda: e2e.info(job.id).lost == 1, 30)
    assert supervisor.poll() is None
    runs = wait_until(lambda: len(lines := e2e.mark_lines("slow-0")) == 2 and lines, 30)
    assert runs[0] == victim and runs[1] != victim


@pytest.mark.timeout(120)
def test_a_dead_supervisor_and_its_children_lose_their_leases(e2e: E2E) -> None:
    job = e2e.tasks.slow.enqueue(0, 1.0)
    supervisor = e2e.start_worker("--processes", "2", "--lease", LEASE)
    wait_until(lambda: e2e.mark_lines("slow-0"), 30)
    os.killpg(supervisor.pid, signal.SIGKILL)  # the supervisor and its children at once
    supervisor.wait(10)
    rescuer = e2e.start_worker()
    wait_until(lambda: e2e.info(job.id).status == "succeeded", 30)
    info = e2e.info(job.id)
    assert (info.attempts, info.lost) == (2, 1), info
    rescuer.send_signal(signal.SIGTERM)
    assert rescuer.wait(20) == 0
