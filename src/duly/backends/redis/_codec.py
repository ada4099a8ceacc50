"""Redis replies turned into records: every job field is read by its name (the job hash's
one-letter fields, see ``keys.py``), never by its place in a reply.

A job hash arrives as a mapping (``HGETALL``) or flat (``list_jobs.lua``); claim.lua answers a
row of values in its order, named once by ``ClaimRow``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from duly._records import (
    EXPIRED_KEEP,
    EnqueueResult,
    JobRecord,
    NewJob,
    QueueStats,
    StatRow,
    WorkerRecord,
)
from duly.backends.redis._keys import DEFAULT_MAX_ATTEMPTS
from duly.backends.redis._scripts import RawHash

__all__ = [
    "ClaimRow",
    "claimed",
    "expired",
    "float_or_none",
    "handed",
    "is_expired_row",
    "queue_stats",
    "record",
    "results",
    "stat_rows",
    "worker_info",
    "worker_records",
]

_SEP: Final = "\x1f"
_OUTCOME_FIELDS: Final = {"s": "succeeded", "f": "failed", "r": "retried"}


def float_or_none(raw: bytes | None) -> float | None:
    """A stored time (``repr(float)``), or None when absent."""
    return None if raw is None else float(raw)


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode()


def record(job_id: str, flat: RawHash | dict[bytes, bytes]) -> JobRecord:
    """A job's record from its hash (absent optional fields mean None or 0)."""
    h = flat if isinstance(flat, dict) else dict(zip(flat[::2], flat[1::2], strict=True))
    return JobRecord(
        id=job_id,
        task=h[b"t"].decode(),
        queue=h[b"q"].decode(),
        payload=h.get(b"p", b""),
        status=h[b"s"].decode(),
        attempts=int(h.get(b"a", 0)),
        max_attempts=int(h.get(b"m", DEFAULT_MAX_ATTEMPTS)),
        key=_text(h.get(b"k")),
        priority=int(h.get(b"r", 0)),
        enqueued_at=float(h[b"e"]),
        scheduled_for=float_or_none(h.get(b"d")),
        started_at=float_or_none(h.get(b"b")),
        finished_at=float_or_none(h.get(b"f")),
        result=h.get(b"o"),
        errors=h.get(b"x"),
        worker=_text(h.get(b"w")),
        lease_until=float_or_none(h.get(b"l")),
        lost=int(h.get(b"n", 0)),
        expire_at=float_or_none(h.get(b"z")),
        rate_slot=float_or_none(h.get(b"y")),
        progress=h.get(b"pr"),
        cursor=h.get(b"cu"),
        expires_at=float_or_none(h.get(b"X")),
    )


class ClaimRow(NamedTuple):
    """One claimed job's fields as claim.lua returns them: in its order (see its header, which
    names them by hash field, given here after each name), None when absent. The decoder reads
    them by name; the caller already knows s, b, w and l, and that f is gone."""

    task: bytes  # t
    queue: bytes  # q
    payload: bytes | None  # p
    attempts: int  # a, after the claim
    max_attempts: bytes | None  # m
    key: bytes | None  # k
    priority: bytes | None  # r
    enqueued_at: bytes  # e
    scheduled_for: bytes | None  # d
    result: bytes | None  # o
    errors: bytes | None  # x
    lost: bytes | None  # n
    expire_at: bytes | None  # z
    rate_slot: bytes | None  # y
    cursor: bytes | None  # cu


def claimed(
    job_id: bytes, row: Sequence[Any], worker: str, now: float, lease_until: float
) -> JobRecord:
    """A claimed job's record from its claim.lua row (see ``ClaimRow``) and what the claimer
    knows: it runs, on ``worker``, since ``now``, until ``lease_until``."""
    r = ClaimRow._make(row)  # a row of another length fails here
    key, priority, scheduled_for = r.key, r.priority, r.scheduled_for
    lost, expire_at, rate_slot = r.lost, r.expire_at, r.rate_slot
    return JobRecord(
        id=job_id.decode(),
        task=r.task.decode(),
        queue=r.queue.decode(),
        payload=r.payload or b"",
        status="running",
        attempts=r.attempts,
        max_attempts=DEFAULT_MAX_ATTEMPTS if r.max_attempts is None else int(r.max_attempts),
        key=None if key is None else key.decode(),
        priority=0 if priority is None else int(priority),
        enqueued_at=float(r.enqueued_at),
        scheduled_for=None if scheduled_for is None else float(scheduled_for),
        started_at=now,
        result=r.result,
        errors=r.errors,
        worker=worker,
        lease_until=lease_until,
        lost=0 if lost is None else int(lost),
        expire_at=None if expire_at is None else float(expire_at),
        rate_slot=None if rate_slot is None else float(rate_slot),
        cursor=r.cursor,
    )


