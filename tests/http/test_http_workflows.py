"""``GET /api/v1/workflows/{id}`` and ``GET /api/v1/jobs/{id}/dependents``, on every backend."""

from __future__ import annotations

import pytest
from http_harness import AS_ADMIN, Hub

pytestmark = pytest.mark.timeout(60)


def test_a_workflow_shows_its_steps_in_order(hub: Hub) -> None:
    wf = hub.app.chain(hub.add.s(1, 2), hub.add.si(3, 4))
    first, second = (j.id for j in wf.jobs)
    shown = hub.get(f"/api/v1/workflows/{wf.id}")
    assert shown["id"] == wf.id and shown["status"] == "running"
    assert [(j["id"], j["status"]) for j in shown["jobs"]] == [
        (first, "queued"),
        (second, "scheduled"),
    ]
    assert shown["jobs"][1]["after"] == [first]
    assert hub.get(f"/api/v1/jobs/{first}/dependents") == {"id": first, "dependents": [second]}
    hub.run(first)
    hub.run(second)
    done = hub.get(f"/api/v1/workflows/{wf.id}")
    assert done["status"] == "succeeded" and [j["result"] for j in done["jobs"]] == [3, 7]


def test_unknown_workflow_and_job_are_404(hub: Hub) -> None:
    for path in ("/api/v1/workflows/01NOPE", "/api/v1/jobs/01NOPE/dependents"):
        response = hub.client.get(path, headers=AS_ADMIN)
        assert response.status_code == 404 and "error" in response.json()
