"""Prometheus metrics of the jobs a process enqueues and runs, through one ``duly.Hook``.

``PrometheusHook`` counts what its App's workers (and ``enqueue`` calls) do, with labels
``task``, ``queue`` and ``outcome`` only: never a job id, key or argument, whose values are
unbounded and would blow up the series count. ``prometheus_client`` is imported when a hook is
built (``pip install 'duly[metrics]'``), so importing duly never needs it.

Under ``duly worker --processes P`` the children write prometheus_client's multiprocess files
(``$PROMETHEUS_MULTIPROC_DIR``) and the supervisor serves their sum (``serve_metrics``).
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Protocol

from duly._clock import Clock, SystemClock
from duly._errors import ConfigurationError
from duly._hooks import Finished, Hook

if TYPE_CHECKING:
    from duly._job import JobInfo
    from duly._records import EnqueueResult, JobRecord, NewJob, Outcome

__all__ = [
    "MULTIPROC_ENV",
    "OUTCOME_LABELS",
    "PrometheusHook",
    "mark_process_dead",
    "require_prometheus",
    "serve_metrics",
]

#: The variable that switches prometheus_client to multiprocess files (read at its import).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: The ``outcome`` label of ``duly_jobs_total`` for each kind of stored outcome.
OUTCOME_LABELS = {
    "succeeded": "succeeded",
    "again": "again",  # a watch's check succeeded and it checks again later
    "retry": "retried",
    "failed": "failed",
    "release": "released",  # handed back without an attempt charged (stop, rate limit, gate)
}

#: Seconds: a job from milliseconds to an hour.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
#: Seconds waited in the queue: from immediate to a day.
WAIT_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400)


def require_prometheus() -> Any:
    """The ``prometheus_client`` module; ``ConfigurationError`` naming the extra if missing."""
    try:
        import prometheus_client
    except ImportError as exc:
        raise ConfigurationError(
            "Prometheus metrics need prometheus_client: pip install 'duly[metrics]'"
        ) from exc
    return prometheus_client


class PrometheusHook(Hook):
    """Job metrics (prefix ``duly_``) registered in ``registry`` (prometheus_client's default
    registry when None). Add it with ``app.add_hook(PrometheusHook())``.

    - ``duly_jobs_enqueued_total{task,queue}``: jobs stored by enqueue;
      ``duly_jobs_deduplicated_total{task,queue}``: enqueues that found a unique holder
    - ``duly_jobs_total{task,queue,outcome}``: stored outcomes of runs (``succeeded``,
      ``failed``, ``retried``, ``released``, ``again``)
    - ``duly_job_duration_seconds{task,queue}``: histogram, start of a run to its outcome
    - ``duly_job_queue_wait_seconds{task,queue}``: histogram, start - max(enqueued, scheduled)
    - ``duly_jobs_in_flight{task,queue}``: gauge, runs started and not yet ended
    - ``duly_jobs_recovered_total``: jobs taken back from dead workers
    - ``duly_jobs_quarantined_total{task,queue}``: jobs that lost their worker too often
    - ``duly_jobs_expired_total{task,queue}``: jobs that expired (``expires=``) before they
      started, ended cancelled by a claim
    """

    def __init__(self, registry: Any = None, *, clock: Clock | None = None) -> None:
        prometheus = require_prometheus()
        if registry is None:
            registry = prometheus.REGISTRY
        self.registry = registry
        self.clock = clock or SystemClock()
        labels = ("task", "queue")
        kw: dict[str, Any] = {"registry": registry}
        self.enqueued_total = prometheus.Counter(
            "duly_jobs_enqueued", "Jobs stored by enqueue.", labels, **kw
        )
        self.deduplicated_total = prometheus.Counter(
            "duly_jobs_deduplicated",
            "Enqueues that found an active job holding the unique key.",
            labels,
            **kw,
        )
        self.recovered_total = prometheus.Counter(
            "duly_jobs_recovered", "Jobs taken back from dead workers (lapsed leases).", **kw
        )
        self.quarantined_total = prometheus.Counter(
            "duly_jobs_quarantined", "Jobs failed for losing their worker too often.", labels, **kw
        )
        self.expired_total = prometheus.Counter(
            "duly_jobs_expired",
            "Jobs that expired before they started (cancelled, never run).",
            labels,
            **kw,
        )
        # The per-run metrics (two per job on a worker's hot path). Under multiprocess mode
        # they are prometheus_client's own Counter / Histogram / Gauge, which write the files
        # the supervisor reads. In one process they are plain numbers each thread adds to
        # without a lock, exposed through prometheus_client's collector API (RunCollector):
        # measured with `python -m bench.metrics_types` (100k runs, CPU time, least of 7
        # rounds, one run on this 2-core machine), its own types cost 3.5 us a run against
        # 1.1 us (ratio 3.1; a bare Histogram.observe 0.73 us against 0.11 us, ratio 6.8),
        # while a worker spends ~46 us of CPU a job (bench.metrics_cost): +5 % per job, the
        # whole of issue 17's budget for metrics. test_app_metrics checks both expose the same.
        if prometheus.values.ValueClass is prometheus.values.MutexValue:
            self._runs: _Runs = _PlainRuns(self.clock)
            registry.register(RunCollector(self._runs))
        else:
            self._runs = _ClientRuns(prometheus, registry, self.clock)

    def enqueued(self, jobs: Sequence[NewJob], results: Sequence[EnqueueResult]) -> None:
        """Count stored and deduplicated enqueues."""
        for job, result in zip(jobs, results, strict=False):
            counter = self.deduplicated_total if result.deduplicated else self.enqueued_total
            counter.labels(job.task, job.queue).inc()

    def started(self, record: JobRecord) -> None:
        """Observe the queue wait and count the run in flight."""
        self._runs.started((record,))

    def started_batch(self, records: Sequence[JobRecord]) -> None:
        """``started`` for the runs of one claim (the worker calls this instead, once per
        claim)."""
        self._runs.started(records)

    def finished(self, record: JobRecord, outcome: Outcome, error: BaseException | None) -> None:
        """Count the outcome, observe the run's duration, end it in flight."""
        self._runs.finished(((record, outcome, error),), self.clock.now())

    def finished_batch(self, items: Sequence[Finished]) -> None:
        """``finished`` for the runs of one report (the worker calls this instead, once per
        batch: their outcomes were stored by one call, so one clock reading times them all)."""
        self._runs.finished(items, self.clock.now())

    def abandoned(self, record: JobRecord, outcome: Outcome) -> None:
        self._runs.end(record.id)  # the run ended here, whatever became of its outcome

    def recovered(self, job_id: str, requeued: bool) -> None:
        """Count a job taken back from a dead worker (its run ended, here if it ran here)."""
        self.recovered_total.inc()
        self._runs.end(job_id)

    def quarantined(self, job: JobInfo, error: BaseException) -> None:
        """Count a quarantined job."""
        self.quarantined_total.labels(job.task, job.queue).inc()

    def expired(self, record: JobRecord) -> None:
        """Count a job that expired before it started."""
        self.expired_total.labels(record.task, record.queue).inc()