def is_expired_row(row: Sequence[Any]) -> bool:
    """Whether a claim.lua row is a job it ended expired: ``[b"expired", row, X, b]`` (a
    taken job's row has ``len(ClaimRow._fields)`` values)."""
    return len(row) == 4 and row[0] == b"expired"


def expired(job_id: bytes, row: Sequence[Any], now: float) -> JobRecord:
    """The record of a job claim.lua ended expired at ``now`` (``is_expired_row``): its
    claim row (errors after the change), its expiry and started_at; ``cancelled``, finished
    at ``now``, kept ``EXPIRED_KEEP``."""
    _, fields, expires_at, started_at = row
    taken = claimed(job_id, fields, "", now, now)
    taken.status, taken.worker, taken.lease_until = "cancelled", None, None
    taken.started_at, taken.finished_at = float_or_none(started_at), now
    taken.expire_at, taken.expires_at = now + EXPIRED_KEEP, float_or_none(expires_at)
    return taken


def handed(row: bytes, worker: str) -> JobRecord:
    """A job handed to ``worker`` by enqueue.lua: its record from its inbox row (netstrings of
    id, started_at, lease_until, task, queue, payload, max_attempts, key, priority,
    enqueued_at; see lua/_handoff.lua). A new job, so attempts is 1 and nothing else is set."""
    values: list[bytes] = []
    at = 0
    while at < len(row):
        colon = row.index(b":", at)
        start = colon + 1
        at = start + int(row[at:colon])
        values.append(row[start:at])
    job_id, started_at, lease_until, task, queue, payload, max_attempts, key, priority, at_ = (
        values  # a row of another length fails here
    )
    return JobRecord(
        id=job_id.decode(),
        task=task.decode(),
        queue=queue.decode(),
        payload=payload,
        status="running",
        attempts=1,
        max_attempts=int(max_attempts),
        key=key.decode() or None,
        priority=int(priority or 0),
        enqueued_at=float(at_),
        started_at=float(started_at),
        worker=worker,
        lease_until=float(lease_until),
    )


def results(jobs: Sequence[NewJob], found: Sequence[bytes | None]) -> list[EnqueueResult]:
    """One ``EnqueueResult`` per job from the enqueue script's answer (see ``Scripts.enqueue``)."""
    return [
        EnqueueResult(job.id) if other is None else EnqueueResult(other.decode(), True)
        for job, other in zip(jobs, found, strict=True)
    ]


def worker_info(started_at: float, info: dict[str, object]) -> str:
    """A worker's entry of the ``wi`` hash (read back by ``worker_records``)."""
    return json.dumps({"s": float(started_at), "i": info}, default=str)


def worker_records(
    seen: Sequence[tuple[bytes, float]], infos: Mapping[bytes, bytes]
) -> list[WorkerRecord]:
    """The workers from the ``w`` zset (id, last seen) and the ``wi`` hash (JSON per id)."""
    records = []
    for raw_id, last_seen in seen:
        blob = infos.get(raw_id)
        data: dict[str, Any] = json.loads(blob) if blob else {}
        records.append(
            WorkerRecord(
                id=raw_id.decode(),
                started_at=float(data.get("s", last_seen)),
                last_seen=float(last_seen),
                info=dict(data.get("i") or {}),
            )
        )
    return records


def queue_stats(
    names: Sequence[str],
    ready: Sequence[int],
    counts: Mapping[bytes, bytes],
    ages: Sequence[bytes | None],
) -> list[QueueStats]:
    """Per queue: its ready zset's size, its fields of the ``qc`` counts hash and the ready
    time of its longest-waiting claimable job (queue_ages.lua)."""
    stats = []
    for name, queued, age in zip(names, ready, ages, strict=True):
        parked = max(int(counts.get(f"{name}{_SEP}w".encode(), 0)), 0)
        stats.append(
            QueueStats(
                name=name,
                queued=int(queued) + parked,
                scheduled=max(int(counts.get(f"{name}{_SEP}s".encode(), 0)), 0),
                running=max(int(counts.get(f"{name}{_SEP}r".encode(), 0)), 0),
                parked=parked,
                oldest_ready_at=None if age is None else float(age),
            )
        )
    return stats


def stat_rows(minutes: Sequence[int], buckets: Sequence[Mapping[bytes, bytes]]) -> list[StatRow]:
    """The rows of the per-minute counter buckets (``c:<minute>``), ordered."""
    rows: dict[tuple[int, str, str], StatRow] = {}
    for minute, bucket in zip(minutes, buckets, strict=True):
        for field, count in bucket.items():
            task, queue, kind = field.decode().rsplit(_SEP, 2)
            row = rows.get((minute, task, queue))
            if row is None:
                row = rows[minute, task, queue] = StatRow(minute, task, queue)
            name = _OUTCOME_FIELDS.get(kind)
            if name is not None:
                setattr(row, name, getattr(row, name) + int(count))
    return [rows[key] for key in sorted(rows)]
