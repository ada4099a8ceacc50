"""Progress and checkpoints on SQLite (``duly.backends.progress``): the heartbeat's
transaction (``_finish.heartbeat_tx``) also stores the runs' reports and their events."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from duly._records import ProgressReport
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._finish import heartbeat_tx

__all__ = ["SqliteProgress"]


class SqliteProgress:
    """``duly.backends.progress.ProgressStore`` on SQLite (``backend.progress``)."""

    def __init__(self, db: SqliteConnection) -> None:
        self._db = db

    async def heartbeat(
        self,
        worker: str,
        job_ids: Sequence[str],
        now: float,
        lease_until: float,
        reports: Sequence[ProgressReport],
    ) -> list[str]:
        """One transaction: the heartbeat, then each report stored (with its event)."""
        beat = heartbeat_tx(worker, job_ids, now, lease_until)
        rows = [
            {"id": r.job_id, "worker": worker, "progress": r.progress, "cursor": r.cursor}
            for r in reports
        ]

        def beat_and_store(conn: sqlite3.Connection) -> set[str]:
            alive = beat(conn)
            if rows:
                conn.executemany(QUERIES["progress_event"], rows)
                conn.executemany(QUERIES["store_progress"], rows)
            return alive

        alive = await self._db.transaction(beat_and_store, "heartbeat")
        return [job_id for job_id in job_ids if job_id not in alive]
