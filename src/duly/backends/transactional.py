"""The transactional-enqueue capability (PostgreSQL, PRODUCT §11): jobs stored on the caller's
own database connection, inside the caller's transaction, exist iff that transaction commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from duly._records import EnqueueResult, NewJob
from duly.backends.capability import Capability

__all__ = ["TRANSACTIONAL", "TransactionalEnqueue"]


class TransactionalEnqueue(Protocol):
    """``Backend.enqueue`` on a connection the caller owns."""

    def enqueue(self, conn: Any, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Store ``jobs`` with the caller's (sync) connection, in its current transaction."""
        ...

    async def enqueue_async(self, conn: Any, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """The async twin of ``enqueue``, for the caller's async connection."""
        ...


#: ``backend.transactional``.
TRANSACTIONAL: Final = Capability[TransactionalEnqueue](
    "transactional", "connection= (transactional enqueue)"
)
