"""The JSON the HTTP API answers, as msgspec Structs: the one source of the responses and of
their OpenAPI schemas (``duly._http.openapi``).

A job is ``duly.JobInfo`` itself (``duly._job``), not a copy of its fields. Times are ISO 8601
in UTC (msgspec writes them with a ``Z``). Arguments of a task's ``secret=`` are ``"***"`` here
already (``duly._secrets``); nothing in this module decides what to show.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from duly._job import JobInfo
from duly._progress import Progress
from duly._schedules import ScheduleInfo

__all__ = [
    "ErrorBody",
    "EventOut",
    "FreshnessList",
    "FreshnessOut",
    "GroupOut",
    "Health",
    "HookAccepted",
    "JobAction",
    "JobList",
    "LastJob",
    "PeriodicList",
    "PeriodicOut",
    "QueueList",
    "QueueOut",
    "ScheduleIn",
    "ScheduleList",
    "ScheduleRemoved",
    "ScopeForgotten",
    "ScopeList",
    "ScopeOut",
    "ScopeRefreshed",
    "Session",
    "StatRowOut",
    "StatTotals",
    "Stats",
    "WatchCheckOut",
    "WatchList",
    "WatchOut",
    "WorkerList",
    "WorkerOut",
]


class ErrorBody(msgspec.Struct):
    """Every error answer: what went wrong, for a human."""

    error: str


class Session(msgspec.Struct):
    """Who the caller is: its ``role`` and the ``csrf`` value a cookie session's POSTs send in
    the ``X-Duly-CSRF`` header."""

    role: Literal["read", "admin"]
    csrf: str


class JobList(msgspec.Struct):
    """A page of jobs, newest first; ``next`` is the ``before=`` of the next page (None: last)."""

    jobs: list[JobInfo[Any]]
    next: str | None


class JobAction(msgspec.Struct):
    """The job after a retry or cancel."""

    job: JobInfo[Any]


class QueueOut(msgspec.Struct):
    """One queue's counts (``scheduled`` includes ``retrying``; ``parked`` are queued jobs
    waiting for a mutex or concurrency slot) and since when its oldest ready job waits."""

    name: str
    queued: int
    scheduled: int
    running: int
    parked: int
    oldest_ready_at: datetime | None
    #: Paused (``app.pause``): workers start none of its jobs.
    paused: bool = False


class QueuePause(msgspec.Struct):
    """A queue after ``pause`` / ``resume``: ``changed`` is False when it already was so."""

    name: str
    paused: bool
    changed: bool


class QueueList(msgspec.Struct):
    """A page of queues by name."""

    queues: list[QueueOut]
    next: str | None


class WorkerOut(msgspec.Struct):
    """A registered worker process and when it was last seen."""

    id: str
    started_at: datetime
    last_seen: datetime
    info: dict[str, Any]


class WorkerList(msgspec.Struct):
    """A page of workers."""

    workers: list[WorkerOut]
    next: str | None


class StatRowOut(msgspec.Struct):
    """Outcomes of one task on one queue in one minute (``minute``: its start)."""

    minute: datetime
    task: str
    queue: str
    succeeded: int
    failed: int
    retried: int


class StatTotals(msgspec.Struct):
    """The sums of the rows."""

    succeeded: int
    failed: int
    retried: int


class Stats(msgspec.Struct):
    """Per-minute counters of the last ``minutes`` minutes (bounded: not paginated)."""

    minutes: int
    rows: list[StatRowOut]
    totals: StatTotals


class LastJob(msgspec.Struct):
    """The newest job of a periodic task."""

    id: str
    status: str
    enqueued_at: datetime


class PeriodicOut(msgspec.Struct):
    """A periodic task's schedule, its next tick and its newest job."""

    task: str
    every: float | None
    cron: str | None
    tz: str
    catch_up: Literal["skip", "one", "all"]
    next_run_at: datetime
    last_job: LastJob | None


class PeriodicList(msgspec.Struct):
    """A page of periodic tasks by name."""

    periodic: list[PeriodicOut]
    next: str | None


