"""``settings.DULY`` → the project's App (``duly.contrib.django.app_from_settings``); the
whole integration runs in tests/examples/test_django_shop.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import duly
from duly.contrib.django import DjangoTransactions, app_from_settings


def test_settings_build_the_app(tmp_path: Path) -> None:
    app = app_from_settings(
        {
            "URL": f"sqlite:///{tmp_path}/jobs.db",
            "RETENTION": 60,
            "MAX_LOST": 5,
            "DATABASE": "orders",
        }
    )
    try:
        assert app.url == f"sqlite:///{tmp_path}/jobs.db"
        assert (app.retention, app.max_lost) == (60.0, 5)
        assert isinstance(app.transactions, DjangoTransactions)
        assert app.transactions.using == "orders"
    finally:
        app.close()


def test_bad_settings_are_named() -> None:
    with pytest.raises(duly.ConfigurationError, match=r"unknown key\(s\) RETRIES; known: URL"):
        app_from_settings({"URL": "sqlite:///x.db", "RETRIES": 3})
    with pytest.raises(duly.ConfigurationError, match="must be a dict"):
        app_from_settings(["URL"])  # type: ignore[arg-type]
    with pytest.raises(duly.ConfigurationError, match=r"mysql"):
        app_from_settings({"URL": "mysql://db/app"})


def test_a_plain_connection_passes_through() -> None:
    """Only Django's connection objects are unwrapped (a psycopg connection passes as is)."""
    marker = object()
    assert DjangoTransactions().driver_connection(marker) is marker


def test_sync_tasks_are_registered_once_and_async_ones_as_they_are(tmp_path: Path) -> None:
    app = app_from_settings({"URL": f"sqlite:///{tmp_path}/jobs.db"})

    def report(n: int) -> int:
        return n

    async def fetch(n: int) -> int:
        return n

    try:
        task = app.task(name="t.report")(report)
        assert app.task(name="t.report")(report) is not None  # the same function again: fine
        assert app.tasks is app.registry.tasks and app.tasks["t.report"].fn is task.fn
        assert task(3) == 3 and task.__wrapped__ is not report  # wrapped (see _connections)
        assert app.task(fetch).fn is fetch
    finally:
        app.close()
