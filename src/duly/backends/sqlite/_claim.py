"""Claiming: the claim transaction of SqliteBackend (gates, parking, priority).

Plain jobs take a fast path (read the candidates, start them, build their records here); a
queue whose candidates include a gated job takes the ``claim`` statement, which decides which
jobs start and which park behind their full gate.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from duly._records import EXPIRED_KEEP, EXPIRED_MESSAGE, JobRecord
from duly.backends.sqlite import _rows
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._operator import cancel_tx
from duly.backends.sqlite._pausing import paused_queues
from duly.backends.sqlite._wake import WorkSignal, data_version

__all__ = ["claim", "claim_tx"]


async def claim(
    db: SqliteConnection,
    signal: WorkSignal,
    gated_queues: set[str],
    worker: str,
    queues: Sequence[str],
    limit: int,
    now: float,
    lease_until: float,
) -> list[JobRecord]:
    """``Backend.claim``: one transaction; the database's version it ran at goes to
    ``signal`` (what a later ``wait_for_work`` compares with)."""
    began = signal.claim_began()
    if limit > 0 and queues:
        version, claimed = await db.transaction(
            lambda conn: claim_tx(conn, gated_queues, worker, queues, limit, now, lease_until),
            "claim",
        )
    else:
        version, claimed = await db.run(data_version, "claim"), []
    signal.claim_ended(began, version)
    return claimed


#: Where claim_start's changes go in a JobRecord's values (see _start).
_STATUS, _ATTEMPTS, _STARTED_AT, _FINISHED_AT, _WORKER, _LEASE_UNTIL, _EXPIRES_AT = (
    _rows.JOB_FIELDS.index(name)
    for name in (
        "status",
        "attempts",
        "started_at",
        "finished_at",
        "worker",
        "lease_until",
        "expires_at",
    )
)


def claim_tx(
    conn: sqlite3.Connection,
    gated_queues: set[str],
    worker: str,
    queues: Sequence[str],
    limit: int,
    now: float,
    lease_until: float,
) -> tuple[int, list[JobRecord]]:
    """The claim transaction's body: (data_version, claimed jobs in claim order, then the
    jobs found expired, ended ``cancelled``).

    Plain jobs (no gate) take the fast path: read the candidates (claim_candidates), start
    them (claim_start) and build their records here. A queue whose candidates include a
    gated job takes the claim statement, which decides which to start and which to park;
    it keeps taking it (it stays in ``gated_queues``, the backend's) until that statement
    takes only plain jobs. A paused queue (``_pausing``) gives nothing.
    """
    claimed: list[JobRecord] = []
    version: int | None = None
    expired: list[JobRecord] = []
    paused = paused_queues(conn)  # under the write lock: a pause is before or after us
    for queue in dict.fromkeys(queues):
        if queue in paused:
            continue
        expired.extend(_end_expired(conn, queue, now))
        while len(claimed) < limit:
            if queue not in gated_queues:
                cursor = conn.execute(
                    QUERIES["claim_candidates"],
                    {"queue": queue, "limit": limit - len(claimed), "now": now},
                )
                codec = _rows.job_codec("claim_candidates", cursor)
                rows = cursor.fetchall()
                if rows and version is None:
                    version = rows[0][codec.at["data_version"]]
                gate = codec.at["gate"]
                if all(row[gate] is None for row in rows):
                    lead = not claimed
                    claimed.extend(_start(conn, codec, rows, lead, worker, now, lease_until))
                    if claimed and claimed[0].lost > 0:
                        return _version(conn, version), claimed + expired  # alone, see below
                    break  # nothing parked: this queue gave what it had
                gated_queues.add(queue)
            cursor = conn.execute(
                QUERIES["claim"],
                {
                    "queue": queue,
                    "limit": limit - len(claimed),
                    "may_lead": not claimed,
                    "now": now,
                    "worker": worker,
                    "lease_until": lease_until,
                },
            )
            codec = _rows.job_codec("claim", cursor)
            rows = cursor.fetchall()
            at = codec.at
            gate, status = at["gate"], at["status"]
            priority, position, job_id = at["priority"], at["position"], at["id"]
            if rows and all(row[gate] is None for row in rows):
                gated_queues.discard(queue)
            started = [row for row in rows if row[status] == "running"]  # the others parked
            started.sort(key=lambda row: (-row[priority], row[position], row[job_id]))
            claimed.extend(codec(row) for row in started)
            if claimed and claimed[0].lost > 0:
                # A job that lost a worker before runs alone in its claim.
                return _version(conn, version), claimed + expired
            if len(started) == len(rows):
                break  # nothing parked: this queue gave what it had
            # Parked jobs left the ready index: look at the ones behind them.
    return _version(conn, version), claimed + expired


def _end_expired(conn: sqlite3.Connection, queue: str, now: float) -> list[JobRecord]:
    """End the queued jobs of ``queue`` whose expiry has passed, as ``cancel`` does (their
    gate's turn, their freshness scope, their dependents), each with a ``JobExpired`` error:
    their records, ``cancelled``. In the claim's transaction, so none of them can start."""
    ids = [row[0] for row in conn.execute(QUERIES["claim_expired"], {"queue": queue, "now": now})]
    ended: list[JobRecord] = []
    for job_id in ids:
        cancelled, _ = cancel_tx(job_id, now, now + EXPIRED_KEEP)(conn)
        if cancelled:
            cursor = conn.execute(
                QUERIES["expired_error"], {"id": job_id, "now": now, "message": EXPIRED_MESSAGE}
            )
            ended.extend(map(_rows.job_codec("expired_error", cursor), cursor.fetchall()))
    return ended


def _start(
    conn: sqlite3.Connection,
    codec: _rows.Codec[JobRecord],
    rows: list[tuple[Any, ...]],
    may_lead: bool,
    worker: str,
    now: float,
    lease_until: float,
) -> list[JobRecord]:
    """Start plain candidate ``rows`` (claim order) as the claim statement would: up to the
    first one that lost a worker before, which is taken only alone, as the first job of the
    claim (``may_lead``)."""
    take = rows
    lost, job_id = codec.at["lost"], codec.at["id"]
    for i, row in enumerate(rows):
        if row[lost] > 0:
            take = rows[:1] if i == 0 and may_lead else rows[:i]
            break
    if not take:
        return []
    started_at, until = float(now), float(lease_until)
    conn.execute(
        QUERIES["claim_start"],
        {
            "ids": json.dumps([row[job_id] for row in take]),
            "now": started_at,
            "worker": worker,
            "lease_until": until,
        },
    )
    values, started = codec.values, []
    for row in take:  # each record as claim_start left its row
        job = list(values(row))
        job[_STATUS], job[_ATTEMPTS] = "running", job[_ATTEMPTS] + 1
        job[_STARTED_AT], job[_FINISHED_AT] = started_at, None
        job[_WORKER], job[_LEASE_UNTIL] = worker, until
        job[_EXPIRES_AT] = None
        started.append(JobRecord(*job))
    return started


def _version(conn: sqlite3.Connection, version: int | None) -> int:
    """``version`` if a candidate row carried it, else read now."""
    if version is not None:
        return version
    return data_version(conn)
