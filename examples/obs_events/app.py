"""The Open Build Service event subsystem (seed 001) in duly.

OBS turns the build backend's notifications into events, then posts them to RabbitMQ, mails
the subscribers and writes the projects' RSS log, with delayed jobs started by ``clock.rb``.
The 2017 review found that jobs of one type could overlap (an event posted twice), that
failures were swallowed, and that nothing told "not started", "done" and "failed" apart. Here:

- ``update_notification_events``: ``clock.rb``'s 17 s thread, a periodic task with a mutex
  instead of a Ruby Mutex; it reads ``/lastnotifications`` from the stored cursor and moves
  the cursor once per tick, after the events and their jobs are stored;
- each new event fans out to a group of single-purpose jobs (PRODUCT §8): ``notify_backend``,
  ``send_event_emails`` and ``log_project_event``, with a mutex per type (one at a time, in
  order); each sets its event's flag only after the work is done, in the same transaction.
  The group's ``on_complete`` job, ``mark_event_processed``, runs exactly once when all three
  have an outcome and stamps the event processed with the summary (the ``undone_jobs``
  counter OBS kept broke on failures). The group's id is the event's (``obs-event:<id>``):
  fanning an event out again (a tick that failed and reads its page again) returns its group
  instead of a second one, and ``app.get_group`` shows each job's current outcome (a failed
  mail retried to success counts as succeeded);
- ``rotate_project_log``: every 10 minutes, ``mutex="rotate-logs"``: drops old log entries
  (and logs an event whose own job has not yet);
- failures raise: the job is ``failed`` with its error (``app.jobs(status="failed")``),
  reported by ``on_failure`` (Errbit's place) and re-run by ``app.retry(id)``.

The build backend and the frontend's tables are simulated by one SQLite file (``OBS_STORE``).
Run it: ``python -m examples.obs_events.app`` (add DULY_URL to use Redis or PostgreSQL).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import duly
import duly.testing

app = duly.App(os.environ.get("DULY_URL", "sqlite:///obs_events.db"))
STORE = os.environ.get("OBS_STORE", "obs_store.db")
POLL_EVERY = timedelta(seconds=float(os.environ.get("OBS_POLL_SECONDS", "17")))
PAGE_LIMIT = 1000  # notifications per /lastnotifications answer
LOG_KEPT = timedelta(days=10)
log = logging.getLogger("obs_events")

SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (nr INTEGER PRIMARY KEY, type TEXT, payload TEXT);
CREATE TABLE IF NOT EXISTS backend_info (name TEXT PRIMARY KEY, value INTEGER);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, type TEXT, payload TEXT, created_at REAL,
    queued INTEGER DEFAULT 0, mails_sent INTEGER DEFAULT 0, project_logged INTEGER DEFAULT 0,
    processed_at REAL, failed_jobs INTEGER);
CREATE TABLE IF NOT EXISTS subscriptions (project TEXT PRIMARY KEY, email TEXT);
CREATE TABLE IF NOT EXISTS outbox (channel TEXT, event_id INTEGER, recipient TEXT, at REAL);
CREATE TABLE IF NOT EXISTS project_log (event_id INTEGER PRIMARY KEY, type TEXT, at REAL);
"""


class MailRejected(Exception):
    """The mail server refused a recipient: retrying will not help, fixing the address will."""


@contextmanager
def store() -> Iterator[sqlite3.Connection]:
    """One transaction on the example's SQLite store (committed unless it raises)."""
    db = sqlite3.connect(STORE, timeout=30)
    db.row_factory = sqlite3.Row
    try:
        db.executescript(SCHEMA)
        with db:
            yield db
    finally:
        db.close()


# -- the build backend (fake) -------------------------------------------------------------------
def emit(type: str, **payload: Any) -> int:
    """The backend records a notification (a build failed, a package changed...); its number."""
    with store() as db:
        cur = db.execute(
            "INSERT INTO notifications (type, payload) VALUES (?, ?)", (type, json.dumps(payload))
        )
        return int(cur.lastrowid or 0)


def lastnotifications(start: int, limit: int) -> dict[str, Any]:
    """``GET /lastnotifications?start=N``: the notifications after ``start``, at most ``limit``;
    ``limit_reached`` when more are waiting, ``next`` where to go on from."""
    with store() as db:
        rows = db.execute(
            "SELECT * FROM notifications WHERE nr > ? ORDER BY nr LIMIT ?", (start, limit + 1)
        ).fetchall()
    page = rows[:limit]
    return {
        "next": page[-1]["nr"] if page else start,
        "limit_reached": len(rows) > limit,
        "notifications": [dict(r) for r in page],
    }


