"""examples/fastapi_links (seed 003's webhook and status routes on FastAPI) on every backend:
handlers enqueue with the async twin, the lifespan opens the App and runs a worker in the
server's process, and stops it with the server.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from example_driver import run_driver
from services import BACKENDS, require_service

DRIVER = """
import json, time
from fastapi.testclient import TestClient
from examples.fastapi_links.app import api, app


def settled(client, op):
    deadline = time.monotonic() + 30
    while True:
        body = client.get(f"/operations/{op}").json()
        if body["status"] in ("succeeded", "failed"):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.02)


with TestClient(api) as client:   # the lifespan runs: App opened, worker started
    ok = client.post("/links/1/hook", params={"secret": "s3cret"}).json()["operation"]
    gone = client.post("/links/2/hook", params={"secret": "s3cret"}).json()["operation"]
    again = client.post("/links/1/hook", params={"secret": "s3cret"}).json()["operation"]
    report = {
        "ok": settled(client, ok),
        "gone": settled(client, gone),
        "again": settled(client, again)["status"],
        "index": [o["id"] for o in client.get("/links/1/operations").json()] == [again, ok],
        "wrong_secret": client.post("/links/1/hook", params={"secret": "nope"}).status_code,
        "no_secret": client.post("/links/1/hook").status_code,
        "unknown_link": client.post("/links/9/hook", params={"secret": "s3cret"}).status_code,
        "unknown_op": client.get("/operations/01NOSUCHOPERATION000000000").status_code,
        "workers_while_serving": len(app.workers()),
    }
    bearer = {"Authorization": "Bearer links-admin"}
    page = client.get("/jobs/")
    report["dashboard"] = [page.status_code, '<base href="/jobs/">' in page.text]
    listed = client.get("/jobs/api/v1/jobs", params={"key": "link:1"}, headers=bearer).json()
    report["api_index"] = [j["id"] for j in listed["jobs"]] == [again, ok]
    report["api_no_token"] = client.get("/jobs/api/v1/jobs").status_code
report["workers_after"] = len(app.workers())  # the lifespan stopped its worker
print(json.dumps(report))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_links_service(backend: str, tmp_path: Path) -> None:
    require_service(backend)
    env = {"LINKS_WORKER": "1", "LINKS_ADMIN_TOKENS": "links-admin"}
    report = run_driver(DRIVER, backend, tmp_path, env=env)
    assert report["ok"] == {
        "status": "succeeded",
        "attempts": 1,
        "result": {"link": 1, "pull_request": "ann/app#pr-1"},
        "error": None,
    }
    assert report["gone"]["status"] == "failed"
    assert report["gone"]["attempts"] == 3  # retries=2
    assert report["gone"]["error"] == {
        "type": "UpstreamMissing",
        "message": "link 2: upstream repository is gone",
    }
    assert report["again"] == "succeeded" and report["index"] is True
    assert report["wrong_secret"] == 404
    assert report["no_secret"] == 422
    assert report["unknown_link"] == 404
    assert report["unknown_op"] == 404
    assert (report["workers_while_serving"], report["workers_after"]) == (1, 0)
    # The dashboard and its API, mounted at /jobs/ next to the service's routes.
    assert report["dashboard"] == [200, True]
    assert report["api_index"] is True
    assert report["api_no_token"] == 401
