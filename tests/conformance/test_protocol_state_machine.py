"""A random walk through the job state machine on every backend, checked against a model.

Hypothesis drives enqueue / claim (two workers) / finish (every kind) / heartbeat / the clock /
recover / promote / cancel / retry / purge, with explicit ``now`` values (never sleeps). After
every step the backend must agree with a small model: no job lost (every id retrievable until
purged), one worker at most per running job, only legal statuses, only legal transitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from contract import BackendFactory, BackendMachine, approx, new_job, run_machine
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    invariant,
    multiple,
    precondition,
    rule,
)

from duly._records import STATUSES, JobFilter, Outcome

LEASE = 10.0
MAX_LOST = 2
KEEP = 100.0  # seconds a finished job is kept
WORKERS = ("w1", "w2")
QUEUES = ("a", "b")

#: Legal transitions, as (before, after). Same-state steps are not transitions.
LEGAL = {
    ("scheduled", "queued"),
    ("scheduled", "cancelled"),
    ("queued", "running"),
    ("queued", "cancelled"),
    ("retrying", "queued"),
    ("retrying", "cancelled"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "retrying"),
    ("running", "queued"),  # released now, or recovered
    ("running", "scheduled"),  # released for later
    ("running", "cancelled"),
    ("failed", "queued"),
    ("cancelled", "queued"),
}


@dataclass
class Model:
    """What the backend should hold for one job."""

    queue: str
    status: str
    attempts: int = 0
    lost: int = 0
    worker: str | None = None
    lease_until: float | None = None
    due: float | None = None  # scheduled_for while scheduled or retrying
    expire_at: float | None = None
    cancelling: bool = False  # running, and its cancel was requested


class JobStateMachine(BackendMachine):
    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, Model] = {}
        self.seen: dict[str, str] = {}  # last status observed per id, for transition checks

    ids = Bundle("ids")

    def _runs_under(self, job_id: str, worker: str) -> bool:
        model = self.jobs[job_id]
        return model.status == "running" and model.worker == worker

    # -- rules -------------------------------------------------------------------------------
    @rule(
        target=ids,
        queue=st.sampled_from(QUEUES),
        delays=st.lists(st.sampled_from([0.0, 0.0, 5.0, 25.0]), min_size=1, max_size=3),
        priority=st.integers(-1, 1),
    )
    def enqueue(self, queue: str, delays: list[float], priority: int) -> Any:
        jobs = [new_job(queue, at=self.now, delay=d, priority=priority) for d in delays]
        results = self.run(self.backend.enqueue(jobs))
        assert [r.id for r in results] == [j.id for j in jobs]
        for new, delay in zip(jobs, delays, strict=True):
            if delay > 0:
                self.jobs[new.id] = Model(queue, "scheduled", due=self.now + delay)
            else:
                self.jobs[new.id] = Model(queue, "queued")
        return multiple(*(j.id for j in jobs))

    @rule(
        worker=st.sampled_from(WORKERS),
        queues=st.sampled_from([["a"], ["b"], ["a", "b"], ["b", "a"]]),
        limit=st.integers(1, 3),
    )
    def claim(self, worker: str, queues: list[str], limit: int) -> None:
        claimable = [i for i, m in self.jobs.items() if m.status == "queued" and m.queue in queues]
        records = self.run(self.backend.claim(worker, queues, limit, self.now, self.now + LEASE))
        taken = [r.id for r in records]
        assert len(taken) == len(set(taken))
        assert set(taken) <= set(claimable), "claimed a job that was not queued"
        wanted = min(limit, len(claimable))
        if any(self.jobs[i].lost for i in claimable):
            # A job that lost a worker is handed out alone and a batch stops before one, so
            # the batch may be short; never empty while something is claimable.
            assert 1 <= len(taken) <= wanted
            if any(self.jobs[i].lost for i in taken):
                assert len(taken) == 1, "a job that lost its worker was claimed with others"
        else:
            assert len(taken) == wanted
        for record in records:
            model = self.jobs[record.id]
            assert record.status == "running"
            assert record.worker == worker
            assert record.attempts == model.attempts + 1
            model.status, model.worker = "running", worker
            model.attempts += 1
            model.lease_until = self.now + LEASE
            model.due = None

    @rule(
        job_id=ids,
        worker=st.sampled_from(WORKERS),
        kind=st.sampled_from(["succeeded", "failed", "retry", "release"]),
        later=st.sampled_from([0.0, 6.0]),
    )
    def finish(self, job_id: str, worker: str, kind: str, later: float) -> None:
        if job_id not in self.jobs:
            return
        model = self.jobs[job_id]
        run_at = self.now + later
        outcome = Outcome(
            job_id,
            kind,  # type: ignore[arg-type]
            result=b'"ok"' if kind == "succeeded" else None,
            errors=b'[{"type":"E","message":"m"}]' if kind in ("failed", "retry") else None,
            run_at=run_at if kind in ("retry", "release") else None,
            expire_at=self.now + KEEP if kind in ("succeeded", "failed") else None,
        )
        [applied] = self.run(self.backend.finish(worker, [outcome], self.now))
        expected = self._runs_under(job_id, worker) and not model.cancelling
        assert applied is expected, f"finish({kind}) by {worker} on {model}"
        if self._runs_under(job_id, worker) and model.cancelling:  # cancelled instead
            model.status, model.lease_until, model.cancelling = "cancelled", None, False
        if not applied:
            return
        model.worker, model.lease_until = None, None
        if kind in ("succeeded", "failed"):
            model.status, model.expire_at = kind, self.now + KEEP
        elif kind == "retry":
            model.status, model.due = "retrying", run_at
        else:
            model.attempts -= 1
            if run_at <= self.now:
                model.status = "queued"
            else:
                model.status, model.due = "scheduled", run_at

    @rule(worker=st.sampled_from(WORKERS), data=st.data())
    def heartbeat(self, worker: str, data: st.DataObject) -> None:
        known = sorted(self.jobs)
        asked = data.draw(st.lists(st.sampled_from(known), unique=True)) if known else []
        gone = self.run(self.backend.heartbeat(worker, asked, self.now, self.now + LEASE))
        expected = {i for i in asked if not self._runs_under(i, worker) or self.jobs[i].cancelling}
        assert set(gone) == expected
        for job_id in asked:
            if self._runs_under(job_id, worker):
                self.jobs[job_id].lease_until = self.now + LEASE

    @rule(seconds=st.sampled_from([1.0, 4.0, 9.0, 30.0]))
    def advance_clock(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def recover(self) -> None:
        lapsed = {
            i
            for i, m in self.jobs.items()
            if m.status == "running" and m.lease_until is not None and m.lease_until < self.now
        }
        # A lease ending exactly at ``now`` may or may not count as lapsed.
        edge = {
            i for i, m in self.jobs.items() if m.status == "running" and m.lease_until == self.now
        }
        found = self.run(self.backend.recover(self.now, MAX_LOST, 1000, self.now + KEEP))
        ids = [r.id for r in found]
        assert len(ids) == len(set(ids)), "recovered one job twice"
        assert lapsed <= set(ids) <= lapsed | edge
        for recovered in found:
            model = self.jobs[recovered.id]
            assert recovered.cancelled is model.cancelling
            if model.cancelling:  # a requested cancel ends it: never requeued
                assert not recovered.requeued
                model.status, model.lease_until, model.cancelling = "cancelled", None, False
                continue
            model.lost += 1
            model.worker, model.lease_until = None, None
            assert recovered.requeued is (model.lost < MAX_LOST)
            if recovered.requeued:
                model.status = "queued"
            else:
                model.status, model.expire_at = "failed", self.now + KEEP

    @rule()
    def promote(self) -> None:
        waiting = {i: m for i, m in self.jobs.items() if m.status in ("scheduled", "retrying")}
        due = {i for i, m in waiting.items() if m.due is not None and m.due <= self.now}
        later = [m.due for i, m in waiting.items() if i not in due and m.due is not None]
        moved, pending = self.run(self.backend.promote_due(self.now, 1000))
        assert moved == len(due)
        assert pending == (approx(min(later)) if later else None)
        for job_id in due:
            self.jobs[job_id].status, self.jobs[job_id].due = "queued", None

    @rule(job_id=ids)
    def cancel(self, job_id: str) -> None:
        if job_id not in self.jobs:
            return
        model = self.jobs[job_id]
        done = self.run(self.backend.cancel(job_id, self.now, self.now + KEEP))
        assert done is (model.status in ("scheduled", "queued", "retrying", "running"))
        if done and model.status == "running":  # requested: it ends with its run
            model.cancelling, model.expire_at = True, self.now + KEEP
        elif done:
            model.status, model.worker, model.lease_until, model.due = "cancelled", None, None, None
            model.expire_at = self.now + KEEP

    @rule(job_id=ids)
    def retry(self, job_id: str) -> None:
        if job_id not in self.jobs:
            return
        model = self.jobs[job_id]
        done = self.run(self.backend.retry(job_id, self.now))
        assert done is (model.status in ("failed", "cancelled"))
        if done:
            model.status, model.attempts, model.lost, model.expire_at = "queued", 0, 0, None

    @precondition(lambda self: any(m.expire_at is not None for m in self.jobs.values()))
    @rule()
    def purge(self) -> None:
        expired = {
            i
            for i, m in self.jobs.items()
            if m.status in ("succeeded", "failed", "cancelled")
            and m.expire_at is not None
            and m.expire_at <= self.now
        }
        assert self.run(self.backend.purge(self.now, 1000)) == len(expired)
        for gone in expired:
            del self.jobs[gone]
            self.seen.pop(gone, None)

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def backend_agrees_with_the_model(self) -> None:
        listed = self.run(self.backend.list_jobs(JobFilter(), 10_000))
        by_id = {r.id: r for r in listed}
        assert len(by_id) == len(listed), "list_jobs returned one job twice"
        assert set(by_id) == set(self.jobs), "a job was lost, or one appeared"
        for job_id, model in self.jobs.items():
            record = by_id[job_id]
            assert self.run(self.backend.get_job(job_id)) == record
            assert record.status in STATUSES
            before = self.seen.get(job_id)
            if before is not None and before != record.status:
                assert (before, record.status) in LEGAL, f"{before} -> {record.status}"
            self.seen[job_id] = record.status
            state = (record.status, record.attempts, record.lost)
            assert state == (model.status, model.attempts, model.lost), job_id
            if model.status == "running":
                assert record.worker == model.worker, job_id
                assert record.lease_until == approx(model.lease_until)
            if model.status in ("scheduled", "retrying"):
                assert record.scheduled_for == approx(model.due)
        for status in ("running", "queued"):
            records = self.run(self.backend.list_jobs(JobFilter(status=status), 10_000))
            expected = {i for i, m in self.jobs.items() if m.status == status}
            assert {r.id for r in records} == expected, status


@pytest.mark.timeout(300)  # a passing run takes seconds; shrinking a failure takes longer
def test_job_state_machine(make_backend: BackendFactory) -> None:
    run_machine(JobStateMachine, make_backend)
