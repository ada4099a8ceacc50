"""The measurement harness shared by duly and every peer.

A *peer* (``bench/peers/*.py``, ``bench/duly_bench.py``) is an object with:

- ``name``, ``store`` (``"redis"`` or ``"postgres"`` or ``"sqlite"``), ``version``;
- ``async reset()`` — empty the library's storage and the counter (called before every step);
- ``enqueue_one()`` — enqueue one no-op job with one library call (sync or ``async def``);
- ``enqueue_bulk(n)`` — enqueue ``n`` no-op jobs in batches of ``BULK_BATCH`` with the library's
  bulk API, or ``None`` when the library has none;
- ``enqueue_stamp()`` — enqueue one latency job (its body RPUSHes ``time.time()`` to ``LAT_KEY``);
- ``worker_cmd(mode)`` — argv of a worker process for ``mode`` in ``drain_modes`` (``"default"``
  is the library's documented default worker; ``"one"`` is one worker process when that differs);
- optional ``done(n)`` — how many jobs finished, when not counted by the Redis INCR counter;
- ``enqueue_io(kind, n)`` — enqueue ``n`` I/O-bound jobs (bulk API where there is one):
  ``kind`` ``"sleep"`` waits ``IO_SECONDS`` (``await asyncio.sleep`` in async libraries,
  ``time.sleep`` in sync ones), ``"pg"`` runs one PostgreSQL query (``bench.peers._base``'s
  pool), then each does the INCR; ``io_tuning`` — the one setting the library documents for
  I/O-bound work; ``io_slots(mode)`` — jobs the worker of ``mode`` in ``IO_MODES`` runs at
  once (``"default"``: the default worker; ``"tuned"``: with ``io_tuning``); optional
  ``io_worker_cmd(mode)`` when the tuned worker is not the default argv plus ``io_tuning``.

Every job body does one ``INCR`` of ``COUNTER_KEY`` on the bench Redis DB (``BENCH_REDIS``,
DB 5 by default — never DB 0), so every library is counted the same way, from outside.

Metrics (per run; ``run.py`` takes medians over runs):

- ``enqueue``: jobs/s over ``ENQUEUE_N`` single calls (capped at ``ENQUEUE_CAP`` seconds);
- ``bulk``: jobs/s of ``DRAIN_N`` jobs enqueued in batches of ``BULK_BATCH``;
- ``drain_<mode>``: ``DRAIN_N`` jobs pre-enqueued, a worker started; jobs/s from the first job
  seen done to the last (worker boot excluded; ``drain_<mode>_wall`` includes it). If
  ``DRAIN_CAP`` seconds pass first, the rate of the jobs done so far is reported and the
  result is marked ``capped``. Without a bulk API the jobs are enqueued one call each for at
  most ``FILL_CAP`` seconds (marked ``short`` when fewer than ``DRAIN_N`` got in);
- ``drain_<mode>_cpu_us``: CPU (user + system, µs) the worker's processes spent per job over
  that same stretch, read from ``/proc`` for the worker's process group (the store's own CPU
  is not counted);
- ``lat_p50`` / ``lat_p99``: ms from just before the enqueue call to the job body's first line,
  with an idle default worker, one job at a time (``LAT_SAMPLES``, capped at ``LAT_CAP`` s);
- ``<kind>_<mode>`` (``sleep_default``, ``sleep_tuned``, ``pg_default``, ``pg_tuned``): jobs/s
  of ``IO_N`` pre-enqueued I/O-bound jobs, measured like a drain (capped at ``DRAIN_CAP``);
  ``sleep_<mode>_ideal`` is that rate over the ideal ``io_slots(mode) / IO_SECONDS``;
- ``bytes``: (Redis stores) growth of ``MEMORY USAGE`` summed over the bench DB's keys after
  ``ENQUEUE_N`` queued jobs, divided by that number.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LOGS = RESULTS / "logs"

BENCH_REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/5")
BENCH_PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/bench")
COUNTER_KEY = "bench:count"
LAT_KEY = "bench:lat"

ENQUEUE_N = int(os.environ.get("BENCH_ENQUEUE_N", "5000"))
ENQUEUE_CAP = float(os.environ.get("BENCH_ENQUEUE_CAP", "5"))
DRAIN_N = int(os.environ.get("BENCH_DRAIN_N", "20000"))
DRAIN_CAP = float(os.environ.get("BENCH_DRAIN_CAP", "20"))
FILL_CAP = float(os.environ.get("BENCH_FILL_CAP", "15"))
BULK_BATCH = 1000
LAT_SAMPLES = int(os.environ.get("BENCH_LAT_SAMPLES", "2000"))
LAT_CAP = float(os.environ.get("BENCH_LAT_CAP", "40"))
BOOT_CAP = 30.0
IO_N = int(os.environ.get("BENCH_IO_N", "5000"))
IO_SECONDS = 0.02
IO_KINDS = ("sleep", "pg")
IO_MODES = ("default", "tuned")

if BENCH_REDIS.rstrip("/").endswith("/0"):
    raise SystemExit("BENCH_REDIS must not be DB 0 (the bench flushes its DB)")


_held: list[Any] = []


def hold_bench_db() -> None:
    """Refuse to run beside another bench run on the same ``BENCH_REDIS``: both flush that DB
    before every step, so each would wipe the other's jobs and counts (seen: a peer check
    emptied a duly run's queue mid-drain). The lock is held until this process exits."""
    import fcntl
    import hashlib
    import tempfile

    digest = hashlib.sha1(BENCH_REDIS.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"duly-bench-{digest}.lock"
    handle = open(path, "a+")  # noqa: SIM115 (kept open: the lock lives with it)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        other = handle.read().strip() or "another process"
        handle.close()
        raise SystemExit(
            f"another bench run ({other}) uses {BENCH_REDIS}; wait for it, or give this one "
            "its own BENCH_REDIS (another DB number)"
        ) from None
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}: {' '.join(sys.argv)}")
    handle.flush()
    _held.append(handle)


