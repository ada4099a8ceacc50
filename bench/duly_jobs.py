"""The bench's duly app: one no-op job (one Redis INCR), one latency job, and the I/O-bound
jobs of ``bench.harness.measure_io`` (``bench.sleep``: 20 ms ``asyncio.sleep``; ``bench.pg``: one
PostgreSQL query; both then INCR, with ``bench.peers._base``'s bodies, as every peer does).

The worker imports ``bench.duly_jobs:app`` (URL from ``BENCH_DULY_URL``). Without a reachable
bench Redis (``BENCH_COUNTER=none``, used for SQLite-only runs), ``noop`` does nothing and
``stamp`` appends ``time.time()`` to the file ``BENCH_STAMP_FILE``. ``BENCH_METRICS=1`` adds
a ``duly.observability.PrometheusHook`` (to measure what metrics cost a worker).
"""

from __future__ import annotations

import os
import time

import duly
from bench.peers._base import aincr, apg_incr, asleep_incr, async_redis

USE_REDIS = os.environ.get("BENCH_COUNTER", "redis") == "redis"
STAMP_FILE = os.environ.get("BENCH_STAMP_FILE", "")


def make_app(url: str, namespace: str = "bench") -> duly.App:
    app = duly.App(url, namespace=namespace)
    if os.environ.get("BENCH_METRICS") == "1":
        from prometheus_client import CollectorRegistry

        from duly.observability import PrometheusHook

        app.add_hook(PrometheusHook(CollectorRegistry()))  # one per app: the bench makes several

    @app.task(name="bench.noop")
    async def noop() -> None:
        if USE_REDIS:
            await aincr()

    @app.task(name="bench.stamp")
    async def stamp() -> None:
        t = time.time()
        if USE_REDIS:
            await async_redis().rpush("bench:lat", repr(t))
        else:
            with open(STAMP_FILE, "a") as f:
                f.write(f"{t!r}\n")

    @app.task(name="bench.sleep")
    async def sleep() -> None:
        await asleep_incr()

    @app.task(name="bench.pg")
    async def pg() -> None:
        await apg_incr()

    return app


app = make_app(os.environ.get("BENCH_DULY_URL", "sqlite:///bench-duly.db"))
