"""duly in a Django project (Django >= 4.2; PostgreSQL through psycopg 3).

settings.py::

    INSTALLED_APPS = [..., "duly.contrib.django"]
    DULY = {"URL": "postgresql://app@db/app"}      # or redis://..., sqlite:///jobs.db

tasks.py of any installed app (imported when Django starts, like models.py)::

    from duly.contrib.django import app

    @app.task(retries=3)
    def send_receipt(order_id: int) -> None: ...

In a view::

    with transaction.atomic():
        order = Order.objects.create(...)
        # PostgreSQL: stored by this transaction, so the job exists iff it commits
        send_receipt.options(connection=django.db.connection).enqueue(order.id)
        # any backend: enqueued by transaction.on_commit, after the commit
        send_receipt.options(on_commit=True).enqueue(order.id)

Run the jobs with ``python manage.py duly worker`` (every ``duly`` command works the same way
through ``manage.py duly ...``). The dashboard and HTTP API under ``/jobs/``, in asgi.py::

    application = with_dashboard(get_asgi_application(), path="/jobs")
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from duly.contrib.django._asgi import with_dashboard
from duly.contrib.django._settings import app_from_settings
from duly.contrib.django._transactions import DjangoTransactions

if TYPE_CHECKING:
    from duly._app import App

__all__ = ["DjangoTransactions", "app", "app_from_settings", "get_app", "with_dashboard"]

_lock = threading.RLock()
_app: App | None = None


def get_app() -> App:
    """The project's App, built once per process from ``settings.DULY`` (Django is set up
    first if it is not yet, as in a worker process started by ``duly worker``)."""
    global _app
    with _lock:
        if _app is None:
            # Setting Django up imports the tasks modules, which get the App: re-entrantly.
            _setup_django()
        if _app is None:
            _app = app_from_settings()
        return _app


def _setup_django() -> None:
    import django
    from django.apps import apps

    # A ``duly worker`` child process imports this module without Django having started;
    # during Django's own start-up (a tasks module imported by ready()) it is already loading.
    if not apps.ready and not apps.loading:
        django.setup()


def __getattr__(name: str) -> Any:
    # ``from duly.contrib.django import app``: built on first use, once settings are loaded.
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    app: App
