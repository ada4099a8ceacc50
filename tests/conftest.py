"""Shared by every test: a clean ``DULY_*`` environment and the checked service URLs
(see ``services.py`` for the rule on a missing service)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from services import POSTGRES_URL, REDIS_URL, require_service

# A property holds or not whatever the machine's load: no per-example deadline, and no health
# check on how fast examples are generated (both failed on a loaded 2-core machine).
settings.register_profile(
    "duly", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("duly")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the chaos package holds the private Redis topologies
    sys.path.insert(0, str(ROOT))


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


@pytest.fixture(scope="session")
def _local_cluster() -> Iterator[str]:
    """A 3-master Redis Cluster on loopback ports, started once per test process (each xdist
    worker has its own) and stopped at the end of the session."""
    from chaos.redis_topologies import LocalCluster

    cluster = LocalCluster(masters=3).start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_url(request: pytest.FixtureRequest) -> str:
    """The URL of this test process's local Redis Cluster (skip locally, fail in CI, when
    redis-server cannot be started)."""
    require_service("redis-cluster")
    url: str = request.getfixturevalue("_local_cluster")
    return url


# The files that take longest (``pytest --durations``), started first: under ``-n`` the run
# ends when its slowest worker does, so a long test picked up last decides the wall time.
# Order only: every test still runs. A file not listed keeps its place after these.
_LONGEST_FIRST = (
    "tests/conformance/test_protocol_group_machine.py",
    "tests/conformance/test_protocol_concurrency_machine.py",
    "tests/conformance/test_protocol_state_machine.py",
    "tests/e2e/test_e2e_cli_errors.py",
    "tests/e2e/test_e2e_cli.py",
    "tests/examples/",
    "tests/http/test_http_schemathesis.py",
    "tests/e2e/",
    "tests/chaos/",
    "tests/backends/test_redis_concurrency.py",
    "tests/docs/test_site.py",
    "tests/dashboard/test_dashboard_browser.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next(
            (i for i, prefix in enumerate(_LONGEST_FIRST) if path.startswith(prefix)),
            len(_LONGEST_FIRST),
        )

    items.sort(key=rank)  # stable: each file keeps its own order
