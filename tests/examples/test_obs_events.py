"""examples/obs_events (seed 001, the OBS event subsystem) runs end to end on every backend.

One driver per backend runs the example in a subprocess (a real worker with its scheduler, the
poller ticking every second) and prints what happened; the tests below read that report.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from example_driver import run_driver
from services import BACKENDS, require_service

DRIVER = """
import asyncio, json, threading, time
import duly.testing
from examples.obs_events import app as obs

app = obs.app
obs.PAGE_LIMIT = 10  # so the first tick needs three pages


def timed(task, pause):
    '''Record (start, end) of every run of ``task``, each ``pause`` seconds longer.'''
    spans, fn = [], task.fn
    def run(*args, **kwargs):
        start = time.time()
        try:
            time.sleep(pause)
            return fn(*args, **kwargs)
        finally:
            spans.append((start, time.time()))
    task.fn = run
    return spans


def wait(condition, timeout=40):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def cursor():
    with obs.store() as db:
        row = db.execute("SELECT value FROM backend_info").fetchone()
    return row[0] if row else 0


def count(sql):
    with obs.store() as db:
        return db.execute(sql).fetchone()[0]


def ticks():
    key = "periodic:" + obs.update_notification_events.name
    return sorted(app.jobs(key=key, limit=1000), key=lambda j: j.id)


def idle():
    return not any(app.jobs(status=s) for s in ("queued", "running", "retrying"))


spans = {
    "poll": timed(obs.update_notification_events, 0.0),
    "mail": timed(obs.send_event_emails, 0.005),
    "post": timed(obs.notify_backend, 0.005),
}

# 1. the poller ticks every second in a real worker; 25 notifications, then 5 more
obs.subscribe("home:alice", "alice@example.org")
for n in range(25):
    obs.emit("package.build_fail", project="home:alice", package=f"p{n}")
worker = app.worker(install_signal_handlers=False, concurrency=4, poll=0.1)


async def serve():
    try:
        await worker.run()
    finally:
        await app.aclose()


thread = threading.Thread(target=asyncio.run, args=(serve(),))
thread.start()
try:
    wait(lambda: cursor() == 25)
    for n in range(5):
        obs.emit("project.create", project=f"home:p{n}")
    wait(lambda: any(t.result == {"from": 30, "to": 30} for t in ticks()))
    wait(idle)
finally:
    worker.stop()
    thread.join(30)
cursor_after_ticks = cursor()

# 2. four log rotations at once on four slots: the mutex runs them one after the other
spans["rotate"] = timed(obs.rotate_project_log, 0.1)
rotations = [obs.rotate_project_log.enqueue() for _ in range(4)]
duly.testing.run_jobs(app, rotations, concurrency=4, scheduler=False)

# 3. every event fanned out to one group, whose on_complete stamped it processed
def groups():
    with obs.store() as db:
        rows = db.execute("SELECT id, processed_at, failed_jobs FROM events").fetchall()
    out = {}
    for row in rows:
        info = app.get_group(obs.group_id(row["id"]))
        callback = info and info.callback_job_id and app.get_job(info.callback_job_id)
        out[row["id"]] = {
            "group": info and info.id,
            "processed": row["processed_at"] is not None,
            "failed_jobs": row["failed_jobs"],
            "counts": info and [info.total, info.succeeded, info.failed, info.pending],
            "complete": bool(info and info.completed_at),
            "callback": callback and [callback.status, callback.attempts],
            "members": sorted(j.task.rsplit(".", 1)[1] for j in app.jobs(key=f"event:{row['id']}")),
        }
    return out
fanned = groups()

