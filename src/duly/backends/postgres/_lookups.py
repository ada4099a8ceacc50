"""Reads on PostgreSQL: one job, a page of jobs (newest first), queue counts, outcome
counters. Each is one read-only statement, resent once after a dead connection."""

from __future__ import annotations

import math

from duly._records import ID_CEILING, JobFilter, JobRecord, QueueStats, StatRow
from duly.backends.postgres import _rows
from duly.backends.postgres._connection import Connection

__all__ = ["get_job", "list_jobs", "queue_stats", "stats"]


async def get_job(db: Connection, job_id: str) -> JobRecord | None:
    found = await db.all("get_job", {"id": job_id}, rows=_rows.GET_JOB)
    return found[0] if found else None


async def list_jobs(db: Connection, where: JobFilter, limit: int) -> list[JobRecord]:
    params: dict[str, object] = {
        "key": where.key,
        "status": where.status,
        "task": where.task,
        "queue": where.queue,
        "before": ID_CEILING if where.before is None else where.before,
        "limit": max(int(limit), 0),
    }
    if where.key is None:
        return await db.all("list_jobs", params, rows=_rows.LIST_JOBS)
    return await db.all("list_jobs_by_key", params, rows=_rows.LIST_JOBS_BY_KEY)


async def queue_stats(db: Connection) -> list[QueueStats]:
    return await db.all("queue_stats", rows=_rows.QUEUE_STATS)


async def stats(db: Connection, since: float) -> list[StatRow]:
    first_minute = math.ceil(since / 60)
    return await db.all("stats", {"first_minute": first_minute}, rows=_rows.STATS)