def _wait(record: JobRecord, clock: Clock) -> float:
    """Seconds ``record`` waited to start: start - max(enqueued_at, scheduled_for), >= 0."""
    start = record.started_at
    if start is None:
        start = clock.now()
    ready, scheduled = record.enqueued_at, record.scheduled_for
    if scheduled is not None and scheduled > ready:
        ready = scheduled
    return start - ready if start > ready else 0.0


_RUN_FAMILIES = (
    ("duly_jobs", "Stored outcomes of job runs."),
    ("duly_job_duration_seconds", "Seconds from a run's start to its stored outcome."),
    (
        "duly_job_queue_wait_seconds",
        "Seconds a job waited to start: start - max(enqueued_at, scheduled_for).",
    ),
    ("duly_jobs_in_flight", "Runs started and not yet ended."),
)


class _Runs(Protocol):
    """The per-run metrics. Runs counted in flight are kept by job id (never a label): a run
    ends once even if this hook saw its start but not its end (or the reverse), and the gauge
    never drifts."""

    def started(self, records: Sequence[JobRecord]) -> None: ...
    def finished(self, items: Sequence[Finished], now: float) -> None: ...
    def end(self, job_id: str) -> None: ...


class _PlainSeries:
    """One thread's counts of one (task, queue): plain numbers, written by that thread only
    (``_PlainRuns`` adds to them)."""

    __slots__ = ("duration", "duration_sum", "outcomes", "wait", "wait_sum")

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        self.duration = [0] * (len(DURATION_BUCKETS) + 1)  # the last: over every bound
        self.duration_sum = 0.0
        self.wait = [0] * (len(WAIT_BUCKETS) + 1)
        self.wait_sum = 0.0


