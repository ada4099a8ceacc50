"""A random walk of one group's members through crashes, retries, cancels and operator retries,
on every backend: the group counts each member's current outcome once, and its callback is
queued exactly once, when (and only when) every member first has had an outcome.

Hypothesis drives claims by two workers, every finish kind, lapsed leases + recover (a worker
killed mid-run, before or after finishing its run but before reporting it), cancels and
operator retries, with explicit ``now`` values. After every step the statuses are read back:
each member's current status, and whether every member has had an outcome once, are the model
the group is checked against.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from contract import EXPIRE, BackendFactory, BackendMachine, new_job, run_machine
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from duly._ids import new_id
from duly._records import NewGroup, Outcome

LEASE = 10.0
MAX_LOST = 2
WORKERS = ("w1", "w2")
TERMINAL = ("succeeded", "failed", "cancelled")
MEMBERS = 3


class GroupMachine(BackendMachine):
    def __init__(self) -> None:
        super().__init__()
        self.members = [new_job(at=self.now, max_attempts=2) for _ in range(MEMBERS)]
        self.group_id = new_id() + "g"
        callback = dataclasses.replace(new_job(task="tests.tasks.done"), id=self.group_id)
        _, self.since = self.run(self.backend.events.read(None, None, 1))
        group = NewGroup(self.group_id, None, self.now, EXPIRE, callback)
        self.run(self.backend.groups.store(group, self.members))
        self.current: dict[str, str] = {}  # member id -> its terminal status now
        self.completed_once = False
        self.history: list[str] = []  # the callback's statuses, from the event stream

    # -- helpers -------------------------------------------------------------------------------
    def statuses(self) -> dict[str, tuple[str, str | None]]:
        ids = [m.id for m in self.members] + [self.group_id]
        out = {}
        for job_id in ids:
            record = self.run(self.backend.get_job(job_id))
            assert record is not None
            out[job_id] = (record.status, record.worker)
        return out

    def observe(self) -> None:
        for job_id, (status, _) in self.statuses().items():
            if job_id == self.group_id:
                continue
            if status in TERMINAL:
                self.current[job_id] = status
            else:
                self.current.pop(job_id, None)
        self.completed_once = self.completed_once or len(self.current) == MEMBERS

    def held_by(self, worker: str) -> list[str]:
        return sorted(i for i, (s, w) in self.statuses().items() if s == "running" and w == worker)

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
            result=b"1",
            errors=b"[]",
            run_at=self.now,
            expire_at=self.now + EXPIRE,
        )
        self.run(self.backend.finish(worker, [outcome], self.now))
        self.observe()

    @rule()
    def workers_die(self) -> None:
        """Every lease lapses: the runs in flight are lost (reported or not)."""
        self.now += LEASE + 1
        self.run(self.backend.recover(self.now, MAX_LOST, 100, self.now + EXPIRE))
        self.observe()

    @rule()
    def time_passes(self) -> None:
        self.now += 1
        self.run(self.backend.promote_due(self.now, 100))
        self.observe()

    @rule(pick=st.integers(0, MEMBERS - 1))
    def cancel(self, pick: int) -> None:
        self.run(self.backend.cancel(self.members[pick].id, self.now, self.now + EXPIRE))
        self.observe()

    @rule(pick=st.integers(0, MEMBERS - 1))
    def operator_retry(self, pick: int) -> None:
        self.run(self.backend.retry(self.members[pick].id, self.now))
        self.observe()

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def counts_match_current_outcomes(self) -> None:
        record = self.run(self.backend.groups.get(self.group_id))
        assert record is not None
        now = list(self.current.values())
        assert record.total == MEMBERS
        assert record.succeeded == now.count("succeeded")
        assert record.failed == now.count("failed")
        assert record.cancelled == now.count("cancelled")
        assert (record.completed_at is not None) == (len(self.current) == MEMBERS)
        assert (record.first_completed_at is not None) == self.completed_once

    @invariant()
    def callback_queued_exactly_once_when_complete(self) -> None:
        status, _ = self.statuses()[self.group_id]
        complete = self.completed_once
        assert (status == "scheduled") == (not complete)
        while True:  # the callback's events since the last look
            page, self.since = self.run(self.backend.events.read(self.since, None, 200))
            if not page:
                break
            self.history += [e.status for e in page if e.job_id == self.group_id]
        history = self.history
        assert history[0] == "scheduled"
        woken = sum(1 for a, b in itertools.pairwise(history) if (a, b) == ("scheduled", "queued"))
        assert woken == (1 if complete else 0)


@pytest.mark.timeout(600)
def test_group_completion_machine(make_backend: BackendFactory) -> None:
    run_machine(GroupMachine, make_backend)