def subscribe(project: str, email: str) -> None:
    """Mail the events of ``project`` to ``email`` (replacing an earlier address)."""
    with store() as db:
        db.execute("INSERT OR REPLACE INTO subscriptions VALUES (?, ?)", (project, email))


def send_mail(db: sqlite3.Connection, event_id: int, to: str) -> None:
    """The fake SMTP server: rejects malformed addresses, 'delivers' the rest to the outbox."""
    if "@" not in to:
        raise MailRejected(f"550 <{to}>: recipient address rejected")
    db.execute("INSERT INTO outbox VALUES ('mail', ?, ?, ?)", (event_id, to, time.time()))


def _event(db: sqlite3.Connection, event_id: int) -> sqlite3.Row | None:
    row: sqlite3.Row | None = db.execute(
        "SELECT * FROM events WHERE id = ?", (event_id,)
    ).fetchone()
    return row


# -- the jobs -----------------------------------------------------------------------------------
def group_id(event_id: int) -> str:
    """The id of an event's group."""
    return f"obs-event:{event_id}"


def fan_out(event_id: int) -> duly.Group:
    """The event's jobs, one per purpose, as one group: ``mark_event_processed`` runs once
    all three have an outcome (each failure stays visible and retryable on its own). Once per
    event: a second call returns the stored group (``deduplicated``), nothing is enqueued."""
    return app.group(
        [notify_backend.s(event_id), send_event_emails.s(event_id), log_project_event.s(event_id)],
        on_complete=mark_event_processed.s(event_id),
        key=f"event:{event_id}",
        id=group_id(event_id),
    )


@app.periodic(every=POLL_EVERY, mutex="lastnotifications", retries=0)
def update_notification_events() -> dict[str, int]:
    """UpdateNotificationEvents: turn the notifications after the cursor into events, fan each
    new one out to its group of jobs, then move the cursor (once per tick). A failed tick moves
    nothing: the next one reads the same notifications again; the stored events are skipped,
    and fanning an event out again returns its group (``id=``: nothing enqueued twice)."""
    with store() as db:
        row = db.execute("SELECT value FROM backend_info WHERE name = 'lastnotification_nr'")
        start = cursor = (row.fetchone() or [0])[0]
    while True:
        page = lastnotifications(cursor, PAGE_LIMIT)
        ids = [n["nr"] for n in page["notifications"]]
        with store() as db:
            db.executemany(
                "INSERT OR IGNORE INTO events (id, type, payload, created_at) VALUES (?, ?, ?, ?)",
                [(n["nr"], n["type"], n["payload"], time.time()) for n in page["notifications"]],
            )
        for event_id in ids:
            fan_out(event_id)
        cursor = page["next"]
        if not page["limit_reached"]:
            break
    with store() as db:
        db.execute(
            "INSERT OR REPLACE INTO backend_info VALUES ('lastnotification_nr', ?)", (cursor,)
        )
    return {"from": start, "to": cursor}


@app.task(mutex="notify-backends", retry_on=(ConnectionError,))
def notify_backend(event_id: int) -> bool:
    """Event::NotifyBackends: post the event to RabbitMQ, then mark it queued (the original
    marked it first, so a failed post was lost). False if it was posted already."""
    with store() as db:
        event = _event(db, event_id)
        if event is None or event["queued"]:
            return False
        key = f"opensuse.obs.{event['type']}"  # the routing key
        db.execute("INSERT INTO outbox VALUES ('rabbitmq', ?, ?, ?)", (event_id, key, time.time()))
        db.execute("UPDATE events SET queued = 1 WHERE id = ?", (event_id,))
    return True


@app.task(mutex="send-event-emails", retry_on=(ConnectionError,))
def send_event_emails(event_id: int) -> list[str]:
    """SendEventEmails: mail the subscribers of the event's project, all or none. A rejected
    address fails the job (the original set mails_sent anyway); the recipients mailed."""
    with store() as db:
        event = _event(db, event_id)
        if event is None or event["mails_sent"]:
            return []
        project = json.loads(event["payload"]).get("project")
        sql = "SELECT email FROM subscriptions WHERE project = ?"
        recipients = [r["email"] for r in db.execute(sql, (project,))]
        for to in recipients:
            send_mail(db, event_id, to)
        db.execute("UPDATE events SET mails_sent = 1 WHERE id = ?", (event_id,))
    return recipients