def counter() -> redis.Redis:
    return redis.Redis.from_url(BENCH_REDIS)


def flush_bench_redis() -> None:
    counter().flushdb()


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["BENCH_REDIS"] = BENCH_REDIS
    env["BENCH_PG"] = BENCH_PG
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


def bin_of(name: str) -> str:
    """A console script of the running interpreter's environment."""
    return str(Path(sys.executable).parent / name)


async def _call(fn: Any, *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


#: Worker processes started and not stopped yet: stopped at exit, so an interrupted run (a
#: timed-out target, Ctrl-C, SIGTERM) leaves none draining another library's jobs.
_live_workers: set[WorkerProcess] = set()


def stop_workers_at_exit() -> None:
    """Make SIGTERM and SIGHUP exit through ``finally`` blocks and ``atexit`` (as Ctrl-C
    does), so every worker this process started is stopped with it. Called by the bench's
    entry points (``run.py``, ``ab.py``), never at import."""

    def leave(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, leave)


@atexit.register
def _stop_live_workers() -> None:
    for worker in list(_live_workers):
        worker.stop(grace=1.0)


class WorkerProcess:
    """A worker subprocess in its own process group (so its children die with it)."""

    def __init__(self, argv: list[str], log_name: str, env: dict[str, str] | None = None):
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log_path = LOGS / f"{log_name.replace('/', '-')}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115
        self._log.write(f"\n=== {time.ctime()} {' '.join(argv)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=child_env(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _live_workers.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the group
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._log.close()
        _live_workers.discard(self)

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of every live process of the worker's group so far (Linux
        ``/proc``; 0.0 elsewhere): the supervisor, its children and their threads."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:  # the process exited meanwhile
                continue
            if int(fields[2]) == self.proc.pid:  # pgrp: the worker leads its own session
                total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
        return total / os.sysconf("SC_CLK_TCK")

    def tail(self, n: int = 5) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])


async def _done(peer: Any, r: redis.Redis) -> int:
    if hasattr(peer, "done"):
        return int(await _call(peer.done))
    return int(r.get(COUNTER_KEY) or 0)


async def measure_enqueue(peer: Any) -> dict[str, Any]:
    await peer.reset()
    r = counter()
    memory = getattr(peer, "memory", None) or (lambda: redis_db_memory(r))
    mem_before = memory() if peer.store == "redis" else 0
    fn = peer.enqueue_one
    is_async = inspect.iscoroutinefunction(fn)
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + ENQUEUE_CAP
    while n < ENQUEUE_N:
        if is_async:
            for _ in range(100):
                await fn()
        else:
            for _ in range(100):
                fn()
        n += 100
        if time.perf_counter() > deadline:
            break
    elapsed = time.perf_counter() - t0
    out: dict[str, Any] = {"enqueue": n / elapsed, "enqueue_n": n}
    if peer.store == "redis":
        out["bytes"] = (memory() - mem_before) / n
    return out


