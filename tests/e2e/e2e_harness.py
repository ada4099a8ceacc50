"""The end-to-end harness: a tasks module, an environment and ``duly`` processes per test.

Used by ``conftest.py`` (the ``e2e`` fixture) and imported by the tests for its helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import uuid4

import pytest
from services import BACKENDS, POSTGRES_URL, REDIS_URL, require_service

import duly

__all__ = ["BACKENDS", "E2E", "pid_alive", "require_service", "wait_until"]


TASKS_MODULE = '''
"""Tasks of the end-to-end tests (written by tests/e2e/conftest.py)."""

import asyncio
import ctypes
import os
import time
from datetime import timedelta

import duly

app = duly.App(os.environ["DULY_URL"], namespace=os.environ.get("DULY_NAMESPACE", "duly"))
MARKS = os.environ["E2E_MARKS"]


def _mark(name, line):
    fd = os.open(os.path.join(MARKS, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\\n").encode())
    finally:
        os.close(fd)


@app.task(name="e2e.slow", retries=3)
def slow(n, seconds):
    _mark(f"slow-{n}", str(os.getpid()))
    time.sleep(seconds)
    _mark(f"slow-{n}.done", str(os.getpid()))
    return n


@app.task(name="e2e.slow_async", retries=3)
async def slow_async(n, seconds):
    _mark(f"slow-{n}", str(os.getpid()))
    await asyncio.sleep(seconds)
    _mark(f"slow-{n}.done", str(os.getpid()))
    return n


@app.task(name="e2e.hold_gil", retries=3)
def hold_gil(n, seconds):
    _mark(f"gil-{n}", str(os.getpid()))
    # C code that keeps the GIL (a PyDLL call does not release it, as a runaway regex would
    # not): no other thread of this process runs meanwhile, its heartbeat included.
    ctypes.PyDLL(None).usleep(int(seconds * 1_000_000))
    _mark(f"gil-{n}.done", str(os.getpid()))
    return n


@app.task(name="e2e.mark")
def mark(n):
    _mark("marks", f"{duly.current_job().id} {os.getpid()}")
    time.sleep(0.02)
    return n


@app.task(name="e2e.boom", retries=0)
def boom():
    raise ValueError("boom")


@app.task(name="e2e.exclusive", mutex="e2e-{group}")
def exclusive(group, n, seconds):
    _mark(f"span-{group}", f"start {time.time()!r} {n} {os.getpid()}")
    time.sleep(seconds if duly.current_job().attempt == 1 else 0.1)
    _mark(f"span-{group}", f"end {time.time()!r} {n} {os.getpid()}")
    return n


@app.watch(name="e2e.watch")
def watch(n, checks, pause):
    _mark(f"watch-{n}", f"{duly.current_job().attempt} {os.getpid()}")
    with open(os.path.join(MARKS, f"watch-{n}")) as marks:
        runs = len(marks.read().splitlines())
    if runs == 2 and duly.current_job().attempt == 1:
        time.sleep(pause)  # the second check hangs (its worker gets killed)
    return timedelta(seconds=0.1) if runs < checks else None


@app.task(name="e2e.isolated_crash", isolated=True, retries=0)
def isolated_crash():
    ctypes.string_at(0)


@app.task(name="e2e.isolated_mark", isolated=True)
def isolated_mark(n):
    _mark("isolated", f"{duly.current_job().id} {os.getpid()}")
    return n


@app.task(name="e2e.limited", rate_limit="10/s")
async def limited(n):
    _mark("rate", f"{time.time()!r} {n} {os.getpid()}")
    await asyncio.sleep(0.15)  # one process at a time runs < 10/s: both must take part
    return n
'''


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, poll: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(poll)


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except (FileNotFoundError, IndexError):
        return False


class E2E:
    """One test's backend, tasks module, environment and processes."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.dir = tmp_path
        self.marks = tmp_path / "marks"
        self.marks.mkdir()
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        if kind == "sqlite":
            self.namespace = "duly"
            self.url = f"sqlite:///{tmp_path / 'e2e.db'}"
        elif kind == "redis":
            self.namespace = f"t{uuid4().hex[:12]}"
            self.url = f"{REDIS_URL}?namespace={self.namespace}"
        else:
            self.namespace = f"t_{uuid4().hex[:12]}"
            self.url = f"{POSTGRES_URL}?namespace={self.namespace}"
        (tmp_path / "e2e_tasks.py").write_text(TASKS_MODULE)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DULY_")},
            "DULY_URL": self.url,
            "DULY_NAMESPACE": self.namespace,
            "E2E_MARKS": str(self.marks),
            "PYTHONPATH": os.pathsep.join(
                [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "200",
        }
        self.tasks = self.load_module("e2e_tasks.py")
        self.app: duly.App = self.tasks.app
        self.procs: list[subprocess.Popen[bytes]] = []
        self._log_count = 0

    def load_module(self, filename: str) -> ModuleType:
        """Import ``filename`` (in the tasks' directory) here, with this test's environment."""
        name = f"{filename.removesuffix('.py')}_{uuid4().hex}"
        spec = importlib.util.spec_from_file_location(name, self.dir / filename)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        saved = {k: os.environ.get(k) for k in ("DULY_URL", "DULY_NAMESPACE", "E2E_MARKS")}
        os.environ.update({k: self.env[k] for k in saved})
        try:
            spec.loader.exec_module(module)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return module

    # -- processes ---------------------------------------------------------------------------
    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "duly", *args]

    @staticmethod
    def run_cli(
        cwd: Path, *args: str, timeout: float = 30, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``duly ARGS`` (``python -m duly``) to completion; no DULY_* setting unless
        ``env`` gives one."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("DULY_")}
        return subprocess.run(
            [sys.executable, "-m", "duly", *args],
            cwd=cwd,
            env=env or {**clean, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def cli(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run ``duly ARGS`` to completion in the tasks module's directory."""
        return self.run_cli(self.dir, *args, timeout=timeout, env=self.env)

    def cli_many(self, *commands: tuple[str, ...], timeout: float = 60) -> list[Any]:
        """Run several read-only ``duly`` commands at once (each pays the CLI start-up);
        their ``(returncode, stdout, stderr)``, in order."""
        procs = [
            subprocess.Popen(
                self.command(*args),
                cwd=self.dir,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args in commands
        ]
        results = []
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        return results

    def cli_json(self, *args: str) -> Any:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """Start ``duly ARGS`` in the background (its own process group); output to a log."""
        self._log_count += 1
        log = open(self.logs / f"proc-{self._log_count}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            self.command(*args),
            cwd=self.dir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def start_worker(self, *args: str) -> subprocess.Popen[bytes]:
        """``duly worker`` with a 2 s lease; one process (its pid runs the jobs, as the tests
        check) unless ``args`` give ``--processes``."""
        processes = () if "--processes" in args else ("--processes", "1")
        return self.start("worker", "e2e_tasks:app", "--lease", "2", *processes, *args)

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        index = self.procs.index(proc) + 1
        return (self.logs / f"proc-{index}.log").read_text(errors="replace")

    def all_logs(self) -> str:
        return "\n".join(
            f"--- {path.name} ---\n{path.read_text(errors='replace')}"
            for path in sorted(self.logs.iterdir())
        )

    def drop(self) -> None:
        """Delete this test's data (from a fresh event loop) and close the app."""

        async def drop() -> None:
            await (await self.app.backend()).drop()
            await self.app.aclose()

        self.app.close()
        asyncio.run(drop())
        self.app.close()

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)

    # -- state ---------------------------------------------------------------------------------
    def info(self, job_id: str) -> duly.JobInfo:
        info = self.app.get_job(job_id)
        assert info is not None, f"job {job_id} is gone"
        return info

    def mark_lines(self, name: str) -> list[str]:
        path = self.marks / name
        return path.read_text().splitlines() if path.exists() else []

    def wait_workers(self, count: int, timeout: float = 20) -> list[duly.WorkerRecord]:
        return wait_until(
            lambda: (found := self.app.workers()) and len(found) >= count and found, timeout
        )
