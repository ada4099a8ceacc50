"""Progress and checkpoints on PostgreSQL (``duly.backends.progress``): the heartbeat
statement, then ``store_progress`` (the reports and their events), in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from duly._records import ProgressReport
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._finish import heartbeat, heartbeat_params

__all__ = ["PostgresProgress"]


class PostgresProgress:
    """``duly.backends.progress.ProgressStore`` on PostgreSQL (``backend.progress``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def heartbeat(
        self,
        worker: str,
        job_ids: Sequence[str],
        now: float,
        lease_until: float,
        reports: Sequence[ProgressReport],
    ) -> list[str]:
        """``Backend.heartbeat`` and the reports stored, in one transaction."""
        db = self._db
        if not reports:
            return await heartbeat(db, worker, job_ids, now, lease_until)
        stored = {
            "worker": worker,
            "ids": [r.job_id for r in reports],
            "progress": [r.progress for r in reports],
            "cursors": [r.cursor for r in reports],
        }

        async def beat_and_store(conn: psycopg.AsyncConnection[Any]) -> set[str]:
            params = heartbeat_params(worker, job_ids, now, lease_until)
            cur = await conn.execute(db.q["heartbeat"], params)
            row = await cur.fetchone()
            assert row is not None
            cur = await conn.execute(db.q["store_progress"], stored)
            events = await cur.fetchone()
            if events is not None and events[0]:
                await conn.execute(db.q["progress_notify"], {"schema_name": db.schema})
            return set(row[0])

        alive = await db.transaction(beat_and_store)
        return [job_id for job_id in job_ids if job_id not in alive]
