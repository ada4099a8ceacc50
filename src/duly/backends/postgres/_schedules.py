"""Schedules on PostgreSQL: ``schedules`` (one row per name) and ``skipped_ticks`` (one row
per schedule's job key), 0014_schedules.sql. Each write is one statement (an upsert)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from psycopg.rows import RowMaker

from duly.backends.postgres._connection import Connection
from duly.backends.postgres._rows import Rows
from duly.backends.schedules import ScheduleRecord, SkippedTicks

__all__ = ["PostgresSchedules"]


def _schedule(names: Sequence[str]) -> RowMaker[ScheduleRecord]:
    at = [names.index(f.name) for f in dataclasses.fields(ScheduleRecord)]

    def make(row: Any) -> ScheduleRecord:
        values = [row[i] for i in at]
        values[3] = bytes(values[3])  # bytea may come as a memoryview
        return ScheduleRecord(*values)

    return make


def _skipped(names: Sequence[str]) -> RowMaker[tuple[str, SkippedTicks]]:
    key, count, last = (names.index(n) for n in ("key", "count", "last_tick"))
    return lambda row: (row[key], SkippedTicks(int(row[count]), float(row[last])))


_SCHEDULES: Final = Rows(_schedule)
_SKIPPED: Final = Rows(_skipped)


class PostgresSchedules:
    """``duly.backends.schedules.ScheduleStore`` on PostgreSQL (``backend.schedules``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def put(self, schedule: ScheduleRecord) -> bool:
        """Upsert the row; True if it is new."""
        row = await self._db.one("put_schedule", dataclasses.asdict(schedule), retry=True)
        return bool(row and row[0])

    async def delete(self, name: str) -> bool:
        """Delete the row; False if there was none."""
        return await self._db.one("delete_schedule", {"name": name}, retry=True) is not None

    async def all(self) -> list[ScheduleRecord]:
        """Every row, by name."""
        return await self._db.all("all_schedules", rows=_SCHEDULES)

    async def skip(self, key: str, tick: float) -> bool:
        """Count ``tick`` unless a tick as late was counted (one upsert; a resend after a
        lost answer finds its own tick and counts nothing)."""
        params = {"key": key, "tick": float(tick)}
        return await self._db.one("skip_tick", params, retry=True) is not None

    async def skipped(self) -> dict[str, SkippedTicks]:
        """Every row of ``skipped_ticks``."""
        return dict(await self._db.all("skipped_ticks", rows=_SKIPPED))
