"""The worker registry on PostgreSQL: one ``workers`` row per live worker process."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from duly._records import WorkerRecord
from duly.backends.postgres import _rows
from duly.backends.postgres._connection import Connection

__all__ = ["register_worker", "unregister_worker", "workers"]


async def register_worker(db: Connection, worker: str, now: float, info: dict[str, object]) -> None:
    params: dict[str, object] = {"worker": worker, "now": float(now), "info": Jsonb(info)}
    await db.one("register_worker", params, retry=True)


async def unregister_worker(db: Connection, worker: str) -> None:
    await db.one("unregister_worker", {"worker": worker}, retry=True)


async def workers(db: Connection) -> list[WorkerRecord]:
    return await db.all("workers", rows=_rows.WORKERS)
