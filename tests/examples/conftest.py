"""The example tests check services the same way as every other test (see ``services.py``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from services import require_service as _require_service


@pytest.fixture
def require_service() -> Callable[[str], None]:
    """``require_service("redis")``: skip (or fail under CI) if the service is down."""
    return _require_service
