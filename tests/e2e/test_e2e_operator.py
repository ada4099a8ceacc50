"""Operator controls from the command line (PRODUCT §15): the queues a plain ``duly worker``
serves, ``duly pause`` / ``duly resume`` and the bulk ``duly cancel|retry --status``."""

from __future__ import annotations

import pytest
from e2e_harness import E2E

MAIL_TASKS = '''
"""A task on a queue of its own, as a new user writes it."""

import os

import duly

app = duly.App(os.environ["DULY_URL"], namespace=os.environ.get("DULY_NAMESPACE", "duly"))


@app.task(name="plain")
def plain(n):
    return n


@app.task(name="send", queue="mail")
def send(to):
    return to


@app.periodic(every=3600, name="nightly", queue="reports")
def nightly():
    return None
'''


@pytest.mark.timeout(120)
def test_plain_worker_serves_every_queue_the_app_declares(e2e: E2E) -> None:
    (e2e.dir / "mail_tasks.py").write_text(MAIL_TASKS)
    tasks = e2e.load_module("mail_tasks.py")
    mail = tasks.send.enqueue("ann@example.com")
    plain = tasks.plain.enqueue(1)

    narrowed = e2e.cli("worker", "mail_tasks:app", "--burst", "-q", "default", "--no-scheduler")
    assert narrowed.returncode == 0, narrowed.stderr
    assert "queues=default " in narrowed.stderr
    assert e2e.info(plain.id).status == "succeeded"
    assert e2e.info(mail.id).status == "queued"  # -q narrows it

    burst = e2e.cli("worker", "mail_tasks:app", "--burst", "--no-scheduler", timeout=60)
    assert burst.returncode == 0, burst.stderr
    assert "queues=default,mail,reports " in burst.stderr  # default first, then as declared
    assert e2e.info(mail.id).status == "succeeded"


@pytest.mark.timeout(120)
def test_duly_pause_and_resume(e2e: E2E) -> None:
    paused = e2e.cli("pause", "default")
    assert (paused.returncode, paused.stdout) == (0, "paused default\n"), paused.stderr
    again = e2e.cli("pause", "default")
    assert again.stdout == "default was paused already\n"
    job = e2e.tasks.mark.enqueue(1)
    burst = e2e.cli("worker", "e2e_tasks:app", "--burst", "--no-scheduler", timeout=60)
    assert burst.returncode == 0, burst.stderr
    assert e2e.info(job.id).status == "queued"  # a paused queue gives the worker nothing
    listed = {q["name"]: q for q in e2e.cli_json("queues", "--json")}
    assert listed["default"]["paused"] is True
    assert "paused" in e2e.cli("queues").stdout

    resumed = e2e.cli("resume", "default")
    assert (resumed.returncode, resumed.stdout) == (0, "resumed default\n"), resumed.stderr
    assert e2e.cli("resume", "default").stdout == "default was not paused\n"
    burst = e2e.cli("worker", "e2e_tasks:app", "--burst", "--no-scheduler", timeout=60)
    assert burst.returncode == 0, burst.stderr
    assert e2e.info(job.id).status == "succeeded"

    bad = e2e.cli("pause", "no spaces")
    assert bad.returncode != 0 and "invalid queue name" in bad.stderr


@pytest.mark.timeout(120)
def test_duly_cancel_and_retry_by_status(e2e: E2E) -> None:
    bad = [e2e.tasks.boom.enqueue() for _ in range(2)]
    burst = e2e.cli("worker", "e2e_tasks:app", "--burst", "--no-scheduler", timeout=60)
    assert burst.returncode == 0, burst.stderr
    waiting = [e2e.tasks.mark.options(queue="q1").enqueue(i) for i in range(3)]
    elsewhere = e2e.tasks.mark.enqueue(9)

    cancelled = e2e.cli("cancel", "--status", "queued", "--queue", "q1")
    assert (cancelled.returncode, cancelled.stdout) == (0, "cancelled 3 queued job(s)\n")
    assert {e2e.info(j.id).status for j in waiting} == {"cancelled"}
    assert e2e.info(elsewhere.id).status == "queued"

    retried = e2e.cli("retry", "--status", "failed", "--task", "e2e.boom")
    assert (retried.returncode, retried.stdout) == (0, "re-queued 2 failed job(s)\n")
    assert {e2e.info(j.id).status for j in bad} == {"queued"}

    both = e2e.cli("cancel", elsewhere.id, "--status", "queued")
    assert both.returncode == 2 and "not both" in both.stderr
    neither = e2e.cli("retry")
    assert neither.returncode == 2
    wrong = e2e.cli("retry", "--status", "queued")
    assert wrong.returncode == 2  # retry takes failed or cancelled only
