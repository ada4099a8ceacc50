"""What every scenario shares: backends, a fleet of worker processes, the marks, the verdict."""

from __future__ import annotations

import contextlib
import os
import random
import resource
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duly
from chaos.tasks import make_app
from duly._job import JobInfo

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

REDIS_URL = os.environ.get("CHAOS_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("CHAOS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
KINDS = ("sqlite", "redis", "postgres")
STATUSES = ("scheduled", "queued", "running", "retrying", "succeeded", "failed", "cancelled")

_T0 = time.monotonic()


def say(*parts: Any) -> None:
    """Progress line on stderr (the table goes to stdout)."""
    print(f"[{time.monotonic() - _T0:7.1f}s]", *parts, file=sys.stderr, flush=True)


def token() -> str:
    return uuid.uuid4().hex[:16]


# -- results ---------------------------------------------------------------------------------
@dataclass
class Result:
    """One row of the table."""

    scenario: str
    backend: str
    jobs: int = 0
    lost: int = 0
    duplicates: int = 0
    bound: int | str = 0
    recovery: float | None = None
    recovery_bound: float | None = None
    ok: bool = False
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    pending: str | None = None  # not run: why
    #: Failover rows (scenario 9): enqueue calls made, and how many raised.
    enqueued: int | None = None
    refused: int = 0

    def check(self, condition: bool, failure: str) -> bool:
        """Record ``failure`` (and fail the row) unless ``condition``."""
        if not condition:
            self.ok = False
            self.notes.append("FAIL: " + failure)
        return condition


# -- backends --------------------------------------------------------------------------------
def service_problem(kind: str) -> str | None:
    """None if ``kind``'s shared service (and duly's backend for it) is usable here."""
    if kind == "sqlite":
        return None
    try:
        __import__(f"duly.backends.{kind}")
    except Exception as exc:  # backend not landed, or its driver is missing
        return f"duly's {kind} backend cannot be imported ({exc})"
    try:
        if kind == "redis":
            import redis

            client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
            client.ping()
            client.close()
        else:
            import psycopg

            psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except Exception as exc:
        return f"{kind} service not reachable ({exc!r})"
    return None


def fresh_url(kind: str, workdir: Path, base: str | None = None) -> str:
    """A URL on a brand-new namespace (SQLite: a new file) of ``kind``."""
    name = f"chaos_{uuid.uuid4().hex[:10]}"
    if kind == "sqlite":
        path = workdir / f"{name}.db"
        return f"sqlite:///{path}"  # path is absolute: sqlite:////...
    if kind == "redis":
        return f"{base or REDIS_URL}?namespace={name}"
    if kind == "postgres":
        return f"{base or POSTGRES_URL}?namespace={name}"
    raise ValueError(kind)


def drop(url: str) -> None:
    """Delete the namespace (not for SQLite files: they stay with the logs)."""
    if url.startswith("sqlite"):
        return
    with contextlib.suppress(Exception):
        app = duly.App(url)
        backend = app._sync(app.backend())
        app._sync(backend.drop())
        app.close()


@contextlib.contextmanager
def producer(url: str, **options: Any) -> Iterator[duly.App]:
    """The harness's own App on ``url`` (with the task the workers do not know)."""
    app = make_app(url, producer=True, **options)
    try:
        yield app
    finally:
        with contextlib.suppress(Exception):
            app.close()


def enqueue_tokens(
    app: duly.App,
    task: str,
    tokens: Sequence[str],
    *args: Any,
    per_job: Callable[[], tuple[Any, ...]] | None = None,
    batch: int = 500,
) -> dict[str, str]:
    """Enqueue ``task(token, *args)`` (or ``task(token, *per_job())``) per token; token -> id."""
    t = app.tasks[task]
    ids: dict[str, str] = {}
    for i in range(0, len(tokens), batch):
        chunk = tokens[i : i + batch]
        sigs = [t.s(tok, *(per_job() if per_job else args)) for tok in chunk]
        jobs = app.enqueue_many(sigs)
        ids.update({tok: job.id for tok, job in zip(chunk, jobs, strict=True)})
    return ids


def queue_totals(app: duly.App) -> tuple[int, int, int]:
    """(queued, scheduled+retrying, running) over every queue."""
    q = s = r = 0
    for row in app.queues():
        q, s, r = q + row.queued, s + row.scheduled, r + row.running
    return q, s, r


def wait_idle(app: duly.App, timeout: float, every: float = 0.5) -> float | None:
    """Wait until nothing is queued, scheduled or running; the seconds it took, None on timeout."""
    start = time.monotonic()
    calm = 0
    while time.monotonic() - start < timeout:
        try:
            totals = queue_totals(app)
        except duly.BackendUnavailable as exc:
            totals = (-1, -1, -1)
            if os.environ.get("CHAOS_DEBUG"):
                say(f"wait_idle: {exc}")
        if os.environ.get("CHAOS_DEBUG"):
            say(f"wait_idle: {totals}")
        calm = calm + 1 if totals == (0, 0, 0) else 0
        if calm >= 2:
            return time.monotonic() - start
        time.sleep(every)
    return None


def all_jobs(app: duly.App) -> dict[str, JobInfo]:
    """Every stored job by id (through duly: used for statuses, never for counting runs)."""
    out: dict[str, JobInfo] = {}
    for status in STATUSES:
        for info in app.jobs(status=status, limit=10_000):
            out[info.id] = info
    return out


def held_by(app: duly.App, pid: int) -> set[str]:
    """Tokens (first argument) of the jobs the backend has running under the process ``pid``."""
    marker = f":{pid}:"
    return {
        str(info.args[0])
        for info in app.jobs(status="running", limit=10_000)
        if info.worker and marker in info.worker and info.args
    }


# -- worker processes ------------------------------------------------------------------------
class Fleet:
    """Worker processes (``python -m duly worker chaos.tasks:app``) that we start and kill."""

    def __init__(
        self,
        url: str,
        rundir: Path,
        *,
        concurrency: int = 8,
        lease: float = 2.0,
        grace: float = 10.0,
        queues: str = "default",
        rlimit_as: int | None = None,
    ) -> None:
        self.url = url
        self.rundir = rundir
        self.marks = rundir / "marks"
        self.logs = rundir / "logs"
        self.marks.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.argv = [
            PYTHON, "-m", "duly", "worker", "chaos.tasks:app",
            "--processes", "1",  # one pid per worker: the scenarios kill and count by pid
            "--queues", queues,
            "--concurrency", str(concurrency),
            "--lease", str(lease),
            "--grace", str(grace),
            "--log-level", "WARNING",
        ]  # fmt: skip
        self.lease = lease
        self.rlimit_as = rlimit_as
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.all: dict[int, subprocess.Popen[bytes]] = {}
        self.killed: dict[int, float] = {}  # pid -> time (SIGKILL by us)
        self.termed: dict[int, float] = {}  # pid -> time (SIGTERM by us)
        self.exits: dict[int, tuple[int, float]] = {}  # pid -> (returncode, time seen)
        self._n = 0

    def _preexec(self) -> None:
        if self.rlimit_as:
            resource.setrlimit(resource.RLIMIT_AS, (self.rlimit_as, self.rlimit_as))

    def spawn(self) -> int:
        self._n += 1
        env = dict(os.environ)
        env.update(
            DULY_URL=self.url,
            CHAOS_MARKS=str(self.marks),
            PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        )
        env.pop("DULY_APP", None)
        log = open(self.logs / f"worker-{self._n}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            self.argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C of the harness is not sent to workers
            preexec_fn=self._preexec if self.rlimit_as else None,
        )  # fmt: skip
        log.close()
        (self.logs / f"worker-{self._n}.log").rename(self.logs / f"worker-{self._n}-{proc.pid}.log")
        self.procs[proc.pid] = proc
        self.all[proc.pid] = proc
        return proc.pid

    def start(self, n: int) -> list[int]:
        return [self.spawn() for _ in range(n)]

    def alive(self) -> list[int]:
        self.reap()
        return list(self.procs)

    def reap(self) -> list[tuple[int, int]]:
        """Pids that exited since the last call, with their return codes."""
        gone = []
        for pid, proc in list(self.procs.items()):
            code = proc.poll()
            if code is not None:
                del self.procs[pid]
                self.exits[pid] = (code, time.time())
                gone.append((pid, code))
        return gone

    def kill(self, pid: int) -> float:
        """SIGKILL ``pid`` and wait for it; the time it died."""
        proc = self.procs.pop(pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = time.time()
        self.killed[pid] = now
        self.exits[pid] = (proc.returncode, now)
        return now

    def term(self, pids: Sequence[int]) -> None:
        now = time.time()
        for pid in pids:
            self.procs[pid].send_signal(signal.SIGTERM)
            self.termed[pid] = now

    def wait_exit(self, pids: Sequence[int], timeout: float) -> dict[int, float | None]:
        """Seconds each pid took to exit after SIGTERM (None: still alive at the timeout)."""
        deadline = time.monotonic() + timeout
        out: dict[int, float | None] = {}
        for pid in pids:
            proc = self.all[pid]
            try:
                proc.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                out[pid] = None
                continue
            self.reap()
            out[pid] = self.exits.get(pid, (0, time.time()))[1] - self.termed.get(pid, 0)
        return out

    def wait_registered(self, app: duly.App, timeout: float = 15.0) -> bool:
        """Wait until every live worker has registered (its SIGTERM handler is installed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = set(self.alive())
            try:
                seen = {int(str(w.info.get("pid", 0))) for w in app.workers()}
            except duly.BackendUnavailable:
                seen = set()
            if pids <= seen:
                return True
            time.sleep(0.1)
        return False

    def stop(self, timeout: float = 30.0, app: duly.App | None = None) -> None:
        """SIGTERM every live worker and wait (SIGKILL stragglers).

        With ``app``, first wait until each has registered: a process still importing dies of
        the SIGTERM (default action), which is no fault of duly's.
        """
        if app is not None:
            self.wait_registered(app)
        pids = self.alive()
        self.term(pids)
        waited = self.wait_exit(pids, timeout)
        for pid, took in waited.items():
            if took is None and pid in self.procs:
                self.kill(pid)
                self.killed.pop(pid, None)

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.logs.glob("*.log")))

    def log_count(self, needle: str) -> int:
        return self.log_text().count(needle)


@contextlib.contextmanager
def fleet(url: str, rundir: Path, **options: Any) -> Iterator[Fleet]:
    f = Fleet(url, rundir, **options)
    try:
        yield f
    finally:
        for proc in list(f.procs.values()):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# -- marks (counted outside duly) ------------------------------------------------------------
@dataclass
class Run:
    pid: int
    start: float
    end: float | None = None


def read_runs(marks: Path) -> dict[str, list[Run]]:
    """token -> its runs (start, and end if the body finished), in start order."""
    runs: dict[str, list[Run]] = defaultdict(list)
    for path in marks.glob("*.marks"):
        pid = int(path.stem)
        open_runs: dict[str, list[Run]] = defaultdict(list)
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue  # a torn last line of a killed process (cannot happen with O_APPEND)
            kind, tok, at = parts[0], parts[1], float(parts[2])
            if kind == "S":
                run = Run(pid, at)
                runs[tok].append(run)
                open_runs[tok].append(run)
            elif kind == "E" and open_runs[tok]:
                open_runs[tok].pop(0).end = at
    for tok in runs:
        runs[tok].sort(key=lambda r: r.start)
    return runs


def completed(runs: dict[str, list[Run]], tok: str) -> int:
    return sum(1 for r in runs.get(tok, ()) if r.end is not None)


def duplicates(runs: dict[str, list[Run]], tokens: Sequence[str]) -> int:
    """Runs started beyond the first, over ``tokens``."""
    return sum(max(len(runs.get(t, ())) - 1, 0) for t in tokens)


def in_flight(runs: dict[str, list[Run]], pid: int, at: float) -> set[str]:
    """Tokens whose run in ``pid`` had started and not finished at ``at``."""
    return {
        tok
        for tok, rs in runs.items()
        for r in rs
        if r.pid == pid and r.start <= at and (r.end is None or r.end > at)
    }


def next_start(runs: dict[str, list[Run]], tok: str, after: float, not_pid: int) -> float | None:
    for r in runs.get(tok, ()):
        if r.start > after and r.pid != not_pid:
            return r.start
    return None


def unexplained_reruns(runs: dict[str, list[Run]], tokens: Sequence[str], dead: set[int]) -> int:
    """Runs followed by another run of the same job although their process was not killed."""
    bad = 0
    for tok in tokens:
        rs = runs.get(tok, [])
        for r in rs[:-1]:
            if r.pid not in dead:
                bad += 1
    return bad


def timed(fn: Callable[[], Result]) -> Result:
    start = time.monotonic()
    result = fn()
    result.seconds = time.monotonic() - start
    return result


def jitter(lo: float, hi: float) -> float:
    return random.uniform(lo, hi)
