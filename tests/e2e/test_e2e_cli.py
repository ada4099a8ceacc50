"""The ``duly`` command line (PRODUCT §0, §2): status, jobs, retry, cancel, stats, queues,
workers and demo, each in a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from e2e_harness import BACKENDS, E2E, require_service

import duly
from duly._cli import cli
from duly._cli.worker import default_processes, resolve_processes

STATUS_KEYS = {
    "id",
    "task",
    "status",
    "attempts",
    "result",
    "error",
    "enqueued_at",
    "started_at",
    "finished_at",
    "key",
}
UNKNOWN_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
#: Every command; the first two need the app, the last two take --url only.
COMMANDS = (
    "worker",
    "scheduler",
    "status",
    "jobs",
    "retry",
    "cancel",
    "stats",
    "queues",
    "pause",
    "resume",
    "workers",
    "watches",
    "groups",
    "forget",
    "schedules",
    "unschedule",
    "migrate",
    "demo",
    "bench",
)


def one_clear_line(stderr: str) -> str:
    """The single line a failing command prints: no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() == timedelta(0), value
    return parsed


def ok_quietly(done: subprocess.CompletedProcess[str]) -> str:
    """A command that worked: exit 0 and nothing on stderr; its stdout."""
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    assert done.stderr == "", (done.args, done.stderr)
    return done.stdout


