"""What the metrics hook costs a worker, in CPU time per job (issue 17's budget: <= 5 %).

    python -m bench.metrics_cost [--jobs 5000] [--rounds 8] [--url redis://127.0.0.1:6379/0]

Each round drains ``--jobs`` no-op async jobs with one in-process burst ``Worker`` twice, in
turn: without hooks, then with ``PrometheusHook`` (its own registry). The clock is this
process's CPU time (``time.process_time``) over the drain only (enqueue_many runs before it),
so other processes on a busy machine slow it far less than they slow wall-clock throughput
(``bench/ab.py``). Reports the CPU microseconds per job of each variant (median of the rounds)
and the median of the per-round ratios on/off.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time

from prometheus_client import CollectorRegistry

import duly
from duly.observability import PrometheusHook


async def drain(url: str, jobs: int, metrics: bool) -> float:
    """CPU seconds this process spent draining ``jobs`` no-op jobs (one namespace, dropped)."""
    app = duly.App(url, namespace=f"mc{secrets.token_hex(4)}")
    if metrics:
        app.add_hook(PrometheusHook(CollectorRegistry()))

    @app.task(name="noop")
    async def noop(n: int) -> None:
        pass

    try:
        for start in range(0, jobs, 1000):
            await app.enqueue_many_async([noop.s(n) for n in range(start, min(jobs, start + 1000))])
        worker = app.worker(burst=True, concurrency=16, install_signal_handlers=False)
        began = time.process_time()
        await worker.run()
        spent = time.process_time() - began
        assert worker.stats.succeeded == jobs, worker.stats
        return spent
    finally:
        await (await app.backend()).drop()
        await app.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    off: list[float] = []
    on: list[float] = []
    for i in range(args.rounds):
        off.append(asyncio.run(drain(args.url, args.jobs, False)) / args.jobs * 1e6)
        on.append(asyncio.run(drain(args.url, args.jobs, True)) / args.jobs * 1e6)
        print(f"round {i + 1}: off {off[-1]:.1f} us/job  on {on[-1]:.1f} us/job", flush=True)
    ratios = [b / a for a, b in zip(off, on, strict=True)]
    print(
        f"CPU per job: off {statistics.median(off):.1f} us, on {statistics.median(on):.1f} us; "
        f"on/off median of {args.rounds} paired rounds = {statistics.median(ratios):.3f}"
    )


if __name__ == "__main__":
    main()
