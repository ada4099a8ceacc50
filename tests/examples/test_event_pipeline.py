"""examples/event_pipeline (an event -> a fan-out group -> a report after the group -> a
notification with the report) runs end to end on every backend, and resumes after a failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from example_driver import run_driver
from services import BACKENDS, require_service

DRIVER = """
import dataclasses
import json
import duly.testing
from examples.event_pipeline import app as ex

app = ex.app
ok = ex.handle_event(7, "home:alice", "build_success")
before = [j.status for j in app.get_workflow(ok.workflow.id).jobs]
duly.testing.run_jobs(app)
done = app.get_workflow(ok.workflow.id)

# One job of the fan-out is cancelled: the report and the notification are cancelled too; a
# retry of that job resumes them.
bad = ex.handle_event(8, "home:bob", "build_fail")
app.cancel(bad.group.jobs[1].id)
stopped = app.get_workflow(bad.workflow.id)
retried = app.retry(bad.group.jobs[1].id)
duly.testing.run_jobs(app)
resumed = app.get_workflow(bad.workflow.id)
with ex.store() as db:
    outbox = [row[0] for row in db.execute("SELECT message FROM outbox ORDER BY event_id")]
print(json.dumps({
    "before": before,
    "done": done.status,
    "report": dataclasses.asdict(done.jobs[0].result),
    "after": done.jobs[0].after == [j.id for j in ok.group.jobs],
    "stopped": [stopped.status, [j.status for j in stopped.jobs]],
    "error": stopped.jobs[0].error["type"],
    "names": bad.group.jobs[1].id in stopped.jobs[0].error["message"],
    "retried": retried,
    "resumed": [resumed.status, [j.status for j in resumed.jobs]],
    "outbox": outbox,
}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_event_pipeline(backend: str, tmp_path: Path) -> None:
    require_service(backend)
    out = run_driver(DRIVER, backend, tmp_path, env={"PIPELINE_STORE": str(tmp_path / "s.db")})
    assert out["before"] == ["scheduled", "scheduled"]
    assert out["done"] == "succeeded" and out["after"]
    assert out["report"] == {
        "event_id": 7,
        "project": "home:alice",
        "channels": ["backend", "emails", "log"],
    }
    assert out["stopped"] == ["cancelled", ["cancelled", "cancelled"]]
    assert out["error"] == "DependencyFailed" and out["names"]
    assert out["retried"] is True
    assert out["resumed"] == ["succeeded", ["succeeded", "succeeded"]]
    assert out["outbox"] == [
        "to ops@example.com: event 7 of home:alice -> backend, emails, log",
        "to ops@example.com: event 8 of home:bob -> backend, emails, log",
    ]
