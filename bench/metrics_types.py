"""What prometheus_client's own metric types would cost ``PrometheusHook`` per run.

    python -m bench.metrics_types [--runs 100000] [--rounds 7]

Feeds the same ``--runs`` runs (a start each, then their outcomes reported 50 at a time, as a
worker does) to the hook's two implementations of its per-run metrics, in turn, each round:
``plain`` (per-thread numbers summed at scrape: what one process uses) and ``client``
(prometheus_client's Counter / Histogram / Gauge: what multiprocess mode must use). The clock
is this process's CPU time, so other processes on a busy machine hardly move it. Reports the
CPU microseconds per run of each (least of the rounds) and their ratio (client / plain), and
the same for 100k bare histogram observations.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from bisect import bisect_left
from collections.abc import Callable

import prometheus_client
from prometheus_client import CollectorRegistry

from duly._clock import SystemClock
from duly._records import JobRecord, Outcome
from duly.observability._prometheus import (
    DURATION_BUCKETS,
    RunCollector,
    _ClientRuns,
    _PlainRuns,
    _PlainSeries,
)

BATCH = 50


def _cpu(work: Callable[[], None]) -> float:
    gc.collect()
    gc.disable()
    try:
        began = time.process_time()
        work()
        return time.process_time() - began
    finally:
        gc.enable()


def per_run(runs: int, rounds: int) -> tuple[float, float]:
    """Least CPU seconds of ``runs`` runs through each implementation: (plain, client)."""
    records = [
        JobRecord(f"j{i}", f"t{i % 3}", "default", b"{}", "running", 1, 4, None, 0, float(i))
        for i in range(runs)
    ]
    for record in records:
        record.started_at = record.enqueued_at + 0.5
    items = [(r, Outcome(r.id, "succeeded"), None) for r in records]
    batches = [
        (records[s : s + BATCH], items[s : s + BATCH], s + 1.0) for s in range(0, runs, BATCH)
    ]

    def drive(impl: _PlainRuns | _ClientRuns) -> Callable[[], None]:
        def work() -> None:
            for started, finished, now in batches:
                impl.started(started)
                impl.finished(finished, now)

        return work

    plain, client = [], []
    for _ in range(rounds):
        runs_plain = _PlainRuns(SystemClock())
        CollectorRegistry().register(RunCollector(runs_plain))
        plain.append(_cpu(drive(runs_plain)))
        client.append(
            _cpu(drive(_ClientRuns(prometheus_client, CollectorRegistry(), SystemClock())))
        )
    return min(plain), min(client)


def observations(n: int, rounds: int) -> tuple[float, float]:
    """Least CPU seconds of ``n`` duration observations each way: (plain, client)."""
    values = [random.expovariate(10) for _ in range(n)]

    def plain() -> None:
        series = _PlainSeries()
        for value in values:
            series.duration[bisect_left(DURATION_BUCKETS, value)] += 1
            series.duration_sum += value

    def client() -> None:
        histogram = prometheus_client.Histogram(
            "d", "d", ("task", "queue"), buckets=DURATION_BUCKETS, registry=CollectorRegistry()
        )
        observe = histogram.labels("t", "q").observe
        for value in values:
            observe(value)

    times = [(_cpu(plain), _cpu(client)) for _ in range(rounds)]
    return min(t[0] for t in times), min(t[1] for t in times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    n = args.runs
    plain, client = per_run(n, args.rounds)
    print(
        f"per run (start + finish), {n} runs: plain {plain / n * 1e6:.2f} us, "
        f"prometheus_client {client / n * 1e6:.2f} us, ratio {client / plain:.2f}"
    )
    plain, client = observations(n, args.rounds)
    print(
        f"histogram observe, {n} values: plain {plain / n * 1e6:.2f} us, "
        f"prometheus_client {client / n * 1e6:.2f} us, ratio {client / plain:.2f}"
    )


if __name__ == "__main__":
    main()
