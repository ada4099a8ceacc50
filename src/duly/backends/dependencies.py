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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from duly._records import EnqueueResult, NewJob
from duly.backends.capability import Capability

__all__ = ["DEPENDENCIES", "DependencyStore"]


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