@pytest.mark.timeout(120)
def test_cli_commands(e2e: E2E) -> None:
    ok = e2e.tasks.mark.options(key="k:1").enqueue(1)
    bad = e2e.tasks.boom.enqueue()
    burst = e2e.cli("worker", "e2e_tasks:app", "--burst", "--lease", "2", timeout=60)
    assert burst.returncode == 0, burst.stderr
    later = e2e.tasks.mark.options(delay=3600, queue="later").enqueue(2)
    assert e2e.info(ok.id).finished and e2e.info(bad.id).finished

    # every read-only command at once (each pays the CLI's start-up)
    (
        status_ok,
        status_bad,
        status_human,
        unknown,
        unknown_json,
        jobs_failed,
        jobs_key,
        retry_ok,
        retry_unknown,
        stats_json,
        queues_json,
        workers_json,
    ) = e2e.cli_many(
        ("status", ok.id, "--json", "--url", e2e.url),
        ("status", bad.id, "--json", "--app", "e2e_tasks:app"),
        ("status", later.id),  # DULY_URL from the environment
        ("status", UNKNOWN_ID),
        ("status", UNKNOWN_ID, "--json"),
        ("jobs", "--status", "failed", "--json"),
        ("jobs", "--key", "k:1"),
        ("retry", ok.id),
        ("retry", UNKNOWN_ID),
        ("stats", "--json"),
        ("queues", "--json"),
        ("workers", "--json"),
    )

    # status --json: the pinned keys, with every other JobInfo field and the error history
    data = json.loads(ok_quietly(status_ok))
    assert set(data) == STATUS_KEYS | set(e2e.info(ok.id).to_dict())
    assert (data["id"], data["task"], data["status"]) == (ok.id, "e2e.mark", "succeeded")
    assert (data["attempts"], data["result"], data["error"], data["key"]) == (1, 1, None, "k:1")
    enqueued, started, finished = (
        parse_time(data[k]) for k in ("enqueued_at", "started_at", "finished_at")
    )
    assert enqueued <= started <= finished
    # DULY_URL is in the environment and the CLI takes it for --url: a note may say so
    assert status_bad.returncode == 0, status_bad.stderr
    assert status_bad.stderr in (
        "",
        "duly: --url ignored: the app given by --app sets its own URL\n",
    )
    data = json.loads(status_bad.stdout)
    assert set(data) >= STATUS_KEYS
    assert [(e["attempt"], e["message"]) for e in data["errors"]] == [(1, "boom")]
    assert (data["status"], data["attempts"], data["result"], data["key"]) == (
        "failed",
        1,
        None,
        None,
    )
    assert data["error"]["type"] == "ValueError" and data["error"]["message"] == "boom"
    assert "Traceback" in data["error"]["traceback"]
    out = ok_quietly(status_human)
    assert later.id in out and "scheduled" in out and "later" in out

    # an unknown id: exit 1, one line on stderr, no traceback
    for done in (unknown, unknown_json):
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert UNKNOWN_ID in one_clear_line(done.stderr)
        assert done.stdout == ""

    # jobs
    assert [j["id"] for j in json.loads(ok_quietly(jobs_failed))] == [bad.id]
    out = ok_quietly(jobs_key)
    assert ok.id in out and bad.id not in out and later.id not in out

    # retry refused: exit 1 and one line
    assert retry_ok.returncode == 1
    assert "succeeded" in one_clear_line(retry_ok.stderr)
    assert retry_unknown.returncode == 1
    assert UNKNOWN_ID in one_clear_line(retry_unknown.stderr)

    # stats, queues, workers
    rows = json.loads(ok_quietly(stats_json))
    totals: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        total = totals.setdefault((r["task"], r["queue"]), [0, 0, 0])
        for i, name in enumerate(("succeeded", "failed", "retried")):
            total[i] += r[name]
    assert totals == {("e2e.mark", "default"): [1, 0, 0], ("e2e.boom", "default"): [0, 1, 0]}
    queues = {q["name"]: q for q in json.loads(ok_quietly(queues_json))}
    assert queues["later"] == {
        "name": "later",
        "queued": 0,
        "scheduled": 1,
        "running": 0,
        "paused": False,
    }
    assert queues["default"]["queued"] == 0 and queues["default"]["running"] == 0
    assert json.loads(ok_quietly(workers_json)) == [], "the burst worker unregistered"

    # retry then cancel, in order
    assert "re-queued" in ok_quietly(e2e.cli("retry", bad.id))
    again = e2e.info(bad.id)
    assert (again.status, again.attempts) == ("queued", 0)
    ok_quietly(e2e.cli("cancel", bad.id))
    assert e2e.info(bad.id).status == "cancelled"
    done = e2e.cli("cancel", bad.id)
    assert done.returncode == 1
    assert "cancelled" in one_clear_line(done.stderr)


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", BACKENDS)
def test_cli_backend_down_is_one_line(kind: str, tmp_path: Path) -> None:
    url = {
        "sqlite": f"sqlite:///{tmp_path}/missing/dir/duly.db",
        "redis": "redis://127.0.0.1:1/0",
        "postgres": f"postgresql://postgres@127.0.0.1:{_unused_port()}/test",
    }[kind]
    done = E2E.run_cli(tmp_path, "status", UNKNOWN_ID, "--url", url)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "unavailable" in one_clear_line(done.stderr)


@pytest.mark.timeout(60)
def test_cli_help_lists_every_command(tmp_path: Path) -> None:
    done = E2E.run_cli(tmp_path, "--help")
    assert done.returncode == 0
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\b", done.stdout, re.MULTILINE), command
    done = E2E.run_cli(tmp_path, "worker", "--help")
    assert done.returncode == 0
    for option in ("--queues", "--concurrency", "--processes", "--lease", "--grace"):
        assert option in done.stdout
    processes = re.search(r"--processes.*?(?=\n  -)", done.stdout, re.DOTALL)
    assert processes, done.stdout
    assert "default: (one per CPU core)" in processes.group(), processes.group()
    assert "DULY_PROCESSES" in processes.group() and "--burst" in processes.group()


def test_worker_processes_default_to_one_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    if hasattr(os, "sched_getaffinity"):  # the cores this process may run on, not the machine's
        assert default_processes() == len(os.sched_getaffinity(0))
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
        monkeypatch.setattr(os, "cpu_count", lambda: 64)
        assert default_processes() == 3
        monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert default_processes() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # "undeterminable"
    assert default_processes() == 1