class _PlainRuns:
    """Per-thread series, so no increment needs a lock; a scrape sums the threads'. A run's
    (task, queue) joins ``running`` by job id while it runs, which the scrape counts for the
    in-flight gauge."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._local = threading.local()
        self._tables: list[dict[tuple[str, str], _PlainSeries]] = []
        self._lock = threading.Lock()  # taken once per thread, and by scrapes
        self.running: dict[str, tuple[str, str]] = {}

    def started(self, records: Sequence[JobRecord]) -> None:
        # _wait inlined: this runs once per job on the worker's event loop.
        running = self.running
        now = None
        key: tuple[str, str] | None = None
        series = None
        for record in records:
            start = record.started_at
            if start is None:
                start = now = self.clock.now() if now is None else now
            ready, scheduled = record.enqueued_at, record.scheduled_for
            if scheduled is not None and scheduled > ready:
                ready = scheduled
            seconds = start - ready if start > ready else 0.0
            if key is None or series is None or record.task != key[0] or record.queue != key[1]:
                key = (record.task, record.queue)
                series = self.series(*key)
            series.wait[bisect_left(WAIT_BUCKETS, seconds)] += 1
            series.wait_sum += seconds
            running.setdefault(record.id, key)

    def finished(self, items: Sequence[Finished], now: float) -> None:
        running = self.running
        task = queue = None
        series = None
        for record, outcome, _ in items:
            running.pop(record.id, None)
            if series is None or record.task != task or record.queue != queue:
                task, queue = record.task, record.queue
                series = self.series(task, queue)
            outcomes, kind = series.outcomes, outcome.kind
            outcomes[kind] = outcomes.get(kind, 0) + 1
            started = record.started_at
            if started is not None:
                duration = now - started if now > started else 0.0
                series.duration[bisect_left(DURATION_BUCKETS, duration)] += 1
                series.duration_sum += duration

    def end(self, job_id: str) -> None:
        self.running.pop(job_id, None)

    def in_flight(self) -> dict[tuple[str, str], int]:
        """Runs in flight by (task, queue)."""
        counts: dict[tuple[str, str], int] = {}
        for key in list(self.running.values()):  # one atomic copy: starts go on meanwhile
            counts[key] = counts.get(key, 0) + 1
        return counts

    def series(self, task: str, queue: str) -> _PlainSeries:
        """This thread's series of (task, queue)."""
        try:
            table: dict[tuple[str, str], _PlainSeries] = self._local.table
        except AttributeError:  # this thread's first run
            table = self._local.table = {}
            with self._lock:
                self._tables.append(table)
        found = table.get((task, queue))
        if found is None:
            found = table[(task, queue)] = _PlainSeries()
        return found

    def snapshot(self) -> dict[tuple[str, str], list[_PlainSeries]]:
        """Every thread's series, by (task, queue)."""
        with self._lock:
            tables = list(self._tables)
        merged: dict[tuple[str, str], list[_PlainSeries]] = {}
        for table in tables:
            for key, series in list(table.items()):
                merged.setdefault(key, []).append(series)
        return merged


