"""Schedules on Redis: the ``sched`` hash (name -> msgpack of the record) and the ``sk`` hash
(a schedule's job key -> ``"<count> <latest tick>"``) of the namespace (see _keys.py). Each
write is one command (HSET, HDEL) or one script (skip_tick.lua), so each is atomic."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

import msgspec

from duly.backends.schedules import ScheduleRecord, SkippedTicks

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisSchedules"]

_FIELDS = [f.name for f in dataclasses.fields(ScheduleRecord)]


def _record(packed: bytes) -> ScheduleRecord:
    return ScheduleRecord(**dict(zip(_FIELDS, msgspec.msgpack.decode(packed), strict=True)))


class RedisSchedules:
    """``duly.backends.schedules.ScheduleStore`` on Redis (``backend.schedules``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def put(self, schedule: ScheduleRecord) -> bool:
        """HSET the record (replacing the one of its name); True if it is new."""
        c = self._conn
        packed = msgspec.msgpack.encode([getattr(schedule, name) for name in _FIELDS])
        with c.guard("put_schedule"):
            return bool(await c.client.hset(c.keys.schedules, schedule.name, packed))

    async def delete(self, name: str) -> bool:
        """HDEL the record; False if there was none."""
        c = self._conn
        with c.guard("delete_schedule"):
            return bool(await c.client.hdel(c.keys.schedules, name))

    async def all(self) -> list[ScheduleRecord]:
        """HGETALL, by name."""
        c = self._conn
        with c.guard("all_schedules"):
            found = cast(dict[bytes, bytes], await c.client.hgetall(c.keys.schedules))
        return sorted((_record(v) for v in found.values()), key=lambda r: r.name)

    async def skip(self, key: str, tick: float) -> bool:
        """skip_tick.lua: count ``tick`` unless a tick as late was counted."""
        c = self._conn
        with c.guard("skip_tick"):
            counted = await c.call(c.scripts.skip_tick, (c.keys.skipped_ticks,), [key, tick])
        return bool(counted)

    async def skipped(self) -> dict[str, SkippedTicks]:
        """HGETALL of ``sk``."""
        c = self._conn
        with c.guard("skipped_ticks"):
            found: dict[Any, Any] = await c.client.hgetall(c.keys.skipped_ticks)
        out: dict[str, SkippedTicks] = {}
        for key, value in found.items():
            count, last = value.split(b" ", 1)
            out[key.decode()] = SkippedTicks(int(count), float(last))
        return out
