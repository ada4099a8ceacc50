"""The Redis direct hand-off with real worker processes: an idle ``duly worker`` is handed a new
job by the enqueue itself (see ``duly.backends.redis.handoff``). Redis only: the other
backends wake their workers.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis
from e2e_harness import E2E, wait_until
from services import REDIS_URL

#: The ``e2e`` fixture on Redis alone (no skipped runs on the other backends).
pytestmark = pytest.mark.parametrize("e2e", ["redis"], indirect=True)


def _idle_workers(r: redis.Redis, e2e: E2E) -> list[bytes]:
    """The ids of the workers registered idle now (their ``iv:`` entries)."""
    return [key.split(b":iv:", 1)[1] for key in r.scan_iter(f"{{{e2e.namespace}}}:iv:*")]


@pytest.mark.timeout(90)
def test_two_idle_workers_and_one_job_it_runs_once(e2e: E2E) -> None:
    r = redis.Redis.from_url(REDIS_URL)
    workers = [e2e.start_worker("--concurrency", "2") for _ in range(2)]
    e2e.wait_workers(2)
    wait_until(lambda: len(_idle_workers(r, e2e)) == 2, 30)
    for n in range(5):
        job = e2e.tasks.mark.enqueue(n)
        wait_until(lambda job=job: e2e.info(job.id).finished, 20)
        info = e2e.info(job.id)
        assert (info.status, info.attempts) == ("succeeded", 1), info
        time.sleep(0.2)
    ran = [line.split()[0] for line in e2e.mark_lines("marks")]
    assert len(ran) == 5, "a job ran twice (or was lost)"
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(20) == 0
    # A clean stop withdraws the registration.
    assert _idle_workers(r, e2e) == []


@pytest.mark.timeout(90)
def test_a_worker_killed_with_a_handed_job_loses_it_to_recovery(e2e: E2E) -> None:
    r = redis.Redis.from_url(REDIS_URL)
    first = e2e.start_worker("--concurrency", "1")
    wait_until(lambda: _idle_workers(r, e2e), 30)
    job = e2e.tasks.slow.enqueue(0, 1.5)
    wait_until(lambda: e2e.mark_lines("slow-0"), 20)
    info = e2e.info(job.id)
    assert info.status == "running" and info.worker is not None
    assert str(first.pid) in info.worker
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    second = e2e.start_worker("--concurrency", "1")
    wait_until(lambda: e2e.info(job.id).finished, 40)
    info = e2e.info(job.id)
    assert (info.status, info.result, info.attempts, info.lost) == ("succeeded", 0, 2, 1), info
    assert e2e.mark_lines("slow-0.done") == [str(second.pid)]
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0
