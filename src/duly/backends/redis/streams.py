"""The event stream and group records of the Redis backend: reads only (the scripts write).

Events live in the ``ev`` stream (and, for a job with a key, in ``ev:k:<key>`` under the same
entry id); see ``lua/_common.lua`` ("Events"). An event id is the stream entry id
(``<ms>-<seq>``, server time), so ids increase and every entry read is final (Redis runs one
script at a time). Retention trims the head of ``ev``; the stream's ``max-deleted-entry-id``
(Redis >= 7) tells a reader whether entries after its cursor were trimmed.
"""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from duly.backends.redis.keys import Keyspace
from duly.errors import EventsTrimmed
from duly.records import EventRecord, GroupRecord

__all__ = ["get_group", "read_events", "wait_for_events"]

_START = "0-0"


def _parse(event_id: str) -> tuple[int, int]:
    """``(ms, seq)`` of a stream id; ValueError naming it otherwise."""
    ms, _, seq = event_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        raise ValueError(f"not an event id of this backend: {event_id!r}") from None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _stream(keys: Keyspace, key: str | None) -> str:
    return keys.events if key is None else keys.key_events(key)


def _event(entry_id: Any, fields: dict[bytes, bytes]) -> EventRecord:
    eid = _text(entry_id)
    key = fields.get(b"k")
    return EventRecord(
        id=eid,
        job_id=fields[b"j"].decode(),
        task=fields[b"t"].decode(),
        queue=fields[b"q"].decode(),
        key=None if key is None else key.decode(),
        status=fields[b"s"].decode(),
        at=_parse(eid)[0] / 1000,
    )


async def read_events(
    client: Redis, keys: Keyspace, after: str | None, key: str | None, limit: int
) -> tuple[list[EventRecord], str]:
    """See ``Backend.read_events``."""
    stream = _stream(keys, key)
    if after is None:
        newest = await client.xrevrange(stream, "+", "-", count=1)
        return [], _text(newest[0][0]) if newest else _START
    position = _parse(after)
    try:
        info = await client.xinfo_stream(stream)
    except ResponseError:  # no such stream: nothing written (or a key's stream expired)
        return [], after
    deleted = _text(info.get("max-deleted-entry-id", _START))
    if _parse(deleted) > position:
        raise EventsTrimmed(
            f"events after {after} were trimmed (retention); the oldest kept is "
            f"{_text(info['first-entry'][0]) if info.get('first-entry') else 'none'}"
        )
    entries = cast(
        list[tuple[bytes, dict[bytes, bytes]]],
        await client.xrange(stream, f"({position[0]}-{position[1]}", "+", count=limit),
    )
    events = [_event(entry_id, fields) for entry_id, fields in entries]
    return events, events[-1].id if events else after


async def wait_for_events(
    client: Redis, keys: Keyspace, after: str, key: str | None, timeout: float
) -> None:
    """See ``Backend.wait_for_events``: one blocking XREAD (a pool connection of its own)."""
    ms, seq = _parse(after)
    await client.xread(
        {_stream(keys, key): f"{ms}-{seq}"}, count=1, block=max(1, int(timeout * 1000))
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
