"""Lookups: SqliteBackend's reads of jobs, queues and stats."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from typing import Any

from duly._records import ID_CEILING, JobFilter, JobRecord, QueueStats, StatRow
from duly.backends.sqlite import _rows
from duly.backends.sqlite._connection import QUERIES

__all__ = ["get_job", "list_jobs", "queue_stats", "stats"]


def get_job(job_id: str) -> Callable[[sqlite3.Connection], JobRecord | None]:
    """Reads one job by id, or None."""

    def read(conn: sqlite3.Connection) -> JobRecord | None:
        cursor = conn.execute(QUERIES["get_job"], {"id": job_id})
        row = cursor.fetchone()
        return None if row is None else _rows.job_codec("get_job", cursor)(row)

    return read


def list_jobs(where: JobFilter, limit: int) -> Callable[[sqlite3.Connection], list[JobRecord]]:
    """Reads the jobs matching ``where``, newest first; by key or status through their index."""
    params: dict[str, Any] = {
        "key": where.key,
        "status": where.status,
        "task": where.task,
        "queue": where.queue,
        "before": ID_CEILING if where.before is None else where.before,
        "limit": limit,
    }
    if where.key is not None:
        name = "list_jobs_by_key"
    elif where.status is not None:
        name = "list_jobs_by_status"
    else:
        name = "list_jobs"
    query = QUERIES[name]

    def read(conn: sqlite3.Connection) -> list[JobRecord]:
        cursor = conn.execute(query, params)
        codec = _rows.job_codec(name, cursor)
        return [codec(row) for row in cursor.fetchall()]

    return read


def queue_stats(conn: sqlite3.Connection) -> list[QueueStats]:
    """Every queue ever enqueued to, with its active counts, by name (one snapshot)."""
    conn.execute("BEGIN")  # one snapshot for both reads
    try:
        names = conn.execute(QUERIES["queue_names"]).fetchall()
        counts = conn.execute(QUERIES["queue_counts"]).fetchall()
    finally:
        conn.execute("COMMIT")
    by_name = {name: QueueStats(name) for (name,) in names}
    for queue, status, count, parked, oldest_ready_at in counts:
        stats = by_name.setdefault(queue, QueueStats(queue))
        if status == "queued":
            stats.queued += count
            stats.parked += parked
            stats.oldest_ready_at = oldest_ready_at
        elif status == "running":
            stats.running += count
        else:
            stats.scheduled += count
    return [by_name[name] for name in sorted(by_name)]


def stats(since: float) -> Callable[[sqlite3.Connection], list[StatRow]]:
    """Reads the per-minute counters of minutes starting at or after ``since``."""
    first = math.ceil(since / 60)

    def read(conn: sqlite3.Connection) -> list[StatRow]:
        cursor = conn.execute(QUERIES["stats_since"], {"minute": first})
        codec = _rows.stat_codec("stats_since", cursor)
        return [codec(row) for row in cursor.fetchall()]

    return read
