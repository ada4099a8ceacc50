"""Dependencies and chains (PRODUCT §16): jobs that run once the jobs they wait for succeeded.

``task.options(after=[job, group, ...]).enqueue(...)`` stores a dependent: it waits,
``scheduled`` with no due time, until every job it waits for succeeded, and is released by the
same atomic backend step that records the last success (``duly.backends.dependencies``); a
dependency that fails for good or is cancelled cancels it (``DependencyFailed``), and a later
retry of that dependency that succeeds releases it again.

``app.chain(a.s(...), b.s(...), c.si(...))`` is built on that one primitive: each step waits
for the previous one, and a step made with ``.s`` takes the previous step's result as its first
argument. The result is copied into the step by the release itself (its ``input``), and the
worker adds it to the call when the step runs (``piped_payload``): so a step run long after
its predecessor was deleted by retention still gets it, and a re-run gets the same one.

A workflow's id is its last step's id followed by ``w``; that step's payload lists every step
(``Links.workflow``), so ``app.get_workflow`` needs no storage of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from duly._errors import ConfigurationError
from duly._ids import new_ids
from duly._job import Job, JobInfo
from duly._payload import Links, payload_links, with_first_argument, with_links
from duly._records import EnqueueResult, JobRecord, NewJob
from duly._task import Signature
from duly.backends.dependencies import DEPENDENCIES, MAX_DEPTH

if TYPE_CHECKING:
    from duly._ports import AppPort

__all__ = [
    "MAX_CHAIN_STEPS",
    "WORKFLOW_SUFFIX",
    "Workflow",
    "WorkflowInfo",
    "WorkflowStatus",
    "build_chain",
    "enqueue_dependents",
    "has_dependents",
    "load_dependents",
    "load_workflow",
    "piped_payload",
    "prepare_chain",
    "store_chain",
]

#: The last character of a workflow's id (after its last step's id).
WORKFLOW_SUFFIX: Final = "w"

#: The most steps of one chain: a failure cancels the steps after it in the same atomic step,
#: one trigger level per step on SQLite (1000 at most) and PostgreSQL (its stack depth); the
#: same cap as any line of dependencies (MAX_DEPTH, checked by the backends).
MAX_CHAIN_STEPS: Final = MAX_DEPTH

WorkflowStatus = Literal["running", "succeeded", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class Workflow:
    """What ``app.chain`` returns: the workflow's id and its steps' jobs, in order."""

    id: str
    jobs: list[Job[Any]]


class WorkflowInfo(msgspec.Struct, frozen=True):
    """A workflow's state: ``running`` while a step will still run, else ``succeeded`` (every
    step did), ``failed`` (a step failed; the steps after it were cancelled) or ``cancelled``;
    ``jobs`` the steps' records in order (a step removed by retention is left out)."""

    id: str
    status: WorkflowStatus
    jobs: list[JobInfo[Any]]


def has_dependents(jobs: Sequence[NewJob]) -> bool:
    """Whether any of ``jobs`` waits for others (so the dependencies capability stores them)."""
    return any(job.after for job in jobs)


def _retention(app: AppPort) -> float:
    # A dependent cancelled by a failure is kept as long as that failed job: a retry of it
    # must still find the dependent to release.
    return max(app.retention, app.failed_retention)


async def enqueue_dependents(app: AppPort, jobs: list[NewJob]) -> list[EnqueueResult]:
    """Store ``jobs``, some waiting for others, in one atomic backend step."""
    store = DEPENDENCIES.of(await app.backend())
    return await store.enqueue(jobs, _retention(app))


