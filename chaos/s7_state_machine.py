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
        {"factory": factory},
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
