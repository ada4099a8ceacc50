"""Watches of SqliteBackend: move an active watch's next check in one transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from duly.backends.sqlite._connection import QUERIES, SqliteConnection

__all__ = ["SqliteWatches"]


def move_tx(
    unique_key: str, run_at: float, now: float
) -> Callable[[sqlite3.Connection], tuple[str, bool] | None]:
    """The move's transaction (one writer at a time: the holder cannot change meanwhile)."""

    def move(conn: sqlite3.Connection) -> tuple[str, bool] | None:
        row = conn.execute(QUERIES["watch_holder"], {"key": unique_key}).fetchone()
        if row is None:
            return None
        job_id, status, parked = row
        if status == "running" or parked:
            return job_id, False
        if not (status == "queued" and run_at <= now):
            conn.execute(QUERIES["watch_move"], {"id": job_id, "at": run_at})
        return job_id, True

    return move


class SqliteWatches:
    """``duly.backends.watches.WatchStore`` on SQLite (``backend.watches``)."""

    def __init__(self, db: SqliteConnection) -> None:
        self._db = db

    async def move(self, unique_key: str, run_at: float, now: float) -> tuple[str, bool] | None:
        """See ``WatchStore.move``."""
        return await self._db.transaction(move_tx(unique_key, run_at, now), "move_watch")
