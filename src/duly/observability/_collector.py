"""Backend-wide gauges: what the whole backend holds, read when Prometheus scrapes.

A worker's ``PrometheusHook`` counts what that worker did; the gauges here describe the backend
every worker shares (queue depth, the oldest wait, parked and scheduled jobs, live workers), so
any one process can serve them: ``app.asgi()``'s ``/metrics``, or your own registry::

    from prometheus_client import REGISTRY
    from duly.observability import BackendCollector

    REGISTRY.register(BackendCollector(app))

Each scrape reads ``queue_stats`` and ``workers`` from the backend (two reads, whatever the
number of jobs on Redis; one aggregate over the active jobs on SQL backends). Labels are
``queue`` (and ``freshness`` for the freshness gauges: one read of the stale scopes' count and
one of the stalest scope per ``app.freshness``), never ids, keys or scopes. A backend that does
not answer gives ``duly_backend_up 0`` and no other gauge, so a dashboard shows a gap rather
than stale numbers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from duly._errors import BackendUnavailable
from duly._freshness import FreshnessGauges
from duly._records import QueueStats, WorkerRecord
from duly.observability._prometheus import require_prometheus

if TYPE_CHECKING:
    from duly._app import App

__all__ = [
    "BACKEND_METRICS",
    "DEFAULT_LEASE",
    "FRESHNESS_METRICS",
    "SCHEDULE_METRICS",
    "BackendCollector",
    "BackendSnapshot",
    "families",
    "metrics_text",
    "metrics_text_async",
    "read_snapshot",
    "read_snapshot_blocking",
]

log = logging.getLogger("duly.observability")

#: The lease a worker is assumed to have when its record does not say (``Worker(lease=)``).
DEFAULT_LEASE = 30.0

#: Every metric family ``BackendCollector`` exports: name -> help.
BACKEND_METRICS: dict[str, str] = {
    "duly_backend_up": "1 if the backend answered this scrape, else 0 (no other duly_ gauge).",
    "duly_queue_depth": "Queued jobs waiting to start (parked ones included).",
    "duly_queue_parked": "Queued jobs parked behind a full mutex or concurrency limit.",
    "duly_queue_scheduled": "Jobs scheduled for later or waiting to retry.",
    "duly_queue_running": "Jobs running now.",
    "duly_queue_paused": "1 while the queue is paused (app.pause): workers start none of its jobs.",
    "duly_queue_oldest_age_seconds": (
        "Seconds the longest-waiting claimable job has waited since it became ready "
        "(max(enqueued_at, scheduled_for)); 0 when none waits. Parked jobs are not counted."
    ),
    "duly_workers_alive": "Worker processes seen within their lease.",
    "duly_workers_registered": "Worker processes registered, alive or not yet purged.",
}

#: The families of an App's freshness (``app.freshness``; labelled ``freshness``), exported
#: when it has one: name -> help.
FRESHNESS_METRICS: dict[str, str] = {
    "duly_freshness_sla_breaches": (
        "Scopes of a freshness whose score is >= 1: stale, or never synced (PRODUCT §7)."
    ),
    "duly_freshness_staleness_seconds": (
        "Seconds since the last successful sync of the freshness's scope that became stale "
        "earliest (+Inf if it never synced; 0 with no scope)."
    ),
    "duly_freshness_score": (
        "Staleness / max_staleness of that scope (+Inf if it never synced; 0 with no scope)."
    ),
}


#: The family of an App's periodic schedules (labelled ``schedule``), exported when it has
#: one: name -> help.
SCHEDULE_METRICS: dict[str, str] = {
    "duly_schedule_skipped_ticks": (
        "Ticks of a periodic schedule skipped because its previous job still waited or ran "
        "(overlap='skip'), as stored: counted once however many schedulers saw them."
    ),
}


@dataclass(frozen=True, slots=True)
class BackendSnapshot:
    """What one scrape read: the queues and workers at ``at`` (the App's clock), or nothing
    if the backend did not answer (``up`` False)."""

    at: float
    up: bool = True
    queues: Sequence[QueueStats] = field(default_factory=tuple)
    workers: Sequence[WorkerRecord] = field(default_factory=tuple)
    #: One per ``app.freshness(...)`` of the App (duly.freshness).
    freshness: Sequence[FreshnessGauges] = field(default_factory=tuple)
    #: ``(schedule name, skipped ticks)`` per schedule of the App (``app.schedules()``).
    skipped_ticks: Sequence[tuple[str, int]] = field(default_factory=tuple)

    def alive_workers(self) -> int:
        """Workers whose last heartbeat is within their lease (a dead one has missed three)."""
        return sum(1 for w in self.workers if self.at - w.last_seen <= _lease_of(w))


def _lease_of(worker: WorkerRecord) -> float:
    lease = worker.info.get("lease")
    return float(lease) if isinstance(lease, int | float) else DEFAULT_LEASE


async def read_snapshot(app: App) -> BackendSnapshot:
    """Read the queues and workers of ``app``'s backend (``up=False`` if it did not answer)."""
    at = app.clock.now()
    try:
        queues, workers = await asyncio.gather(app.queues_async(), app.workers_async())
        fresh = [await mirror.gauges_async() for mirror in app.mirrors.values()]
        skipped = [(s.name, s.skipped) for s in await app.schedules_async()]
    except BackendUnavailable as exc:
        return _down(at, exc)
    return BackendSnapshot(
        at, queues=queues, workers=workers, freshness=fresh, skipped_ticks=skipped
    )


def read_snapshot_blocking(app: App) -> BackendSnapshot:
    """Blocking twin of ``read_snapshot``, callable from any thread."""
    at = app.clock.now()
    try:
        fresh = [mirror.gauges() for mirror in app.mirrors.values()]
        skipped = [(s.name, s.skipped) for s in app.schedules()]
        return BackendSnapshot(
            at, queues=app.queues(), workers=app.workers(), freshness=fresh, skipped_ticks=skipped
        )
    except BackendUnavailable as exc:
        return _down(at, exc)


def _down(at: float, exc: BackendUnavailable) -> BackendSnapshot:
    log.warning("metrics: the backend did not answer: %s", exc)
    return BackendSnapshot(at, up=False)


def families(snapshot: BackendSnapshot) -> list[Any]:
    """The Prometheus metric families of ``snapshot`` (``BACKEND_METRICS``, in that order,
    then ``FRESHNESS_METRICS`` if the App has a freshness, ``SCHEDULE_METRICS`` if it has a
    schedule)."""
    made = {name: _empty(name, text) for name, text in BACKEND_METRICS.items()}
    made["duly_backend_up"].add_metric([], 1.0 if snapshot.up else 0.0)
    if not snapshot.up:
        return [made["duly_backend_up"]]
    for queue in snapshot.queues:
        label = [queue.name]
        made["duly_queue_depth"].add_metric(label, queue.queued)
        made["duly_queue_parked"].add_metric(label, queue.parked)
        made["duly_queue_scheduled"].add_metric(label, queue.scheduled)
        made["duly_queue_running"].add_metric(label, queue.running)
        made["duly_queue_paused"].add_metric(label, 1.0 if queue.paused else 0.0)
        waited = 0.0 if queue.oldest_ready_at is None else snapshot.at - queue.oldest_ready_at
        made["duly_queue_oldest_age_seconds"].add_metric(label, max(waited, 0.0))
    made["duly_workers_alive"].add_metric([], snapshot.alive_workers())
    made["duly_workers_registered"].add_metric([], len(snapshot.workers))
    if snapshot.freshness:
        made.update((name, _empty(name, text)) for name, text in FRESHNESS_METRICS.items())
    for gauges in snapshot.freshness:
        label = [gauges.name]
        made["duly_freshness_sla_breaches"].add_metric(label, gauges.breaches)
        made["duly_freshness_staleness_seconds"].add_metric(label, gauges.staleness)
        made["duly_freshness_score"].add_metric(label, gauges.score)
    if snapshot.skipped_ticks:
        made.update((name, _empty(name, text)) for name, text in SCHEDULE_METRICS.items())
    for name, count in snapshot.skipped_ticks:
        made["duly_schedule_skipped_ticks"].add_metric([name], count)
    return list(made.values())


class BackendCollector:
    """A prometheus_client collector of ``app``'s backend-wide gauges (``BACKEND_METRICS``);
    register it in any registry: ``registry.register(BackendCollector(app))``.

    ``collect`` reads the backend through the App's sync calls, so it works from
    prometheus_client's own HTTP server thread as from any other; in async code, render with
    ``await metrics_text_async(app)`` instead, which never blocks the event loop.
    """

    def __init__(self, app: App) -> None:
        require_prometheus()
        self.app = app

    def describe(self) -> Iterable[Any]:
        """The families without samples: registering reads nothing from the backend."""
        return [_empty(name, text) for name, text in BACKEND_METRICS.items()]

    def collect(self) -> Iterable[Any]:
        """Read the backend now and yield its gauges."""
        yield from families(read_snapshot_blocking(self.app))


class _Snapshotted:
    """A collector that yields the families of a snapshot already read."""

    def __init__(self, snapshot: BackendSnapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterable[Any]:
        return families(self.snapshot)


def _empty(name: str, text: str) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    if name.startswith("duly_freshness_"):
        return GaugeMetricFamily(name, text, labels=["freshness"])
    if name.startswith("duly_schedule_"):
        return GaugeMetricFamily(name, text, labels=["schedule"])
    return GaugeMetricFamily(name, text, labels=["queue"] if "_queue_" in name else None)


def _render(snapshot: BackendSnapshot, extra: Any) -> bytes:
    prometheus = require_prometheus()
    registry = prometheus.CollectorRegistry(auto_describe=False)
    registry.register(_Snapshotted(snapshot))
    text: bytes = prometheus.generate_latest(registry)
    if extra is not None:
        text += prometheus.generate_latest(extra)
    return text


def metrics_text(app: App, registry: Any = None) -> bytes:
    """The Prometheus text exposition of ``app``'s backend-wide gauges, followed by
    ``registry``'s metrics if given (e.g. a ``PrometheusHook``'s)."""
    return _render(read_snapshot_blocking(app), registry)


async def metrics_text_async(app: App, registry: Any = None) -> bytes:
    """Async twin of ``metrics_text`` (for ``/metrics`` of an ASGI app)."""
    return _render(await read_snapshot(app), registry)
