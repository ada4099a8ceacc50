"""examples/operations (seed 003, Backstroke) runs end to end on every backend."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import duly

ROOT = Path(__file__).resolve().parents[2]

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


def _url(backend: str, tmp_path: Path) -> str:
    ns = f"t{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/ops.db"
    if backend == "redis":
        return f"redis://127.0.0.1:6379/0?namespace={ns}"
    return f"postgresql://postgres@127.0.0.1:5432/test?namespace=t_{ns}"


async def _drop(url: str) -> None:
    app = duly.App(url)
    try:
        await (await app.backend()).drop()
    finally:
        await app.aclose()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_operations_example(
    backend: str, tmp_path: Path, require_service: Callable[[str], None]
) -> None:
    if backend != "sqlite":
        require_service(backend)
    url = _url(backend, tmp_path)
    env = {**os.environ, "DULY_URL": url, "PYTHONPATH": str(ROOT)}
    try:
        out = subprocess.run(
            [sys.executable, "-c", DRIVER],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=80,
            check=False,
        )
    finally:
        if backend != "sqlite":
            asyncio.run(_drop(url))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
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
