"""Watching duly from the outside: Prometheus metrics and JSON logs (PRODUCT §10).

- ``PrometheusHook``: a ``duly.Hook`` counting jobs by task, queue and outcome
  (``pip install 'duly[metrics]'``); ``duly worker --metrics-port N`` serves it.
- ``BackendCollector``: backend-wide gauges (queue depth, oldest wait, parked, scheduled,
  running, workers alive; per ``app.freshness``: SLA breaches, the stalest scope's staleness
  and score; per schedule: its skipped ticks) for any prometheus_client registry;
  ``metrics_text(app)`` / ``await metrics_text_async(app)`` render them as a ``/metrics`` body.
- ``JsonFormatter``: ``duly worker --log-format json``, one JSON object per line.
- ``OtelHook``: OpenTelemetry spans, a consumer span per run linked to its enqueue's producer
  span (``pip install 'duly[otel]'``).
- ``SentryHook``: failed jobs reported to Sentry with their context, secret arguments redacted
  (``pip install 'duly[sentry]'``).

docs/observability.md has every metric, the Grafana dashboard and the alert rules.
"""

from duly.observability._collector import (
    BACKEND_METRICS,
    FRESHNESS_METRICS,
    SCHEDULE_METRICS,
    BackendCollector,
    BackendSnapshot,
    metrics_text,
    metrics_text_async,
)
from duly.observability._logs import JsonFormatter
from duly.observability._otel import OtelHook
from duly.observability._prometheus import PrometheusHook, require_prometheus, serve_metrics
from duly.observability._sentry import SentryHook

__all__ = [
    "BACKEND_METRICS",
    "FRESHNESS_METRICS",
    "SCHEDULE_METRICS",
    "BackendCollector",
    "BackendSnapshot",
    "JsonFormatter",
    "OtelHook",
    "PrometheusHook",
    "SentryHook",
    "metrics_text",
    "metrics_text_async",
    "require_prometheus",
    "serve_metrics",
]
