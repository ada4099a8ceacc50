"""What the feature modules need of their App, as a protocol ``duly.App`` implements.

Tasks, job handles, watches, freshness, groups, events, webhooks, secrets and the scheduler
are built by the App and call back into it (enqueue, look a job up, reach the backend, run a
coroutine from sync code). They take an ``AppPort``, never ``duly._app.App``, so the arrows run
one way: ``duly._app`` imports them, they import this module (an importlinter contract and
``tests/unit/test_ports.py`` keep it so).
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly._freshness import Mirror
    from duly._hooks import Hooks
    from duly._job import Job, JobInfo
    from duly._records import EnqueueResult, NewJob
    from duly._registry import Registry
    from duly._sealing import Sealer
    from duly._task import Signature, Task
    from duly.backends import Backend

__all__ = ["AppPort"]

T = TypeVar("T")


class AppPort(Protocol):
    """The App as its feature modules see it (read-only settings, and the ways in)."""

    @property
    def clock(self) -> Clock:
        """The time source."""

    @property
    def hooks(self) -> Hooks:
        """The hooks called on job events."""

    @property
    def registry(self) -> Registry:
        """The registered tasks, periodic schedules and watches."""

    @property
    def tasks(self) -> dict[str, Task[Any, Any]]:
        """The registered tasks by name."""

    @property
    def mirrors(self) -> Mapping[str, Mirror]:
        """The freshness mirrors by name."""

    @property
    def retention(self) -> float:
        """Seconds a succeeded job is kept (unless its task says otherwise)."""

    @property
    def failed_retention(self) -> float:
        """Seconds a failed job is kept (unless its task says otherwise)."""

    @property
    def max_payload_bytes(self) -> int:
        """The largest encoded arguments accepted."""

    @property
    def sealer(self) -> Sealer | None:
        """Seals secret arguments at rest, or None."""

    async def backend(self) -> Backend:
        """The opened backend of the running event loop."""

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` from sync code (on the App's portal) and return its result."""

    async def enqueue_built(self, built: list[NewJob]) -> list[EnqueueResult]:
        """Store jobs already built (hooks are the caller's business)."""

    def enqueue_many(self, signatures: Iterable[Signature]) -> Sequence[Job[Any]]:
        """Store many calls; their handles in order."""

    async def enqueue_many_async(self, signatures: Iterable[Signature]) -> Sequence[Job[Any]]:
        """Async twin of ``enqueue_many``."""

    def get_job(self, job_id: str) -> JobInfo[Any] | None:
        """The job with this id, or None."""

    async def get_job_async(self, job_id: str) -> JobInfo[Any] | None:
        """Async twin of ``get_job``."""

    async def jobs_async(self, *, key: str | None = None, limit: int = 50) -> list[JobInfo[Any]]:
        """Jobs of ``key``, newest first."""

    async def cancel_async(self, job_id: str) -> bool:
        """Cancel a job that has not finished."""
