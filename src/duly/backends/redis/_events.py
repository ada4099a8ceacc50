"""The event stream of the Redis backend: reads only (the scripts write).

Events are numbered 1, 2, 3... per namespace (``ev:n`` is the last number); a script writes
its events as one ``ev`` entry per 1000 (see ``lua/_events.lua``): entry id
``0-<number of its last event>``, ``n`` events (absent = 1), ``a`` server time (ms), ``e`` the
events as msgpack (five values each, the status as its code: ``STATUSES[code - 1]``); entries
written before the codes (status names, ``n`` always) read the same. A job with a key also has
its events in ``ev:k:<key>`` under the same entry ids. The
public event id is the number, so ids are contiguous and increase, and every event read is
final (Redis runs one script at a time). A reader resuming below the first event still stored
is told (``EventsTrimmed``); with ``key=`` that is checked on the whole stream, so a key quiet
for longer than the retention reports it too (it cannot tell).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, cast

import msgspec

from duly._errors import EventsTrimmed
from duly._records import STATUSES, EventRecord
from duly.backends.redis._clients import Client
from duly.backends.redis._keys import Keyspace

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["EVENTS_KEPT", "RedisEvents", "parse_event_id"]

#: Events kept at least (``EVENTS_KEPT`` in lua/_events.lua).
EVENTS_KEPT: Final = 100_000
_decode = msgspec.msgpack.Decoder(list[str | int]).decode

Entry = tuple[bytes, dict[bytes, bytes]]

#: A status as stored in an event: its code (STATUS_CODE in lua/_events.lua) or, in entries
#: written before the codes, its name.
_STATUS: Final[dict[str | int, str]] = {
    **{code: name for code, name in enumerate(STATUSES, 1)},
    **{name: name for name in STATUSES},
}


def parse_event_id(event_id: str) -> int:
    """The number of an event id of this backend; ValueError naming it otherwise."""
    try:
        value = int(event_id)
    except ValueError:
        raise ValueError(f"not an event id of this backend: {event_id!r}") from None
    if value < 0:
        raise ValueError(f"not an event id of this backend: {event_id!r}")
    return value


def _stream(keys: Keyspace, key: str | None) -> str:
    return keys.events if key is None else keys.key_events(key)


def _event(
    number: str, job_id: str, task: str, queue: str, key: str | None, status: str | int, at: float
) -> EventRecord:
    """One event; a status slot holding JSON is a ``progress`` event's progress (emit_progress
    in lua/_events.lua), of a ``running`` job."""
    if isinstance(status, str) and status.startswith("{"):
        return EventRecord(number, job_id, task, queue, key, "running", at, status.encode())
    return EventRecord(number, job_id, task, queue, key, _STATUS[status], at)


def _events(entry: Entry, key: str | None) -> list[EventRecord]:
    """The events of one entry of ``ev`` (``key`` None) or of ``ev:k:<key>``."""
    entry_id, fields = entry
    at = int(fields[b"a"]) / 1000
    flat = _decode(fields[b"e"])
    if key is None:
        first = int(entry_id[2:]) - len(flat) // 5 + 1
        return [
            _event(
                str(first + i // 5),
                str(flat[i]),
                str(flat[i + 2]),
                str(flat[i + 3]),
                str(flat[i + 4]) or None,
                flat[i + 1],
                at,
            )
            for i in range(0, len(flat), 5)
        ]
    return [
        _event(
            str(flat[i]),
            str(flat[i + 1]),
            str(flat[i + 3]),
            str(flat[i + 4]),
            key,
            flat[i + 2],
            at,
        )
        for i in range(0, len(flat), 5)
    ]


async def _first_and_last(client: Client, keys: Keyspace) -> tuple[int, int]:
    """The number of the first event still stored (the last + 1 if none) and of the last."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.xrange(keys.events, "-", "+", count=1)
        pipe.get(keys.events_count)
        oldest, count = await pipe.execute()
    last = int(count or 0)
    if not oldest:
        return last + 1, last
    entry_id, fields = oldest[0]
    return int(entry_id[2:]) - int(fields.get(b"n", 1)) + 1, last


async def read_events(
    client: Client, keys: Keyspace, after: str | None, key: str | None, limit: int
) -> tuple[list[EventRecord], str]:
    """See ``Backend.read_events``. The last number is read first: every event up to it is in
    both streams by then, so a key reader's cursor may move on to it."""
    first, last = await _first_and_last(client, keys)
    if after is None:
        return [], str(last)
    position = parse_event_id(after)
    if position + 1 < first:
        raise EventsTrimmed(
            f"events after {after} were trimmed (retention); the oldest kept is {first}"
        )
    if position >= last:
        return [], after
    # An entry's id is the number of its last event: entries from position + 1 on hold every
    # event after position (and a few before it, skipped below).
    entries = cast(
        list[Entry],
        await client.xrange(_stream(keys, key), f"0-{position + 1}", f"0-{last}", count=limit),
    )
    events = [e for entry in entries for e in _events(entry, key) if int(e.id) > position]
    if len(events) > limit:
        events = events[:limit]
        return events, events[-1].id
    if len(entries) == limit:  # more entries may follow: go on after the last one read
        return events, entries[-1][0][2:].decode()
    return events, str(last)


async def wait_for_events(
    client: Client, keys: Keyspace, after: str, key: str | None, timeout: float
) -> None:
    """See ``Backend.wait_for_events``: one blocking XREAD (a pool connection of its own)."""
    position = parse_event_id(after)
    await client.xread(
        {_stream(keys, key): f"0-{position}"}, count=1, block=max(1, int(timeout * 1000))
    )


class RedisEvents:
    """``duly.backends.events.EventStore`` on Redis (``backend.events``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def read(
        self, after: str | None, key: str | None, limit: int
    ) -> tuple[list[EventRecord], str]:
        """Events after ``after``, oldest first (see the module docstring)."""
        c = self._conn
        with c.guard("read_events"):
            return await read_events(c.client, c.keys, after, key, limit)

    async def wait(self, after: str, key: str | None, timeout: float) -> None:
        """Block on the stream (``XREAD BLOCK``) until an event after ``after`` may exist."""
        c = self._conn
        with c.guard("wait_for_events"):
            await wait_for_events(c.client, c.keys, after, key, timeout)
