"""examples/operations (seed 003, Backstroke) runs end to end on every backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from example_driver import run_driver

DRIVER = """
import json
from examples.operations import app as ops

links = [
    {"id": 456, "upstream": "octo/widget", "fork": "me/widget"},
    {"id": 457, "upstream": "octo/gadget", "fork": "me/gadget", "flaky": True},
    {"id": 458, "upstream": None, "fork": "me/orphan"},
]
ids = [ops.start_operation(link, "AUTOMATIC") for link in links]
ids.append(ops.start_operation(links[0], "MANUAL"))
before = ops.operation_status(ids[0])
import duly.testing
duly.testing.run_jobs(ops.app, ids)
print(json.dumps({
    "ids": ids,
    "before": before,
    "status": [ops.operation_status(i) for i in ids],
    "history": ops.link_history(456),
    "other_history": ops.link_history(999),
    "counters": ops.counters(),
    "unknown": ops.operation_status("01NOTANOPERATIONID00000000"),
}))
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_operations_example(
    backend: str, tmp_path: Path, require_service: Callable[[str], None]
) -> None:
    if backend != "sqlite":
        require_service(backend)
    data = run_driver(DRIVER, backend, tmp_path)
    ids = data["ids"]
    assert data["before"]["status"] == "QUEUED"
    statuses = [s["status"] for s in data["status"]]
    assert statuses == ["OK", "OK", "ERROR", "OK"]
    assert data["status"][0]["output"]["link"] == 456
    assert data["status"][2]["output"]["type"] == "UpstreamMissing"
    # link 456's operations, newest first, and nothing of other links
    assert [h["id"] for h in data["history"]] == [ids[3], ids[0]]
    assert data["other_history"] == []
    assert data["counters"] == {"successes": 3, "errors": 1, "retries": 1}
    assert data["unknown"] is None