def test_worker_processes_given_win_and_a_burst_runs_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert resolve_processes(None, burst=False) == default_processes() == 4
    assert resolve_processes(None, burst=True) == 1
    assert resolve_processes(3, burst=False) == 3
    assert resolve_processes(2, burst=True) == 2  # given: a burst in two processes
    assert resolve_processes(1, burst=False) == 1


def test_worker_processes_from_the_environment() -> None:
    # $DULY_PROCESSES is read (and checked like --processes; 0 fails before any work).
    done = CliRunner().invoke(cli, ["worker", "nowhere:app"], env={"DULY_PROCESSES": "0"})
    assert done.exit_code == 2
    assert "--processes" in done.output and "0 is not in the range" in done.output


@pytest.mark.timeout(60)
def test_worker_with_a_bad_app_fails_once_even_with_processes(tmp_path: Path) -> None:
    # The app is loaded before any child starts: one clear line and exit 2, not a supervisor
    # restarting children that cannot import it.
    done = E2E.run_cli(tmp_path, "worker", "no_such_module:app", "--processes", "2", timeout=20)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "no_such_module" in one_clear_line(done.stderr)


@pytest.mark.timeout(90)
def test_burst_without_processes_runs_in_one_process(e2e: E2E) -> None:
    jobs = e2e.app.enqueue_many([e2e.tasks.mark.s(n) for n in range(40)])
    done = e2e.cli("worker", "e2e_tasks:app", "--burst", "--lease", "2", timeout=60)
    assert done.returncode == 0, done.stderr
    assert {e2e.info(j.id).status for j in jobs} == {"succeeded"}
    pids = {line.split()[1] for line in e2e.mark_lines("marks")}
    assert len(pids) == 1, pids  # every job ran in the one process
    assert "duly.supervisor" not in done.stderr, done.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", BACKENDS)
def test_demo(kind: str, tmp_path: Path) -> None:
    require_service(kind)
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path}/demo.db"
    else:
        harness = E2E(kind, tmp_path)
        url = harness.url
    try:
        done = E2E.run_cli(tmp_path, "demo", "--url", url, timeout=50)
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        assert "Traceback" not in out + done.stderr
        assert re.search(r"done in [\d.]+s", out), out
        assert "failed" in out and "succeeded" in out
        shown = re.search(r"duly status (\w{26})", out)
        assert shown, out
        assert "--json" in out and "duly jobs" in out and "duly retry" in out
        with duly.App(url) as app:
            info = app.get_job(shown.group(1))
            assert info is not None and info.status == "failed"
            statuses = {i.status for i in app.jobs(limit=1000)}
            assert statuses == {"succeeded", "failed"}
        done = E2E.run_cli(tmp_path, "status", shown.group(1), "--json", "--url", url)
        assert done.returncode == 0 and json.loads(done.stdout)["status"] == "failed"
    finally:
        if kind != "sqlite":
            harness.drop()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", BACKENDS)
def test_bench_measures_and_cleans_up(kind: str, tmp_path: Path) -> None:
    require_service(kind)
    url = {
        "sqlite": f"sqlite:///{tmp_path}/bench.db",
        "redis": "redis://127.0.0.1:6379/0",
        "postgres": "postgresql://postgres@127.0.0.1:5432/test",
    }[kind]
    done = E2E.run_cli(
        tmp_path, "bench", "--url", url, "--jobs", "300", "--samples", "10", "--json", timeout=80
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for measure in ("enqueue_per_s", "bulk_per_s", "drain_per_s"):
        assert result[measure] > 0, result
    assert 0 < result["latency_p50_ms"] <= result["latency_p99_ms"]
    namespace = result["namespace"]
    assert namespace.startswith("duly_bench_")
    app = duly.App(url, namespace=namespace)
    try:
        assert app.jobs(limit=10) == []  # the namespace was dropped
    finally:  # looking recreated it (a PostgreSQL schema): drop it again

        async def drop() -> None:
            await (await app.backend()).drop()
            await app.aclose()

        asyncio.run(drop())
        app.close()
