"""The dependencies capability (PRODUCT §16): a job that runs once the jobs it waits for succeeded.

A dependent (``NewJob.after`` not empty) is stored ``scheduled`` with no due time (nothing
promotes or claims it) and a count of the dependencies that have not succeeded yet. Every way a
job first reaches an outcome changes its dependents in the same atomic step:

- ``succeeded``: each dependent counts it once (a job succeeds at most once: a retry only takes
  a failed or cancelled job); the step that leaves a dependent none waiting releases it to
  ``queued`` (its queue woken), so it runs exactly once however the dependencies finish (two at
  once on two workers, or a worker killed mid-finish: recovery re-runs the dependency, whose
  success then counts once). A chain step (``NewJob.pipe_from``) gets that dependency's result
  copied in the same step: its ``input``, read by the worker when the step runs, so the result
  survives the dependency's own retention.
- ``failed`` (for good) or ``cancelled``: each dependent still waiting ends ``cancelled``, with
  an error of type ``DependencyFailed`` naming the dependency, and so on down its own
  dependents (transitively). Such a dependent stays releasable: when a later (manual) retry of
  the dependency succeeds and leaves it none waiting, it is released as a waiting one is.

A dependency already succeeded when the dependent is stored counts as done; one already failed
or cancelled cancels it at once (still releasable). A job can only wait for stored jobs (or
jobs earlier in the same batch), so a cycle cannot be built.

Each dependent stores its depth: 1 + the deepest of its dependencies (a job without any is 1
deep). A failure cancels its dependents one level at a time (a SQL trigger per level), so a
dependent deeper than ``MAX_DEPTH`` (a chain's cap) is refused, nothing stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from duly._errors import ConfigurationError, JobNotFound
from duly._records import EnqueueResult, NewJob
from duly.backends.capability import Capability

__all__ = ["DEPENDENCIES", "MAX_DEPTH", "DependencyStore", "dependency_depths", "too_deep"]

#: The deepest a dependent may be (jobs in its longest line of dependencies, itself included).
MAX_DEPTH: Final = 500


def too_deep(job_id: str, depth: int) -> str:
    """The message of the ``ConfigurationError`` refusing a dependent ``depth`` jobs deep."""
    return (
        f"after=: job {job_id!r} would be {depth} jobs deep, at most {MAX_DEPTH} allowed"
        " (a failure cancels its dependents level by level)"
    )


def dependency_depths(jobs: Sequence[NewJob], stored: Mapping[str, int]) -> dict[str, int]:
    """The depth of each job of ``jobs`` that has ``after``, given ``stored``: the depth of
    each stored job among their dependencies. ``JobNotFound`` for an ``after`` id neither
    stored nor earlier in ``jobs``; ``ConfigurationError`` for a job deeper than MAX_DEPTH."""
    earlier: dict[str, int] = {}
    depths: dict[str, int] = {}
    for job in jobs:
        depth = 1
        for dependency in job.after:
            known = max(earlier.get(dependency, 0), stored.get(dependency, 0))
            if not known:
                raise JobNotFound(f"after=: no job {dependency!r}")
            depth = max(depth, known + 1)
        if depth > MAX_DEPTH:
            raise ConfigurationError(too_deep(job.id, depth))
        earlier[job.id] = depth
        if job.after:
            depths[job.id] = depth
    return depths


class DependencyStore(Protocol):
    """Jobs that wait for other jobs, stored and released atomically."""

    async def enqueue(self, jobs: Sequence[NewJob], retention: float) -> list[EnqueueResult]:
        """Store ``jobs`` (as ``Backend.enqueue`` does) in one atomic step, those with ``after``
        waiting as the module docstring says. ``retention``: seconds a dependent cancelled by
        a dependency is kept. ``JobNotFound`` (nothing stored) if an ``after`` id is neither
        stored nor earlier in ``jobs``."""
        ...

    async def dependents(self, job_id: str) -> list[str]:
        """The ids of the jobs waiting (or that waited) for ``job_id``, in id order."""
        ...

    async def input(self, job_id: str) -> bytes | None:
        """A chain step's input: the result of its ``pipe_from`` dependency, copied when it
        was released (None before, or for a job that takes none)."""
        ...


#: ``backend.dependencies``.
DEPENDENCIES: Final = Capability[DependencyStore]("dependencies", "options(after=...)")
