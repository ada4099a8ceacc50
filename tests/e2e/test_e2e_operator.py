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
