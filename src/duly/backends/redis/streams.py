"""The event stream and group records of the Redis backend: reads only (the scripts write).

Events live in the ``ev`` stream (and, for a job with a key, in ``ev:k:<key>`` under the same
entry id); see "Events" in ``lua/_common.lua``. Entry ids are ``0-<n>`` with ``n`` counting
every event, so the public event id is ``n``: ids are contiguous and increase, and every entry
read is final (Redis runs one script at a time). Entries from the floor ``max(last n -
EVENTS_KEPT, ev:floor)`` on are always kept; a reader resuming below it is told
(``EventsTrimmed``), even with ``key=`` when that key had no event since (it cannot tell).
"""

from __future__ import annotations

from typing import Final, cast

from redis.asyncio import Redis

from duly.backends.redis.keys import Keyspace
from duly.errors import EventsTrimmed
from duly.records import EventRecord, GroupRecord

__all__ = ["EVENTS_KEPT", "get_group", "read_events", "wait_for_events"]

#: Events kept at least (``EVENTS_KEPT`` in lua/_common.lua).
EVENTS_KEPT: Final = 100_000


def parse_event_id(event_id: str) -> int:
    """The counter of an event id of this backend; ValueError naming it otherwise."""
    try:
        value = int(event_id)
    except ValueError:
        raise ValueError(f"not an event id of this backend: {event_id!r}") from None
    if value < 0:
        raise ValueError(f"not an event id of this backend: {event_id!r}")
    return value


def _stream(keys: Keyspace, key: str | None) -> str:
    return keys.events if key is None else keys.key_events(key)


def _event(entry_id: bytes, fields: dict[bytes, bytes]) -> EventRecord:
    key = fields.get(b"k")
    return EventRecord(
        id=entry_id[2:].decode(),
        job_id=fields[b"j"].decode(),
        task=fields[b"t"].decode(),
        queue=fields[b"q"].decode(),
        key=None if key is None else key.decode(),
        status=fields[b"s"].decode(),
        at=int(fields[b"a"]) / 1000,
    )


async def _last_and_floor(client: Redis, keys: Keyspace) -> tuple[int, int]:
    """The counter of the newest event ever written (0 if none) and the retention floor."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.xrevrange(keys.events, "+", "-", count=1)
        pipe.get(keys.events_floor)
        newest, floor = await pipe.execute()
    last = int(newest[0][0][2:]) if newest else 0
    if not newest:  # empty: everything was trimmed (or nothing written); the floor says which
        last = max(int(floor or 0) - 1, 0)
    return last, max(last - EVENTS_KEPT, int(floor or 0))


async def read_events(
    client: Redis, keys: Keyspace, after: str | None, key: str | None, limit: int
) -> tuple[list[EventRecord], str]:
    """See ``Backend.read_events``. The newest counter is read first: every entry up to it is
    in both streams then, so a key reader's cursor may move on to it."""
    last, floor = await _last_and_floor(client, keys)
    if after is None:
        return [], str(last)
    position = parse_event_id(after)
    if position + 1 < floor:
        raise EventsTrimmed(
            f"events after {after} were trimmed (retention); the oldest kept is {floor}"
        )
    if position >= last:
        return [], after
    entries = cast(
        list[tuple[bytes, dict[bytes, bytes]]],
        await client.xrange(_stream(keys, key), f"(0-{position}", f"0-{last}", count=limit),
    )
    events = [_event(entry_id, fields) for entry_id, fields in entries]
    return events, events[-1].id if len(events) == limit else str(last)


async def wait_for_events(
    client: Redis, keys: Keyspace, after: str, key: str | None, timeout: float
) -> None:
    """See ``Backend.wait_for_events``: one blocking XREAD (a pool connection of its own)."""
    position = parse_event_id(after)
    await client.xread(
        {_stream(keys, key): f"0-{position}"}, count=1, block=max(1, int(timeout * 1000))
    )


async def get_group(client: Redis, keys: Keyspace, group_id: str) -> GroupRecord | None:
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