class RunCollector:
    """Exposes ``_PlainRuns`` as the four per-run families (prometheus_client's Collector)."""

    def __init__(self, runs: _PlainRuns) -> None:
        self._runs = runs

    def describe(self) -> list[Any]:
        return list(self._families())

    def collect(self) -> list[Any]:
        families = self._families()
        jobs, duration, wait, in_flight = families
        runs = self._runs
        flying = runs.in_flight()
        snapshot = runs.snapshot()
        for task, queue in sorted(snapshot.keys() | flying.keys()):
            parts = snapshot.get((task, queue), [])
            outcomes: dict[str, int] = {}
            for part in parts:
                for kind, n in list(part.outcomes.items()):
                    outcomes[kind] = outcomes.get(kind, 0) + n
            for kind, n in sorted(outcomes.items()):
                jobs.add_metric([task, queue, OUTCOME_LABELS.get(kind, kind)], n)
            for family, bounds, counts, total in (
                (duration, DURATION_BUCKETS, "duration", "duration_sum"),
                (wait, WAIT_BUCKETS, "wait", "wait_sum"),
            ):
                per_bucket = [
                    sum(getattr(p, counts)[i] for p in parts) for i in range(len(bounds) + 1)
                ]
                cumulative = list(accumulate(per_bucket))
                buckets = [(_le(b), float(c)) for b, c in zip(bounds, cumulative, strict=False)]
                buckets.append(("+Inf", float(cumulative[-1])))
                family.add_metric([task, queue], buckets, sum(getattr(p, total) for p in parts))
            in_flight.add_metric([task, queue], flying.get((task, queue), 0))
        return list(families)

    @staticmethod
    def _families() -> tuple[Any, Any, Any, Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        (jobs, jobs_doc), (duration, duration_doc), (wait, wait_doc), (flying, flying_doc) = (
            _RUN_FAMILIES
        )
        labels = ["task", "queue"]
        return (
            CounterMetricFamily(jobs, jobs_doc, labels=[*labels, "outcome"]),
            HistogramMetricFamily(duration, duration_doc, labels=labels),
            HistogramMetricFamily(wait, wait_doc, labels=labels),
            GaugeMetricFamily(flying, flying_doc, labels=labels),
        )


def _le(bound: float) -> str:
    """A bucket bound as prometheus_client writes it (``0.5``, ``1.0``)."""
    return repr(float(bound))


class _ClientSeries:
    """One (task, queue) in prometheus_client's own metrics (multiprocess mode)."""

    __slots__ = ("_runs", "duration", "in_flight", "outcomes", "queue", "queue_wait", "task")

    def __init__(self, runs: _ClientRuns, task: str, queue: str) -> None:
        self.queue_wait = runs.queue_wait.labels(task, queue)
        self.duration = runs.duration.labels(task, queue)
        self.in_flight = runs.in_flight.labels(task, queue)
        self.outcomes: dict[str, Any] = {}
        self._runs, self.task, self.queue = runs, task, queue

    def ran(self, kind: str, duration: float | None) -> None:
        counter = self.outcomes.get(kind)
        if counter is None:
            label = OUTCOME_LABELS.get(kind, kind)
            counter = self.outcomes[kind] = self._runs.jobs_total.labels(
                self.task, self.queue, label
            )
        counter.inc()
        if duration is not None:
            self.duration.observe(duration)


class _ClientRuns:
    """The per-run metrics as prometheus_client metrics (their values in multiprocess files)."""

    def __init__(self, prometheus: Any, registry: Any, clock: Clock) -> None:
        (jobs, jobs_doc), (duration, duration_doc), (wait, wait_doc), (flying, flying_doc) = (
            _RUN_FAMILIES
        )
        labels = ("task", "queue")
        kw: dict[str, Any] = {"registry": registry}
        self.jobs_total = prometheus.Counter(jobs, jobs_doc, (*labels, "outcome"), **kw)
        self.duration = prometheus.Histogram(
            duration, duration_doc, labels, buckets=DURATION_BUCKETS, **kw
        )
        self.queue_wait = prometheus.Histogram(wait, wait_doc, labels, buckets=WAIT_BUCKETS, **kw)
        self.in_flight = prometheus.Gauge(
            flying, flying_doc, labels, multiprocess_mode="livesum", **kw
        )
        self.clock = clock
        self._series: dict[tuple[str, str], _ClientSeries] = {}
        self._running: dict[str, _ClientSeries] = {}

    def series(self, task: str, queue: str) -> _ClientSeries:
        found = self._series.get((task, queue))
        if found is None:
            found = self._series[(task, queue)] = _ClientSeries(self, task, queue)
        return found

    def started(self, records: Sequence[JobRecord]) -> None:
        for record in records:
            series = self.series(record.task, record.queue)
            series.queue_wait.observe(_wait(record, self.clock))
            if record.id not in self._running:
                self._running[record.id] = series
                series.in_flight.inc()

    def finished(self, items: Sequence[Finished], now: float) -> None:
        for record, outcome, _ in items:
            series = self._running.pop(record.id, None)
            if series is None:
                series = self.series(record.task, record.queue)
            else:
                series.in_flight.dec()
            started = record.started_at
            series.ran(outcome.kind, None if started is None else max(now - started, 0.0))

    def end(self, job_id: str) -> None:
        series = self._running.pop(job_id, None)
        if series is not None:
            series.in_flight.dec()


def serve_metrics(
    port: int, host: str = "127.0.0.1", *, multiprocess_dir: str | None = None
) -> Any:
    """Serve ``/metrics`` over HTTP on ``host:port`` from a daemon thread; returns the server
    (``shutdown()`` stops it). With ``multiprocess_dir`` (default ``$PROMETHEUS_MULTIPROC_DIR``),
    serve the sum of the processes that write there (prometheus_client's multiprocess mode);
    else this process's default registry.
    """
    prometheus = require_prometheus()
    registry = prometheus.REGISTRY
    multiprocess_dir = multiprocess_dir or os.environ.get(MULTIPROC_ENV) or None
    if multiprocess_dir is not None:
        from prometheus_client import multiprocess

        registry = prometheus.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
    try:
        server, _thread = prometheus.start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigurationError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
    return server


def mark_process_dead(pid: int, multiprocess_dir: str) -> None:
    """Forget the live gauges (``duly_jobs_in_flight``) of a dead process writing to
    ``multiprocess_dir``: its counters and histograms still count, its runs no longer fly."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, multiprocess_dir)  # type: ignore[no-untyped-call]
