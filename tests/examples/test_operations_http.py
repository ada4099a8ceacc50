"""examples/operations' HTTP face (seed 003) on every backend: the status route, a link's
operations by key, the counters, and the secret webhook whose GitHub token never shows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from example_driver import run_driver

TOKEN = "gho_" + "T0k3n" * 6
DRIVER = """
import json
from starlette.testclient import TestClient
import duly.testing
from examples.operations import http
from examples.operations.app import start_operation

link = {"id": 456, "upstream": "octo/widget", "fork": "me/widget"}
hook = http.webhook_for(link, access_token="TOKEN")
as_read = {"Authorization": "Bearer r-token"}
with TestClient(http.web) as client:
    fired = client.post(hook.path)
    op = fired.json()["job_id"]
    other = start_operation({"id": 457, "upstream": "octo/x", "fork": "me/x"})
    duly.testing.run_jobs(http.app, [op, other])
    out = {
        "fired": fired.status_code,
        "backstroke": client.get(f"/v1/operations/{op}").json(),
        "unknown": client.get("/v1/operations/01NOSUCHOPERATION000000000").status_code,
        "job": client.get(f"/api/v1/jobs/{op}", headers=as_read).json(),
        "link": client.get("/api/v1/jobs", params={"key": "link:456"}, headers=as_read).json(),
        "stats": client.get("/api/v1/stats", params={"minutes": 60}, headers=as_read).json(),
        "anonymous": client.get(f"/api/v1/jobs/{op}").status_code,
        "wrong_hook": client.post("/hooks/" + "x" * 43).status_code,
    }
    out["texts"] = [client.get(f"/api/v1/jobs/{op}", headers=as_read).text]
print(json.dumps(out))
""".replace("TOKEN", TOKEN)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_operations_http_face(
    backend: str, tmp_path: Path, require_service: Callable[[str], None]
) -> None:
    if backend != "sqlite":
        require_service(backend)
    env = {"DULY_READ_TOKENS": "r-token", "DULY_ADMIN_TOKENS": "a-token"}
    data = run_driver(DRIVER, backend, tmp_path, env=env)
    assert data["fired"] == 202
    assert data["backstroke"]["status"] == "OK" and data["backstroke"]["link"] == 456
    assert data["unknown"] == 404 and data["anonymous"] == 401 and data["wrong_hook"] == 404
    job = data["job"]
    assert job["status"] == "succeeded" and job["key"] == "link:456"
    assert job["kwargs"] == {"access_token": "***"} and job["args"][1] == "WEBHOOK"
    assert [j["id"] for j in data["link"]["jobs"]] == [job["id"]]
    assert data["stats"]["totals"]["succeeded"] == 2
    assert TOKEN not in repr(data)
