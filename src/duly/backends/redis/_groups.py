"""Groups on Redis: the group's enqueue (one script with its members, ``enqueue.lua``) and its
record (the ``g:<id>`` hash the scripts keep, and a named group's ``gn:<name>``, see
``lua/_groups.lua``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from duly._records import GroupRecord, NewGroup, NewJob, StoredGroup
from duly.backends.redis._clients import Client
from duly.backends.redis._enqueue import store_group
from duly.backends.redis._keys import Keyspace

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisGroups"]


async def get_group(client: Client, keys: Keyspace, group_id: str) -> GroupRecord | None:
    """One group by id or by name (``gn:<name>`` holds a named group's id), or None."""
    raw = cast(dict[bytes, bytes], await client.hgetall(keys.group(group_id)))
    if not raw:
        named = cast(bytes | None, await client.get(keys.group_name(group_id)))
        if named is None:
            return None
        group_id = named.decode()
        raw = cast(dict[bytes, bytes], await client.hgetall(keys.group(group_id)))
        if not raw:
            return None
    done, key, first, name = raw.get(b"done"), raw.get(b"k"), raw.get(b"f"), raw.get(b"nm")
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
        first_completed_at=None if first is None else float(first),
        name=None if name is None else name.decode(),
    )


class RedisGroups:
    """``duly.backends.groups.GroupStore`` on Redis (``backend.groups``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def store(self, group: NewGroup, members: Sequence[NewJob]) -> StoredGroup:
        """Store the group with its members and callback in one script call."""
        c = self._conn
        jobs = [*members, group.callback] if group.callback is not None else list(members)
        with c.guard("enqueue_group"):
            found = await store_group(c, group, jobs)
        if isinstance(found, StoredGroup):
            return found
        if any(f is not None for f in found):
            raise ValueError(f"group {group.id!r}: a job id of it is already stored")
        return StoredGroup(group.id, [job.id for job in members])

    async def get(self, group_id: str) -> GroupRecord | None:
        """The group's hash, or None."""
        c = self._conn
        with c.guard("get_group"):
            return await get_group(c.client, c.keys, group_id)