async def fill(peer: Any, n: int) -> tuple[int, float]:
    """Enqueue ``n`` jobs (bulk when the library has it); return (jobs enqueued, bulk rate or
    0). Without bulk, one call per job, stopping early after ``FILL_CAP`` seconds."""
    await peer.reset()
    t0 = time.perf_counter()
    if getattr(peer, "has_bulk", False):
        await _call(peer.enqueue_bulk, n)
        return n, n / (time.perf_counter() - t0)
    fn = peer.enqueue_one
    is_async = inspect.iscoroutinefunction(fn)
    done = 0
    while done < n:
        k = min(500, n - done)
        if is_async:
            for _ in range(k):
                await fn()
        else:
            for _ in range(k):
                fn()
        done += k
        if time.perf_counter() - t0 > FILL_CAP:
            break
    return done, 0.0


async def _drain(peer: Any, worker: WorkerProcess, n: int, on_start: Any = None) -> dict[str, Any]:
    """Watch ``worker`` finish ``n`` queued jobs: done, first/last-done and spawn times, capped,
    and whatever ``on_start(worker)`` returned. Stops the worker."""
    r = counter()
    t_spawn = time.perf_counter()
    t_first = None
    done = done_first = 0
    cpu_first = cpu_done = 0.0
    capped = False
    extra: dict[str, Any] = {}
    try:
        if on_start is not None:
            extra = await on_start(worker) or {}
        while True:
            done = await _done(peer, r)
            now = time.perf_counter()
            if done and t_first is None:
                t_first, done_first, cpu_first = now, done, worker.cpu_seconds()
            if done >= n:
                cpu_done = worker.cpu_seconds()
                break
            if not worker.alive():
                raise RuntimeError(f"worker exited ({worker.proc.returncode}): {worker.tail()}")
            if t_first is None and now - t_spawn > BOOT_CAP:
                raise RuntimeError(f"no job done {BOOT_CAP:g}s after start: {worker.tail()}")
            if t_first is not None and now - t_first > DRAIN_CAP:
                capped, cpu_done = True, worker.cpu_seconds()
                break
            await asyncio.sleep(0.005)
        t_done = time.perf_counter()
    finally:
        worker.stop(grace=2.0 if done < n else 10.0)
    assert t_first is not None
    return {
        "done": done,
        "rate": done / max(t_done - t_first, 1e-9),
        "wall": done / (t_done - t_spawn),
        "capped": capped,
        "extra": extra,
        # worker CPU per job between the first done seen and the last (boot excluded)
        "cpu_us": (cpu_done - cpu_first) / max(done - done_first, 1) * 1e6,
    }


async def measure_drain(peer: Any, mode: str, on_start: Any = None) -> dict[str, Any]:
    n, bulk_rate = await fill(peer, DRAIN_N)
    worker = WorkerProcess(peer.worker_cmd(mode), f"{peer.name}-{mode}", getattr(peer, "env", None))
    got = await _drain(peer, worker, n, on_start)
    out = {
        f"drain_{mode}": got["rate"],
        f"drain_{mode}_wall": got["wall"],
        f"drain_{mode}_n": got["done"],
        f"drain_{mode}_cpu_us": got["cpu_us"],
        **{f"drain_{mode}_{k}": v for k, v in got["extra"].items()},
    }
    if got["capped"]:
        out[f"drain_{mode}_capped"] = True
    if n < DRAIN_N:
        out[f"drain_{mode}_short"] = True  # fewer jobs than DRAIN_N were enqueued (FILL_CAP)
    if bulk_rate:
        out["bulk"] = bulk_rate
    return out


async def measure_io(peer: Any, kind: str, mode: str) -> dict[str, Any]:
    """``IO_N`` I/O-bound jobs of ``kind`` drained by the ``mode`` worker (see the module doc)."""
    await peer.reset()
    await _call(peer.enqueue_io, kind, IO_N)
    if hasattr(peer, "io_worker_cmd"):
        argv = peer.io_worker_cmd(mode)
    else:
        argv = peer.worker_cmd("default") + (peer.io_tuning.split() if mode == "tuned" else [])
    worker = WorkerProcess(argv, f"{peer.name}-{kind}-{mode}", getattr(peer, "env", None))
    got = await _drain(peer, worker, IO_N)
    key = f"{kind}_{mode}"
    slots = int(peer.io_slots(mode))
    out: dict[str, Any] = {key: got["rate"], f"{key}_n": got["done"], f"{key}_slots": slots}
    if kind == "sleep":
        out[f"{key}_ideal"] = got["rate"] / (slots / IO_SECONDS)
    if got["capped"]:
        out[f"{key}_capped"] = True
    return out


