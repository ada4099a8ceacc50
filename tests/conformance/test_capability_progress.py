"""The progress capability (``duly.backends.progress``) on every backend: reports stored with
the heartbeat, only on a job still running under the reporting worker; the checkpoint kept
across a recovery, a hand-back and a retry, and returned by the next claim; a progress event
per progress written."""

from __future__ import annotations

import json

import pytest
from contract import LEASE, T0, W1, W2, claim_ids, enqueue, finish_one, job, new_job

from duly._records import Outcome, ProgressReport, Recovered
from duly.backends.base import Backend
from duly.backends.events import EVENTS
from duly.backends.progress import PROGRESS

pytestmark = pytest.mark.timeout(30)


def progress(fraction: float, message: str | None = None, at: float = T0) -> bytes:
    return json.dumps({"fraction": fraction, "message": message, "at": at}).encode()


async def test_a_report_is_stored_with_the_heartbeat(backend: Backend) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1, now=T0)
    store = PROGRESS.of(backend)
    report = ProgressReport(new.id, progress(0.25, "page 1 of 4"), b'{"after": 17}')
    assert await store.heartbeat(W1, [new.id], T0 + 1, T0 + 1 + LEASE, [report]) == []
    record = await job(backend, new.id)
    assert json.loads(record.progress or b"") == {
        "fraction": 0.25,
        "message": "page 1 of 4",
        "at": T0,
    }
    assert json.loads(record.cursor or b"") == {"after": 17}
    assert record.lease_until == pytest.approx(T0 + 1 + LEASE)  # the heartbeat's own work

    # None fields leave what is stored; a report needs no lease extension (job_ids empty).
    later = ProgressReport(new.id, progress(0.5), None)
    assert await store.heartbeat(W1, [], T0 + 2, T0 + 2, [later]) == []
    record = await job(backend, new.id)
    assert json.loads(record.progress or b"")["fraction"] == 0.5
    assert json.loads(record.cursor or b"") == {"after": 17}
    assert record.lease_until == pytest.approx(T0 + 1 + LEASE)


async def test_a_report_of_a_job_not_running_under_the_worker_changes_nothing(
    backend: Backend,
) -> None:
    mine, theirs, waiting = new_job(), new_job(), new_job()
    await enqueue(backend, mine, theirs)
    await claim_ids(backend, W1, limit=1, now=T0)
    await claim_ids(backend, W2, limit=1, now=T0)
    await enqueue(backend, waiting)
    store = PROGRESS.of(backend)
    reports = [
        ProgressReport(theirs.id, progress(0.9), b"1"),  # runs under W2
        ProgressReport(waiting.id, progress(0.9), b"1"),  # queued
    ]
    assert await store.heartbeat(W1, [mine.id], T0 + 1, T0 + 31, reports) == []
    for job_id in (theirs.id, waiting.id):
        record = await job(backend, job_id)
        assert (record.progress, record.cursor) == (None, None)


async def test_the_checkpoint_survives_recovery_and_the_next_claim_returns_it(
    backend: Backend,
) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1, now=T0)
    store = PROGRESS.of(backend)
    await store.heartbeat(
        W1, [new.id], T0 + 1, T0 + 1 + LEASE, [ProgressReport(new.id, None, b"500")]
    )
    assert await backend.recover(T0 + 100, 3, 100, T0 + 1000) == [Recovered(new.id, True)]
    [claimed] = await backend.claim(W2, ["default"], 1, T0 + 101, T0 + 131)
    assert (claimed.id, claimed.cursor) == (new.id, b"500")


@pytest.mark.parametrize("kind", ["release", "retry"])
async def test_the_checkpoint_survives_a_hand_back_and_a_retry(backend: Backend, kind: str) -> None:
    new = new_job()
    await enqueue(backend, new)
    await claim_ids(backend, W1, now=T0)
    store = PROGRESS.of(backend)
    await store.heartbeat(W1, [], T0 + 1, T0 + 1, [ProgressReport(new.id, None, b'"k-9"')])
    errors = None if kind == "release" else b"[]"
    assert await finish_one(
        backend, W1, Outcome(new.id, kind, errors=errors, run_at=T0 + 2), T0 + 2
    )
    await backend.promote_due(T0 + 3, 100)
    [claimed] = await backend.claim(W2, ["default"], 1, T0 + 3, T0 + 33)
    assert claimed.cursor == b'"k-9"'
    # A run that starts over stores the cleared checkpoint: the next claim has none to resume.
    await store.heartbeat(W2, [], T0 + 4, T0 + 4, [ProgressReport(new.id, None, b"null")])
    assert json.loads((await job(backend, new.id)).cursor or b"null") is None


async def test_a_progress_write_appends_a_progress_event(backend: Backend) -> None:
    new = new_job(key="export:7")
    await enqueue(backend, new)
    events = EVENTS.of(backend)
    _, cursor = await events.read(None, None, 100)
    _, key_cursor = await events.read(None, "export:7", 100)
    await claim_ids(backend, W1, now=T0)
    store = PROGRESS.of(backend)
    await store.heartbeat(W1, [new.id], T0 + 1, T0 + 31, [ProgressReport(new.id, None, b"1")])
    await store.heartbeat(W1, [new.id], T0 + 2, T0 + 32, [ProgressReport(new.id, progress(0.5))])
    for key, after in ((None, cursor), ("export:7", key_cursor)):
        read, _ = await events.read(after, key, 100)
        assert [(e.job_id, e.status) for e in read] == [(new.id, "running")] * 2
        claimed_event, progress_event = read
        assert claimed_event.progress is None  # the claim's status change
        assert json.loads(progress_event.progress or b"")["fraction"] == 0.5
        assert progress_event.key == "export:7"
