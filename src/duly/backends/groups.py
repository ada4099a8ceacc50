"""The groups capability (PRODUCT §8): jobs fanned out together, one callback when all ended.

Every way a member job first reaches ``succeeded``, ``failed`` or ``cancelled`` (``finish``,
``recover``, ``cancel``) records that outcome in its group, once per member id, in the same
atomic step; the step that records the last one completes the group and makes its callback
job ``queued``. A member's first outcome is final for its group: a later operator ``retry``
re-runs the job but neither counts again nor re-fires the callback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from duly._records import GroupRecord, NewGroup, NewJob
from duly.backends.capability import Capability

__all__ = ["GROUPS", "GroupStore"]


class GroupStore(Protocol):
    """Groups of jobs, stored atomically with their members."""

    async def store(self, group: NewGroup, members: Sequence[NewJob]) -> None:
        """Store ``group``, its ``members`` and its callback in one atomic step (all or none).

        Members are stored as ``enqueue`` stores jobs (none has a ``unique_key``; ids are
        new) and each remembers its group. The callback (id = ``group.id``) is ``scheduled``
        with no due time until the group completes (see the module docstring). Raises
        ValueError for a group id already stored.
        """

    async def get(self, group_id: str) -> GroupRecord | None:
        """One group by id, or None (unknown, or past its retention)."""
        ...


#: ``backend.groups``.
GROUPS: Final = Capability[GroupStore]("groups", "app.group(...)")
