"""A random walk of a small dependency tree through crashes, retries, cancels and operator
retries, on every backend: a dependent is released exactly once, when (and only when) every
job it waits for succeeded, and is cancelled while it waits by a dependency that failed or was
cancelled (transitively), until a retried dependency succeeds.

The tree: ``c`` waits for ``a`` and ``b``, ``d`` waits for ``c``. Hypothesis drives claims by
two workers, every finish kind, lapsed leases + recover, cancels and operator retries of ``a``
and ``b``, with explicit ``now`` values. After every step the statuses are read back and the
dependents are checked against what their dependencies did; the releases are counted from the
event stream.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from contract import EXPIRE, BackendFactory, BackendMachine, new_job, run_machine
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from duly._records import Outcome

LEASE = 10.0
MAX_LOST = 2
WORKERS = ("w1", "w2")
BAD = ("failed", "cancelled")
WAITING = ("scheduled", "cancelled")


class DependencyMachine(BackendMachine):
    def __init__(self) -> None:
        super().__init__()
        self.a = new_job(at=self.now, max_attempts=2)
        self.b = new_job(at=self.now, max_attempts=2)
        c = new_job(at=self.now, max_attempts=2)
        self.c = dataclasses.replace(c, after=(self.a.id, self.b.id), pipe_from=self.a.id)
        self.d = dataclasses.replace(new_job(at=self.now), after=(self.c.id,))
        self.ids = [self.a.id, self.b.id, self.c.id, self.d.id]
        _, self.since = self.run(self.backend.events.read(None, None, 1))
        jobs = [self.a, self.b, self.c, self.d]
        self.run(self.backend.dependencies.enqueue(jobs, EXPIRE))
        self.status: dict[str, str] = {}
        self.workers: dict[str, str | None] = {}
        self.bad_seen: dict[str, bool] = dict.fromkeys(self.ids, False)
        self.history: dict[str, list[str]] = {i: [] for i in self.ids}
        self.observe()

    # -- helpers -------------------------------------------------------------------------------
    def observe(self) -> None:
        for job_id in self.ids:
            record = self.run(self.backend.get_job(job_id))
            assert record is not None
            self.status[job_id] = record.status
            self.workers[job_id] = record.worker
            self.bad_seen[job_id] = self.bad_seen[job_id] or record.status in BAD

    def held_by(self, worker: str) -> list[str]:
        return sorted(
            i for i in self.ids if self.status[i] == "running" and self.workers[i] == worker
        )

    # -- rules ---------------------------------------------------------------------------------
    @rule(worker=st.sampled_from(WORKERS), limit=st.integers(1, 3))
    def claim(self, worker: str, limit: int) -> None:
        self.run(self.backend.claim(worker, ["default"], limit, self.now, self.now + LEASE))
        self.observe()

    @rule(
        worker=st.sampled_from(WORKERS),
        pick=st.integers(0, 10),
        kind=st.sampled_from(["succeeded", "failed", "retry", "release"]),
    )
    def finish(self, worker: str, pick: int, kind: str) -> None:
        held = self.held_by(worker)
        if not held:
            return
        job_id = held[pick % len(held)]
        outcome = Outcome(
            job_id,
            kind,  # type: ignore[arg-type]
            result=b'"r"',
            errors=b"[]",
            run_at=self.now,
            expire_at=self.now + EXPIRE,
        )
        self.run(self.backend.finish(worker, [outcome], self.now))
        self.observe()

    @rule()
    def workers_die(self) -> None:
        self.now += LEASE + 1
        self.run(self.backend.recover(self.now, MAX_LOST, 100, self.now + EXPIRE))
        self.observe()

    @rule()
    def time_passes(self) -> None:
        self.now += 1
        self.run(self.backend.promote_due(self.now, 100))
        self.observe()

    @rule(pick=st.integers(0, 1))
    def cancel(self, pick: int) -> None:
        self.run(self.backend.cancel(self.ids[pick], self.now, self.now + EXPIRE))
        self.observe()

    @rule(pick=st.integers(0, 1))
    def operator_retry(self, pick: int) -> None:
        self.run(self.backend.retry(self.ids[pick], self.now))
        self.observe()

    # -- invariants ----------------------------------------------------------------------------
    def releases(self, job_id: str) -> int:
        history = ["scheduled", *self.history[job_id]]
        return sum(1 for a, b in itertools.pairwise(history) if a in WAITING and b == "queued")

    def check(self, dependent: str, dependencies: list[str]) -> None:
        done = all(self.status[i] == "succeeded" for i in dependencies)
        assert self.releases(dependent) == (1 if done else 0)
        if not done:
            bad = any(self.bad_seen[i] for i in dependencies)
            assert self.status[dependent] == ("cancelled" if bad else "scheduled")

    @invariant()
    def dependents_follow_their_dependencies(self) -> None:
        while True:
            page, self.since = self.run(self.backend.events.read(self.since, None, 200))
            if not page:
                break
            for event in page:
                if event.job_id in self.history:
                    self.history[event.job_id].append(event.status)
        self.check(self.c.id, [self.a.id, self.b.id])
        self.check(self.d.id, [self.c.id])


@pytest.mark.timeout(600)
def test_dependency_machine(make_backend: BackendFactory) -> None:
    run_machine(DependencyMachine, make_backend)
