"""Finishing: the finish (outcomes, releases) and heartbeat transactions of SqliteBackend.

Hot statements fetch few rows: each SQLite step releases and retakes the GIL, which costs a
wait whenever the event loop's thread is busy, so finish reads the jobs it applies to as one
JSON row and updates each kind of outcome in one statement over a VALUES list.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final

from duly._records import Outcome
from duly.backends.sqlite import _concurrency, _freshness
from duly.backends.sqlite._connection import QUERIES, SqliteConnection
from duly.backends.sqlite._maintenance import bump_stats
from duly.backends.sqlite._wake import WorkSignal

__all__ = ["finish", "finish_tx", "heartbeat", "heartbeat_tx"]

#: The stats counter (succeeded, failed, retried) each kind of outcome adds to.
_STATS_KIND: Final = {"succeeded": 0, "again": 0, "failed": 1, "retry": 2}

#: The most rows one batched statement binds: 4 values each at most, so 512 parameters, within
#: even the 999 that SQLite builds before 3.32 allowed by default.
_MAX_ROWS: Final = 128


async def finish(
    db: SqliteConnection, signal: WorkSignal, worker: str, outcomes: Sequence[Outcome], now: float
) -> list[bool]:
    """``Backend.finish``: one transaction; wakes this instance's waiters when a job became
    claimable again (released, again, or unparked by a freed gate slot)."""
    if not outcomes:
        return []
    flags, unparked = await db.transaction(finish_tx(worker, outcomes, now), "finish")
    requeued = any(
        o.kind in ("release", "again") for o, ok in zip(outcomes, flags, strict=True) if ok
    )
    if requeued or unparked:
        signal.note_local_change()
    return flags


def finish_tx(
    worker: str, outcomes: Sequence[Outcome], now: float
) -> Callable[[sqlite3.Connection], tuple[list[bool], bool]]:
    """The finish transaction's body: apply the outcomes of jobs still running under
    ``worker``; (applied flag per outcome, whether a gate slot unparked a job)."""
    ids = json.dumps([outcome.job_id for outcome in outcomes])
    minute = int(now // 60)

    def finish(conn: sqlite3.Connection) -> tuple[list[bool], bool]:
        [(found,)] = conn.execute(QUERIES["running_under"], {"ids": ids, "worker": worker})
        running = {job[0]: job for job in json.loads(found)}
        batches: dict[str, list[tuple[Any, ...]]] = {}
        counters: dict[tuple[str, str], list[int]] = {}
        gates: dict[str, int] = {}
        flags = []
        for outcome in outcomes:
            job = running.pop(outcome.job_id, None)  # pop: an id applies once
            flags.append(job is not None)
            if job is None:
                continue
            _, task, queue, gate, gate_limit, cancelling = job
            if cancelling is not None:  # its cancel was requested: cancelled, not applied
                flags[-1], name, row = False, "finish_cancelled", (outcome.job_id, now)
            else:
                name, row = _outcome_row(outcome, now)
                if (column := _STATS_KIND.get(outcome.kind)) is not None:
                    counters.setdefault((task, queue), [0, 0, 0])[column] += 1
            batches.setdefault(name, []).append(row)
            if gate is not None:
                gates[gate] = max(gates.get(gate, 0), gate_limit)
        for name, rows in batches.items():
            _apply(conn, name, rows)
        bump_stats(conn, minute, counters)
        unparked = _concurrency.free_gate_slots(conn, gates)
        _freshness.ended(conn, [o.job_id for o in outcomes], now)  # their scopes, if syncs
        return flags, bool(unparked)

    return finish


def _outcome_row(outcome: Outcome, now: float) -> tuple[str, tuple[Any, ...]]:
    """The finish_* statement of ``outcome`` and its row of ``o`` (see queries/finish.sql)."""
    job_id, kind = outcome.job_id, outcome.kind
    if kind == "succeeded":
        return "finish_succeeded", (job_id, now, outcome.result, outcome.expire_at)
    if kind == "failed":
        return "finish_failed", (job_id, now, outcome.errors, outcome.expire_at)
    run_at = now if outcome.run_at is None else outcome.run_at
    if kind == "retry":
        return "finish_retry", (job_id, outcome.errors, run_at, outcome.expire_at)
    if kind == "release":
        if run_at <= now:
            return "finish_release_now", (job_id, outcome.rate_slot)
        return "finish_release_later", (job_id, run_at, outcome.rate_slot)
    if kind == "again":
        return "finish_again", (job_id, now, run_at, outcome.result)
    raise ValueError(f"unknown outcome kind {kind!r}")


@functools.cache
def _batched(name: str, rows: int, width: int) -> str:
    """Query ``name`` with ``rows`` VALUES rows of ``width`` parameters (see queries/finish.sql)."""
    values = ", ".join(["(" + ", ".join("?" * width) + ")"] * rows)
    return QUERIES[name].replace("/* rows */", values)


def _apply(conn: sqlite3.Connection, name: str, rows: list[tuple[Any, ...]]) -> None:
    """Run the batched statement ``name`` over ``rows`` (one statement per _MAX_ROWS)."""
    width = len(rows[0])
    for start in range(0, len(rows), _MAX_ROWS):
        chunk = rows[start : start + _MAX_ROWS]
        size = 1 << (len(chunk) - 1).bit_length()  # padded to a power of two
        params = [value for row in chunk for value in row]
        params.extend([None] * ((size - len(chunk)) * width))
        conn.execute(_batched(name, size, width), params)


async def heartbeat(
    db: SqliteConnection, worker: str, job_ids: Sequence[str], now: float, lease_until: float
) -> list[str]:
    """``Backend.heartbeat``: the ids of ``job_ids`` the worker no longer runs."""
    alive = await db.transaction(heartbeat_tx(worker, job_ids, now, lease_until), "heartbeat")
    return [job_id for job_id in job_ids if job_id not in alive]


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
        return {job_id for job_id, cancelling in rows if cancelling is None}

    return beat
