"""The records that cross the backend boundary.

Backends store and return these plain values; they never decode payloads, results or errors
(those stay JSON bytes) and never look at task code. Times are POSIX seconds (float) taken from
the caller's clock, so a test can replace the clock and every backend agrees on "now".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from duly._payload import payload_headers

__all__ = [
    "ACTIVE_STATUSES",
    "EXPIRED_KEEP",
    "EXPIRED_MESSAGE",
    "FINISHED_STATUSES",
    "ID_CEILING",
    "STATS_RETENTION",
    "STATUSES",
    "EnqueueResult",
    "EventRecord",
    "GroupRecord",
    "JobFilter",
    "JobRecord",
    "JobStatus",
    "NewGroup",
    "NewJob",
    "Outcome",
    "OutcomeKind",
    "ProgressReport",
    "QueueStats",
    "RateRequest",
    "Recovered",
    "StatRow",
    "StorageFormat",
    "StoredGroup",
    "UniqueUntil",
    "WebhookRecord",
    "WorkerRecord",
]

JobStatus = Literal[
    "scheduled", "queued", "running", "retrying", "succeeded", "failed", "cancelled"
]
STATUSES: Final[tuple[JobStatus, ...]] = (
    "scheduled",
    "queued",
    "running",
    "retrying",
    "succeeded",
    "failed",
    "cancelled",
)
#: A job in one of these states will still run (or is running).
ACTIVE_STATUSES: Final[frozenset[str]] = frozenset({"scheduled", "queued", "running", "retrying"})
#: A job in one of these states has reached an outcome; retention will delete it.
FINISHED_STATUSES: Final[frozenset[str]] = frozenset({"succeeded", "failed", "cancelled"})

OutcomeKind = Literal["succeeded", "failed", "retry", "release", "again"]
UniqueUntil = Literal["start", "finish"]

#: Sorts after every job id (ULIDs: 26 characters of ``0-9A-Z``; ids given with
#: ``options(id=)``: ``A-Za-z0-9_.:-``) in a bytewise collation: the ``before`` of a listing's
#: first page.
ID_CEILING: Final = "~" * 32

#: Seconds a job that expired before it started is kept (as a failed job is by default).
EXPIRED_KEEP: Final = 7 * 86_400.0
#: The message of the ``JobExpired`` error such a job gets.
EXPIRED_MESSAGE: Final = "the job was not started by its expiry time (expires=): it never ran"

#: How long per-minute counters and the records of workers that vanished are kept by default
#: (``App(stats_retention=)``; ``Backend.purge``'s ``keep``), in seconds.
STATS_RETENTION: Final = 86_400.0


@dataclass(slots=True)
class NewJob:
    """A job to store. ``scheduled_for > enqueued_at`` makes it ``scheduled``, else ``queued``.

    Concurrency control (PRODUCT §4), rendered by the task before the job reaches a backend:

    - ``unique_key``: while a job holding this key is active, enqueueing another job with the
      same key stores nothing and returns the holder. The hold ends when the holder first
      starts (``unique_until="start"``) or reaches succeeded/failed/cancelled (``"finish"``), or
      at ``unique_expires_at`` (a later enqueue then takes the key over).
    - ``gate`` / ``gate_limit``: at most ``gate_limit`` jobs with this gate run at once (a
      mutex is a gate of limit 1). ``claim`` parks a job whose gate is full; a job leaving
      ``running`` frees its slot and puts the best parked job of its gate back in its queue.
    """

    id: str
    task: str
    queue: str
    payload: bytes
    max_attempts: int
    key: str | None
    priority: int
    enqueued_at: float
    scheduled_for: float
    unique_key: str | None = None
    unique_until: UniqueUntil = "finish"
    unique_expires_at: float | None = None
    gate: str | None = None
    gate_limit: int = 0
    #: A job still waiting at this time never starts: the claim that finds it ends it
    #: ``cancelled`` with a ``JobExpired`` error (``options(expires=)``), kept ``EXPIRED_KEEP``.
    expires_at: float | None = None
    #: With ``unique_key``: a holder of the key still waiting (scheduled or queued, not
    #: started) takes this job's ``payload`` and ``scheduled_for`` (``debounce=``; it becomes
    #: ``scheduled``), in the same atomic step that finds it; the enqueue reports it.
    debounce: bool = False
    #: Text a hook carries from enqueue to the runs (trace context and the like), set in its
    #: ``enqueuing``; stored inside ``payload`` once the hooks ran (``with_headers``), read back
    #: as ``JobRecord.headers``. Never an argument of the task.
    headers: dict[str, str] = field(default_factory=dict)
    #: The ids of the jobs it waits for (PRODUCT §16, ``duly.backends.dependencies``): stored
    #: ``scheduled`` with no due time until every one of them succeeded. Empty: none.
    after: tuple[str, ...] = ()
    #: A chain step: the id (one of ``after``) whose result becomes its first argument.
    pipe_from: str | None = None


@dataclass(slots=True)
class EnqueueResult:
    """What ``Backend.enqueue`` did with one ``NewJob``: its id, or an existing job's id."""

    id: str
    deduplicated: bool = False