async def measure_latency(peer: Any, mode: str = "default") -> dict[str, Any]:
    await peer.reset()
    r = counter()
    worker = WorkerProcess(peer.worker_cmd(mode), f"{peer.name}-lat", getattr(peer, "env", None))
    samples: list[float] = []
    pop = getattr(peer, "pop_stamp", None) or (lambda: r.lpop(LAT_KEY))
    try:
        # warm up: wait for the worker to run a first job
        boot = time.perf_counter()
        await _call(peer.enqueue_stamp)
        while not pop():
            if not worker.alive():
                raise RuntimeError(f"worker exited: {worker.tail()}")
            if time.perf_counter() - boot > BOOT_CAP:
                raise RuntimeError(f"latency warm-up job not run in {BOOT_CAP:g}s: {worker.tail()}")
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        t_end = time.perf_counter() + LAT_CAP
        while len(samples) < LAT_SAMPLES and time.perf_counter() < t_end:
            await asyncio.sleep(0.01)  # idle worker between samples
            t0 = time.time()
            await _call(peer.enqueue_stamp)
            got = None
            while got is None:
                got = pop()
                if got is None:
                    if time.perf_counter() > t_end + 10:
                        raise RuntimeError("latency job never ran")
                    await asyncio.sleep(0.0002)
            samples.append((float(got) - t0) * 1000.0)
    finally:
        worker.stop(grace=2.0)
    samples.sort()
    return {
        "lat_p50": percentile(samples, 50),
        "lat_p99": percentile(samples, 99),
        "lat_n": len(samples),
    }


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def redis_db_memory(r: redis.Redis) -> int:
    total = 0
    keys = list(r.scan_iter(count=1000))
    for i in range(0, len(keys), 1000):
        pipe = r.pipeline(transaction=False)
        for key in keys[i : i + 1000]:
            pipe.memory_usage(key, samples=0)
        total += sum(v or 0 for v in pipe.execute())
    return total


async def run_peer(peer: Any, runs: int, steps: set[str] | None = None) -> dict[str, Any]:
    """Run every metric ``runs`` times; return {"runs": [...], "errors": {...}}."""
    all_runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    want = steps or {"enqueue", "drain", "latency", "io"}
    for i in range(runs):
        one: dict[str, Any] = {}
        steps_list: list[tuple[str, Any]] = []
        if "enqueue" in want:
            steps_list.append(("enqueue", lambda: measure_enqueue(peer)))
        if "drain" in want:
            for mode in peer.drain_modes:
                steps_list.append((f"drain_{mode}", lambda m=mode: measure_drain(peer, m)))
        if "latency" in want:
            steps_list.append(("latency", lambda: measure_latency(peer)))
        if "io" in want and hasattr(peer, "enqueue_io"):
            for kind in IO_KINDS:
                for mode in IO_MODES:
                    steps_list.append(
                        (f"{kind}_{mode}", lambda k=kind, m=mode: measure_io(peer, k, m))
                    )
        for label, step in steps_list:
            if label in errors:
                continue
            t = time.perf_counter()
            try:
                one.update(await step())
            except Exception as exc:
                errors[label] = f"{type(exc).__name__}: {exc}"[:300]
            print(
                f"  [{peer.name}] run {i + 1}/{runs} {label}: {time.perf_counter() - t:.1f}s",
                file=sys.stderr,
                flush=True,
            )
        all_runs.append(one)
    return {"runs": all_runs, "errors": errors}


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Median, min and max of each numeric metric over the runs."""
    keys = sorted({k for r in runs for k, v in r.items() if isinstance(v, (int, float))})
    out: dict[str, dict[str, float]] = {}
    for k in keys:
        vals = [float(r[k]) for r in runs if isinstance(r.get(k), (int, float))]
        if vals:
            out[k] = {
                "median": statistics.median(vals),
                "min": min(vals),
                "max": max(vals),
                "n": len(vals),
            }
    flags = sorted({k for r in runs for k, v in r.items() if v is True})
    for k in flags:
        out[k] = {"median": 1.0, "min": 1.0, "max": 1.0, "n": sum(1 for r in runs if r.get(k))}
    return out
