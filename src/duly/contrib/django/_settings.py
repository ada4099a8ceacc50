"""The App of a Django project, from ``settings.DULY``."""

from __future__ import annotations

from typing import Any

from duly._app import App
from duly._errors import ConfigurationError
from duly.contrib.django._connections import DjangoRegistry
from duly.contrib.django._transactions import DjangoTransactions

__all__ = ["SETTINGS", "app_from_settings"]

#: ``settings.DULY`` keys and the ``duly.App`` argument each sets (``DATABASE`` is the alias of
#: the Django database whose transactions ``on_commit=True`` follows; default "default").
SETTINGS = {
    "URL": "url",
    "NAMESPACE": "namespace",
    "RETENTION": "retention",
    "FAILED_RETENTION": "failed_retention",
    "STATS_RETENTION": "stats_retention",
    "MAX_PAYLOAD_BYTES": "max_payload_bytes",
    "MAX_LOST": "max_lost",
}


def app_from_settings(config: dict[str, Any] | None = None) -> App:
    """A ``duly.App`` from ``config`` (default ``settings.DULY``; without one, the App reads
    ``$DULY_URL``, then uses ``sqlite:///duly.db``), with Django's transactions."""
    if config is None:
        from django.conf import settings

        config = getattr(settings, "DULY", {})
    if not isinstance(config, dict):
        raise ConfigurationError(f"settings.DULY must be a dict, got {type(config).__name__}")
    unknown = sorted(set(config) - set(SETTINGS) - {"DATABASE"})
    if unknown:
        known = ", ".join([*SETTINGS, "DATABASE"])
        names = ", ".join(unknown)
        raise ConfigurationError(f"settings.DULY: unknown key(s) {names}; known: {known}")
    kwargs = {SETTINGS[name]: value for name, value in config.items() if name in SETTINGS}
    transactions = DjangoTransactions(using=config.get("DATABASE", "default"))
    app = App(**kwargs, transactions=transactions)
    # Sync tasks close Django's stale connections around each run (see _connections).
    app.registry = DjangoRegistry()
    app.tasks = app.registry.tasks
    return app
