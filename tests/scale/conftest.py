"""Fixtures of the scale tests: private Redis topologies on loopback ports (helpers in
``scale_helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from services import require_service

from chaos.redis_topologies import LocalSentinel


@pytest.fixture
def sentinel() -> Iterator[LocalSentinel]:
    """A primary, its replica and three sentinels of this test's own."""
    require_service("redis-sentinel")
    started = LocalSentinel().start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def topology_tools() -> Iterator[None]:
    """Skip (locally; fail in CI) when redis-server cannot be started here."""
    require_service("redis-cluster")
    yield
