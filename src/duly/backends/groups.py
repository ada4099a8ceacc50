"""The groups capability (PRODUCT §8): jobs fanned out together, one callback when all ended.

Every way a member job reaches ``succeeded``, ``failed`` or ``cancelled`` (``finish``,
``recover``, ``cancel``) records that outcome in its group, once per member id, in the same
atomic step; the step that records the last one completes the group, and the first time it
does, makes its callback job ``queued``. The group counts each member's *current* outcome: an
operator ``retry`` of a failed or cancelled member takes its outcome back (pending again, the
group not complete) in the retry's atomic step, and its next outcome counts; the callback is
never queued again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from duly._records import GroupRecord, NewGroup, NewJob, StoredGroup
from duly.backends.capability import Capability

__all__ = ["GROUPS", "GroupStore"]


class GroupStore(Protocol):
    """Groups of jobs, stored atomically with their members."""

    async def store(self, group: NewGroup, members: Sequence[NewJob]) -> StoredGroup:
        """Store ``group``, its ``members`` and its callback in one atomic step (all or none).

        Members are stored as ``enqueue`` stores jobs (none has a ``unique_key``; ids are
        new) and each remembers its group. The callback (id = ``group.id``) is ``scheduled``
        with no due time until the group completes (see the module docstring). A group with a
        ``name`` of a group still stored stores nothing and answers that group (its id and
        members, ``deduplicated``), atomically: of many concurrent stores of one name, one
        stores. Raises ValueError for a group id already stored.
        """

    async def get(self, group_id: str) -> GroupRecord | None:
        """One group by id or by name, or None (unknown, or past its retention)."""
        ...


#: ``backend.groups``.
GROUPS: Final = Capability[GroupStore]("groups", "app.group(...)")
