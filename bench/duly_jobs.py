"""The bench's duly app: one no-op job (one Redis INCR) and one latency job.

The worker imports ``bench.duly_jobs:app`` (URL from ``BENCH_DULY_URL``). Without a reachable
bench Redis (``BENCH_COUNTER=none``, used for SQLite-only runs), ``noop`` does nothing and
``stamp`` appends ``time.time()`` to the file ``BENCH_STAMP_FILE``. ``BENCH_METRICS=1`` adds
a ``duly.observability.PrometheusHook`` (to measure what metrics cost a worker).
"""

from __future__ import annotations

import os
import time
from typing import Any

import duly

BENCH_REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/5")
USE_REDIS = os.environ.get("BENCH_COUNTER", "redis") == "redis"
STAMP_FILE = os.environ.get("BENCH_STAMP_FILE", "")

_client: Any = None


def _redis() -> Any:
    global _client
    if _client is None:
        import redis.asyncio

        _client = redis.asyncio.Redis.from_url(BENCH_REDIS)
    return _client


def make_app(url: str, namespace: str = "bench") -> duly.App:
    app = duly.App(url, namespace=namespace)
    if os.environ.get("BENCH_METRICS") == "1":
        from prometheus_client import CollectorRegistry

        from duly.observability import PrometheusHook

        app.add_hook(PrometheusHook(CollectorRegistry()))  # one per app: the bench makes several

    @app.task(name="bench.noop")
    async def noop() -> None:
        if USE_REDIS:
            await _redis().incr("bench:count")

    @app.task(name="bench.stamp")
    async def stamp() -> None:
        t = time.time()
        if USE_REDIS:
            await _redis().rpush("bench:lat", repr(t))
        else:
            with open(STAMP_FILE, "a") as f:
                f.write(f"{t!r}\n")

    return app


app = make_app(os.environ.get("BENCH_DULY_URL", "sqlite:///bench-duly.db"))
