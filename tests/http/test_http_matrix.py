"""Every route x no token / read token / admin token, on every backend (PRODUCT §9)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from http_harness import AS_ADMIN, AS_READ, Hub

from duly._http import endpoints

pytestmark = pytest.mark.timeout(60)


def _concrete(path: str, job_id: str, group_id: str, workflow_id: str) -> str:
    values = {"id": job_id, "name": "links", "scope": "link:1", "secret": "x" * 20}
    if path.startswith("/api/v1/groups/"):
        values["id"] = group_id
    if path.startswith("/api/v1/workflows/"):
        values["id"] = workflow_id
    return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], path)


def test_every_route_by_token(hub: Hub) -> None:
    job = hub.add.enqueue(1, 2)
    group = hub.app.group([hub.add.s(3, 4)])
    workflow = hub.app.chain(hub.add.s(5, 6), hub.add.s(7))
    table = [e for e in endpoints() if e.path != "/api/v1/events"]  # SSE: test_http_events
    seen = set()
    for endpoint in table:
        path = _concrete(endpoint.path, job.id, group.id, workflow.id)
        # A route that reads a body gets a valid one (its bad bodies: its own tests).
        body = (
            {"json": {"task": hub.add.name, "args": [1, 2], "every": 60}} if endpoint.body else {}
        )

        def call(
            path: str, method: str = endpoint.method, body: dict[str, Any] = body, **kw: object
        ) -> Any:
            return hub.client.request(method, path, **body, **kw)

        anonymous = call(path)
        read = call(path, headers=AS_READ)
        admin = call(path, headers=AS_ADMIN)
        wrong = call(path, headers={"Authorization": "Bearer nope"})
        seen.add((endpoint.method, endpoint.path))
        if endpoint.access == "public":
            assert anonymous.status_code not in (401, 403), path
            continue
        assert anonymous.status_code == 401, path
        assert anonymous.json() == {"error": "missing or unknown token"}
        assert anonymous.headers["www-authenticate"] == "Bearer"
        assert wrong.status_code == 401, path
        assert admin.status_code < 400 or admin.status_code == 409, (path, admin.text)
        if endpoint.access == "admin":
            assert read.status_code == 403, path
            assert "admin" in read.json()["error"]
        else:
            assert read.status_code == 200, (path, read.text)
    # Every pinned route of PRODUCT §9 is in the table.
    pinned = {
        ("GET", "/api/v1/jobs/{id}"),
        ("GET", "/api/v1/jobs"),
        ("POST", "/api/v1/jobs/{id}/retry"),
        ("POST", "/api/v1/jobs/{id}/cancel"),
        ("GET", "/api/v1/queues"),
        ("GET", "/api/v1/workers"),
        ("GET", "/api/v1/stats"),
        ("GET", "/api/v1/periodic"),
        ("GET", "/api/v1/watches"),
        ("GET", "/api/v1/groups/{id}"),
        ("GET", "/api/v1/freshness"),
        ("GET", "/api/v1/freshness/{name}/scopes"),
        ("POST", "/api/v1/freshness/{name}/scopes/{scope}/refresh"),
        ("DELETE", "/api/v1/freshness/{name}/scopes/{scope}"),
        ("GET", "/metrics"),
        ("GET", "/healthz"),
    }
    assert pinned <= seen


def test_openapi_schema_needs_a_token_and_lists_every_route(hub: Hub) -> None:
    assert hub.client.get("/api/v1/openapi.json").status_code == 401
    schema = hub.get("/api/v1/openapi.json")
    assert schema["openapi"].startswith("3.")
    for endpoint in endpoints():
        assert endpoint.method.lower() in schema["paths"][endpoint.path], endpoint.path
    job = schema["components"]["schemas"]["JobInfo"]
    assert {"id", "task", "status", "args", "kwargs", "errors"} <= set(job["properties"])


def test_unknown_routes_and_methods_answer_json(hub: Hub) -> None:
    missing = hub.client.get("/api/v1/nothing", headers=AS_ADMIN)
    assert missing.status_code == 404 and missing.json() == {"error": "no such route"}
    wrong = hub.client.delete("/api/v1/jobs", headers=AS_ADMIN)
    assert wrong.status_code == 405 and "error" in wrong.json()
