"""``duly worker --metrics-port`` and ``--log-format json`` as an operator runs them: real
worker processes, a scrape over HTTP parsed by prometheus_client's parser, stderr parsed line
by line as JSON. On SQLite only (what is tested is the CLI's wiring; the hook's counts are
checked on every backend in tests/app/test_app_metrics.py)."""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from e2e_harness import E2E, wait_until
from prometheus_client.parser import text_string_to_metric_families

import duly
from duly._worker.supervisor import Supervisor
from duly.observability import JsonFormatter

SQLITE = pytest.mark.parametrize("e2e", ["sqlite"], indirect=True)

OBS_TASKS = """
import os

import duly
from duly.observability import JsonFormatter
from duly._worker.supervisor import Supervisor

app = duly.App(os.environ["DULY_URL"], namespace=os.environ.get("DULY_NAMESPACE", "duly"))


@app.task(name="obs.ok")
def ok(n):
    return n


@app.task(name="obs.boom", retries=0)
def boom():
    raise ValueError("boom")


@app.task(name="obs.flaky", retries=2, backoff=duly.Backoff(base=0.05, cap=0.1))
def flaky():
    if duly.current_job().attempt == 1:
        raise RuntimeError("first attempt fails")
    return "ok"
"""


def load_tasks(e2e: E2E) -> ModuleType:
    """The tasks module, written next to e2e_tasks.py and imported here (for enqueueing)."""
    (e2e.dir / "obs_tasks.py").write_text(OBS_TASKS)
    return e2e.load_module("obs_tasks.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def scrape(port: int) -> tuple[str, dict[tuple[str, frozenset[Any]], float]]:
    """``/metrics`` over HTTP (empty if not served yet), and its samples."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return "", {}
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return text, samples


def jobs_total(samples: dict[tuple[str, frozenset[Any]], float], task: str, outcome: str) -> float:
    labels = frozenset({"task": task, "queue": "default", "outcome": outcome}.items())
    return samples.get(("duly_jobs_total", labels), 0.0)


def enqueue_mix(app: duly.App, tasks: ModuleType) -> list[duly.Job]:
    try:
        return [
            tasks.ok.enqueue(1),
            tasks.ok.enqueue(2),
            tasks.boom.enqueue(),
            tasks.flaky.enqueue(),
        ]
    finally:
        app.close()


@SQLITE
@pytest.mark.parametrize("processes", [1, 2])
def test_worker_serves_its_metrics_over_http(e2e: E2E, processes: int) -> None:
    tasks = load_tasks(e2e)
    app: duly.App = tasks.app
    port = free_port()
    worker = e2e.start(
        "worker", "obs_tasks:app", "--lease", "2", "--processes", str(processes),
        "--metrics-port", str(port),
    )  # fmt: skip
    wait_until(lambda: scrape(port)[0])
    jobs = enqueue_mix(app, tasks)

    def counted() -> Any:
        text, samples = scrape(port)
        done = (
            jobs_total(samples, "obs.ok", "succeeded") == 2
            and jobs_total(samples, "obs.boom", "failed") == 1
            and jobs_total(samples, "obs.flaky", "retried") == 1
            and jobs_total(samples, "obs.flaky", "succeeded") == 1
        )
        return done and (text, samples)

    text, samples = wait_until(counted, timeout=30)
    assert worker.poll() is None, e2e.log_of(worker)
    assert sum(v for (name, _), v in samples.items() if name == "duly_jobs_total") == 5
    flaky = frozenset({"task": "obs.flaky", "queue": "default"}.items())
    assert samples[("duly_job_duration_seconds_count", flaky)] == 2
    assert samples[("duly_job_queue_wait_seconds_count", flaky)] == 2
    assert samples[("duly_jobs_in_flight", flaky)] == 0
    for job in jobs:
        assert job.id not in text
    app.close()


@SQLITE
def test_metrics_port_without_a_number_is_a_usage_error(e2e: E2E) -> None:
    load_tasks(e2e).app.close()
    done = e2e.cli("worker", "obs_tasks:app", "--burst", "--metrics-port", "http")
    assert done.returncode == 2
    assert "--metrics-port" in done.stderr


@SQLITE
def test_json_logs_one_object_per_line(e2e: E2E) -> None:
    tasks = load_tasks(e2e)
    jobs = enqueue_mix(tasks.app, tasks)
    done = e2e.cli("worker", "obs_tasks:app", "--burst", "--log-format", "json", timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]  # every line is JSON
    assert lines
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line), line
        assert line["time"].endswith("+00:00")
    flaky, boom = jobs[3], jobs[2]
    [retry] = [
        line for line in lines if line.get("job_id") == flaky.id and "retrying" in line["message"]
    ]
    assert retry["level"] == "WARNING"
    assert retry["logger"] == "duly.worker"
    assert (retry["task"], retry["attempt"], retry["max_attempts"]) == ("obs.flaky", 1, 3)
    assert retry["queue"] == "default" and retry["worker"]
    [failure] = [line for line in lines if line.get("job_id") == boom.id]
    assert failure["level"] == "ERROR" and failure["task"] == "obs.boom"
    tasks.app.close()


@SQLITE
def test_log_format_from_the_environment(e2e: E2E) -> None:
    load_tasks(e2e).app.close()
    env = {**e2e.env, "DULY_LOG_FORMAT": "json"}
    done = E2E.run_cli(e2e.dir, "worker", "obs_tasks:app", "--burst", env=env)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["logger"] for line in done.stderr.splitlines()]


def test_json_formatter_carries_the_traceback_on_one_line() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord(
            "duly.worker", logging.ERROR, __file__, 1, "job %s failed", ("J1",), sys.exc_info()
        )
    record.job_id, record.task, record.attempt = "J1", "t.x", 2
    text = JsonFormatter().format(record)
    assert "\n" not in text
    line = json.loads(text)
    assert line["message"] == "job J1 failed" and line["level"] == "ERROR"
    assert (line["job_id"], line["task"], line["attempt"]) == ("J1", "t.x", 2)
    assert "queue" not in line  # absent fields are left out, not null
    assert line["traceback"].startswith("Traceback") and "ValueError: bad" in line["traceback"]


def test_supervisor_reports_each_exited_child_once(tmp_path: Path) -> None:
    exited: list[int] = []
    supervisor = Supervisor([], 2, grace=1, burst=True, on_exit=exited.append)
    supervisor.child_argv = [sys.executable, "-c", "pass"]
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert supervisor.run() == 0
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    children = sorted(child.pid for child, _ in supervisor._children.values())
    assert sorted(exited) == children and len(set(exited)) == 2


@SQLITE
def test_an_app_with_its_own_hook_is_served_once(e2e: E2E) -> None:
    own = (
        OBS_TASKS
        + "\nfrom duly.observability import PrometheusHook\napp.add_hook(PrometheusHook())\n"
    )
    (e2e.dir / "obs_tasks.py").write_text(own)
    tasks = e2e.load_module("obs_tasks.py")
    tasks.ok.enqueue(1)
    tasks.app.close()
    port = free_port()
    worker = e2e.start("worker", "obs_tasks:app", "--processes", "1", "--metrics-port", str(port))
    wait_until(lambda: jobs_total(scrape(port)[1], "obs.ok", "succeeded") == 1)
    assert worker.poll() is None, e2e.log_of(worker)
