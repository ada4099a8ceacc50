"""Introspection: SqliteBackend's reads of jobs, queues, stats and workers (and the worker
registry's writes)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from typing import Any

from duly.backends.sqlite._tx import QUERIES, Row, record
from duly.records import JobFilter, JobRecord, QueueStats, StatRow, WorkerRecord

__all__ = [
    "get_job",
    "list_jobs",
    "queue_stats",
    "register_worker_tx",
    "stats",
    "unregister_worker_tx",
    "workers",
]


def get_job(job_id: str) -> Callable[[sqlite3.Connection], JobRecord | None]:
    """Reads one job by id, or None."""

    def read(conn: sqlite3.Connection) -> JobRecord | None:
        row = conn.execute(QUERIES["get_job"], {"id": job_id}).fetchone()
        return None if row is None else record(row)

    return read


def list_jobs(where: JobFilter, limit: int) -> Callable[[sqlite3.Connection], list[JobRecord]]:
    """Reads the jobs matching ``where``, newest first; by key or status through their index."""
    params: dict[str, Any] = {
        "key": where.key,
        "status": where.status,
        "task": where.task,
        "queue": where.queue,
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
        return [record(row) for row in conn.execute(query, params).fetchall()]

    return read


def queue_stats(conn: sqlite3.Connection) -> list[QueueStats]:
    """Every queue ever enqueued to, with its active counts, by name (one snapshot)."""
    conn.execute("BEGIN")  # one snapshot for both reads
    try:
        names: list[Row] = conn.execute(QUERIES["queue_names"]).fetchall()
        counts: list[Row] = conn.execute(QUERIES["queue_counts"]).fetchall()
    finally:
        conn.execute("COMMIT")
    by_name = {row[0]: QueueStats(row[0]) for row in names}
    for queue, status, count in counts:
        stats = by_name.setdefault(queue, QueueStats(queue))
        if status == "queued":
            stats.queued += count
        elif status == "running":
            stats.running += count
        else:
            stats.scheduled += count
    return [by_name[name] for name in sorted(by_name)]


def stats(since: float) -> Callable[[sqlite3.Connection], list[StatRow]]:
    """Reads the per-minute counters of minutes starting at or after ``since``."""
    first = math.ceil(since / 60)

    def read(conn: sqlite3.Connection) -> list[StatRow]:
        rows = conn.execute(QUERIES["stats_since"], {"minute": first}).fetchall()
        return [StatRow(*row) for row in rows]

    return read


def workers(conn: sqlite3.Connection) -> list[WorkerRecord]:
    """Registered workers by id."""
    rows = conn.execute(QUERIES["list_workers"]).fetchall()
    return [WorkerRecord(row[0], row[1], row[2], json.loads(row[3])) for row in rows]


def register_worker_tx(
    worker: str, now: float, info: dict[str, object]
) -> Callable[[sqlite3.Connection], None]:
    """The register transaction's body: announce (or re-announce) a worker process."""
    params = {"worker": worker, "now": now, "info": json.dumps(info, default=str)}

    def register(conn: sqlite3.Connection) -> None:
        conn.execute(QUERIES["register_worker"], params)

    return register


def unregister_worker_tx(worker: str) -> Callable[[sqlite3.Connection], None]:
    """The unregister transaction's body: remove a worker that stopped cleanly."""

    def unregister(conn: sqlite3.Connection) -> None:
        conn.execute(QUERIES["unregister_worker"], {"worker": worker})

    return unregister