class ScheduleList(msgspec.Struct):
    """A page of schedules (decorated and stored) by name."""

    schedules: list[ScheduleInfo]
    next: str | None


class ScheduleIn(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``PUT /api/v1/schedules/{name}``: the call each tick enqueues (``task``
    by name, ``args``, ``kwargs``, optional ``queue`` and ``priority``) and when: ``every``
    seconds or ``cron`` in ``tz`` (exactly one of them)."""

    task: str
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    every: float | None = None
    cron: str | None = None
    tz: str = "UTC"
    catch_up: Literal["skip", "one", "all"] = "one"
    overlap: Literal["skip", "queue"] = "skip"
    queue: str | None = None
    priority: int | None = None


class ScheduleRemoved(msgspec.Struct):
    """The answer of ``DELETE /api/v1/schedules/{name}``."""

    name: str
    removed: bool


class WatchCheckOut(msgspec.Struct):
    """One check of a watch: its start, how long it ran (seconds), and its outcome."""

    at: datetime
    seconds: float
    outcome: Literal["again", "done", "ended", "timeout", "error", "lost"]


class WatchOut(msgspec.Struct):
    """One watch (``duly._watch.WatchRecord``): active, or a history row once it ended."""

    watch: str
    job_id: str
    key: str | None
    args: list[Any]
    kwargs: dict[str, Any]
    state: Literal["watching", "done", "ended", "stopped", "failed"]
    reason: str | None
    checks: int
    started_at: datetime
    first_check: datetime | None
    last_check: datetime | None
    next_check: datetime | None
    ended_at: datetime | None
    #: The watch's last 100 checks, oldest first.
    history: list[WatchCheckOut]


class WatchList(msgspec.Struct):
    """A page of watches, newest first; ``next`` is the ``before=`` of the next page."""

    watches: list[WatchOut]
    next: str | None


class GroupOut(msgspec.Struct):
    """A group's progress (``duly.GroupInfo``)."""

    id: str
    key: str | None
    total: int
    succeeded: int
    failed: int
    cancelled: int
    pending: int
    created_at: datetime
    completed_at: datetime | None
    callback_job_id: str | None


class FreshnessOut(msgspec.Struct):
    """A freshness mirror: its sync task and how many of its scopes are stale now."""

    name: str
    task: str
    stale: int


class FreshnessList(msgspec.Struct):
    """A page of freshness mirrors by name."""

    freshness: list[FreshnessOut]
    next: str | None


class ScopeOut(msgspec.Struct):
    """How fresh one scope is (``duly.Freshness``; ``score`` None = never synced; ``job``: the
    id of its active sync)."""

    scope: str
    state: Literal["never", "stale", "current"]
    score: float | None
    last_synced_at: datetime | None
    syncing: bool
    job: str | None
    failures: int
    last_error: str | None
    last_attempt_at: datetime | None
    next_due: datetime | None
    requested_by: str | None


class ScopeList(msgspec.Struct):
    """A page of scopes, stalest first."""

    scopes: list[ScopeOut]
    next: str | None


class ScopeRefreshed(msgspec.Struct):
    """The scope after a refresh was requested (``scope.job``: its sync)."""

    scope: ScopeOut


class ScopeForgotten(msgspec.Struct):
    """What forgetting a scope did (``forgotten`` False: it was not known)."""

    scope: str
    forgotten: bool


class EventOut(msgspec.Struct):
    """One job state change (the ``data`` of an SSE ``job`` event), or a running job's
    progress (an SSE ``progress`` event: ``progress`` set, ``status`` running)."""

    id: str
    job_id: str
    task: str
    queue: str
    key: str | None
    status: str
    at: datetime
    progress: Progress | None = None


class HookAccepted(msgspec.Struct):
    """A webhook's job was enqueued."""

    job_id: str


class Health(msgspec.Struct):
    """``ok``, or ``unavailable`` with the backend's error."""

    status: Literal["ok", "unavailable"]
    error: str | None = None
