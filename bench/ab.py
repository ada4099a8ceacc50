"""Same-run A/B: one metric, a few targets, alternated round by round.

On a shared or virtual machine the speed drifts (2x within an hour here), so a figure from one
`make bench` target and one from another taken minutes later do not compare well. This runs
the targets in turn, round after round, and prints each median and the ratios to the first::

    bench/.venv/bin/python bench/ab.py enqueue duly/redis,huey --rounds 5
    bench/.venv/bin/python bench/ab.py drain_default duly/postgres,pgqueuer
    bench/.venv/bin/python bench/ab.py lat_p99 duly/redis,huey,taskiq

Metrics: ``enqueue``, ``bulk``, ``drain_<mode>`` (``drain_default``, ``drain_one``, ...),
``cpu_<mode>`` (the worker's CPU µs per job of that drain: lower is better),
``lat_p50`` / ``lat_p99``, the I/O-bound ``sleep_default``, ``sleep_tuned``, ``pg_default``,
``pg_tuned``. Targets: ``duly/redis``, ``duly/postgres``, ``duly/sqlite`` (as in
``bench/run.py``), each also as ``duly/<backend>+metrics`` (the worker with a
``PrometheusHook``: what metrics cost, ``drain_default duly/redis,duly/redis+metrics``), and
the peers of ``bench/peers/``. Every step is the harness's own
(``bench/harness.py``), so the numbers mean what the ``make bench`` table means.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.run import DULY_TARGETS


def make_peer(target: str) -> Any:
    if target.startswith("duly/"):
        from bench.duly_bench import DulyPeer

        base, plus, extra = target.partition("+")
        if plus and extra != "metrics":
            raise SystemExit(f"unknown variant {target!r}: duly/<backend>+metrics is the one")
        url = DULY_TARGETS[base]
        if url.startswith("sqlite:"):
            Path(url.split("sqlite:///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        return DulyPeer(url, metrics=bool(plus))
    return importlib.import_module(f"bench.peers.{target}_peer").Peer()


async def measure(peer: Any, metric: str) -> float:
    if metric == "enqueue":
        return float((await harness.measure_enqueue(peer))["enqueue"])
    if metric == "bulk":
        return (await harness.fill(peer, harness.DRAIN_N))[1]
    if metric.startswith("cpu_"):  # worker CPU µs per job of the drain_<mode> run
        mode = metric.split("_", 1)[1]
        return float((await harness.measure_drain(peer, mode))[f"drain_{mode}_cpu_us"])
    if metric.startswith("drain_"):
        mode = metric.split("_", 1)[1]
        return float((await harness.measure_drain(peer, mode))[metric])
    kind, _, mode = metric.partition("_")
    if kind in harness.IO_KINDS and mode in harness.IO_MODES:
        return float((await harness.measure_io(peer, kind, mode))[metric])
    if metric in ("lat_p50", "lat_p99"):
        return float((await harness.measure_latency(peer))[metric])
    raise SystemExit(f"unknown metric {metric!r}")


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metric")
    parser.add_argument("targets", help="comma-separated, the first is the reference")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    harness.hold_bench_db()
    harness.stop_workers_at_exit()
    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    peers = {name: make_peer(name) for name in names}
    values: dict[str, list[float]] = {name: [] for name in names}
    try:
        for i in range(args.rounds):
            for name, peer in peers.items():
                value = await measure(peer, args.metric)
                values[name].append(value)
                print(f"round {i + 1} {name} {args.metric} {value:,.2f}", flush=True)
    finally:
        for peer in peers.values():
            if hasattr(peer, "close"):
                peer.close()
    base = statistics.median(values[names[0]])
    for name in names:
        median = statistics.median(values[name])
        spread = f"{min(values[name]):,.2f}-{max(values[name]):,.2f}"
        ratio = base / median if median else float("nan")
        print(f"{name:16s} median {median:,.2f} ({spread})  {names[0]}/{name} = {ratio:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
