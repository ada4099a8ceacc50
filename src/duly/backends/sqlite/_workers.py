"""The worker registry of SqliteBackend: register, unregister, list (the heartbeat's touch is
in ``_finish``, in the same transaction as the lease extension)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from duly._records import WorkerRecord
from duly.backends.sqlite import _rows
from duly.backends.sqlite._connection import QUERIES

__all__ = ["register_worker_tx", "unregister_worker_tx", "workers"]


def workers(conn: sqlite3.Connection) -> list[WorkerRecord]:
    """Registered workers by id."""
    cursor = conn.execute(QUERIES["list_workers"])
    at = _rows.positions(cursor)
    worker, started_at, last_seen, info = at["id"], at["started_at"], at["last_seen"], at["info"]
    return [
        WorkerRecord(row[worker], row[started_at], row[last_seen], json.loads(row[info]))
        for row in cursor.fetchall()
    ]


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
