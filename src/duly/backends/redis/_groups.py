"""Groups on Redis: the group's enqueue (one script with its members, ``enqueue.lua``) and its
record (the ``grp:<id>`` hash the scripts keep, see ``lua/_groups.lua``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from duly._records import GroupRecord, NewGroup, NewJob
from duly.backends.redis._clients import Client
from duly.backends.redis._enqueue import store_group
from duly.backends.redis._keys import Keyspace

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisGroups"]


async def get_group(client: Client, keys: Keyspace, group_id: str) -> GroupRecord | None:
    """See ``Backend.get_group``."""
    raw = cast(dict[bytes, bytes], await client.hgetall(keys.group(group_id)))
    if not raw:
        return None
    done, key = raw.get(b"done"), raw.get(b"k")
    return GroupRecord(
        id=group_id,
        key=None if key is None else key.decode(),
        created_at=float(raw[b"at"]),
        total=int(raw[b"n"]),
        succeeded=int(raw.get(b"succeeded", 0)),
        failed=int(raw.get(b"failed", 0)),
        cancelled=int(raw.get(b"cancelled", 0)),
        completed_at=None if done is None else float(done),
        has_callback=b"cb" in raw,
    )


class RedisGroups:
    """``duly.backends.groups.GroupStore`` on Redis (``backend.groups``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def store(self, group: NewGroup, members: Sequence[NewJob]) -> None:
        """Store the group with its members and callback in one script call."""
        c = self._conn
        jobs = [*members, group.callback] if group.callback is not None else list(members)
        with c.guard("enqueue_group"):
            found = await store_group(c, group, jobs)
        if any(f is not None for f in found):
            raise ValueError(f"group {group.id!r}: a job id of it is already stored")

    async def get(self, group_id: str) -> GroupRecord | None:
        """The group's hash, or None."""
        c = self._conn
        with c.guard("get_group"):
            return await get_group(c.client, c.keys, group_id)
