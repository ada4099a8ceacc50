"""Helpers shared by the contract tests: job builders, a fixed clock origin, small shortcuts.

Time is never read from the system clock: every test passes explicit ``now`` values measured
from ``T0`` (a minute boundary, so per-minute counters are easy to predict).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
from depth import examples
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from duly._ids import new_id
from duly._records import JobRecord, NewJob, Outcome
from duly.backends.base import Backend

T = TypeVar("T")

#: The backends every contract test runs on; also the test ids (``pytest -k redis``).
#: ``redis-cluster`` is the Redis backend on a local 3-master Redis Cluster.
KINDS = ("sqlite", "redis", "redis-cluster", "postgres")


class BackendFactory:
    """Builds new, unopened backends of one kind: on this test's namespace, or a fresh one."""

    def __init__(
        self, kind: str, build: Callable[[str], Backend], namespace: str, fresh: Callable[[], str]
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self._build = build
        self._fresh = fresh

    def __call__(self, namespace: str | None = None) -> Backend:
        """Another instance on this test's namespace (or on ``namespace``)."""
        return self._build(namespace or self.namespace)

    def new_namespace(self) -> str:
        """A namespace no other test uses."""
        return self._fresh()

    def fresh(self) -> Backend:
        """An instance on a brand-new namespace; whoever opens it drops it."""
        return self._build(self._fresh())


T0 = 1_700_000_040.0
assert T0 % 60 == 0
MINUTE0 = int(T0 // 60)
LEASE = 30.0
EXPIRE = 86_400.0
W1 = "worker-1"
W2 = "worker-2"
DEFAULT_QUEUE = "default"
TASK = "tests.tasks.add"
PAYLOAD = b'{"args":[1,2],"kwargs":{}}'


def new_job(
    queue: str = DEFAULT_QUEUE,
    *,
    task: str = TASK,
    priority: int = 0,
    key: str | None = None,
    payload: bytes = PAYLOAD,
    at: float = T0,
    delay: float = 0.0,
    max_attempts: int = 3,
) -> NewJob:
    """A job enqueued at ``at``, due ``delay`` seconds later."""
    return NewJob(
        id=new_id(),
        task=task,
        queue=queue,
        payload=payload,
        max_attempts=max_attempts,
        key=key,
        priority=priority,
        enqueued_at=at,
        scheduled_for=at + delay,
    )


async def enqueue(backend: Backend, *jobs: NewJob) -> list[str]:
    """Enqueue ``jobs`` in one batch; their ids, in order."""
    results = await backend.enqueue(list(jobs))
    assert [r.id for r in results] == [j.id for j in jobs]
    return [j.id for j in jobs]


async def claim_ids(
    backend: Backend,
    worker: str = W1,
    queues: Sequence[str] = (DEFAULT_QUEUE,),
    limit: int = 1,
    now: float = T0,
    lease: float = LEASE,
) -> list[str]:
    """Claim and return the ids taken, in the order the backend returned them."""
    records = await backend.claim(worker, list(queues), limit, now, now + lease)
    return [r.id for r in records]


async def claim_order(
    backend: Backend, queues: Sequence[str] = (DEFAULT_QUEUE,), now: float = T0
) -> list[str]:
    """Claim one job at a time until none is left: the order the queues hand jobs out."""
    order: list[str] = []
    while taken := await claim_ids(backend, queues=queues, limit=1, now=now):
        order.extend(taken)
    return order


async def job(backend: Backend, job_id: str) -> JobRecord:
    """The stored job, which must exist."""
    record = await backend.get_job(job_id)
    assert record is not None, f"job {job_id} is gone"
    return record


async def status(backend: Backend, job_id: str) -> str | None:
    record = await backend.get_job(job_id)
    return None if record is None else record.status


async def finish_one(backend: Backend, worker: str, outcome: Outcome, now: float) -> bool:
    [applied] = await backend.finish(worker, [outcome], now)
    return applied


def error_history(*entries: tuple[str, str]) -> bytes:
    """A JSON error history as the worker writes it."""
    return json.dumps(
        [
            {"type": kind, "message": message, "traceback": None, "at": T0, "attempt": n}
            for n, (kind, message) in enumerate(entries, start=1)
        ]
    ).encode()


def errors_of(record: JobRecord) -> list[dict[str, Any]]:
    assert record.errors is not None, f"job {record.id} has no error history"
    history = json.loads(record.errors)
    assert isinstance(history, list)
    return history


def approx(value: float) -> Any:
    """Times are floats; allow storage to round them to the microsecond."""
    return pytest.approx(value, abs=1e-3)


@asynccontextmanager
async def opened(backend: Backend) -> AsyncIterator[Backend]:
    """Open another instance (on a shared namespace) for the duration of a block."""
    await backend.open()
    try:
        yield backend
    finally:
        await backend.close()


async def in_own_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on a new event loop in a worker thread, like another process would."""
    return await asyncio.to_thread(asyncio.run, coroutine)


class BackendMachine(RuleBasedStateMachine):
    """A hypothesis state machine driving one fresh backend on its own event loop; each
    example gets a new namespace, dropped at teardown. ``now`` starts at ``T0``."""

    factory: BackendFactory  # set by ``run_machine``

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.backend: Backend = self.factory.fresh()
        self.run(self.backend.open())
        self.now = T0

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine)

    def teardown(self) -> None:
        try:
            self.run(self.backend.drop())
            self.run(self.backend.close())
        finally:
            self.runner.close()


M = TypeVar("M", bound=BackendMachine)

# 10 programs per machine and backend by default, 25 in `make thorough` (tests/depth.py)
MACHINE_EXAMPLES = examples(quick=10, thorough=25)


def run_machine(machine: type[M], factory: BackendFactory) -> type[M]:
    """Run ``machine`` on ``factory``'s backend kind (``MACHINE_EXAMPLES`` programs of 30 steps,
    no deadline); returns the class it ran, whose class attributes the machine may have counted
    in."""
    bound = type(f"{machine.__name__}Here", (machine,), {"factory": factory})
    run_state_machine_as_test(
        bound,
        settings=settings(
            max_examples=MACHINE_EXAMPLES,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    return bound
