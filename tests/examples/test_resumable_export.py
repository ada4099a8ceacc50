"""examples/resumable_export runs end to end on every backend: a ``duly worker`` SIGKILLed
mid-export and the next one SIGTERMed (a deploy), and the CSV file still holds every order
exactly once, the job resumed from its checkpoints, its progress shown.

One driver per backend runs the example's workers as real processes and prints what happened;
the tests below read that report.
"""

from __future__ import annotations

from typing import Any

import pytest
from example_driver import run_driver
from services import BACKENDS, require_service

ORDERS = 3000

DRIVER = f"""
import json, os, signal, subprocess, sys, time
from examples.resumable_export import app as ex

app = ex.app
ex.seed_orders({ORDERS})
job = ex.export_orders.enqueue(os.path.abspath("orders.csv"), batch=100)
worker = [sys.executable, "-m", "duly", "worker", "examples.resumable_export.app:app",
          "--lease", "2", "--processes", "1", "--grace", "30"]


def done():
    info = app.get_job(job.id)
    return 0 if info.progress is None else round(info.progress.fraction * {ORDERS})


def wait(condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


first = subprocess.Popen(worker)
wait(lambda: done() >= 600)
first.kill()  # SIGKILL mid-export
first.wait()
killed_at = done()
second = subprocess.Popen(worker)
wait(lambda: done() >= killed_at + 600)
second.send_signal(signal.SIGTERM)  # a deploy: the export hands itself back
second.wait(60)
handed_back = app.get_job(job.id)
third = subprocess.Popen(worker)
wait(lambda: app.get_job(job.id).finished)
third.send_signal(signal.SIGTERM)
third.wait(60)
info = app.get_job(job.id)
with open("orders.csv") as out:
    lines = out.read().splitlines()
print(json.dumps({{
    "status": info.status, "result": info.result, "attempts": info.attempts, "lost": info.lost,
    "progress": [info.progress.fraction, info.progress.message],
    "handed_back": [handed_back.status, handed_back.attempts, handed_back.errors],
    "codes": [second.returncode, third.returncode],
    "header": lines[0], "ids": [int(line.split(",")[0]) for line in lines[1:]],
}}))
"""


@pytest.fixture(scope="module", params=BACKENDS)
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the driver saw on one backend."""
    backend = request.param
    if backend != "sqlite":
        require_service(backend)
    tmp_path = tmp_path_factory.mktemp(f"export-{backend}")
    # The driver sees progress as the heartbeat stored it (every lease / 3 = 0.67 s here), so
    # the SIGTERM can come that late: 0.1 s per batch of 100 leaves the second worker 1.8 s of
    # orders after it (at 0.05 s one run in a loaded suite finished the export first).
    env = {"EXPORT_PAUSE": "0.1", "ORDERS_DB": str(tmp_path / "orders.db")}
    return run_driver(DRIVER, backend, tmp_path, env, timeout=150)


pytestmark = pytest.mark.timeout(170)


def test_every_order_is_exported_exactly_once_across_a_kill_and_a_deploy(report: Any) -> None:
    assert report["header"] == "id,customer,total_cents"
    assert report["ids"] == list(range(1, ORDERS + 1))
    assert (report["status"], report["result"]) == ("succeeded", ORDERS)


def test_the_kill_costs_an_attempt_and_the_deploy_none(report: Any) -> None:
    status, attempts, errors = report["handed_back"]
    assert (status, errors) == ("queued", [])
    assert report["codes"] == [0, 0]
    # the lost run and the last one; the handed-back run was not charged
    assert (report["attempts"], report["lost"]) == (2, 1)
    assert attempts == 1


def test_the_progress_ends_at_the_last_order(report: Any) -> None:
    assert report["progress"] == [1.0, f"{ORDERS} of {ORDERS} orders"]