@app.task(mutex="project-log")
def log_project_event(event_id: int) -> bool:
    """The project log (RSS) entry of one project or package event; every event ends marked
    logged. True if it wrote an entry."""
    with store() as db:
        event = _event(db, event_id)
        if event is None or event["project_logged"]:
            return False
        logged = event["type"].split(".")[0] in ("project", "package")
        if logged:
            db.execute(
                "INSERT OR IGNORE INTO project_log VALUES (?, ?, ?)",
                (event_id, event["type"], time.time()),
            )
        db.execute("UPDATE events SET project_logged = 1 WHERE id = ?", (event_id,))
    return logged


@app.task
def mark_event_processed(event_id: int) -> dict[str, int]:
    """The group's on_complete: every job of the event has an outcome. Stamps the event
    processed with how many failed (a failed job stays retryable: ``duly retry ID``)."""
    summary = duly.current_job().group
    assert summary is not None  # always set in a group's on_complete job
    with store() as db:
        db.execute(
            "UPDATE events SET processed_at = ?, failed_jobs = ? WHERE id = ?",
            (time.time(), summary.failed + summary.cancelled, event_id),
        )
    return {"succeeded": summary.succeeded, "failed": summary.failed}


@app.periodic(every=timedelta(minutes=10), mutex="rotate-logs")
def rotate_project_log() -> int:
    """ProjectLogRotate: log the project and package events for the RSS feed, mark the others
    done at once (the original kept them 10 days), drop entries older than 10 days."""
    with store() as db:
        events = db.execute("SELECT id, type FROM events WHERE NOT project_logged").fetchall()
        logged = [e for e in events if e["type"].split(".")[0] in ("project", "package")]
        db.executemany(
            "INSERT OR IGNORE INTO project_log VALUES (?, ?, ?)",
            [(e["id"], e["type"], time.time()) for e in logged],
        )
        db.executemany(
            "UPDATE events SET project_logged = 1 WHERE id = ?", [(e["id"],) for e in events]
        )
        cutoff = time.time() - LOG_KEPT.total_seconds()
        db.execute("DELETE FROM project_log WHERE at < ?", (cutoff,))
    return len(logged)


@app.on_failure
def errbit(job: duly.JobInfo, error: BaseException) -> None:
    """Where OBS notified Errbit: a job failed for good (it stays, retryable, for 7 days)."""
    log.error("%s %s failed: %r (retry: duly retry %s)", job.task, job.id, error, job.id)


def main() -> None:
    subscribe("home:alice", "alice@example.org")
    subscribe("home:bob", "bob-at-example.org")  # a typo: bob's mails are rejected
    for package in ("hello", "world"):
        emit("package.build_fail", project="home:alice", package=package)
    emit("package.commit", project="home:bob", package="tools")
    emit("user.create", login="carol")
    tick = update_notification_events.enqueue()  # what one tick of the schedule enqueues
    duly.testing.run_jobs(app, [tick], scheduler=False)  # in production: duly worker ...
    duly.testing.run_jobs(app, [rotate_project_log.enqueue()], scheduler=False)
    duly.testing.run_jobs(app, scheduler=False)  # the jobs the tick queued
    print("tick:", app.get_job(tick.id).result)  # type: ignore[union-attr]
    for job in app.jobs(status="failed"):
        print("failed:", job.task, job.args, job.error and job.error["message"])
        subscribe("home:bob", "bob@example.org")  # fix the address, then re-run the job
        app.retry(job.id)
        duly.testing.run_jobs(app, [job.id], scheduler=False)
        print("after the fix and a retry:", app.get_job(job.id).status)  # type: ignore[union-attr]
    with store() as db:
        for row in db.execute("SELECT channel, event_id, recipient FROM outbox"):
            print("sent:", tuple(row))
        for row in db.execute("SELECT id, failed_jobs FROM events ORDER BY id"):
            info = app.get_group(group_id(row["id"]))
            print(f"event {row['id']}: processed ({row['failed_jobs']} failed) by group", info)


if __name__ == "__main__":
    main()
