"""The backing services the tests use, and the one rule for a missing one.

A service that is not reachable skips the tests that need it on a developer's machine and fails
them when the ``CI`` environment variable is set, so CI never passes by skipping everything (as
dramatiq's ``check_redis`` does). Importable from every test folder (``tests/`` is on sys.path
through the root conftest).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

__all__ = [
    "BACKENDS",
    "POSTGRES_URL",
    "REDIS_URL",
    "backend_url",
    "require_service",
    "service_problem",
]

REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ["sqlite", "redis", "postgres"]


@functools.cache
def service_problem(kind: str) -> str | None:
    """Why the ``kind`` service (``sqlite``, ``redis``, ``postgres``; ``redis-cluster`` and
    ``redis-sentinel``, which the tests start themselves) cannot be used, or None."""
    if kind == "redis":
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
    elif kind in ("redis-cluster", "redis-sentinel"):
        missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
        if missing:
            return f"{kind} needs {' and '.join(missing)} on PATH to start one on loopback"
    elif kind == "postgres":
        try:
            import psycopg
        except ImportError as exc:
            return f"psycopg is not installed ({exc})"
        try:
            psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
        except Exception as exc:
            return f"PostgreSQL at {POSTGRES_URL} is not reachable ({exc!r})"
    return None


def require_service(kind: str) -> None:
    """Skip the test when ``kind`` is unreachable; fail it instead when ``CI`` is set."""
    problem = service_problem(kind)
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{problem}; CI must provide this service", pytrace=False)
    pytest.skip(problem)


def backend_url(kind: str, tmp_path: Path) -> tuple[str, str]:
    """A URL and a namespace of this test's own on backend ``kind`` (a SQLite file in
    ``tmp_path``, a Redis key prefix, a PostgreSQL schema); the service is required."""
    require_service(kind)
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'duly.db'}", "duly"
    if kind == "redis":
        return REDIS_URL, f"t{uuid4().hex[:12]}"
    return POSTGRES_URL, f"t_{uuid4().hex[:12]}"


def claim_as(app: Any, job_id: str, worker: str, lease: float) -> None:
    """Claim ``job_id`` (the next job of queue ``default``) for a worker process that is not
    there: its lease ends ``lease`` seconds from now (negative: already lapsed, as if it died)."""

    async def claim() -> None:
        try:
            backend = await app.backend()
            now = app.clock.now()
            [record] = await backend.claim(worker, ["default"], 1, now, now + lease)
            assert record.id == job_id
        finally:
            await app.aclose()

    asyncio.run(claim())


def keys_matching(client: Any, pattern: str) -> set[str]:
    """The keys of a sync redis-py ``client`` matching ``pattern``, in few round trips: the
    test server is shared, and may hold a million keys of other tests or benches."""
    return {name.decode() for name in client.scan_iter(match=pattern, count=10_000)}
