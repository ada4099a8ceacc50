"""The hand-off capability: a new job goes straight to an idle worker process (Redis, one server).

The enqueue that stores the job also claims it for that worker, atomically, and the worker's
wait returns it, saving the wake-up hop and the claim round trip. At-least-once holds as for a
claim: a handed job is ``running`` under the worker and its lease from the moment it is stored,
so if the worker dies before running it, recovery requeues it when the lease lapses.

A backend that cannot hand off (SQLite, PostgreSQL, a Redis Cluster or Sentinel) has no
``handoff`` attribute (or None): its workers claim and wait as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final, Protocol

from duly._records import JobRecord
from duly.backends.capability import Capability

__all__ = ["HANDOFF", "Handoff"]


class Handoff(Protocol):
    """Idle registrations of worker processes, and the jobs handed to them."""

    async def claim_idle(
        self,
        worker: str,
        queues: Sequence[str],
        limit: int,
        now: float,
        lease_until: float,
        idle_for: float,
        withdraw: bool = True,
    ) -> list[JobRecord]:
        """``Backend.claim``, first (with ``withdraw``) withdrawing ``worker``'s idle
        registration and taking the jobs already handed to it (they count against ``limit``);
        a worker whose last ``claim_idle`` took something (and did not fail) is not registered,
        holds no handed job and may skip that. When nothing was taken and ``limit`` > 0,
        ``worker`` is registered idle on ``queues`` for ``idle_for`` seconds: until its next
        ``claim_idle`` or ``withdraw``, an enqueue may hand it one plain job (no unique key, no
        gate, not scheduled, not in a group) of those queues with a lease until
        ``lease_until + idle_for``. A registration is used once, and never after it lapsed."""
        ...

    async def wait(
        self, worker: str, queues: Sequence[str], timeout: float, stop: asyncio.Event
    ) -> list[JobRecord]:
        """``Backend.wait_for_work`` for a worker registered by ``claim_idle``, returning early
        when ``stop`` is set; returns the jobs handed to ``worker`` meanwhile (to run like
        claimed ones), else []. Never drops a handed job it read."""
        ...

    async def withdraw(self, worker: str, queues: Sequence[str]) -> list[JobRecord]:
        """End ``worker``'s idle registration (a stopping worker) and return the jobs handed to
        it that it has not taken yet; the caller runs them or hands them back."""
        ...


#: ``backend.handoff``.
HANDOFF: Final = Capability[Handoff]("handoff", "handing jobs to idle workers")