def build_chain(app: AppPort, signatures: Sequence[Signature], now: float) -> list[NewJob]:
    """Validate and build a chain's steps (nothing stored): each waits for the one before,
    taking its result unless made with ``.si``."""
    sigs = list(signatures)
    if not sigs:
        raise ConfigurationError("a chain needs at least one step")
    if len(sigs) > MAX_CHAIN_STEPS:
        raise ConfigurationError(f"a chain has at most {MAX_CHAIN_STEPS} steps, got {len(sigs)}")
    for sig in sigs:
        if not isinstance(sig, Signature):
            raise TypeError(f"chain takes task.s(...) / task.si(...) signatures, got {sig!r}")
        if sig.task.app is not app:
            raise ConfigurationError(f"{sig!r} belongs to another App")
        if sig.options.connection is not None or sig.options.on_commit:
            raise ConfigurationError("chain: connection= and on_commit= are not supported")
        if sig.options.id is not None:
            raise ConfigurationError("chain: id= is not supported (a chain names its steps)")
    ids = new_ids(len(sigs))
    jobs: list[NewJob] = []
    for position, (sig, job_id) in enumerate(zip(sigs, ids, strict=True)):
        piped = position > 0 and not sig.immutable
        if piped and sig.task.config.secret:
            raise ConfigurationError(
                f"chain: {sig!r} has secret arguments; make it immutable (.si)"
            )
        job = sig.build(now, job_id, piped=piped)
        after = list(job.after)
        if position > 0 and ids[position - 1] not in after:
            after.insert(0, ids[position - 1])
        last = position == len(sigs) - 1
        links = Links(after=after, pipe=piped, workflow=ids if last else [])
        if after or last:
            job = dataclasses.replace(
                job,
                payload=with_links(job.payload, links),
                after=tuple(after),
                pipe_from=ids[position - 1] if piped else None,
            )
        jobs.append(job)
    return jobs


def prepare_chain(app: AppPort, signatures: Sequence[Signature]) -> list[NewJob]:
    """Build a chain's steps and show them to ``enqueuing`` hooks, in the caller's thread and
    context (a trace context travels with them); nothing stored yet."""
    jobs = build_chain(app, signatures, app.clock.now())
    if app.hooks.watching("enqueuing"):
        app.hooks.enqueuing(jobs)
    return jobs


async def store_chain(app: AppPort, jobs: list[NewJob]) -> Workflow:
    """Store a chain built by ``prepare_chain`` in one atomic step (see ``App.chain``)."""
    results = await enqueue_dependents(app, jobs)
    if app.hooks.watching("enqueued"):
        await app.hooks.emit("enqueued", jobs, results)
    return Workflow(
        jobs[-1].id + WORKFLOW_SUFFIX, [Job(app, r.id, r.deduplicated) for r in results]
    )


def _status(steps: list[JobInfo[Any]]) -> WorkflowStatus:
    statuses = [step.status for step in steps]
    if any(status in ("scheduled", "queued", "running", "retrying") for status in statuses):
        return "running"
    if all(status == "succeeded" for status in statuses):
        return "succeeded"
    return "failed" if "failed" in statuses else "cancelled"


async def load_workflow(app: AppPort, workflow_id: str) -> WorkflowInfo | None:
    """The workflow with this id, or None (unknown, or its last step removed by retention)."""
    if not isinstance(workflow_id, str):
        raise TypeError(f"a workflow id is a str, got {workflow_id!r}")
    if len(workflow_id) != 27 or not workflow_id.endswith(WORKFLOW_SUFFIX):
        return None
    last = await (await app.backend()).get_job(workflow_id[:-1])
    if last is None:
        return None
    ids = payload_links(last.payload).workflow
    if not ids:
        return None
    steps = [info for info in [await app.get_job_async(i) for i in ids] if info is not None]
    return WorkflowInfo(workflow_id, _status(steps), steps)


async def load_dependents(app: AppPort, job_id: str) -> list[str]:
    """The ids of the jobs that wait (or waited) for ``job_id`` (see ``App.dependents``)."""
    if not isinstance(job_id, str):
        raise TypeError(f"a job id is a str, got {job_id!r}")
    return await DEPENDENCIES.of(await app.backend()).dependents(job_id)


async def piped_payload(app: AppPort, record: JobRecord, payload: bytes) -> bytes:
    """``payload`` (opened) of a job about to run, with its chain input as its first argument
    if it is a chain step that takes one; itself otherwise."""
    if not payload_links(record.payload).pipe:
        return payload
    value = await DEPENDENCIES.of(await app.backend()).input(record.id)
    return with_first_argument(payload, b"null" if value is None else value)
