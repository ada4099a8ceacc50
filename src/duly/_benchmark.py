"""``duly bench``: measure duly alone on your own backend, in a namespace of its own.

Four figures, each with every guarantee on (leases, status, counters, retention):

- **enqueue**: one-call ``task.enqueue`` jobs/s (a round trip per job);
- **bulk**: ``app.enqueue_many`` in batches of 1,000, jobs/s;
- **drain**: one in-process worker (the given concurrency) runs every queued no-op job, jobs/s
  from its start to the last outcome stored;
- **latency**: an idle worker; one job at a time, enqueue -> start, p50 and p99 in ms.

The namespace (``duly_bench_<hex>``; SQLite: the URL's file) is dropped at the end. For duly
against its peers, run ``make bench`` from a clone (``docs/benchmarks.md``).
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from duly._app import App

__all__ = ["BenchResult", "run_benchmark"]

BULK_BATCH = 1000


@dataclass(frozen=True, slots=True)
class BenchResult:
    """What ``run_benchmark`` measured."""

    url: str
    namespace: str
    jobs: int
    concurrency: int
    enqueue_per_s: float
    bulk_per_s: float
    drain_per_s: float
    latency_p50_ms: float
    latency_p99_ms: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def run_benchmark(
    url: str,
    *,
    jobs: int = 20_000,
    one_call: int = 2_000,
    latency_samples: int = 200,
    concurrency: int = 16,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Measure enqueue, bulk enqueue, drain and idle latency on ``url`` (see the module doc)."""
    say = progress or (lambda _: None)
    namespace = f"duly_bench_{secrets.token_hex(4)}"
    app = App(url, namespace=namespace)
    started: dict[str, float] = {}
    ready = threading.Event()

    @app.task(name="duly.bench.noop")
    async def noop() -> None:
        return None

    @app.task(name="duly.bench.stamp")
    async def stamp(mark: str) -> None:
        started[mark] = time.perf_counter()
        ready.set()

    try:
        say(f"one-call enqueue of {one_call:,} jobs")
        began = time.perf_counter()
        for _ in range(one_call):
            noop.enqueue()
        enqueue_per_s = one_call / (time.perf_counter() - began)

        say(f"bulk enqueue of {jobs:,} jobs")
        began = time.perf_counter()
        for start in range(0, jobs, BULK_BATCH):
            app.enqueue_many([noop.s() for _ in range(min(BULK_BATCH, jobs - start))])
        bulk_per_s = jobs / (time.perf_counter() - began)

        say(f"draining {jobs + one_call:,} jobs with one worker (concurrency {concurrency})")
        drain_per_s = asyncio.run(_drain(app, jobs + one_call, concurrency))

        say(f"idle enqueue -> start latency, {latency_samples} samples")
        latencies = _latencies(app, stamp, started, ready, latency_samples, concurrency)
    finally:
        asyncio.run(_drop(app))
        app.close()
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return BenchResult(
        url=app.url,
        namespace=namespace,
        jobs=jobs,
        concurrency=concurrency,
        enqueue_per_s=enqueue_per_s,
        bulk_per_s=bulk_per_s,
        drain_per_s=drain_per_s,
        latency_p50_ms=statistics.median(latencies) * 1000,
        latency_p99_ms=quantiles[98] * 1000,
    )


async def _drain(app: App, expected: int, concurrency: int) -> float:
    worker = app.worker(
        burst=True, concurrency=concurrency, install_signal_handlers=False, scheduler=False
    )
    try:
        began = time.perf_counter()
        await worker.run()
        elapsed = time.perf_counter() - began
    finally:
        await app.aclose()
    if worker.stats.succeeded < expected:
        raise RuntimeError(f"the worker ran {worker.stats.succeeded} of {expected} jobs")
    return worker.stats.succeeded / elapsed


def _latencies(
    app: App,
    stamp: Any,
    started: dict[str, float],
    ready: threading.Event,
    samples: int,
    concurrency: int,
) -> list[float]:
    worker = app.worker(concurrency=concurrency, install_signal_handlers=False, scheduler=False)

    async def serve() -> None:
        try:
            await worker.run()
        finally:
            await app.aclose()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    latencies: list[float] = []
    try:
        time.sleep(0.5)  # the worker is up and idle
        for n in range(samples + 5):
            ready.clear()
            mark = str(n)
            sent = time.perf_counter()
            stamp.enqueue(mark)
            if not ready.wait(10):
                raise RuntimeError("a latency job did not start within 10 s")
            if n >= 5:  # the first few warm connections up
                latencies.append(started[mark] - sent)
            time.sleep(0.005)
    finally:
        worker.stop()
        thread.join(30)
    return latencies


async def _drop(app: App) -> None:
    try:
        await (await app.backend()).drop()
    finally:
        await app.aclose()
