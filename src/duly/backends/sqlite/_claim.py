"""Consuming: the claim and heartbeat transactions of SqliteBackend."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from duly.backends.sqlite._tx import QUERIES, Row, record
from duly.records import JobRecord

__all__ = ["claim", "data_version", "heartbeat_tx"]


def claim(
    conn: sqlite3.Connection,
    gated_queues: set[str],
    worker: str,
    queues: Sequence[str],
    limit: int,
    now: float,
    lease_until: float,
) -> tuple[int, list[JobRecord]]:
    """The claim transaction's body: (data_version, claimed jobs in claim order).

    Plain jobs (no gate) take the fast path: read the candidates (claim_candidates), start
    them (claim_start) and build their records here. A queue whose candidates include a
    gated job takes the claim statement, which decides which to start and which to park;
    it keeps taking it (it stays in ``gated_queues``, the backend's) until that statement
    takes only plain jobs.
    """
    claimed: list[JobRecord] = []
    version: int | None = None
    for queue in dict.fromkeys(queues):
        while len(claimed) < limit:
            if queue not in gated_queues:
                rows = conn.execute(
                    QUERIES["claim_candidates"],
                    {"queue": queue, "limit": limit - len(claimed)},
                ).fetchall()
                if rows and version is None:
                    version = rows[0][21]
                if all(row[20] is None for row in rows):
                    lead = not claimed
                    claimed.extend(_start(conn, rows, lead, worker, now, lease_until))
                    if claimed and claimed[0].lost > 0:
                        return _version(conn, version), claimed  # alone, see below
                    break  # nothing parked: this queue gave what it had
                gated_queues.add(queue)
            rows = conn.execute(
                QUERIES["claim"],
                {
                    "queue": queue,
                    "limit": limit - len(claimed),
                    "may_lead": not claimed,
                    "now": now,
                    "worker": worker,
                    "lease_until": lease_until,
                },
            ).fetchall()
            if rows and all(row[21] is None for row in rows):
                gated_queues.discard(queue)
            started = [row for row in rows if row[4] == "running"]  # the others parked
            started.sort(key=lambda row: (-row[8], row[20], row[0]))
            claimed.extend(record(row) for row in started)
            if claimed and claimed[0].lost > 0:
                # A job that lost a worker before runs alone in its claim.
                return _version(conn, version), claimed
            if len(started) == len(rows):
                break  # nothing parked: this queue gave what it had
            # Parked jobs left the ready index: look at the ones behind them.
    return _version(conn, version), claimed


def _start(
    conn: sqlite3.Connection,
    rows: list[Row],
    may_lead: bool,
    worker: str,
    now: float,
    lease_until: float,
) -> list[JobRecord]:
    """Start plain candidate ``rows`` (claim order) as the claim statement would: up to the
    first one that lost a worker before, which is taken only alone, as the first job of the
    claim (``may_lead``)."""
    take = rows
    for i, row in enumerate(rows):
        if row[17] > 0:  # lost
            take = rows[:1] if i == 0 and may_lead else rows[:i]
            break
    if not take:
        return []
    started_at, until = float(now), float(lease_until)
    conn.execute(
        QUERIES["claim_start"],
        {
            "ids": json.dumps([row[0] for row in take]),
            "now": started_at,
            "worker": worker,
            "lease_until": until,
        },
    )
    # fmt: off
    return [
        JobRecord(
            row[0], row[1], row[2], row[3], "running", row[5] + 1, row[6], row[7], row[8],
            row[9], row[10], started_at, None, row[13], row[14], worker, until, row[17],
            row[18], row[19],
        )
        for row in take
    ]
    # fmt: on


def _version(conn: sqlite3.Connection, version: int | None) -> int:
    """``version`` if a candidate row carried it, else read now."""
    if version is not None:
        return version
    return data_version(conn)


def data_version(conn: sqlite3.Connection) -> int:
    """The database's ``PRAGMA data_version`` (what ``wait_for_work`` compares)."""
    value: int = conn.execute(QUERIES["data_version"]).fetchone()[0]
    return value


def heartbeat_tx(
    worker: str, job_ids: Sequence[str], now: float, lease_until: float
) -> Callable[[sqlite3.Connection], set[str]]:
    """The heartbeat transaction's body: mark the worker alive, extend its leases; the ids of
    ``job_ids`` still running under it."""
    ids = json.dumps(list(job_ids))

    def beat(conn: sqlite3.Connection) -> set[str]:
        conn.execute(QUERIES["touch_worker"], {"worker": worker, "now": now})
        if not job_ids:
            return set()
        rows = conn.execute(
            QUERIES["extend_leases"],
            {"ids": ids, "worker": worker, "lease_until": lease_until},
        ).fetchall()
        return {row[0] for row in rows}

    return beat
