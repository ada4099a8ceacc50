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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from duly.clock import Clock, SystemClock
from duly.errors import ConfigurationError
from duly.hooks import Hook

if TYPE_CHECKING:
    from duly.job import JobInfo
    from duly.records import EnqueueResult, JobRecord, NewJob, Outcome

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
        self.jobs_total = prometheus.Counter(
            "duly_jobs", "Stored outcomes of job runs.", (*labels, "outcome"), **kw
        )
        self.duration = prometheus.Histogram(
            "duly_job_duration_seconds",
            "Seconds from a run's start to its stored outcome.",
            labels,
            buckets=DURATION_BUCKETS,
            **kw,
        )
        self.queue_wait = prometheus.Histogram(
            "duly_job_queue_wait_seconds",
            "Seconds a job waited to start: start - max(enqueued_at, scheduled_for).",
            labels,
            buckets=WAIT_BUCKETS,
            **kw,
        )
        self.in_flight = prometheus.Gauge(
            "duly_jobs_in_flight",
            "Runs started and not yet ended.",
            labels,
            multiprocess_mode="livesum",
            **kw,
        )
        self.recovered_total = prometheus.Counter(
            "duly_jobs_recovered", "Jobs taken back from dead workers (lapsed leases).", **kw
        )
        self.quarantined_total = prometheus.Counter(
            "duly_jobs_quarantined", "Jobs failed for losing their worker too often.", labels, **kw
        )
        # Runs counted in flight, by job id (kept here, never a label): a run ends once even if
        # this hook saw its start but not its end (or the reverse), and the gauge never drifts.
        self._running: dict[str, _Series] = {}
        # The labelled children of each (task, queue): labels() takes a lock and builds a key
        # on every call, too dear twice per job on a worker's hot path.
        self._series: dict[tuple[str, str], _Series] = {}
        # One process's values live in this process: the in-flight gauges read a plain count
        # when scraped instead of taking a lock twice per job. Multiprocess values live in
        # files the supervisor reads, so there each start and end writes its gauge.
        self._counted_here = prometheus.values.ValueClass is prometheus.values.MutexValue

    def _of(self, task: str, queue: str) -> _Series:
        series = self._series.get((task, queue))
        if series is None:
            series = self._series[(task, queue)] = _Series(self, task, queue)
        return series

    def enqueued(self, jobs: Sequence[NewJob], results: Sequence[EnqueueResult]) -> None:
        """Count stored and deduplicated enqueues."""
        for job, result in zip(jobs, results, strict=False):
            counter = self.deduplicated_total if result.deduplicated else self.enqueued_total
            counter.labels(job.task, job.queue).inc()

    def started(self, record: JobRecord) -> None:
        """Observe the queue wait and count the run in flight."""
        start = record.started_at if record.started_at is not None else self.clock.now()
        ready = max(record.enqueued_at, record.scheduled_for or 0.0)
        series = self._series.get((record.task, record.queue)) or self._of(
            record.task, record.queue
        )
        series.queue_wait.observe(max(start - ready, 0.0))
        if record.id not in self._running:
            self._running[record.id] = series
            series.began()

    def finished(self, record: JobRecord, outcome: Outcome, error: BaseException | None) -> None:
        """Count the outcome, observe the run's duration, end it in flight."""
        series = self._running.pop(record.id, None)
        if series is None:  # its start was not seen here
            series = self._of(record.task, record.queue)
        else:
            series.ended()
        counter = series.outcomes.get(outcome.kind) or series.outcome(outcome.kind)
        counter.inc()
        if record.started_at is not None:
            series.duration.observe(max(self.clock.now() - record.started_at, 0.0))

    def abandoned(self, record: JobRecord, outcome: Outcome) -> None:
        self._end(record.id)  # the run ended here, whatever became of its outcome

    def recovered(self, job_id: str, requeued: bool) -> None:
        """Count a job taken back from a dead worker (its run ended, here if it ran here)."""
        self.recovered_total.inc()
        self._end(job_id)

    def quarantined(self, job: JobInfo, error: BaseException) -> None:
        """Count a quarantined job."""
        self.quarantined_total.labels(job.task, job.queue).inc()

    def _end(self, job_id: str) -> None:
        series = self._running.pop(job_id, None)
        if series is not None:
            series.ended()


class _Series:
    """The metrics of one (task, queue), resolved once."""

    __slots__ = (
        "_hook",
        "began",
        "duration",
        "ended",
        "outcomes",
        "queue",
        "queue_wait",
        "running",
        "task",
    )

    def __init__(self, hook: PrometheusHook, task: str, queue: str) -> None:
        self._hook, self.task, self.queue = hook, task, queue
        self.queue_wait = hook.queue_wait.labels(task, queue)
        self.duration = hook.duration.labels(task, queue)
        #: The counter of stored outcomes of each kind seen.
        self.outcomes: dict[str, Any] = {}
        in_flight = hook.in_flight.labels(task, queue)
        self.running = 0
        self.began: Callable[[], None]
        self.ended: Callable[[], None]
        if hook._counted_here:
            in_flight.set_function(lambda: self.running)
            self.began, self.ended = self._began, self._ended
        else:
            self.began, self.ended = in_flight.inc, in_flight.dec

    def _began(self) -> None:
        self.running += 1

    def _ended(self) -> None:
        self.running -= 1

    def outcome(self, kind: str) -> Any:
        """The counter of stored outcomes of this kind."""
        counter = self.outcomes.get(kind)
        if counter is None:
            label = OUTCOME_LABELS.get(kind, kind)
            counter = self.outcomes[kind] = self._hook.jobs_total.labels(
                self.task, self.queue, label
            )
        return counter


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
