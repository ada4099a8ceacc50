"""Paused queues of SqliteBackend (``duly.backends.pausing``): rows of ``paused_queues``.

The claim transaction reads them (``paused_queues`` in ``_claim.claim_tx``) under the same
write lock as its updates, so a pause committed before a claim began is seen by it, and a
claim that began first committed before the pause could.
"""

from __future__ import annotations

import sqlite3

from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["SqlitePausing", "paused_queues"]


def paused_queues(conn: sqlite3.Connection) -> set[str]:
    """In a claim's transaction: the paused queues."""
    return {row[0] for row in conn.execute(QUERIES["paused_queues"])}


class SqlitePausing:
    """``duly.backends.pausing.PauseStore`` on SQLite (``backend.pausing``)."""

    def __init__(self, db: SqliteConnection, signal: WorkSignal) -> None:
        self._db = db
        self._signal = signal

    async def pause(self, queue: str, now: float) -> bool:
        """Pause ``queue``; False if it was paused already."""

        def pause(conn: sqlite3.Connection) -> bool:
            params = {"queue": queue, "now": float(now)}
            return conn.execute(QUERIES["pause_queue"], params).rowcount > 0

        return await self._db.transaction(pause, "pause")

    async def resume(self, queue: str) -> bool:
        """Resume ``queue`` (its commit wakes the other processes' waiters; this instance's
        are woken here)."""

        def resume(conn: sqlite3.Connection) -> bool:
            return conn.execute(QUERIES["resume_queue"], {"queue": queue}).rowcount > 0

        resumed = await self._db.transaction(resume, "resume")
        if resumed:
            self._signal.note_local_change()
        return resumed

    async def paused(self) -> dict[str, float]:
        """The paused queues and when each was paused."""

        def read(conn: sqlite3.Connection) -> dict[str, float]:
            return {queue: float(at) for queue, at in conn.execute(QUERIES["paused_queues"])}

        return await self._db.run(read, "paused")