@dataclass(slots=True)
class JobRecord:
    """A stored job, as every backend returns it."""

    id: str
    task: str
    queue: str
    payload: bytes
    status: str
    attempts: int
    max_attempts: int
    key: str | None
    priority: int
    enqueued_at: float
    scheduled_for: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: bytes | None = None
    #: JSON list of ``{"type", "message", "traceback", "at", "attempt"}``, oldest first.
    errors: bytes | None = None
    worker: str | None = None
    lease_until: float | None = None
    #: How many runs of this job were lost with their worker.
    lost: int = 0
    expire_at: float | None = None
    #: The start time of a rate-limit slot this job already holds (set by a ``release`` that
    #: deferred it to that slot); the worker runs it without taking another slot.
    rate_slot: float | None = None
    #: The run's last reported progress: JSON ``{"fraction", "message", "at"}`` (see
    #: ``duly.backends.progress``); None until a run reports one.
    progress: bytes | None = None
    #: The last checkpoint a run stored (JSON), None if none: what the next run resumes from.
    cursor: bytes | None = None
    #: When the job, still waiting then, never starts (``NewJob.expires_at``), or None
    #: (none, or cleared: by the job's first start, or an operator's retry).
    expires_at: float | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The headers hooks set on this job at enqueue (``NewJob.headers``), decoded from its
        payload on each read (a new dict: changing it changes nothing stored)."""
        return payload_headers(self.payload)


@dataclass(slots=True)
class Outcome:
    """How one claimed run ended. Applied only while the job is still ``running`` under ``worker``.

    - ``succeeded``: store ``result``; retention deletes the job at ``expire_at``.
    - ``failed``: store ``errors`` (the whole history); deleted at ``expire_at``.
    - ``retry``: store ``errors``; status ``retrying`` until ``run_at``.
    - ``release``: hand the job back without charging the attempt (``attempts - 1``): ``queued``
      at the head of its queue if ``run_at <= now``, else ``scheduled`` for ``run_at``; it
      stores ``rate_slot`` (None clears it).
    - ``again``: the run succeeded and the same job runs again (a watch's next check): store
      ``result``; ``attempts`` and ``lost`` back to 0; ``scheduled`` for ``run_at`` (``queued``
      if ``run_at <= now``); counted as a success. Its unique key stays held.

    Every kind but ``release`` clears ``rate_slot``; every kind frees the job's gate slot.
    """

    job_id: str
    kind: OutcomeKind
    result: bytes | None = None
    errors: bytes | None = None
    run_at: float | None = None
    expire_at: float | None = None
    rate_slot: float | None = None


@dataclass(slots=True)
class ProgressReport:
    """What a run reported since the last write (``duly.backends.progress``): its latest
    ``progress`` (JSON ``{"fraction", "message", "at"}``) and its latest checkpoint ``cursor``
    (JSON; ``b"null"`` clears it); None leaves that value as stored."""

    job_id: str
    progress: bytes | None = None
    cursor: bytes | None = None


@dataclass(slots=True)
class RateRequest:
    """One slot asked of a rate limit (GCRA): ``burst`` starts at once, then one per ``interval``.

    ``not_before`` pushes the limit's whole schedule: no slot of this key starts before it
    (an upstream said "slow down until then").
    """

    key: str
    interval: float
    burst: int
    not_before: float = 0.0


@dataclass(slots=True)
class Recovered:
    """One orphaned job found by ``Backend.recover``: put back in its queue, or quarantined,
    or (its cancel had been requested) cancelled."""

    id: str
    requeued: bool
    cancelled: bool = False


@dataclass(slots=True)
class JobFilter:
    """Which jobs ``Backend.list_jobs`` returns; ``None`` means any."""

    key: str | None = None
    status: str | None = None
    task: str | None = None
    queue: str | None = None
    #: Only jobs whose id sorts before this one (the next page of a newest-first listing).
    before: str | None = None


@dataclass(slots=True)
class QueueStats:
    """Counts of one queue's jobs by state (``scheduled`` includes ``retrying``)."""

    name: str
    queued: int = 0
    scheduled: int = 0
    running: int = 0
    #: Of ``queued``: jobs parked behind a full gate (mutex or limit), waiting for a slot.
    parked: int = 0
    #: When the longest-waiting claimable (queued, not parked) job became ready, i.e. the least
    #: ``max(enqueued_at, scheduled_for)``; None when none waits.
    oldest_ready_at: float | None = None
    #: Paused (``app.pause``): its workers start none of its jobs until ``app.resume``.
    paused: bool = False


@dataclass(slots=True)
class StatRow:
    """Outcomes counted in one minute for one task on one queue."""

    minute: int  # POSIX seconds // 60
    task: str
    queue: str
    succeeded: int = 0
    failed: int = 0
    retried: int = 0


@dataclass(frozen=True, slots=True)
class StorageFormat:
    """The storage format of a backend's data (``Backend.storage_format``): ``stored``, the
    format the data is in (0 when nothing was stored yet), and ``readable``, the newest format
    this duly reads and writes. An older duly refuses data with ``stored > readable``
    (``StorageTooNew``); a newer one upgrades it in place when it opens the backend."""

    stored: int
    readable: int


@dataclass(slots=True)
class WorkerRecord:
    """A worker process as registered in the backend."""

    id: str
    started_at: float
    last_seen: float
    info: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class NewGroup:
    """A group to store with its member jobs (``Backend.enqueue_group``).

    ``callback`` (the ``on_complete`` job, or None) is stored at once with ``id`` = the group's
    id, as ``scheduled`` with no due time: nothing promotes or claims it until the outcome of
    the group's last member makes it ``queued``, in the same atomic step.
    """

    id: str
    key: str | None
    created_at: float
    #: Seconds the group is kept once complete (its members follow their own retention).
    retention: float
    callback: NewJob | None = None
    #: The caller's id of the group (``app.group(id=...)``), or None: while a group of this
    #: name is stored, storing another stores nothing and answers the stored one.
    name: str | None = None


@dataclass(slots=True)
class StoredGroup:
    """What ``GroupStore.store`` did: the stored group's ``id`` and its members' job ids, in
    order; ``deduplicated`` when a group of the same name was stored already (these are its)."""

    id: str
    members: list[str]
    deduplicated: bool = False


@dataclass(slots=True)
class GroupRecord:
    """A stored group: each member's current outcome, counted once per member."""

    id: str
    key: str | None
    created_at: float
    total: int
    succeeded: int
    failed: int
    cancelled: int
    #: When the last member's outcome was recorded (the caller's clock), else None: None
    #: again while a member retried after it runs.
    completed_at: float | None
    #: Whether the group has an ``on_complete`` job (its id is the group's id).
    has_callback: bool
    #: When every member first had an outcome: the callback was queued then, and only then.
    first_completed_at: float | None = None
    #: The caller's id of the group (``NewGroup.name``), or None.
    name: str | None = None


@dataclass(slots=True)
class EventRecord:
    """One job state change as the event stream stores it. ``id`` is an increasing integer as
    text (per namespace); ``at`` is the storage server's clock."""

    id: str
    job_id: str
    task: str
    queue: str
    key: str | None
    status: str
    at: float
    #: A ``progress`` event's progress (JSON, as ``JobRecord.progress``); None for a change of
    #: status (see ``duly.backends.progress``).
    progress: bytes | None = None


@dataclass(slots=True)
class WebhookRecord:
    """A webhook as stored (``Backend.store_webhook``): the SHA-256 of its secret (hex) and the
    job a hit enqueues: ``task``, ``queue``, ``payload`` (already encoded), ``key``,
    ``priority`` and ``delay`` (seconds after the hit the job is due; 0 = at once)."""

    digest: str
    task: str
    queue: str
    payload: bytes
    key: str | None
    priority: int
    delay: float
    created_at: float
