"""A checkpointed job in real ``duly worker`` processes (PRODUCT §16): SIGKILLed mid-run, it
resumes from its last stored checkpoint in the next worker; SIGTERMed, it hands itself back
(``duly.Interrupted``) uncharged; ``duly status`` shows its progress (text and ``--json``)."""

from __future__ import annotations

import json
import os
import signal

import pytest
from e2e_harness import E2E, wait_until

import duly

ITEMS = 400

PROGRESS_TASKS = '''
"""A resumable job of the end-to-end tests (written by tests/e2e/test_e2e_progress.py)."""

import os
import time

import duly

app = duly.App(os.environ["DULY_URL"], namespace=os.environ.get("DULY_NAMESPACE", "duly"))
MARKS = os.environ["E2E_MARKS"]


@app.task(name="e2e.resumable", retries=0)
def resumable(items):
    job = duly.current_job()
    start = job.cursor or 0
    with open(os.path.join(MARKS, "starts"), "a") as marks:
        marks.write(f"{start} {os.getpid()}\\n")
    for i in range(start, items):
        if job.stopping:
            raise duly.Interrupted()
        time.sleep(0.01)  # one item of work
        job.checkpoint(i + 1)
        job.set_progress((i + 1) / items, f"{i + 1} of {items}")
    return items
'''


def _starts(e2e: E2E) -> list[tuple[int, int]]:
    return [
        (int(start), int(pid)) for start, pid in (line.split() for line in e2e.mark_lines("starts"))
    ]


def _done_items(info: duly.JobInfo) -> int:
    return 0 if info.progress is None else round(info.progress.fraction * ITEMS)


@pytest.mark.timeout(120)
def test_a_sigkilled_checkpointed_job_resumes_from_its_cursor(e2e: E2E) -> None:
    (e2e.dir / "e2e_progress.py").write_text(PROGRESS_TASKS)
    tasks = e2e.load_module("e2e_progress.py")
    job = tasks.resumable.enqueue(ITEMS)
    worker_args = ("worker", "e2e_progress:app", "--lease", "2", "--processes", "1")

    first = e2e.start(*worker_args)
    seen = wait_until(lambda: (done := _done_items(e2e.info(job.id))) >= 60 and done, 60)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    assert not e2e.info(job.id).finished

    second = e2e.start(*worker_args, "--grace", "30")
    wait_until(lambda: len(_starts(e2e)) >= 2 and _done_items(e2e.info(job.id)) > seen + 20, 60)
    second.send_signal(signal.SIGTERM)  # a deploy: the job hands itself back
    assert second.wait(30) == 0
    handed_back = e2e.info(job.id)
    assert (handed_back.status, handed_back.errors) == ("queued", [])

    third = e2e.start(*worker_args)
    wait_until(lambda: e2e.info(job.id).finished, 60)
    third.send_signal(signal.SIGTERM)
    assert third.wait(30) == 0

    info = e2e.info(job.id)
    assert (info.status, info.result, info.lost) == ("succeeded", ITEMS, 1), info
    # attempts: the lost run, the handed-back one (not charged), the last one.
    assert info.attempts == 2, info
    [(zero, pid1), (resumed, pid2), (after_term, pid3)] = _starts(e2e)
    assert (zero, pid1, pid2, pid3) == (0, first.pid, second.pid, third.pid)
    # The recovered run starts from the last stored checkpoint: no earlier than the progress
    # seen before the kill (stored with it), so at most what ran since that heartbeat is redone.
    assert seen <= resumed < ITEMS, (seen, resumed)
    # A graceful hand-back stores the checkpoint of the very item it stopped after.
    assert resumed < after_term < ITEMS

    status_text, status_json = e2e.cli_many(("status", job.id), ("status", job.id, "--json"))
    assert status_text.returncode == 0, status_text.stderr
    assert f"progress      100% {ITEMS} of {ITEMS}" in status_text.stdout
    data = json.loads(status_json.stdout)
    assert (data["progress"]["fraction"], data["progress"]["message"]) == (
        1.0,
        f"{ITEMS} of {ITEMS}",
    )
