"""A random walk through unique holds and gates on every backend, checked against a model.

Hypothesis enqueues jobs (plain, with a unique key from a small set held until "start" or
"finish" and sometimes expiring, with a gate of limit 1 or 2, several in one batch), claims them
(two workers, various limits, one queue or both), finishes them with every outcome kind (also
late, or by the wrong worker), lets leases lapse and recovers, cancels (scheduled, queued,
parked, running), promotes due jobs and retries failed or cancelled ones. Every ``now`` is
explicit (never a sleep).

After every step the backend must agree with the model where the spec is exact: every job
stored, in exactly its modelled state (parked jobs are listed and counted as ``queued``, never
charged an attempt), and no gate with more running jobs than its limit. An enqueue of a key
whose active holder still holds it returns that holder (deduplicated, nothing stored); any
other enqueue stores its job. An operator retry takes the key back only if the hold lasted
until the job finished, and is refused only then, while another job holds the key. Which jobs
a claim takes is left open (parking may stop it short): only queued ones, a queue's best first,
at least one while a plain job waits. Liveness: once claims take nothing, a gate with a free
slot has no queued job left (none stranded parked); and at teardown every failed or cancelled
job is retried and every job is run to ``succeeded``, after which every unique key is free.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar

import pytest
from contract import BackendFactory, BackendMachine, approx, new_job, run_machine
from hypothesis import strategies as st
from hypothesis.stateful import (
    invariant,
    precondition,
    rule,
)

from duly._records import ACTIVE_STATUSES, JobFilter, Outcome

F = TypeVar("F", bound=Callable[..., Any])

LEASE = 10.0
MAX_LOST = 2
KEEP = 10_000.0  # seconds a finished job is kept (never purged here)
WORKERS = ("w1", "w2")
QUEUES = ("a", "b")
GATES = {"m": 1, "c": 2}  # a mutex and a concurrency limit of 2; each gate keeps one limit
UNIQUE_KEYS = ("k1", "k2")
CLAIM_ALL = 3  # the limit of each claim when claiming until nothing is left


class Spec(NamedTuple):
    """One job to enqueue, as drawn (printed in a failing example)."""

    queue: str
    priority: int
    delay: float
    unique_key: str | None
    until: str
    hold_for: float | None  # the hold expires this long after the enqueue
    gate: str | None


def specs(
    unique_keys: list[str | None] | None = None, gates: list[str | None] | None = None
) -> st.SearchStrategy[Spec]:
    """Jobs to enqueue: any kind, or only with a unique key / a gate from the lists given."""
    return st.builds(
        Spec,
        queue=st.sampled_from(QUEUES),
        priority=st.integers(0, 1),
        delay=st.sampled_from([0.0, 0.0, 0.0, 5.0]),
        unique_key=st.sampled_from(unique_keys or [None, *UNIQUE_KEYS]),
        until=st.sampled_from(["finish", "start"]),
        hold_for=st.sampled_from([None, 2.0, 20.0]),
        gate=st.sampled_from(gates or [None, *GATES]),
    )


@dataclass
class Model:
    """What the backend should hold for one job."""

    name: str  # j1, j2, ... in enqueue order, for messages
    queue: str
    priority: int
    status: str
    gate: str | None
    unique_key: str | None
    until: str
    hold_expires: float | None
    holding: bool = False  # holds its unique key (while the hold has not expired)
    retakes: bool = False  # finished while holding: an operator retry takes the key again
    hold_ended: str | None = None  # why it stopped holding before it finished (messages)
    attempts: int = 0
    lost: int = 0
    worker: str | None = None
    last_worker: str | None = None  # the worker of its last run, for late finishes
    cancelling: bool = False  # running, and its cancel was requested
    lease_until: float | None = None
    due: float | None = None  # scheduled_for while scheduled or retrying


def step(function: F) -> F:
    """Marks the machine unclean until the invariants pass again after this rule."""

    @functools.wraps(function)
    def wrapper(self: ConcurrencyMachine, *args: Any, **kwargs: Any) -> Any:
        self.clean = False
        return function(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class ConcurrencyMachine(BackendMachine):
    drains = 0  # teardowns that drove every job to its end (the test checks some did)

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, Model] = {}  # in enqueue order
        self.owner: dict[str, str] = {}  # unique key -> the job that last took it
        self.clean = False

    def teardown(self) -> None:
        try:
            if self.clean:  # only after a run whose steps all passed
                self.drain()
                type(self).drains += 1
        finally:
            super().teardown()

    # -- the model -----------------------------------------------------------------------------
    def ids(self, *statuses: str) -> list[str]:
        return [i for i, m in self.jobs.items() if not statuses or m.status in statuses]

    def holder(self, key: str, at: float) -> str | None:
        """The active job holding ``key`` at ``at``, per the model."""
        job_id = self.owner.get(key)
        if job_id is None:
            return None
        model = self.jobs[job_id]
        if not model.holding or model.status not in ACTIVE_STATUSES:
            return None
        if model.hold_expires is not None and model.hold_expires <= at:
            return None
        return job_id

    def take_key(self, job_id: str) -> None:
        model = self.jobs[job_id]
        assert model.unique_key is not None
        previous = self.owner.get(model.unique_key)
        if previous is not None and previous != job_id and self.jobs[previous].holding:
            self.jobs[previous].holding = False  # taken over after its hold expired
            self.jobs[previous].hold_ended = "taken over"
        self.owner[model.unique_key] = job_id
        model.holding = True

    def end_run(self, model: Model) -> None:
        model.worker, model.lease_until = None, None

    def finished(self, model: Model, status: str) -> None:
        """``model`` reached succeeded, failed or cancelled: its hold ends."""
        expired = model.hold_expires is not None and model.hold_expires <= self.now
        model.retakes = model.holding and not expired
        if model.holding and expired:
            model.hold_ended = "expired"
        model.holding = False
        model.status, model.due = status, None
        self.end_run(model)

    def ended_with_key(self) -> list[str]:
        """Failed or cancelled jobs enqueued with a unique key (what an operator retry tests)."""
        return [i for i in self.ids("failed", "cancelled") if self.jobs[i].unique_key is not None]

    def running(self, gate: str) -> list[str]:
        return [i for i, m in self.jobs.items() if m.status == "running" and m.gate == gate]

    def describe(self, job_ids: Any) -> list[str]:
        return [self.jobs[i].name if i in self.jobs else i for i in job_ids]

    # -- shared steps --------------------------------------------------------------------------
    def enqueue_specs(self, batch: list[Spec]) -> None:
        jobs = []
        for spec in batch:
            new = new_job(spec.queue, at=self.now, delay=spec.delay, priority=spec.priority)
            if spec.unique_key is not None:
                expires = None if spec.hold_for is None else self.now + spec.hold_for
                new = replace(
                    new,
                    unique_key=spec.unique_key,
                    unique_until=spec.until,  # type: ignore[arg-type]
                    unique_expires_at=expires,
                )
            if spec.gate is not None:
                new = replace(new, gate=spec.gate, gate_limit=GATES[spec.gate])
            jobs.append(new)
        results = self.run(self.backend.enqueue(jobs))
        assert len(results) == len(jobs)
        for n, (new, result) in enumerate(zip(jobs, results, strict=True)):
            key = new.unique_key
            holder = None if key is None else self.holder(key, self.now)
            if holder is not None:
                assert (result.id, result.deduplicated) == (holder, True), (
                    f"job {n} of the batch: key {key} is held by {self.jobs[holder].name}, "
                    f"got {self.describe([result.id])} deduplicated={result.deduplicated}"
                )
                continue
            assert (result.id, result.deduplicated) == (new.id, False), (
                f"job {n} of the batch (key {key}, no active holder per the model) was "
                f"deduplicated to {self.describe([result.id])}"
            )
            delayed = new.scheduled_for > new.enqueued_at
            self.jobs[new.id] = Model(
                name=f"j{len(self.jobs) + 1}",
                queue=new.queue,
                priority=new.priority,
                status="scheduled" if delayed else "queued",
                gate=new.gate,
                unique_key=key,
                until=new.unique_until,
                hold_expires=new.unique_expires_at,
                due=new.scheduled_for if delayed else None,
            )
            if key is not None:
                self.take_key(new.id)

    def claim_once(self, worker: str, queues: list[str], limit: int) -> list[str]:
        """One claim, checked against the model; the ids taken."""
        queued = [i for i in self.ids("queued") if self.jobs[i].queue in queues]
        records = self.run(self.backend.claim(worker, queues, limit, self.now, self.now + LEASE))
        taken = [r.id for r in records]
        names = self.describe(taken)
        assert len(taken) == len(set(taken)), f"claimed one job twice: {names}"
        assert len(taken) <= limit
        assert set(taken) <= set(queued), f"claimed a job that was not queued: {names}"
        plain = [i for i in queued if self.jobs[i].gate is None]
        if plain:
            assert taken, f"a claim of {queues} took nothing while {self.describe(plain)} wait"
        if any(self.jobs[i].lost for i in taken):
            assert len(taken) == 1, f"a job that lost its worker was claimed with others: {names}"
        for queue in queues:
            # The best of a queue first: no plain job left behind for a worse one.
            left = [
                self.jobs[i].priority
                for i in plain
                if i not in taken and self.jobs[i].queue == queue and not self.jobs[i].lost
            ]
            worst = [self.jobs[i].priority for i in taken if self.jobs[i].queue == queue]
            if left and worst:
                assert min(worst) >= max(left), f"{queue}: took {names} before a better job"
        for record in records:
            model = self.jobs[record.id]
            assert record.status == "running"
            assert record.worker == worker
            assert record.attempts == model.attempts + 1, model.name
            assert record.started_at == approx(self.now)
            assert record.lease_until == approx(self.now + LEASE)
            model.status, model.worker, model.last_worker = "running", worker, worker
            model.attempts += 1
            model.lease_until, model.due = self.now + LEASE, None
            if model.until == "start" and model.holding:
                model.holding = False  # the hold ends when the job first starts
                model.hold_ended = "started"
        for gate, limit_of_gate in GATES.items():
            running = self.running(gate)
            assert len(running) <= limit_of_gate, (
                f"gate {gate} (limit {limit_of_gate}) runs {self.describe(running)} "
                f"after a claim of {names}"
            )
        return taken

    def claim_until_empty(self) -> None:
        """Claim until a claim takes nothing: then no job waits that could run (liveness)."""
        for n in range(200):
            if not self.claim_once(WORKERS[n % 2], list(QUEUES), CLAIM_ALL):
                break
        else:
            raise AssertionError("claims kept taking jobs")
        stuck = [i for i in self.ids("queued") if self.jobs[i].gate is None]
        assert not stuck, f"plain jobs {self.describe(stuck)} queued but never claimed"
        for gate, limit in GATES.items():
            running = self.running(gate)
            waiting = [i for i in self.ids("queued") if self.jobs[i].gate == gate]
            assert len(running) == limit or not waiting, (
                f"gate {gate} runs {self.describe(running)} of {limit} but "
                f"{self.describe(waiting)} stay queued (stranded parked)"
            )

    def finish_one(self, job_id: str, worker: str, kind: str, later: float) -> bool:
        model = self.jobs[job_id]
        run_at = self.now + later
        outcome = Outcome(
            job_id,
            kind,  # type: ignore[arg-type]
            result=b'"ok"' if kind in ("succeeded", "again") else None,
            errors=b'[{"type":"E","message":"m"}]' if kind in ("failed", "retry") else None,
            run_at=run_at if kind in ("retry", "release", "again") else None,
            expire_at=self.now + KEEP if kind in ("succeeded", "failed") else None,
        )
        [applied] = self.run(self.backend.finish(worker, [outcome], self.now))
        runs_here = model.status == "running" and model.worker == worker
        assert applied is (runs_here and not model.cancelling), (
            f"finish({kind}) by {worker} of {model}"
        )
        if runs_here and model.cancelling:  # its cancel was requested: cancelled instead
            model.cancelling = False
            self.finished(model, "cancelled")
        if not applied:
            return False
        if kind in ("succeeded", "failed"):
            self.finished(model, kind)
        elif kind == "retry":
            self.end_run(model)
            model.status, model.due = "retrying", run_at
        elif kind == "release":
            self.end_run(model)
            model.attempts -= 1
            if run_at <= self.now:
                model.status = "queued"
            else:
                model.status, model.due = "scheduled", run_at
        else:  # again: the same job runs once more, as new; its unique hold stays
            self.end_run(model)
            model.attempts, model.lost = 0, 0
            if run_at <= self.now:
                model.status = "queued"
            else:
                model.status, model.due = "scheduled", run_at
        return True

    def promote_due(self) -> None:
        waiting = {i: m for i, m in self.jobs.items() if m.status in ("scheduled", "retrying")}
        due = {i for i, m in waiting.items() if m.due is not None and m.due <= self.now}
        later = [m.due for i, m in waiting.items() if i not in due and m.due is not None]
        moved, pending = self.run(self.backend.promote_due(self.now, 1000))
        assert moved == len(due)
        assert pending == (approx(min(later)) if later else None)
        for job_id in due:
            self.jobs[job_id].status, self.jobs[job_id].due = "queued", None

    def drain(self) -> None:
        """Retry every failed or cancelled job and run every job to success: none may stay
        stranded (parked) on the way, and a retry refused for a held key succeeds once the
        holder is done."""
        for _ in range(2 * len(self.jobs) + 10):
            for job_id in self.ids("failed", "cancelled"):
                self.retry_one(job_id)
            for job_id in self.ids("running"):
                model = self.jobs[job_id]
                assert model.worker is not None
                cancelling = model.cancelling
                assert self.finish_one(job_id, model.worker, "succeeded", 0.0) is not cancelling
            self.now += 50.0  # past every due time and hold
            self.promote_due()
            self.claim_until_empty()
            self.backend_agrees_with_the_model()
            if all(m.status == "succeeded" for m in self.jobs.values()):
                break
        left = {m.name: m.status for m in self.jobs.values() if m.status != "succeeded"}
        assert not left, f"not driven to success: {left}"
        # Every hold ended with its job: each key is free again.
        self.enqueue_specs([Spec("a", 0, 0.0, key, "finish", None, None) for key in UNIQUE_KEYS])
        for key in UNIQUE_KEYS:
            assert self.jobs[self.owner[key]].status == "queued"
        self.backend_agrees_with_the_model()

    # -- rules ---------------------------------------------------------------------------------
    @rule(batch=st.lists(specs(), min_size=1, max_size=3))
    @step
    def enqueue(self, batch: list[Spec]) -> None:
        self.enqueue_specs(batch)

    @rule(batch=st.lists(specs(unique_keys=["k1", "k1", "k2"]), min_size=1, max_size=2))
    @step
    def enqueue_unique(self, batch: list[Spec]) -> None:
        self.enqueue_specs(batch)

    @rule(batch=st.lists(specs(gates=list(GATES)), min_size=1, max_size=3))
    @step
    def enqueue_gated(self, batch: list[Spec]) -> None:
        self.enqueue_specs(batch)

    @rule(
        worker=st.sampled_from(WORKERS),
        queues=st.sampled_from([["a"], ["b"], ["a", "b"], ["b", "a"]]),
        limit=st.integers(1, 3),
    )
    @step
    def claim(self, worker: str, queues: list[str], limit: int) -> None:
        self.claim_once(worker, queues, limit)

    @rule()
    @step
    def claim_everything(self) -> None:
        self.claim_until_empty()

    @precondition(lambda self: any(m.last_worker for m in self.jobs.values()))
    @rule(
        data=st.data(),
        kind=st.sampled_from(["succeeded", "failed", "retry", "release", "again"]),
        later=st.sampled_from([0.0, 6.0]),
        own=st.sampled_from([True, True, True, False]),
    )
    @step
    def finish(self, data: st.DataObject, kind: str, later: float, own: bool) -> None:
        ran = [i for i, m in self.jobs.items() if m.last_worker is not None]
        job_id = data.draw(st.sampled_from(ran), label="job")
        last = self.jobs[job_id].last_worker
        worker = last if own else next(w for w in WORKERS if w != last)
        self.finish_one(job_id, str(worker), kind, later)

    @rule(seconds=st.sampled_from([1.0, 4.0, 11.0, 30.0]))
    @step
    def advance_clock(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    @step
    def recover(self) -> None:
        running = {i: m for i, m in self.jobs.items() if m.status == "running"}
        lapsed = {
            i for i, m in running.items() if m.lease_until is not None and m.lease_until < self.now
        }
        edge = {i for i, m in running.items() if m.lease_until == self.now}  # may count or not
        found = self.run(self.backend.recover(self.now, MAX_LOST, 1000, self.now + KEEP))
        ids = [r.id for r in found]
        assert len(ids) == len(set(ids)), "recovered one job twice"
        assert lapsed <= set(ids) <= lapsed | edge, self.describe(ids)
        for recovered in found:
            model = self.jobs[recovered.id]
            assert recovered.cancelled is model.cancelling, model.name
            if model.cancelling:  # a requested cancel ends it: never requeued
                assert not recovered.requeued, model.name
                model.cancelling = False
                self.finished(model, "cancelled")
                continue
            model.lost += 1
            assert recovered.requeued is (model.lost < MAX_LOST), model.name
            if recovered.requeued:
                self.end_run(model)
                model.status = "queued"
            else:
                self.finished(model, "failed")

    @rule()
    @step
    def promote(self) -> None:
        self.promote_due()

    def cancel_one(self, job_id: str) -> None:
        model = self.jobs[job_id]
        done = self.run(self.backend.cancel(job_id, self.now, self.now + KEEP))
        assert done is (model.status in ACTIVE_STATUSES), f"cancel of {model}"
        if done and model.status == "running":  # requested: it ends with its run
            model.cancelling = True
        elif done:
            self.finished(model, "cancelled")

    @precondition(lambda self: bool(self.jobs))
    @rule(data=st.data())
    @step
    def cancel(self, data: st.DataObject) -> None:
        self.cancel_one(data.draw(st.sampled_from(self.ids()), label="job"))

    @precondition(lambda self: bool(self.ids("scheduled", "queued", "retrying")))
    @rule(data=st.data())
    @step
    def cancel_waiting(self, data: st.DataObject) -> None:
        waiting = self.ids("scheduled", "queued", "retrying")  # queued includes parked
        self.cancel_one(data.draw(st.sampled_from(waiting), label="job"))

    @precondition(lambda self: bool(self.ids("running")))
    @rule(data=st.data())
    @step
    def cancel_running(self, data: st.DataObject) -> None:
        self.cancel_one(data.draw(st.sampled_from(self.ids("running")), label="job"))

    def retry_one(self, job_id: str) -> None:
        model = self.jobs[job_id]
        holder = None
        if model.retakes:
            assert model.unique_key is not None
            holder = self.holder(model.unique_key, self.now)
        if holder is not None:
            why = f"it takes key {model.unique_key} again, held by {self.jobs[holder].name}"
        elif model.retakes:
            why = f"it takes key {model.unique_key} again, which no active job holds"
        elif model.unique_key is not None:
            why = f"it takes no key (its hold on {model.unique_key} ended: {model.hold_ended})"
        else:
            why = "it has no unique key"
        done = self.run(self.backend.retry(job_id, self.now))
        assert done is (holder is None), f"retry of {model.name} gave {done}: {why}; {model}"
        if not done:
            return
        model.status, model.attempts, model.lost = "queued", 0, 0
        self.end_run(model)
        if model.retakes:
            self.take_key(job_id)
            model.retakes, model.hold_ended = False, None

    @precondition(lambda self: bool(self.ids("failed", "cancelled")))
    @rule(data=st.data())
    @step
    def retry(self, data: st.DataObject) -> None:
        self.retry_one(data.draw(st.sampled_from(self.ids("failed", "cancelled")), label="job"))

    @precondition(lambda self: bool(self.ended_with_key()))
    @rule(data=st.data())
    @step
    def retry_unique(self, data: st.DataObject) -> None:
        self.retry_one(data.draw(st.sampled_from(self.ended_with_key()), label="job"))

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def backend_agrees_with_the_model(self) -> None:
        listed = self.run(self.backend.list_jobs(JobFilter(), 10_000))
        by_id = {r.id: r for r in listed}
        assert len(by_id) == len(listed), "list_jobs returned one job twice"
        assert set(by_id) == set(self.jobs), (
            f"lost {self.describe(set(self.jobs) - set(by_id))}, "
            f"unknown {sorted(set(by_id) - set(self.jobs))}"
        )
        for job_id, model in self.jobs.items():
            record = by_id[job_id]
            state = (record.status, record.attempts, record.lost)
            assert state == (model.status, model.attempts, model.lost), model
            if model.status == "running":
                assert record.worker == model.worker, model.name
                assert record.lease_until == approx(model.lease_until), model.name
            if model.status in ("scheduled", "retrying"):
                assert record.scheduled_for == approx(model.due), model.name
        for status in ("scheduled", "queued", "running", "retrying"):
            records = self.run(self.backend.list_jobs(JobFilter(status=status), 10_000))
            expected = set(self.ids(status))
            assert {r.id for r in records} == expected, status
        stats = {q.name: q for q in self.run(self.backend.queue_stats())}
        for queue in QUEUES:
            mine = [m for m in self.jobs.values() if m.queue == queue]
            counts = (
                sum(m.status == "queued" for m in mine),  # parked jobs count as queued
                sum(m.status in ("scheduled", "retrying") for m in mine),
                sum(m.status == "running" for m in mine),
            )
            if queue not in stats:
                assert not mine, queue
                continue
            got = stats[queue]
            assert (got.queued, got.scheduled, got.running) == counts, queue
        for gate, limit in GATES.items():
            assert len(self.running(gate)) <= limit, gate
        self.clean = True


@pytest.mark.timeout(600)  # a passing run takes seconds; shrinking a failure takes longer
def test_concurrency_state_machine(make_backend: BackendFactory) -> None:
    machine = run_machine(ConcurrencyMachine, make_backend)
    assert machine.drains > 0, "no run reached the final drain"
