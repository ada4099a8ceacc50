"""What durable enqueue (``?wait_replicas=1``) costs against a plain one, same run.

    python -m bench.durable [--rounds 5] [--single 2000] [--batches 100]

Starts its own primary and replica on loopback ports (``chaos.redis_topologies``; the
sentinels of that topology are idle) and, round after round, alternates the two URLs on the
same primary: ``redis://…`` and ``redis://…?wait_replicas=1``. Each round measures:

- ``single``: ``task.enqueue()`` one job per call, ``--single`` calls (sync API);
- ``many(100)``: ``app.enqueue_many`` of 100 jobs, ``--batches`` calls.

Prints jobs/s per variant (median of the rounds) and durable / plain (median of the per-round
ratios: both variants of one round ran within seconds of each other).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from uuid import uuid4

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duly
from chaos.redis_topologies import LocalSentinel


def _rate(url: str, mode: str, count: int) -> float:
    """Jobs per second of ``count`` calls of ``mode`` on ``url`` (a namespace of its own)."""
    app = duly.App(url, namespace=f"bench{uuid4().hex[:8]}")

    @app.task(name="bench.noop")
    def noop(n: int) -> None:
        pass

    try:
        noop.enqueue(-1)  # connect, load the scripts, record the format: not timed
        started = time.perf_counter()
        if mode == "single":
            for n in range(count):
                noop.enqueue(n)
            jobs = count
        else:
            batch = [noop.s(n) for n in range(100)]
            for _ in range(count):
                app.enqueue_many(batch)
            jobs = count * 100
        return jobs / (time.perf_counter() - started)
    finally:
        app._sync(_drop(app))
        app.close()


async def _drop(app: duly.App) -> None:
    await (await app.backend()).drop()
    await app.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single", type=int, default=2000, help="single enqueues per round")
    parser.add_argument("--batches", type=int, default=100, help="enqueue_many(100) per round")
    args = parser.parse_args(argv)
    topology = LocalSentinel().start()
    try:
        plain = f"redis://127.0.0.1:{topology.primary}/0"
        durable = plain + "?wait_replicas=1"
        for mode, count in (("single", args.single), ("many(100)", args.batches)):
            rates: dict[str, list[float]] = {"plain": [], "durable": []}
            ratios = []
            for _ in range(args.rounds):
                rates["plain"].append(_rate(plain, mode, count))
                rates["durable"].append(_rate(durable, mode, count))
                ratios.append(rates["durable"][-1] / rates["plain"][-1])
            print(
                f"{mode:10} plain {statistics.median(rates['plain']):>9,.0f} jobs/s  "
                f"durable {statistics.median(rates['durable']):>9,.0f} jobs/s  "
                f"durable/plain {statistics.median(ratios):.2f}x "
                f"(rounds {min(ratios):.2f}-{max(ratios):.2f})"
            )
    finally:
        topology.stop()


if __name__ == "__main__":
    main()
