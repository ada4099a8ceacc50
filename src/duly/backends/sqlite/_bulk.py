"""Bulk actions of SqliteBackend (``duly.backends.bulk``): one transaction applies the per-job
cancel or retry (``_operator``) to every id of the batch still in the given status."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from duly._records import ID_CEILING, JobFilter
from duly.backends.bulk import MAX_BATCH
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._operator import cancel_tx, retry_tx
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["SqliteBulk"]


def _still_in(conn: sqlite3.Connection, job_ids: Sequence[str], status: str) -> list[str]:
    """The ids of the batch whose job is in ``status`` now (under the write lock)."""
    params = {"ids": json.dumps(list(job_ids[:MAX_BATCH])), "status": status}
    return [row[0] for row in conn.execute(QUERIES["bulk_candidates"], params)]


class SqliteBulk:
    """``duly.backends.bulk.BulkActions`` on SQLite (``backend.bulk``)."""

    def __init__(self, db: SqliteConnection, signal: WorkSignal) -> None:
        self._db = db
        self._signal = signal

    async def matching(self, where: JobFilter, cursor: str | None) -> tuple[list[str], str | None]:
        """A page of matching ids, keyset by id (the cursor: the last one)."""
        params = {
            "status": where.status,
            "task": where.task,
            "queue": where.queue,
            "key": where.key,
            "before": ID_CEILING if cursor is None else cursor,
            "limit": MAX_BATCH,
        }

        def read(conn: sqlite3.Connection) -> list[str]:
            return [row[0] for row in conn.execute(QUERIES["bulk_ids"], params)]

        ids = await self._db.run(read, "bulk_ids")
        return ids, (ids[-1] if len(ids) == MAX_BATCH else None)

    async def cancel(
        self, job_ids: Sequence[str], status: str, now: float, expire_at: float
    ) -> int:
        """Cancel the batch's jobs still in ``status``, in one transaction."""

        def cancel_many(conn: sqlite3.Connection) -> tuple[int, bool]:
            cancelled, unparked = 0, False
            for job_id in _still_in(conn, job_ids, status):
                done, freed = cancel_tx(job_id, now, expire_at)(conn)
                cancelled += done
                unparked = unparked or freed
            return cancelled, unparked

        if not job_ids:
            return 0
        cancelled, unparked = await self._db.transaction(cancel_many, "cancel_many")
        if unparked:
            self._signal.note_local_change()
        return cancelled

    async def retry(self, job_ids: Sequence[str], status: str, now: float) -> int:
        """Re-queue the batch's jobs still in ``status``, in one transaction."""

        def retry_many(conn: sqlite3.Connection) -> int:
            return sum(retry_tx(job_id, now)(conn) for job_id in _still_in(conn, job_ids, status))

        if not job_ids:
            return 0
        retried = await self._db.transaction(retry_many, "retry_many")
        if retried:
            self._signal.note_local_change()
        return retried
