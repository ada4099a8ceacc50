"""A worker's memory over a long drain: RSS at the start and the end of 1,000,000 jobs.

    bench/.venv/bin/python bench/rss_drain.py                       # duly/redis, 1,000,000 jobs
    bench/.venv/bin/python bench/rss_drain.py --target duly/sqlite --jobs 200000

Enqueues ``--jobs`` of the bench's no-op job (one Redis ``INCR``) with ``app.enqueue_many`` in
batches of 1,000, starts ``duly worker`` as shipped (one process per core), and every
``--every`` seconds reads the resident set size (``VmRSS`` of ``/proc/<pid>/status``) of each
worker process (the children of the supervisor, and the supervisor itself). A leak shows as
RSS that keeps growing with the jobs done; a flat worker rises while it warms up (imports,
connection pools, caches filling) and then stays. So the table compares the RSS once
``--warm`` jobs are done with the RSS at the end, per process, and gives the peak. Raw
samples: ``bench/results/rss_drain.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.ab import make_peer


def rss_kib(pid: int) -> int | None:
    """The resident set size of ``pid`` in KiB, or None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (Linux ``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return sorted(set(found))


async def run(target: str, jobs: int, warm: int, every: float) -> dict[str, Any]:
    peer = make_peer(target)
    await peer.reset()
    t0 = time.perf_counter()
    for start in range(0, jobs, 100_000):
        await harness._call(peer.enqueue_bulk, min(100_000, jobs - start))
    peer._n = jobs  # the peer counts completions against the jobs it enqueued
    print(f"enqueued {jobs:,} in {time.perf_counter() - t0:.1f} s", flush=True)
    r = harness.counter()
    worker = harness.WorkerProcess(peer.worker_cmd("default"), f"rss-{target}")
    samples: list[dict[str, Any]] = []
    try:
        started = time.perf_counter()
        while True:
            done = await harness._done(peer, r)
            procs = [worker.pid, *children(worker.pid)]
            sample = {
                "t": round(time.perf_counter() - started, 2),
                "done": done,
                "rss_kib": {str(p): rss_kib(p) for p in procs},
            }
            samples.append(sample)
            if done >= jobs:
                break
            if not worker.alive():
                raise RuntimeError(f"worker exited: {worker.tail()}")
            if time.perf_counter() - started > 1800:
                raise RuntimeError(f"not drained after 30 min: {done:,} done")
            await asyncio.sleep(every)
    finally:
        worker.stop(grace=10.0)
    warm_sample = next(s for s in samples if s["done"] >= warm)
    end = samples[-1]
    rows = []
    for pid, start_kib in warm_sample["rss_kib"].items():
        end_kib = end["rss_kib"].get(pid)
        peak = max((s["rss_kib"].get(pid) or 0) for s in samples)
        rows.append({"pid": pid, "warm_kib": start_kib, "end_kib": end_kib, "peak_kib": peak})
    elapsed = end["t"] - warm_sample["t"]
    return {
        "target": target,
        "jobs": jobs,
        "warm_jobs": warm_sample["done"],
        "drain_rate": (end["done"] - warm_sample["done"]) / max(elapsed, 1e-9),
        "processes": rows,
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default="duly/redis")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--warm", type=int, default=50_000, help="jobs done before the first RSS")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.target, args.jobs, args.warm, args.every))
    out = harness.RESULTS / "rss_drain.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"{result['target']}: {result['jobs']:,} jobs, {result['drain_rate']:,.0f} jobs/s")
    print("| process | RSS after warm-up (MiB) | RSS at the end (MiB) | peak (MiB) | end/warm |")
    print("|---|---:|---:|---:|---:|")
    for row in result["processes"]:
        warm, end = row["warm_kib"], row["end_kib"]
        ratio = f"{end / warm:.3f}" if warm and end else "n/a"
        print(
            f"| {row['pid']} | {(warm or 0) / 1024:.1f} | {(end or 0) / 1024:.1f}"
            f" | {row['peak_kib'] / 1024:.1f} | {ratio} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