# 4. a rejected address fails the job; fixed, a retry sends the mail
obs.subscribe("home:bob", "bob-at-example.org")
bob_event = obs.emit("package.commit", project="home:bob", package="tools")
poll = obs.update_notification_events.enqueue()
duly.testing.run_jobs(app, [poll], scheduler=False)
duly.testing.run_jobs(app, scheduler=False)
failed = app.jobs(status="failed")
again = obs.fan_out(bob_event)  # a tick that read bob's event again: the same group
refanned = {"id": again.id, "deduplicated": again.deduplicated, "jobs": len(again.jobs)}
obs.subscribe("home:bob", "bob@example.org")
retried = [app.retry(j.id) for j in failed]
retried_twice = [app.retry(j.id) for j in failed]
duly.testing.run_jobs(app, [j.id for j in failed], scheduler=False)

job = lambda j: {"status": app.get_job(j.id).status, "result": app.get_job(j.id).result}
print(json.dumps({
    "ticks": [{"status": t.status, "result": t.result} for t in ticks()],
    "cursor_after_ticks": cursor_after_ticks,
    "cursor": cursor(),
    "poll": job(poll),
    "events": count("SELECT count(*) FROM events"),
    "outbox": {
        channel: count(f"SELECT count(*) FROM outbox WHERE channel = '{channel}'")
        for channel in ("mail", "rabbitmq")
    },
    "outbox_distinct": count("SELECT count(*) FROM (SELECT DISTINCT * FROM outbox)"),
    "project_log": count("SELECT count(*) FROM project_log"),
    "unprocessed": count(
        "SELECT count(*) FROM events WHERE NOT (queued AND mails_sent AND project_logged)"
    ),
    "spans": spans,
    "rotate_records": [
        [app.get_job(j.id).started_at.timestamp(), app.get_job(j.id).finished_at.timestamp()]
        for j in rotations
    ],
    "rotations": [job(j) for j in rotations],
    "fanned": fanned,
    "groups_at_end": groups(),
    "bob_event": bob_event,
    "refanned": refanned,
    "failed": [
        {"task": j.task, "args": j.args, "attempts": j.attempts, "error": j.error}
        for j in failed
    ],
    "retried": retried,
    "retried_twice": retried_twice,
    "after_retry": [job(j) for j in failed],
    "still_failed": [j.id for j in app.jobs(status="failed")],
    "bob_mails": count("SELECT count(*) FROM outbox WHERE recipient = 'bob@example.org'"),
}))
"""

SLOW_TICKS = """
import asyncio, json, threading, time
from examples.obs_events import app as obs

spans, fn = [], obs.update_notification_events.fn
def slow():
    start = time.time()
    time.sleep(1.5)  # longer than the period (1 s)
    try:
        return fn()
    finally:
        spans.append((start, time.time()))
obs.update_notification_events.fn = slow

worker = obs.app.worker(install_signal_handlers=False, concurrency=4, poll=0.1)
async def serve():
    try:
        await worker.run()
    finally:
        await obs.app.aclose()
thread = threading.Thread(target=asyncio.run, args=(serve(),))
thread.start()
time.sleep(0.5)
obs.update_notification_events.enqueue()  # and one by hand
time.sleep(3.5)
worker.stop()
thread.join(30)
print(json.dumps(spans))
"""


def _run(driver: str, backend: str, tmp_path: Path) -> Any:
    """Run ``driver`` against a fresh namespace of ``backend``; its last line of output."""
    return run_driver(driver, backend, tmp_path, {"OBS_POLL_SECONDS": "1"}, timeout=100)


@pytest.fixture(scope="module", params=BACKENDS)
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the driver saw on one backend."""
    backend = request.param
    if backend != "sqlite":
        require_service(backend)
    return _run(DRIVER, backend, tmp_path_factory.mktemp(f"obs-{backend}"))


def _assert_serial(spans: list[list[float]]) -> None:
    spans = sorted(spans)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"two runs overlap: {spans}"


pytestmark = pytest.mark.timeout(120)


