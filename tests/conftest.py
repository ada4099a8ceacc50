"""Shared by every test: a clean ``DULY_*`` environment and checks for the backing services.

A service that is not reachable skips the tests that need it on a developer's machine and fails
them when the ``CI`` environment variable is set, so CI never passes by skipping everything (as
dramatiq's ``check_redis`` does).
"""

from __future__ import annotations

import functools
import os

import pytest

REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(autouse=True)
def _scrub_duly_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's DULY_URL, DULY_APP, ... settings."""
    for name in list(os.environ):
        if name.startswith("DULY_"):
            monkeypatch.delenv(name)


@functools.cache
def _redis_problem() -> str | None:
    try:
        import redis
    except ImportError as exc:
        return f"redis-py is not installed ({exc})"
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except Exception as exc:
        return f"Redis at {REDIS_URL} is not reachable ({exc!r})"
    finally:
        client.close()
    return None


@functools.cache
def _postgres_problem() -> str | None:
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except Exception as exc:
        return f"PostgreSQL at {POSTGRES_URL} is not reachable ({exc!r})"
    return None


def require_service(problem: str | None) -> None:
    """Skip the current test because of ``problem``, or fail it when running in CI."""
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{problem}; CI must provide this service", pytrace=False)
    pytest.skip(problem)


@pytest.fixture
def redis_url() -> str:
    """The test Redis, checked reachable (skip locally, fail in CI)."""
    require_service(_redis_problem())
    return REDIS_URL


@pytest.fixture
def postgres_url() -> str:
    """The test PostgreSQL database, checked reachable (skip locally, fail in CI)."""
    require_service(_postgres_problem())
    return POSTGRES_URL
