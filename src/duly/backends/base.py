"""The one backend protocol every storage (SQLite, Redis, PostgreSQL) implements.

Every method that changes state is one atomic step in the backend (a Lua script, or one SQL
transaction): two workers and a crash between any two lines must never lose a job nor hand one
job to two workers. The worker algorithms (retries, leases, recovery cadence, retention) live in
``duly.worker`` and are written once on top of this protocol.

Time: every ``now`` comes from the caller's clock (POSIX seconds). Backends never read the
system clock for job state, so a test can drive time and all backends agree.

Errors: a backend that cannot be reached raises ``duly.BackendUnavailable`` (chained to the
driver's exception); any other failure is a bug and may raise what it likes.

Ordering of a queue: higher ``priority`` first; within one priority, jobs handed back (recovered
orphans and graceful-shutdown releases) first, then by ``enqueued_at``/id (FIFO).

Concurrency control rests on three primitives every backend keeps atomically with the job
states (the task layer renders keys and limits; ``duly.worker`` applies rate limits):

- **unique hold** (``enqueue``): one active holder per ``unique_key``; see ``NewJob``.
- **gate** (``claim`` and every way out of ``running``): a counting semaphore per ``gate`` whose
  holders are exactly the running jobs of that gate, so a slot lives and dies with its holder's
  lease. A job that finds its gate full is *parked*: it stays ``queued`` (listed and counted as
  queued, never charged an attempt) but no claim sees it until a slot of its gate frees, which
  puts the best parked job (priority, then FIFO) back in its queue and wakes that queue. So a
  waiting job never polls, and a gate with a free slot has no parked job for long.
- **rate slots** (``reserve_rate``): a GCRA schedule per key, reserved in one round trip.

Everything else a backend stores (freshness scopes, groups, events, webhooks...) is a
*capability*: a protocol of its own in ``duly.backends.<capability>``, implemented by an object
the backend exposes under one attribute (see ``duly.backends.capability``). The core steps
below keep those capabilities' state atomically with the job's (a group counts its member's
outcome in the ``finish`` that applied it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from duly._records import (
    STATS_RETENTION,
    EnqueueResult,
    JobFilter,
    JobRecord,
    NewJob,
    Outcome,
    QueueStats,
    RateRequest,
    Recovered,
    StatRow,
    StorageFormat,
    WorkerRecord,
)

__all__ = ["Backend"]


@runtime_checkable
class Backend(Protocol):
    """Storage for jobs. One instance belongs to one event loop (it may hold async clients):
    an App opens one ``clone()`` per event loop that uses it."""

    #: Where the data lives (may hold a password: redact before showing it).
    url: str
    #: What separates several apps' data in one place (Redis key prefix, PostgreSQL schema).
    namespace: str

    # -- lifecycle -------------------------------------------------------------------------
    def clone(self) -> Backend:
        """A new, unopened backend with this one's configuration (for another event loop)."""
        ...

    async def open(self) -> None:
        """Connect, load scripts / apply migrations. Idempotent. Raises BackendUnavailable."""

    async def migrate(self) -> list[int]:
        """Bring the stored format up to date now; the migration versions applied (none for a
        backend without a schema, which still checks it is reachable). Raises
        BackendUnavailable."""
        ...

    async def storage_format(self) -> StorageFormat:
        """The format the stored data is in and the newest one this duly reads (SQL backends:
        the highest migration applied; Redis: the ``format`` key). ``open`` and ``migrate``
        upgrade older data to ``readable`` and raise ``StorageTooNew`` on newer data, as does
        ``enqueue_blocking``, which opens nothing. Raises BackendUnavailable."""
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""

    async def ping(self) -> None:
        """Round-trip to the server; raise BackendUnavailable if it does not answer."""

    async def drop(self) -> None:
        """Delete everything this backend stored under its namespace (tests, resets)."""

    # -- producing -------------------------------------------------------------------------
    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Store a batch in one round trip and wake idle workers of the affected queues.

        A job whose ``scheduled_for > enqueued_at`` is ``scheduled`` (in the due index, never
        scanned before it is due); else ``queued``. A job with a ``key`` joins that key's index.
        Returns one result per input, in order.

        A job with a ``unique_key`` held by an active job (scheduled, queued, running or
        retrying, whose hold has not ended) is not stored: its result is the holder's id with
        ``deduplicated=True`` (also for a duplicate earlier in the same batch). A hold past its
        ``unique_expires_at`` (compared with the job's ``enqueued_at``) is taken over.
        """
        ...

    def enqueue_blocking(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Blocking twin of ``enqueue`` for sync callers (``task.enqueue``): same effect, no
        event loop, callable from any thread and without ``open()``."""
        ...

    def close_blocking(self) -> None:
        """Release what ``enqueue_blocking`` opened. Idempotent."""

    # -- consuming -------------------------------------------------------------------------
    async def claim(
        self, worker: str, queues: Sequence[str], limit: int, now: float, lease_until: float
    ) -> list[JobRecord]:
        """Atomically take up to ``limit`` queued jobs, trying ``queues`` in the given order.

        Each claimed job becomes ``running`` with ``attempts + 1``, ``started_at = now``,
        ``worker``, ``lease_until``; ``finished_at`` is cleared (``result`` is kept: it is the
        previous run's, for a job that runs ``again``). Returned records show the new state.
        A ``unique_until="start"`` job's unique hold ends here.

        A job with a ``gate`` whose ``gate_limit`` running jobs are reached is parked instead
        (not returned, not charged); the claim goes on with the jobs behind it. A claim may
        return fewer than ``limit`` while claimable jobs remain (it always returns at least one
        if any job is claimable).

        A job that already lost a worker (``lost > 0``) may be a poison pill that kills whoever
        runs it, so it is handed out alone: only as the first job of a claim, which then stops.
        Its batch-mates are thus never charged a lost run for it.
        """
        ...

    async def heartbeat(
        self, worker: str, job_ids: Sequence[str], now: float, lease_until: float
    ) -> list[str]:
        """Record the worker alive and extend the leases of its running jobs.

        Returns the ids among ``job_ids`` the worker should stop: those no longer running under
        it (recovered after a lapsed lease, or gone), and those whose cancel was requested
        (their lease is extended still: they run until their run ends, see ``cancel``).
        """
        ...

    async def finish(self, worker: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """Apply a batch of run outcomes in one round trip (see ``Outcome`` for each kind).

        An outcome applies only if its job is still ``running`` under ``worker`` and its cancel
        was not requested; otherwise its flag is False: a job whose cancel was requested ends
        ``cancelled`` (whatever the outcome, which is not counted; its gate slot frees), any
        other is left alone (it was recovered, or is gone). Applied outcomes
        bump the per-minute counters: succeeded and again -> succeeded, failed, retry ->
        retried. Each applied outcome frees its job's gate slot (unparking one job of that gate);
        succeeded and failed end its unique hold.
        """
        ...

    async def promote_due(self, now: float, limit: int) -> tuple[int, float | None]:
        """Move up to ``limit`` scheduled/retrying jobs with ``scheduled_for <= now`` to queued.

        Cost depends on the number due, never on the number not yet due. Returns how many
        moved and the earliest ``scheduled_for`` still pending (or None).
        """
        ...

    async def recover(
        self, now: float, max_lost: int, limit: int, failed_expire_at: float
    ) -> list[Recovered]:
        """Find running jobs whose lease lapsed before ``now`` and recover each exactly once.

        Each one gets ``lost + 1``. Below ``max_lost`` it goes back to the head of its queue
        (``queued``, worker cleared, ``attempts`` kept so the lost run shows). At ``max_lost`` it
        is quarantined: ``failed`` with an error ``{"type": "LostWorker", "message": "lost its
        worker N times"}`` appended to its history, counted as a failure, deleted at
        ``failed_expire_at`` (its unique hold ends). Either way its gate slot frees and its
        ``rate_slot`` is cleared. A job whose cancel was requested is neither requeued nor
        quarantined: it ends ``cancelled`` (``Recovered(id, False, cancelled=True)``, ``lost``
        unchanged, not counted). Two processes calling this at once never recover a job twice.
        """
        ...

    async def wait_for_work(self, queues: Sequence[str], timeout: float) -> None:
        """Return soon after a job may have become claimable in ``queues``, or after ``timeout``.

        Best effort: a spurious wake-up is fine, a missed one costs at most ``timeout``.
        """
        ...

    # -- workers ---------------------------------------------------------------------------
    async def register_worker(self, worker: str, now: float, info: dict[str, object]) -> None:
        """Announce a worker process (host, pid, queues, concurrency...)."""

    async def unregister_worker(self, worker: str) -> None:
        """Remove a worker that stopped cleanly."""

    async def workers(self) -> list[WorkerRecord]:
        """Registered workers, with the time each was last seen (by heartbeat)."""
        ...

    # -- operator actions ------------------------------------------------------------------
    async def cancel(self, job_id: str, now: float, expire_at: float) -> bool:
        """Cancel a scheduled, queued, retrying or running job; False if finished or unknown.

        A waiting job (parked too) becomes ``cancelled`` at once, expiring at ``expire_at``; its
        unique hold ends, and a gated one passes its turn on to a parked job.

        A running job cannot be stopped from here, so its cancel is *requested*: it stays
        ``running`` (its lease, gate slot and unique hold kept) until its run ends. Its
        worker's next ``heartbeat`` reports it, so the worker asks the run to stop; when the
        worker reports the run's outcome, ``finish`` makes the job ``cancelled`` instead of
        applying it, and if the worker died, ``recover`` makes it ``cancelled`` instead of
        requeuing it. A second request changes nothing and is True too. SQL backends mark the
        request by setting ``expire_at`` (never set on a running job otherwise); Redis by a
        ``c`` field.
        """
        ...

    async def retry(self, job_id: str, now: float) -> bool:
        """Re-queue a ``failed`` or ``cancelled`` job with fresh attempts; False otherwise.

        ``attempts`` and ``lost`` reset to 0, ``finished_at``/``result``/``expire_at`` cleared,
        the error history kept. A job enqueued with a ``unique_key`` whose hold had not ended
        before it finished takes it again; if another active job holds that key, nothing changes
        and the result is False.
        """
        ...

    async def reserve_rate(self, requests: Sequence[RateRequest], now: float) -> list[float]:
        """Reserve one slot per request, in order, in one atomic step; each slot's start time.

        GCRA per key. A key stores ``tat`` (its theoretical arrival time) and ``floor`` (no
        slot starts before it; raised by ``not_before``). With ``tolerance = (burst - 1) *
        interval``: ``floor = max(floor, not_before)``; ``tat = max(tat, now, floor)``; the
        slot starts at ``max(now, floor, tat - tolerance)``; the key stores ``tat + interval``.
        So ``burst`` slots start at once, then one per ``interval``; after a pause the schedule
        resumes at ``floor`` as if idle until then. A start after ``now`` is a reservation the
        caller must honour (defer the job). State of a key whose ``tat`` and ``floor`` have
        passed may be forgotten (it is equivalent to none).
        """
        ...

    async def purge(self, now: float, limit: int, keep: float = STATS_RETENTION) -> int:
        """Delete up to ``limit`` finished jobs with ``expire_at <= now`` (and their index
        entries), counter buckets of minutes that started over ``keep`` seconds ago, workers
        not seen for ``keep`` seconds (they died without unregistering), and rate-limit state
        whose ``tat`` has passed. Returns how many jobs were deleted."""
        ...

    # -- introspection ---------------------------------------------------------------------
    async def get_job(self, job_id: str) -> JobRecord | None:
        """One job by id, or None."""
        ...

    async def list_jobs(self, where: JobFilter, limit: int) -> list[JobRecord]:
        """Jobs matching every set field of ``where``, newest first (by id), at most ``limit``.

        With ``key`` set, reads only that key's index (never scans other jobs). With ``before``
        set, only jobs with a smaller id: the page after the one that ended at ``before``,
        reached through the index without reading the newer jobs again.
        """
        ...

    async def queue_stats(self) -> list[QueueStats]:
        """Every known queue with its counts, sorted by name."""
        ...

    async def stats(self, since: float) -> list[StatRow]:
        """Per-minute outcome counters for minutes starting at or after ``since``."""
        ...
