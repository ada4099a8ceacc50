"""What ``@app.task(isolated=True)`` costs per job (issue 29 item 7).

    python -m bench.isolated [--jobs 2000] [--rounds 3] [--concurrency 4] [--url sqlite]

Each round drains ``--jobs`` no-op sync jobs with one in-process burst ``Worker`` twice: the
task as is (``plain``, on the worker's thread pool) and the same function ``isolated=True``
(each run in a child process of the worker's pool), interleaved so a shared machine's drift hits
both alike. Every run returns ``time.monotonic()`` (one clock for every process on Linux); the
cost per job is the steady-state time between runs: ``(t[90%] - t[10%]) / (0.8 * jobs)``, so a
worker's start-up (and its pool's: child processes importing the task's module) is left out.
Reports µs per job per variant (median of the rounds), their ratio and the difference (what
isolation adds per job), and writes ``bench/results/isolated.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import duly
from duly._context import JobContext

URLS = {
    "redis": "redis://127.0.0.1:6379/0",
    "postgres": "postgresql://postgres@127.0.0.1:5432/test",
}


def stamp(n: int) -> float:
    """A no-op job: when it ran."""
    return time.monotonic()


async def drain(app: duly.App, task: Any, jobs: int, concurrency: int) -> float:
    """Steady-state µs per job of one drain of ``jobs`` jobs of ``task``."""
    handles = []
    for start in range(0, jobs, 1000):
        handles += await app.enqueue_many_async([task.s(n) for n in range(start, start + 1000)])
    worker = app.worker(
        burst=True, install_signal_handlers=False, scheduler=False, concurrency=concurrency
    )
    if task.config.isolated:  # start the pool's children first: their start-up is not a job's
        context = JobContext("warm", task.name, "default", 1, 1, None, worker.id)
        payload = b'{"args":[0],"kwargs":{}}'
        pool = worker._isolation
        await asyncio.gather(*[pool.run(stamp, context, payload, None) for _ in range(concurrency)])
    await worker.run()
    stamps = sorted([await handle.result_async(timeout=10) for handle in handles])
    low, high = int(jobs * 0.1), int(jobs * 0.9)
    return (stamps[high] - stamps[low]) / (high - low) * 1e6


async def main(url: str, jobs: int, rounds: int, concurrency: int) -> dict[str, Any]:
    app = duly.App(url, namespace=f"bench{secrets.token_hex(4)}")
    plain = app.task(name="bench.plain", retries=0)(stamp)
    isolated = app.task(name="bench.isolated", retries=0, isolated=True)(stamp)
    per_round: dict[str, list[float]] = {"plain": [], "isolated": []}
    try:
        for _ in range(rounds):
            per_round["plain"].append(await drain(app, plain, jobs, concurrency))
            per_round["isolated"].append(await drain(app, isolated, jobs, concurrency))
    finally:
        await (await app.backend()).drop()
        await app.aclose()
    ratios = [i / p for p, i in zip(per_round["plain"], per_round["isolated"], strict=True)]
    added = [i - p for p, i in zip(per_round["plain"], per_round["isolated"], strict=True)]
    return {
        "url": url.split(":", 1)[0],
        "jobs": jobs,
        "concurrency": concurrency,
        "us_per_job": {k: round(statistics.median(v), 1) for k, v in per_round.items()},
        "ratio_isolated_to_plain": round(statistics.median(ratios), 2),
        "us_added_per_job": round(statistics.median(added), 1),
        "rounds": per_round,
    }


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--url", default="sqlite", help="sqlite, redis, postgres or a URL")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = options.url
        url = f"sqlite:///{tmp}/bench.db" if url == "sqlite" else URLS.get(url, url)
        report = asyncio.run(main(url, options.jobs, options.rounds, options.concurrency))
    print(
        f"{report['url']}: plain {report['us_per_job']['plain']} µs/job, isolated "
        f"{report['us_per_job']['isolated']} µs/job (x{report['ratio_isolated_to_plain']}, "
        f"+{report['us_added_per_job']} µs/job), concurrency {report['concurrency']}"
    )
    out = Path(__file__).parent / "results" / "isolated.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    run()
