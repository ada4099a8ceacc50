"""End-to-end fixtures: the real ``duly`` CLI in subprocesses, on every backend.

``e2e`` (ids ``sqlite``, ``redis``, ``postgres``) writes a tasks module ``e2e_tasks.py`` into
``tmp_path``, gives the test its own data (a SQLite file, a Redis key prefix, a PostgreSQL
schema, passed as ``?namespace=`` in ``DULY_URL``), starts ``python -m duly ...`` processes with
that environment, and on teardown kills whatever process is left (by its own process group,
which each started process leads) and drops the data. See ``e2e_harness.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import BACKENDS, E2E, require_service


@pytest.fixture(params=BACKENDS)
def e2e(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[E2E]:
    """This test's E2E harness on one backend."""
    kind: str = request.param
    require_service(kind)
    harness = E2E(kind, tmp_path)
    try:
        yield harness
    finally:
        harness.cleanup()
        if getattr(request.node, "rep_call_failed", False):
            print(harness.all_logs())
        harness.drop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Remember a failed call so the fixture can print the processes' logs."""
    report = yield
    if report.when == "call" and report.failed:
        item.rep_call_failed = True  # type: ignore[attr-defined]
    return report
