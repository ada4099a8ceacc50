"""``@app.task(isolated=True)`` under a real ``duly worker`` process (PRODUCT §15, issue 29).

The worker runs ``python -m duly``: its isolated runs' child processes import the tasks module
(and not the CLI again); a segfault in one fails that job only, the worker's other jobs
succeed, and the burst worker exits cleanly.
"""

from __future__ import annotations

import pytest
from e2e_harness import E2E


@pytest.mark.timeout(120)
def test_a_segfault_in_an_isolated_run_fails_that_job_only(e2e: E2E) -> None:
    crash = e2e.tasks.isolated_crash.enqueue()
    marks = e2e.app.enqueue_many([e2e.tasks.isolated_mark.s(n) for n in range(5)])
    plain = e2e.tasks.mark.enqueue(99)
    worker = e2e.start_worker("--burst", "--concurrency", "2")
    assert worker.wait(90) == 0, e2e.log_of(worker)
    info = e2e.info(crash.id)
    assert info.status == "failed" and info.error is not None, info
    assert info.error["message"] == "the job's process died: signal 11 (SIGSEGV)"
    assert [e2e.info(m.id).result for m in marks] == list(range(5))
    assert e2e.info(plain.id).status == "succeeded"
    worker_pid = str(worker.pid)
    child_pids = {line.split()[1] for line in e2e.mark_lines("isolated")}
    assert child_pids and worker_pid not in child_pids
