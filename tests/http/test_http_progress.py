"""Progress over HTTP: ``JobInfo.progress`` in ``GET /api/v1/jobs/{id}``, and ``event:
progress`` messages on ``GET /api/v1/events`` (a client listening for ``job`` never sees them)."""

from __future__ import annotations

import json

import pytest
from http_harness import AS_READ, Hub, Served, Stream

import duly

pytestmark = pytest.mark.timeout(90)


def test_progress_is_in_the_job_and_an_sse_progress_event(hub: Hub, served: Served) -> None:
    @hub.app.task(name="measured", retries=0)
    def measured() -> None:
        duly.current_job().set_progress(0.75, "3 of 4")

    stream = Stream(served.port, "/api/v1/events", AS_READ)
    job = measured.enqueue()
    hub.run(job.id)
    seen: list[tuple[str, dict[str, str]]] = []
    while not seen or seen[-1][0] != "job" or '"succeeded"' not in seen[-1][1]["data"]:
        fields = stream.message()
        if "event" in fields:
            seen.append((fields["event"], fields))
    stream.close()
    kinds = [kind for kind, _ in seen]
    assert kinds == ["job", "job", "progress", "job"], kinds  # queued, running, ..., succeeded
    data = json.loads(seen[2][1]["data"])
    assert (data["job_id"], data["status"]) == (job.id, "running")
    assert (data["progress"]["fraction"], data["progress"]["message"]) == (0.75, "3 of 4")
    assert seen[2][1]["id"] == data["id"]

    body = hub.get(f"/api/v1/jobs/{job.id}")
    assert (body["progress"]["fraction"], body["progress"]["message"]) == (0.75, "3 of 4")
    assert body["progress"]["at"].endswith(("Z", "+00:00"))
    assert hub.get(f"/api/v1/jobs/{hub.add.enqueue(1, 2).id}")["progress"] is None
