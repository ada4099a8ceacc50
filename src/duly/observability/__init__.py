"""Watching duly from the outside: Prometheus metrics and JSON logs (PRODUCT §10).

- ``PrometheusHook``: a ``duly.Hook`` counting jobs by task, queue and outcome
  (``pip install 'duly[metrics]'``); ``duly worker --metrics-port N`` serves it.
- ``JsonFormatter``: ``duly worker --log-format json``, one JSON object per line.
"""

from duly.observability.logs import JsonFormatter
from duly.observability.prometheus import PrometheusHook, require_prometheus, serve_metrics

__all__ = ["JsonFormatter", "PrometheusHook", "require_prometheus", "serve_metrics"]
