"""Dependencies of SqliteBackend: storing dependents, and the reads.

Releasing and cancelling dependents must be atomic with the change of the job they wait for:
the triggers of ``migrations/0011_dependencies.sql`` do it in that change's transaction,
whatever statement made it. This module stores dependents (``enqueue``'s transaction, then
their rows) and reads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections.abc import Callable, Sequence

from duly._records import EnqueueResult, NewJob
from duly.backends.dependencies import dependency_depths
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._enqueue import enqueue_tx
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["SqliteDependencies", "enqueue_after_tx"]


def enqueue_after_tx(
    jobs: Sequence[NewJob], retention: float, now: float
) -> Callable[[sqlite3.Connection], list[EnqueueResult]]:
    """The transaction storing ``jobs``, the dependents among them waiting (see
    ``duly.backends.dependencies``); JobNotFound (nothing stored) for an unknown ``after`` id,
    ConfigurationError for a dependent too deep."""
    # Dependents are inserted `scheduled` (so their first event says so), then lose the due time.
    store = enqueue_tx(
        [dataclasses.replace(j, scheduled_for=math.inf) if j.after else j for j in jobs]
    )
    wanted = json.dumps(sorted({dependency for job in jobs for dependency in job.after}))

    def enqueue_after(conn: sqlite3.Connection) -> list[EnqueueResult]:
        stored = dict(conn.execute(QUERIES["dependency_depths"], {"ids": wanted}).fetchall())
        depths = dependency_depths(jobs, stored)
        results = store(conn)
        for job, result in zip(jobs, results, strict=True):
            if job.after and not result.deduplicated:
                _wait(conn, job, depths[job.id], retention, now)
        return results

    return enqueue_after


def _wait(conn: sqlite3.Connection, job: NewJob, depth: int, retention: float, now: float) -> None:
    """Link a stored dependent to its dependencies and settle what they already did."""
    conn.execute(QUERIES["dependency_links"], {"id": job.id, "after": json.dumps(job.after)})
    params = {"id": job.id, "pipe_from": job.pipe_from, "retention": retention, "depth": depth}
    [(waiting, failed_by)] = conn.execute(QUERIES["dependency_wait"], params).fetchall()
    if waiting == 0:
        conn.execute(QUERIES["dependency_ready"], {"id": job.id})
    elif failed_by is not None:
        cancel = {"id": job.id, "cause": failed_by, "now": now, "retention": retention}
        conn.execute(QUERIES["dependency_cancel"], cancel)
    else:
        conn.execute(QUERIES["dependency_hold"], {"id": job.id})


class SqliteDependencies:
    """``duly.backends.dependencies.DependencyStore`` on SQLite (``backend.dependencies``)."""

    def __init__(self, db: SqliteConnection, signal: WorkSignal) -> None:
        self._db = db
        self._signal = signal

    async def enqueue(self, jobs: Sequence[NewJob], retention: float) -> list[EnqueueResult]:
        """Store ``jobs`` and their waits in one transaction."""
        if not jobs:
            return []
        now = max(job.enqueued_at for job in jobs)
        results = await self._db.transaction(
            enqueue_after_tx(jobs, retention, now), "enqueue_after"
        )
        self._signal.note_local_change()
        return results

    async def dependents(self, job_id: str) -> list[str]:
        """The jobs that wait (or waited) for ``job_id``."""

        def read(conn: sqlite3.Connection) -> list[str]:
            return [row[0] for row in conn.execute(QUERIES["dependents"], {"id": job_id})]

        return await self._db.run(read, "dependents")

    async def input(self, job_id: str) -> bytes | None:
        """A chain step's input (its dependency's result), or None."""

        def read(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute(QUERIES["dependency_input"], {"id": job_id}).fetchone()
            return None if row is None or row[0] is None else bytes(row[0])

        return await self._db.run(read, "dependency_input")
