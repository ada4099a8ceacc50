"""Maintenance of SqliteBackend: promoting due jobs, purging what retention lets go (and
giving the freed pages back to the file system), the per-minute stats rows."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from typing import Final

from duly.backends.sqlite import _events, _groups
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["VACUUM_MIN_PAGES", "bump_stats", "promote", "promote_tx", "purge", "purge_tx", "vacuum"]

#: Free pages past which a purge gives them back to the file system: below, not worth a pass
#: (new rows reuse free pages anyway). 256 pages are 1 MiB at SQLite's default page size.
VACUUM_MIN_PAGES: Final = 256


async def promote(
    db: SqliteConnection, signal: WorkSignal, now: float, limit: int
) -> tuple[int, float | None]:
    """``Backend.promote_due``: (jobs queued, next due time)."""
    moved, earliest = await db.transaction(promote_tx(now, limit), "promote_due")
    if moved:
        signal.note_local_change()
    return moved, earliest


async def purge(db: SqliteConnection, now: float, limit: int, keep: float) -> int:
    """``Backend.purge`` in one transaction, then the freed pages returned (``vacuum``)."""
    deleted = await db.transaction(purge_tx(now, limit, keep), "purge")
    await db.run(vacuum, "purge")
    return deleted


def promote_tx(now: float, limit: int) -> Callable[[sqlite3.Connection], tuple[int, float | None]]:
    """The promote transaction's body: queue up to ``limit`` due scheduled/retrying jobs;
    (moved, next due time)."""

    def promote(conn: sqlite3.Connection) -> tuple[int, float | None]:
        moved = 0
        if limit > 0:
            moved = conn.execute(QUERIES["promote_due"], {"now": now, "limit": limit}).rowcount
        earliest = conn.execute(QUERIES["next_due"]).fetchone()[0]
        return moved, earliest

    return promote


def purge_tx(now: float, limit: int, keep: float) -> Callable[[sqlite3.Connection], int]:
    """The purge transaction's body: delete up to ``limit`` expired finished jobs, stats
    buckets older than ``keep`` seconds, workers not seen for as long and rate-limit state
    whose tat has passed; the jobs deleted."""
    old_minute = math.floor((now - keep) / 60)

    def purge(conn: sqlite3.Connection) -> int:
        deleted = 0
        if limit > 0:
            deleted = conn.execute(QUERIES["purge_jobs"], {"now": now, "limit": limit}).rowcount
        conn.execute(QUERIES["purge_stats"], {"minute": old_minute})
        conn.execute(QUERIES["purge_workers"], {"cutoff": now - keep})
        conn.execute(QUERIES["purge_rates"], {"now": now})
        _groups.purge_groups(conn, now)
        _events.purge_events(conn, keep)
        return deleted

    return purge


def vacuum(conn: sqlite3.Connection) -> int:
    """Give the file's free pages back (``PRAGMA incremental_vacuum``) once there are at least
    ``VACUUM_MIN_PAGES``; the pages freed. Outside any transaction: the pragma is a write of
    its own, and a file of an older duly without incremental auto_vacuum just keeps them.

    ``executescript`` steps the pragma to its end: ``execute`` steps once, which frees one page.
    In WAL mode the file itself shrinks at the next checkpoint.
    """
    [(free,)] = conn.execute("PRAGMA freelist_count")
    if free < VACUUM_MIN_PAGES:
        return 0
    conn.executescript("PRAGMA incremental_vacuum")
    [(left,)] = conn.execute("PRAGMA freelist_count")
    return int(free - left)


def bump_stats(
    conn: sqlite3.Connection, minute: int, counters: dict[tuple[str, str], list[int]]
) -> None:
    """Add ``counters`` ((task, queue) -> [succeeded, failed, retried]) to ``minute``'s
    buckets, in the caller's transaction."""
    if counters:
        conn.executemany(
            QUERIES["bump_stats"],
            [
                {
                    "minute": minute,
                    "task": task,
                    "queue": queue,
                    "succeeded": counts[0],
                    "failed": counts[1],
                    "retried": counts[2],
                }
                for (task, queue), counts in counters.items()
            ],
        )