def test_mutex_jobs_never_overlap(report: Any) -> None:
    spans = report["spans"]
    assert len(spans["rotate"]) == 4
    assert len(spans["mail"]) >= 30 and len(spans["post"]) >= 30
    for kind in ("rotate", "mail", "post", "poll"):
        _assert_serial(spans[kind])
    _assert_serial(report["rotate_records"])  # duly's own started/finished times agree
    assert [r["status"] for r in report["rotations"]] == ["succeeded"] * 4
    # the first to run logs the 30 events; the others find nothing left (a rotation ticking in
    # the first phase, if a 10-minute mark passed, may have done it already)
    assert sorted(r["result"] for r in report["rotations"])[:3] == [0, 0, 0]
    assert report["project_log"] == 31  # with bob's event (phase 4), logged by its own job


def test_the_poller_moves_its_cursor_once_per_tick(report: Any) -> None:
    ticks = report["ticks"]
    assert {t["status"] for t in ticks} == {"succeeded"}
    moves = [(t["result"]["from"], t["result"]["to"]) for t in ticks]
    assert moves[0][0] == 0 and moves[-1] == (30, 30)
    for (_, to), (start, _) in itertools.pairwise(moves):
        assert start == to, f"a tick did not start where the previous one ended: {moves}"
    assert (0, 25) in moves  # three pages of 10 in one tick, one cursor write
    assert report["cursor_after_ticks"] == 30
    # the poller enqueued by hand (as `duly` operators may) goes on from there
    assert report["poll"] == {"status": "succeeded", "result": {"from": 30, "to": 31}}
    assert report["cursor"] == 31
    # every notification became one event, posted once and mailed once
    assert report["events"] == 31
    assert report["outbox"] == {"mail": 26, "rabbitmq": 31}
    assert report["outbox_distinct"] == 57
    assert report["unprocessed"] == 0  # each event's own log job logged it


def test_each_event_fans_out_to_one_group(report: Any) -> None:
    fanned = report["fanned"]
    assert len(fanned) == 30
    assert len({g["group"] for g in fanned.values()}) == 30
    for event in fanned.values():
        assert event["processed"] and event["failed_jobs"] == 0 and event["complete"]
        assert event["counts"] == [3, 3, 0, 0]
        assert event["callback"] == ["succeeded", 1]  # its on_complete ran once
        names = ["log_project_event", "mark_event_processed", "notify_backend"]
        assert event["members"] == sorted([*names, "send_event_emails"])


def test_a_failure_is_visible_and_a_retry_succeeds(report: Any) -> None:
    [failed] = report["failed"]
    assert failed["task"] == "examples.obs_events.app.send_event_emails"
    assert failed["args"] == [report["bob_event"]]
    assert failed["attempts"] == 1  # MailRejected is not worth retrying by itself
    assert failed["error"]["type"] == "MailRejected"
    assert "bob-at-example.org" in failed["error"]["message"]
    assert report["retried"] == [True] and report["retried_twice"] == [False]
    assert report["after_retry"] == [{"status": "succeeded", "result": ["bob@example.org"]}]
    assert report["still_failed"] == []
    assert report["bob_mails"] == 1
    # bob's event: fanned out again, its stored group answers (nothing enqueued twice); the
    # retry that succeeded later counts as succeeded, and on_complete ran once (when every
    # job first had an outcome: it stamped the failure then)
    bob = report["groups_at_end"][str(report["bob_event"])]
    assert report["refanned"] == {
        "id": f"obs-event:{report['bob_event']}",
        "deduplicated": True,
        "jobs": 3,
    }
    assert bob["members"] == sorted(
        ["log_project_event", "mark_event_processed", "notify_backend", "send_event_emails"]
    )
    assert bob["counts"] == [3, 3, 0, 0] and bob["failed_jobs"] == 1
    assert bob["callback"] == ["succeeded", 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slow_tick_makes_the_next_one_wait(backend: str, tmp_path: Path) -> None:
    if backend != "sqlite":
        require_service(backend)
    spans = _run(SLOW_TICKS, backend, tmp_path)
    assert len(spans) >= 2
    _assert_serial(spans)
