"""An event pipeline (seed 001's fan-out, with what follows it): an event fans out to a group of
single-purpose jobs, a report runs once the whole group succeeded, and a notification carries
the report.

- ``handle_event(event_id)`` is the entry point (a webhook, a poller, a request handler):
  it stores the event's fan-out as one group (``notify_backend``, ``send_event_emails``,
  ``log_project_event``) and, in the same call, a chain of two steps that waits for that group
  (``options(after=[group])``): ``build_report`` then ``send_notification``, which takes the
  report as its first argument (decoded back into a ``Report`` by its annotation).
- ``build_report`` runs exactly once, when the last of the three jobs succeeded, however they
  finish (two at once on two workers, one worker killed mid-finish). If one of them fails for
  good, the report and the notification are cancelled with a ``DependencyFailed`` error naming
  it; ``app.retry(job_id)`` of that job, once it succeeds, runs them after all.
- ``app.get_workflow(wf.id)`` shows the two steps and their states; the dashboard's Workflows
  page shows them too, and each job page what it waits for and what waits for it.

The event store and the outbox are one SQLite file (``PIPELINE_STORE``).
Run it: ``python -m examples.event_pipeline.app`` (add DULY_URL for Redis or PostgreSQL).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import duly
import duly.testing

app = duly.App(os.environ.get("DULY_URL", "sqlite:///event_pipeline.db"))
STORE = os.environ.get("PIPELINE_STORE", "pipeline_store.db")

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, project TEXT, kind TEXT);
CREATE TABLE IF NOT EXISTS deliveries (
    event_id INTEGER, channel TEXT, PRIMARY KEY (event_id, channel));
CREATE TABLE IF NOT EXISTS outbox (event_id INTEGER PRIMARY KEY, message TEXT);
"""


@contextmanager
def store() -> Iterator[sqlite3.Connection]:
    """The event store, one transaction per block."""
    db = sqlite3.connect(STORE, timeout=30, isolation_level=None)
    try:
        db.executescript(SCHEMA)
        db.execute("BEGIN IMMEDIATE")
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        db.close()


def _deliver(event_id: int, channel: str) -> str:
    with store() as db:
        (project,) = db.execute("SELECT project FROM events WHERE id = ?", (event_id,)).fetchone()
        db.execute("INSERT OR IGNORE INTO deliveries VALUES (?, ?)", (event_id, channel))
    return f"{channel}:{project}"


@app.task(retries=3)
def notify_backend(event_id: int) -> str:
    """Post the event to the message bus."""
    return _deliver(event_id, "backend")


@app.task(retries=3)
def send_event_emails(event_id: int) -> str:
    """Mail the project's subscribers."""
    return _deliver(event_id, "emails")


@app.task(retries=3)
def log_project_event(event_id: int) -> str:
    """Write the project's log entry."""
    return _deliver(event_id, "log")


@dataclass
class Report:
    """What happened to one event."""

    event_id: int
    project: str
    channels: list[str]


@app.task
def build_report(event_id: int) -> Report:
    """Runs once every job of the event's fan-out succeeded."""
    with store() as db:
        (project,) = db.execute("SELECT project FROM events WHERE id = ?", (event_id,)).fetchone()
        rows = db.execute(
            "SELECT channel FROM deliveries WHERE event_id = ? ORDER BY channel", (event_id,)
        ).fetchall()
    return Report(event_id, project, [channel for (channel,) in rows])


@app.task
def send_notification(report: Report, to: str) -> str:
    """The chain's last step: ``report`` is ``build_report``'s result."""
    message = (
        f"to {to}: event {report.event_id} of {report.project} -> {', '.join(report.channels)}"
    )
    with store() as db:
        db.execute("INSERT OR REPLACE INTO outbox VALUES (?, ?)", (report.event_id, message))
    return message


@dataclass
class Pipeline:
    """One event's jobs: its fan-out group and the report-then-notify workflow."""

    group: duly.Group
    workflow: duly.Workflow


def handle_event(
    event_id: int, project: str, kind: str, notify: str = "ops@example.com"
) -> Pipeline:
    """Store the event and its whole pipeline."""
    with store() as db:
        db.execute("INSERT OR IGNORE INTO events VALUES (?, ?, ?)", (event_id, project, kind))
    key = f"event:{event_id}"
    group = app.group(
        [notify_backend.s(event_id), send_event_emails.s(event_id), log_project_event.s(event_id)],
        key=key,
    )
    workflow = app.chain(
        build_report.options(after=[group], key=key).s(event_id),
        send_notification.options(key=key).s(to=notify),
    )
    return Pipeline(group, workflow)


def main() -> None:
    """One event end to end with an in-process worker."""
    pipeline = handle_event(7, "home:alice", "build_success")
    duly.testing.run_jobs(app)
    info = app.get_workflow(pipeline.workflow.id)
    assert info is not None
    print(json.dumps({"workflow": info.status, "notification": info.jobs[-1].result}))


if __name__ == "__main__":
    main()
