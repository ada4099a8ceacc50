"""7. The hypothesis state machine of the job lifecycle, on every backend, with more examples.

The machine itself lives in ``tests/conformance/test_protocol_state_machine.py`` (enqueue /
claim by two workers / every finish kind / heartbeat / lease expiry / recover / promote /
cancel / retry / purge, checked against a model after every step: no job lost, one worker at
most per running job, only legal states and transitions). Here it runs with more examples.
"""

from __future__ import annotations

import sys
import traceback
import uuid
from pathlib import Path
from typing import Any

from chaos import harness as h

NAME = "7 state machine"


def run(kind: str, workdir: Path, short: bool = False) -> h.Result:
    result = h.Result(NAME, kind, ok=True, bound=0)
    sys.path.insert(0, str(h.ROOT / "tests" / "conformance"))
    try:
        from contract import BackendFactory
        from hypothesis import HealthCheck, settings
        from hypothesis.stateful import run_state_machine_as_test
        from test_protocol_state_machine import JobStateMachine
    except Exception as exc:
        result.pending = f"state machine not importable ({exc})"
        return result
    hexname = lambda: f"t_{uuid.uuid4().hex[:12]}"  # noqa: E731
    if kind == "sqlite":
        from duly.backends.sqlite import SqliteBackend

        build = lambda name: SqliteBackend(f"sqlite:///{workdir}/sm-{name}.db")  # noqa: E731
    elif kind == "redis":
        from duly.backends.redis import RedisBackend

        build = lambda name: RedisBackend(h.REDIS_URL, namespace=name)  # noqa: E731
    else:
        from duly.backends.postgres import PostgresBackend

        build = lambda name: PostgresBackend(h.POSTGRES_URL, schema=name)  # noqa: E731
    factory = BackendFactory(kind, build, hexname(), hexname)
    examples = 25 if short else 100
    machine = type(
        "ChaosJobStateMachine",
        (JobStateMachine,),
        {"factory": factory, "claim": _claim_rule(JobStateMachine)},
    )
    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except Exception as exc:
        # Hypothesis puts the falsifying program in the exception's notes: keep all of it.
        detail = "".join(traceback.format_exception(exc))
        (workdir / f"s7-{kind}-failure.txt").write_text(detail)
        notes = " | ".join(getattr(exc, "__notes__", []))
        result.check(
            False,
            f"{type(exc).__name__}: {str(exc)[:300]} {notes[:600]} "
            f"(full program and traceback: {workdir / f's7-{kind}-failure.txt'})",
        )
    result.jobs = examples
    result.notes.append(f"{examples} random programs x up to 40 steps (jobs column = programs)")
    return result


def _claim_rule(base: type) -> Any:
    """The machine's ``claim`` rule, with the model of the claim contract as of commit 2822923.

    A job that already lost a worker is handed out alone: only as the first job of a claim,
    which then stops (``Backend.claim``'s docstring). The model in
    ``tests/conformance/test_protocol_state_machine.py`` still expects every claim to take
    ``min(limit, claimable)`` jobs, so it fails on any program that recovers a job and then
    claims with room for two. Same strategies and same bookkeeping as the original rule; only
    the count check follows the new contract. Drop this once the conformance model has it.
    """
    from hypothesis.stateful import rule
    from test_protocol_state_machine import LEASE

    strategies = base.claim.hypothesis_stateful_rule.arguments_strategies

    @rule(**strategies)
    def claim(self: Any, worker: str, queues: list[str], limit: int) -> None:
        claimable = [i for i, m in self.jobs.items() if m.status == "queued" and m.queue in queues]
        records = self.run(self.backend.claim(worker, queues, limit, self.now, self.now + LEASE))
        taken = [r.id for r in records]
        assert len(taken) == len(set(taken))
        assert set(taken) <= set(claimable), "claimed a job that was not queued"
        assert len(taken) <= min(limit, len(claimable))
        assert taken or not claimable, "nothing claimed although a job was queued"
        suspects = [i for i in taken if self.jobs[i].lost > 0]
        assert not suspects or taken == suspects[:1], (
            f"a job that lost a worker shared a claim: {taken}"
        )
        if len(taken) < min(limit, len(claimable)):
            left = set(claimable) - set(taken)
            assert suspects or any(self.jobs[i].lost > 0 for i in left), (
                f"claim stopped at {len(taken)} of {min(limit, len(claimable))} for no reason"
            )
        for record in records:
            model = self.jobs[record.id]
            assert record.status == "running"
            assert record.worker == worker
            assert record.attempts == model.attempts + 1
            model.status, model.worker = "running", worker
            model.attempts += 1
            model.lease_until = self.now + LEASE
            model.due = None

    return claim
