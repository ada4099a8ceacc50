"""Shared by every test: a clean ``DULY_*`` environment and the checked service URLs
(see ``services.py`` for the rule on a missing service)."""

from __future__ import annotations

import os

import pytest
from services import POSTGRES_URL, REDIS_URL, require_service


@pytest.fixture(autouse=True)
def _scrub_duly_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's DULY_URL, DULY_APP, ... settings."""
    for name in list(os.environ):
        if name.startswith("DULY_"):
            monkeypatch.delenv(name)


@pytest.fixture
def redis_url() -> str:
    """The test Redis, checked reachable (skip locally, fail in CI)."""
    require_service("redis")
    return REDIS_URL


@pytest.fixture
def postgres_url() -> str:
    """The test PostgreSQL database, checked reachable (skip locally, fail in CI)."""
    require_service("postgres")
    return POSTGRES_URL
