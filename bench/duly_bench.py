"""Measure duly alone on one backend URL.

    python bench/duly_bench.py redis://127.0.0.1:6379/5?namespace=bench
    python bench/duly_bench.py postgresql://postgres@127.0.0.1:5432/bench?namespace=duly_bench
    python bench/duly_bench.py sqlite:////tmp/duly-bench.db --no-redis-counter

Metrics (see ``bench/harness.py``): one-call enqueue jobs/s (``task.enqueue``; the async twin is
reported as ``enqueue_async``), bulk enqueue jobs/s (``app.enqueue_many`` in batches of 1000),
drain jobs/s of 20,000 pre-enqueued no-op jobs by ``duly worker`` with its default options (one
process per CPU core) and with ``--processes 1`` (``--processes 1,3`` adds a drain with 3),
idle enqueue->start latency p50/p99,
and bytes per queued job (Redis). The job body does one ``INCR`` on the bench Redis
(``BENCH_REDIS``, DB 5); with ``--no-redis-counter`` it does nothing and completion is read from
duly's own queue counts (latency stamps go to a file).

Prints a table and writes ``bench/results/duly-<backend>.json``. Importable: ``DulyPeer``,
``bench_url(url, runs=...)`` and ``main(argv)``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness


def split_url(url: str) -> tuple[str, str | None]:
    """``url`` without its ``namespace=`` query parameter, and that parameter."""
    from urllib.parse import parse_qsl, urlencode

    base, sep, query = url.partition("?")
    if not sep:
        return url, None
    params = parse_qsl(query, keep_blank_values=True)
    ns = [v for k, v in params if k == "namespace"]
    rest = urlencode([(k, v) for k, v in params if k != "namespace"])
    return (f"{base}?{rest}" if rest else base), (ns[-1] if ns else None)


def _store_of(url: str) -> str:
    scheme = urlsplit(url).scheme.lower()
    if scheme.startswith("redis") or scheme == "unix":
        return "redis"
    if scheme.startswith("postgres"):
        return "postgres"
    return "sqlite"


class DulyPeer:
    """duly as a harness peer (see ``bench/harness.py``)."""

    has_bulk = True

    def __init__(
        self,
        url: str,
        processes: list[int] | None = None,
        redis_counter: bool = True,
        metrics: bool = False,
    ):
        import duly

        self.url = url
        self.store = _store_of(url)
        base, ns = split_url(url)
        self.base_url = base
        self.namespace = ns or "bench"
        self.name = f"duly/{self.store}" + ("+metrics" if metrics else "")
        self.version = duly.__version__
        # "default": `duly worker` as shipped (one process per core); "one": --processes 1;
        # "pN": --processes N for each N > 1 asked for.
        self.processes = processes or [1]
        self.drain_modes = ["default", "one", *(f"p{p}" for p in self.processes if p > 1)]
        self.redis_counter = redis_counter
        self._stamp_dir = tempfile.mkdtemp(prefix="duly-bench-")
        self.stamp_file = os.path.join(self._stamp_dir, "stamps")
        self.env = {
            "BENCH_DULY_URL": url,
            "BENCH_COUNTER": "redis" if redis_counter else "none",
            "BENCH_STAMP_FILE": self.stamp_file,
            "BENCH_METRICS": "1" if metrics else "0",
        }
        os.environ.update(self.env)  # for bench.duly_jobs imported here
        self.app: Any = None
        self._n = 0
        if not redis_counter:
            self.done = self._done_from_status
            self.pop_stamp = self._pop_stamp_file

    # -- lifecycle -------------------------------------------------------------------------
    def _new_app(self) -> None:
        from bench.duly_jobs import make_app

        if self.app is not None:
            with contextlib.suppress(Exception):
                self.app.close()
        os.environ.update(self.env)  # this peer's variant (another peer may have set its own)
        self.app = make_app(self.url, self.namespace)
        self.noop = self.app.tasks["bench.noop"]
        self.stamp = self.app.tasks["bench.stamp"]

    async def reset(self) -> None:
        if self.app is not None:
            with contextlib.suppress(Exception):
                self.app.close()
            self.app = None
        if self.redis_counter:
            harness.counter().delete(harness.COUNTER_KEY, harness.LAT_KEY)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.stamp_file)
        if self.store == "redis":
            import redis

            r = redis.Redis.from_url(self.base_url)
            keys = list(r.scan_iter(match=f"{{{self.namespace}}}:*", count=1000))
            for i in range(0, len(keys), 1000):
                r.delete(*keys[i : i + 1000])
        elif self.store == "postgres":
            import psycopg

            with psycopg.connect(self.base_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.namespace}" CASCADE')
        else:
            path = self.base_url.split("sqlite:///", 1)[1]
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + suffix)
        self._new_app()
        self.app.ping()  # opens (and migrates) the backend

    def close(self) -> None:
        if self.app is not None:
            with contextlib.suppress(Exception):
                self.app.close()
        shutil.rmtree(self._stamp_dir, ignore_errors=True)

    # -- the harness protocol --------------------------------------------------------------
    def enqueue_one(self) -> None:
        self.noop.enqueue()

    def enqueue_bulk(self, n: int) -> None:
        s = self.noop.s
        for i in range(0, n, harness.BULK_BATCH):
            self.app.enqueue_many([s() for _ in range(min(harness.BULK_BATCH, n - i))])
        self._n = n

    def enqueue_stamp(self) -> None:
        self.stamp.enqueue()

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("duly"), "worker", "bench.duly_jobs:app", "--log-level", "WARNING"]
        if mode != "default":
            argv += ["--processes", "1" if mode == "one" else mode[1:]]
        return argv

    #: duly's setting for I/O-bound async jobs: more slots per process (each is a coroutine);
    #: twice the default (``duly._worker.settings.ASYNC_CONCURRENCY``).
    io_tuned_concurrency = 256
    io_tuning = f"--concurrency {io_tuned_concurrency}"

    def enqueue_io(self, kind: str, n: int) -> None:
        s = self.app.tasks[f"bench.{kind}"].s
        for i in range(0, n, harness.BULK_BATCH):
            self.app.enqueue_many([s() for _ in range(min(harness.BULK_BATCH, n - i))])
        self._n = n

    def io_slots(self, mode: str) -> int:
        """Processes as ``duly worker`` counts them, times the jobs each runs at once."""
        from duly._cli.worker import default_processes
        from duly._worker.settings import default_concurrency

        tuned = mode == "tuned"
        per_process = self.io_tuned_concurrency if tuned else default_concurrency(self.app.registry)
        return default_processes() * per_process

    def memory(self) -> int:
        """Bytes of every key of the namespace (Redis)."""
        import redis

        r = redis.Redis.from_url(self.base_url)
        keys = list(r.scan_iter(match=f"{{{self.namespace}}}:*", count=1000))
        total = 0
        for i in range(0, len(keys), 1000):
            pipe = r.pipeline(transaction=False)
            for key in keys[i : i + 1000]:
                pipe.memory_usage(key, samples=0)
            total += sum(v or 0 for v in pipe.execute())
        return total

    # -- without a Redis counter -----------------------------------------------------------
    def _done_from_status(self) -> int:
        left = sum(q.queued + q.running + q.scheduled for q in self.app.queues())
        return max(self._n - left, 0) if self._n else 0

    def _pop_stamp_file(self) -> bytes | None:
        try:
            with open(self.stamp_file, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        lines = data.split()
        if not lines:
            return None
        os.remove(self.stamp_file)
        return lines[-1]


async def measure_enqueue_async(peer: DulyPeer) -> dict[str, float]:
    """One ``await task.enqueue_async()`` per job (the async twin)."""
    await peer.reset()
    app = peer.app
    noop = peer.noop
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + harness.ENQUEUE_CAP
    while n < harness.ENQUEUE_N:
        for _ in range(100):
            await noop.enqueue_async()
        n += 100
        if time.perf_counter() > deadline:
            break
    rate = n / (time.perf_counter() - t0)
    await app.aclose()
    return {"enqueue_async": rate}


def top_frames(collapsed: Path, limit: int = 25) -> dict[str, list[tuple[str, float]]]:
    """Self and inclusive sample shares per frame from py-spy ``--format raw`` output."""
    self_count: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        frames = stack.split(";")
        total += count
        leaf = frames[-1]
        self_count[leaf] = self_count.get(leaf, 0) + count
        for f in set(frames):
            incl[f] = incl.get(f, 0) + count
    if not total:
        return {"self": [], "inclusive": []}

    def top(d: dict[str, int]) -> list[tuple[str, float]]:
        return [
            (k, round(100.0 * v / total, 1))
            for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:limit]
        ]

    return {"self": top(self_count), "inclusive": top(incl), "samples": total}  # type: ignore[dict-item]


def _profiler(out_stem: Path, duration: int) -> Any:
    """``on_start`` hook for ``measure_drain``: py-spy record the worker while it drains."""
    py_spy = shutil.which("py-spy") or harness.bin_of("py-spy")

    async def start(worker: harness.WorkerProcess) -> dict[str, Any]:
        await asyncio.sleep(0.3)  # let the interpreter start
        raw = out_stem.with_suffix(".txt")
        svg = out_stem.with_suffix(".svg")
        for fmt, path in (("raw", raw), ("flamegraph", svg)):
            subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(worker.pid),
                    "--duration",
                    str(duration),
                    "--rate",
                    "250",
                    "--format",
                    fmt,
                    "--output",
                    str(path),
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        return {}

    return start


async def bench_url_async(
    url: str,
    runs: int = 3,
    processes: list[int] | None = None,
    redis_counter: bool = True,
    profile: bool = False,
) -> dict[str, Any]:
    peer = DulyPeer(url, processes=processes, redis_counter=redis_counter)
    try:
        result = await harness.run_peer(peer, runs)
        for i in range(runs):
            try:
                result["runs"][i].update(await measure_enqueue_async(peer))
            except Exception as exc:
                result["errors"]["enqueue_async"] = f"{type(exc).__name__}: {exc}"
        if profile:
            stem = harness.RESULTS / f"profile-{peer.store}"
            stem.parent.mkdir(parents=True, exist_ok=True)
            await harness.measure_drain(peer, "one", on_start=_profiler(stem, 8))
            await asyncio.sleep(1.0)
            raw = stem.with_suffix(".txt")
            for _ in range(20):
                if raw.exists() and raw.stat().st_size:
                    break
                await asyncio.sleep(0.5)
            if raw.exists():
                result["profile"] = top_frames(raw)
    finally:
        if peer.app is not None:
            with contextlib.suppress(Exception):
                await peer.app.aclose()
        peer.close()
    result["summary"] = harness.summarize(result["runs"])
    result["name"] = peer.name
    result["version"] = peer.version
    result["store"] = peer.store
    result["drain_modes"] = peer.drain_modes
    result["has_bulk"] = True
    result["io_tuning"] = peer.io_tuning
    return result


def bench_url(url: str, **kwargs: Any) -> dict[str, Any]:
    """Measure duly on ``url``; see ``bench_url_async``."""
    return asyncio.run(bench_url_async(url, **kwargs))


def format_table(results: list[dict[str, Any]]) -> str:
    from bench.table import markdown_table

    return markdown_table(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="+", help="backend URL(s)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--processes", default="1", help="comma list, e.g. 1,2")
    parser.add_argument(
        "--no-redis-counter",
        action="store_true",
        help="no Redis needed: count finished jobs from duly's own queue counts",
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the worker during one extra drain"
    )
    args = parser.parse_args(argv)
    processes = [int(p) for p in args.processes.split(",")]
    results = []
    for url in args.url:
        print(f"duly on {url} ...", file=sys.stderr)
        res = bench_url(
            url,
            runs=args.runs,
            processes=processes,
            redis_counter=not args.no_redis_counter,
            profile=args.profile,
        )
        results.append(res)
        harness.RESULTS.mkdir(parents=True, exist_ok=True)
        out = harness.RESULTS / f"duly-{res['store']}.json"
        out.write_text(json.dumps(res, indent=2, default=str))
        print(f"wrote {out}", file=sys.stderr)
    print(format_table(results))
    for res in results:
        if res.get("profile"):
            print(f"\nprofile of duly/{res['store']} worker (self %):")
            for frame, pct in res["profile"]["self"][:15]:
                print(f"  {pct:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
