"""What concurrency control costs on drain throughput (issue 5: "the cost of each feature").

    python -m bench.limits_cost [--jobs 3000] [--rounds 3] [--backends sqlite,redis,postgres]

For each backend (own namespace, dropped at the end), each round drains ``--jobs`` no-op async
jobs with one in-process ``Worker`` (default concurrency 16, burst) for every variant, the
variants interleaved so a shared machine's drift hits all of them alike:

- ``plain``: no limits (the baseline);
- ``unique``: ``unique="{n}"`` (every job its own key: the hold is taken and released);
- ``mutex``: ``mutex="m:{k}"`` over 64 keys (jobs of one key park and unpark);
- ``concurrency``: ``concurrency=4, concurrency_key="{k}"`` over 16 keys;
- ``rate``: ``rate_limit="1000000/s"`` (a slot reserved per claimed batch, never deferred).

Reports jobs/s per variant (median of the rounds) and the ratio to ``plain`` in the same round
(median of the per-round ratios). Enqueue time is not counted (enqueue_many before the clock).
Writes ``bench/results/limits_cost.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duly

VARIANTS = ("plain", "unique", "mutex", "concurrency", "rate")
URLS = {
    "redis": "redis://127.0.0.1:6379/0",
    "postgres": "postgresql://postgres@127.0.0.1:5432/test",
}


def build_app(url: str, namespace: str) -> tuple[duly.App, dict[str, Callable[..., Any]]]:
    app = duly.App(url, namespace=namespace)

    @app.task(name="plain")
    async def plain(n: int, k: int) -> None:
        pass

    @app.task(name="unique", unique="{n}")
    async def unique(n: int, k: int) -> None:
        pass

    @app.task(name="mutex", mutex="m:{k}")
    async def mutex(n: int, k: int) -> None:
        pass

    @app.task(name="concurrency", concurrency=4, concurrency_key="{k}")
    async def concurrency(n: int, k: int) -> None:
        pass

    @app.task(name="rate", rate_limit="1000000/s")
    async def rate(n: int, k: int) -> None:
        pass

    tasks = {
        "plain": plain,
        "unique": unique,
        "mutex": mutex,
        "concurrency": concurrency,
        "rate": rate,
    }
    return app, tasks


async def drain(app: duly.App, task: Any, variant: str, jobs: int, round_no: int) -> float:
    keys = {"mutex": 64, "concurrency": 16}.get(variant, 1)
    sigs = [task.s(round_no * 1_000_000 + n, n % keys) for n in range(jobs)]
    for start in range(0, jobs, 1000):
        await app.enqueue_many_async(sigs[start : start + 1000])
    worker = app.worker(burst=True, install_signal_handlers=False, scheduler=False)
    began = time.perf_counter()
    await worker.run()
    elapsed = time.perf_counter() - began
    assert worker.stats.succeeded == jobs, (variant, worker.stats.succeeded)
    return jobs / elapsed


async def bench_backend(kind: str, jobs: int, rounds: int) -> dict[str, Any]:
    if kind == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp(prefix='duly-limits-')}/bench.db"
        namespace = "duly"
    else:
        url = URLS[kind]
        namespace = f"bench_lc_{secrets.token_hex(4)}"
    app, tasks = build_app(url, namespace)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    ratios: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        await drain(app, tasks["plain"], "plain", min(jobs, 500), 99)  # warm-up
        for round_no in range(rounds):
            order = VARIANTS if round_no % 2 == 0 else tuple(reversed(VARIANTS))
            got = {v: await drain(app, tasks[v], v, jobs, round_no) for v in order}
            for variant, value in got.items():
                rates[variant].append(value)
                ratios[variant].append(value / got["plain"])
            print(kind, round_no, {v: round(r) for v, r in got.items()}, flush=True)
    finally:
        await (await app.backend()).drop()
        await app.aclose()
    return {
        v: {
            "jobs_per_s": statistics.median(rates[v]),
            "spread": [min(rates[v]), max(rates[v])],
            "ratio_to_plain": statistics.median(ratios[v]),
        }
        for v in VARIANTS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    args = parser.parse_args()
    results = {
        kind: asyncio.run(bench_backend(kind, args.jobs, args.rounds))
        for kind in args.backends.split(",")
    }
    print(f"\n{'backend':<10} {'variant':<12} {'jobs/s':>8} {'spread':>15} {'ratio':>6}")
    for kind, variants in results.items():
        for variant, row in variants.items():
            low, high = row["spread"]
            print(
                f"{kind:<10} {variant:<12} {row['jobs_per_s']:>8.0f} "
                f"{f'{low:.0f}-{high:.0f}':>15} {row['ratio_to_plain']:>6.2f}"
            )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "limits_cost.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
