"""Schedules on SQLite: ``schedules`` (one row per name) and ``skipped_ticks`` (one row per
schedule's job key), 0010_schedules.sql. Each write is one transaction."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from typing import Any

from duly.backends.schedules import ScheduleRecord, SkippedTicks
from duly.backends.sqlite._connection import QUERIES, SqliteConnection

__all__ = ["SqliteSchedules"]


def _put(record: ScheduleRecord) -> Callable[[sqlite3.Connection], bool]:
    row = dataclasses.asdict(record)

    def put(conn: sqlite3.Connection) -> bool:
        new = conn.execute(QUERIES["schedule_exists"], {"name": record.name}).fetchone() is None
        conn.execute(QUERIES["put_schedule"], row)
        return new

    return put


def _record(row: Any) -> ScheduleRecord:
    name, task, queue, payload, priority, every, cron, tz, catch_up, overlap, updated_at = row
    return ScheduleRecord(
        name=str(name),
        task=str(task),
        queue=str(queue),
        payload=bytes(payload),
        priority=int(priority),
        every=None if every is None else float(every),
        cron=None if cron is None else str(cron),
        tz=str(tz),
        catch_up=str(catch_up),
        overlap=str(overlap),
        updated_at=float(updated_at),
    )


class SqliteSchedules:
    """``duly.backends.schedules.ScheduleStore`` on SQLite (``backend.schedules``)."""

    def __init__(self, db: SqliteConnection) -> None:
        self._db = db

    async def put(self, schedule: ScheduleRecord) -> bool:
        """Upsert the row (one transaction); True if it is new."""
        return await self._db.transaction(_put(schedule), "put_schedule")

    async def delete(self, name: str) -> bool:
        """Delete the row; False if there was none."""

        def delete(conn: sqlite3.Connection) -> bool:
            return conn.execute(QUERIES["delete_schedule"], {"name": name}).rowcount > 0

        return await self._db.transaction(delete, "delete_schedule")

    async def all(self) -> list[ScheduleRecord]:
        """Every row, by name."""

        def read(conn: sqlite3.Connection) -> list[ScheduleRecord]:
            return [_record(row) for row in conn.execute(QUERIES["all_schedules"])]

        return await self._db.run(read, "all_schedules")

    async def skip(self, key: str, tick: float) -> bool:
        """Count ``tick`` unless a tick as late was counted (one upsert)."""

        def skip(conn: sqlite3.Connection) -> bool:
            params = {"key": key, "tick": float(tick)}
            return conn.execute(QUERIES["skip_tick"], params).fetchone() is not None

        return await self._db.transaction(skip, "skip_tick")

    async def skipped(self) -> dict[str, SkippedTicks]:
        """Every row of ``skipped_ticks``."""

        def read(conn: sqlite3.Connection) -> dict[str, SkippedTicks]:
            rows = conn.execute(QUERIES["skipped_ticks"])
            return {str(k): SkippedTicks(int(n), float(t)) for k, n, t in rows}

        return await self._db.run(read, "skipped_ticks")
