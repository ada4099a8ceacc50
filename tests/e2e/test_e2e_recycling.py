"""``duly worker --max-jobs-per-child N`` recycles its worker processes (PRODUCT §15, issue 29).

A real ``duly worker`` process: each child stops claiming after N jobs, finishes them, exits,
and the supervisor starts a replacement; every job runs once and succeeds (none lost, none
recovered), spread over several children.
"""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from e2e_harness import E2E, wait_until


@pytest.mark.timeout(180)
def test_children_are_replaced_after_n_jobs_and_every_job_runs_once(e2e: E2E) -> None:
    jobs = e2e.app.enqueue_many([e2e.tasks.mark.s(n) for n in range(30)])
    supervisor = e2e.start_worker("--concurrency", "4", "--max-jobs-per-child", "10")
    wait_until(lambda: all(e2e.info(j.id).status == "succeeded" for j in jobs), 120)
    infos = [e2e.info(j.id) for j in jobs]
    assert {(i.attempts, i.lost) for i in infos} == {(1, 0)}, infos
    runs = Counter(line.split()[0] for line in e2e.mark_lines("marks"))
    assert runs == Counter({j.id: 1 for j in jobs})  # each ran once
    pids = {line.split()[1] for line in e2e.mark_lines("marks")}
    workers = Counter(i.worker for i in infos)
    assert len(pids) >= 3 and len(workers) >= 3, workers
    assert max(workers.values()) <= 11, workers  # N, and at most one handed to it while idle
    assert supervisor.poll() is None  # the supervisor lives on, with a fresh child
    log = e2e.log_of(supervisor)
    assert log.count("recycled; starting another") >= 2, log
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0, e2e.log_of(supervisor)
    assert e2e.app.workers() == [], "every child unregistered"


@pytest.mark.timeout(120)
def test_a_burst_worker_recycles_until_the_queue_is_drained(e2e: E2E) -> None:
    jobs = e2e.app.enqueue_many([e2e.tasks.mark.s(n) for n in range(12)])
    supervisor = e2e.start_worker("--burst", "--max-jobs-per-child", "5")
    assert supervisor.wait(90) == 0, e2e.log_of(supervisor)
    infos = [e2e.info(j.id) for j in jobs]
    assert {(i.status, i.attempts) for i in infos} == {("succeeded", 1)}
    assert len({i.worker for i in infos}) >= 3
