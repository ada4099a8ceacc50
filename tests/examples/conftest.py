"""Service checks for the example tests: skip a missing Redis/Postgres locally, fail in CI."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import pytest

_PORTS = {"redis": 6379, "postgres": 5432}


@pytest.fixture
def require_service() -> Callable[[str], None]:
    """``require_service("redis")``: skip (or fail under CI) if the service is down."""

    def check(name: str) -> None:
        try:
            socket.create_connection(("127.0.0.1", _PORTS[name]), timeout=1).close()
        except OSError:
            if os.environ.get("CI"):
                pytest.fail(f"{name} is not running on 127.0.0.1:{_PORTS[name]} (required in CI)")
            pytest.skip(f"{name} is not running on 127.0.0.1:{_PORTS[name]}")

    return check
