"""Watches (PRODUCT §6): durable future checks — "do this when that has not happened by then".

A watch is one job that runs again and again: ``start(...)`` enqueues it with the watch's
arguments as its unique key (so starting it twice does not double it) and as its ``key`` (so
``stop(...)`` and the history find it without scanning). Each check is a run; the function
returns when to check next (``datetime`` or ``timedelta``) or ``None`` when done, and the worker
turns that into the backend's ``again`` outcome: the same job, ``scheduled`` for the next check,
with the watch's progress kept in its ``result``. So a watch inherits everything a job has: it
is never lost to a worker crash (leases), never runs two checks at once (one job), waits in the
due index at no cost until due, and runs past-due checks after downtime.

``start(..., replace=True)`` (or ``options(..., replace=True)``, the form a type checker
sees) moves an active watch's next check to the new time in one atomic backend step
(``duly.backends.watches``): without it, starting an active watch returns it unchanged. A
check running at that moment is not moved (its outcome decides what follows): ``start``
returns the job, ``deduplicated``, as it is.

Guards end a watch with a recorded reason: ``max_checks`` checks made and another asked for, a
next time in the past or beyond ``horizon`` (from the start), or a check over ``timeout``. Every
ended watch stays as a finished job (kept ``retention``, 7 days by default): ``WatchRecord``
reads one, ``app.watch_history()`` / ``duly watches`` list them.

Each check is kept in the watch's history (``WatchRecord.history``, the last ``MAX_HISTORY``):
its start, duration and outcome, written into the job's progress by the same atomic step that
records the check's outcome. The check that fails a watch (it raised after its retries, ran
past ``timeout``, or lost its worker too often) is read from the failed job itself: its last
run's start and end, and its error.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

from duly._errors import ConfigurationError, ConfigurationTypeError
from duly._job import Job
from duly._payload import decode_payload
from duly._records import JobRecord, Outcome
from duly._serialization import decode, encode
from duly._task import BoundTask, EnqueueOptions, Task, TaskConfig, seconds
from duly.backends.watches import WATCHES

if TYPE_CHECKING:
    from duly._ports import AppPort

__all__ = [
    "MAX_HISTORY",
    "CheckOutcome",
    "Watch",
    "WatchCheck",
    "WatchConfig",
    "WatchRecord",
    "WatchState",
    "check_outcome",
]

P = ParamSpec("P")
R = TypeVar("R")

WatchState = Literal["watching", "done", "ended", "stopped", "failed"]
#: What one check did: asked for another (``again``), ended the watch (``done``: returned None;
#: ``ended``: a guard), or failed it (``timeout``, ``error``, ``lost``: its worker died).
CheckOutcome = Literal["again", "done", "ended", "timeout", "error", "lost"]
#: Checks kept per watch (the newest).
MAX_HISTORY = 100


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """A watch's guards and slot; times in seconds."""

    max_checks: int | None = None
    horizon: float | None = None
    slot: float | None = None

    def __post_init__(self) -> None:
        if self.max_checks is not None and (
            isinstance(self.max_checks, bool)
            or not isinstance(self.max_checks, int)
            or self.max_checks < 1
        ):
            raise ConfigurationError(f"max_checks must be an int >= 1, got {self.max_checks!r}")
        if self.horizon is not None and not self.horizon > 0:
            raise ConfigurationError(f"horizon must be > 0, got {self.horizon!r}")
        if self.slot is not None and not self.slot > 0:
            raise ConfigurationError(f"slot must be > 0, got {self.slot!r}")

    def round_up(self, when: float) -> float:
        """``when`` rounded up to the next multiple of ``slot`` (since the epoch)."""
        if self.slot is None:
            return when
        return math.ceil(when / self.slot - 1e-9) * self.slot


def _progress(record: JobRecord) -> dict[str, Any]:
    if record.result is None:
        return {}
    try:
        value = decode(record.result)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _next_time(value: object, now: float) -> float:
    if isinstance(value, timedelta):
        return now + value.total_seconds()
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise TypeError("a watch returned a naive datetime; return an aware one (UTC)")
        return value.timestamp()
    raise TypeError(
        f"a watch returns when to check next (datetime or timedelta) or None, not {value!r}"
    )


def check_outcome(
    config: WatchConfig, record: JobRecord, value: object, now: float, expire_at: float
) -> Outcome:
    """The outcome of one check that returned ``value``: run ``again`` at the next time, or end
    the watch (``succeeded``) as done or by a guard. TypeError for a value of the wrong type."""
    progress = _progress(record)
    checks = int(progress.get("checks", 0)) + 1
    summary: dict[str, Any] = {
        "checks": checks,
        "first_check": progress.get("first_check", now),
        "last_check": now,
    }
    started = record.started_at if record.started_at is not None else now
    kept = progress.get("history")
    history = kept[-(MAX_HISTORY - 1) :] if isinstance(kept, list) else []

    def check(outcome: CheckOutcome) -> None:
        summary["history"] = [*history, [started, max(0.0, now - started), outcome]]

    if value is None:
        summary.update(state="done", reason=None)
        check("done")
        return Outcome(record.id, "succeeded", result=encode(summary), expire_at=expire_at)
    when = config.round_up(_next_time(value, now))
    reason = None
    if config.max_checks is not None and checks >= config.max_checks:
        reason = f"max_checks: {checks} checks made"
    elif when < now:
        reason = "past: the next check time is in the past"
    elif config.horizon is not None and when > record.enqueued_at + config.horizon:
        reason = f"horizon: the next check is more than {config.horizon:g}s after the start"
    if reason is not None:
        summary.update(state="ended", reason=reason)
        check("ended")
        return Outcome(record.id, "succeeded", result=encode(summary), expire_at=expire_at)
    summary.update(state="watching", reason=None, next_check=when)
    check("again")
    return Outcome(record.id, "again", result=encode(summary), run_at=when)


@dataclass(frozen=True, slots=True)
class WatchCheck:
    """One check of a watch: when it started, how long it ran, and its outcome."""

    at: datetime
    seconds: float
    outcome: CheckOutcome

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``at`` as ISO 8601)."""
        return {"at": self.at.isoformat(), "seconds": self.seconds, "outcome": self.outcome}


def _history(progress: dict[str, Any]) -> list[WatchCheck]:
    kept = progress.get("history")
    out: list[WatchCheck] = []
    for entry in kept if isinstance(kept, list) else []:
        try:
            at, took, outcome = entry
            out.append(WatchCheck(_utc(float(at)), float(took), outcome))
        except (TypeError, ValueError):
            continue  # not a check entry: skipped, never an error on read
    return out


def _failed_check(record: JobRecord, outcome: CheckOutcome) -> WatchCheck | None:
    """The check that failed the watch: its last run, from the failed job itself."""
    start = record.started_at if record.started_at is not None else record.finished_at
    if start is None:
        return None
    end = record.finished_at if record.finished_at is not None else start
    return WatchCheck(_utc(start), max(0.0, end - start), outcome)


@dataclass(frozen=True, slots=True)
class WatchRecord:
    """One watch, from its job: a history row once it ended.

    ``state``: ``watching`` (active), ``done`` (the function returned None), ``ended`` (a guard
    ended it; ``reason`` says which), ``stopped`` (``stop()``), ``failed`` (a check raised
    after its retries, or ran past ``timeout``; ``reason`` says which).
    """

    watch: str
    job_id: str
    args: list[Any]
    kwargs: dict[str, Any]
    state: WatchState
    reason: str | None
    checks: int
    started_at: datetime
    first_check: datetime | None
    last_check: datetime | None
    next_check: datetime | None
    ended_at: datetime | None
    #: The last ``MAX_HISTORY`` checks, oldest first.
    history: list[WatchCheck]

    @property
    def total(self) -> timedelta | None:
        """From the start to the end (None while active)."""
        return None if self.ended_at is None else self.ended_at - self.started_at

    @classmethod
    def from_record(cls, record: JobRecord) -> WatchRecord:
        """Read a watch's job (active or finished)."""
        progress = _progress(record)
        checks = int(progress.get("checks", 0))
        reason = progress.get("reason")
        history = _history(progress)
        failed_at: datetime | None = None  # when the check that failed the watch ended
        state: WatchState
        if record.status == "succeeded":
            state = "ended" if progress.get("state") == "ended" else "done"
        elif record.status == "cancelled":
            state, reason = "stopped", "stopped"
        elif record.status == "failed":
            state, checks = "failed", checks + 1
            last = _last_error_type(record)
            reason = {"JobTimeout": "timeout", "LostWorker": "lost its worker"}.get(
                last, f"error: {last}"
            )
            kind: CheckOutcome = (
                "timeout" if last == "JobTimeout" else "lost" if last == "LostWorker" else "error"
            )
            failing = _failed_check(record, kind)
            if failing is not None:
                history = [*history, failing][-MAX_HISTORY:]
                failed_at = _maybe_utc(record.finished_at)
        else:
            state, reason = "watching", None
        try:
            args, kwargs = decode_payload(record.payload)
        except ValueError:
            args, kwargs = [], {}
        next_check = record.scheduled_for if state == "watching" else None
        return cls(
            watch=record.task,
            job_id=record.id,
            args=args,
            kwargs=kwargs,
            state=state,
            reason=reason,
            checks=checks,
            started_at=_utc(record.enqueued_at),
            first_check=_maybe_utc(progress.get("first_check")) or failed_at,
            last_check=failed_at or _maybe_utc(progress.get("last_check")),
            next_check=_maybe_utc(next_check),
            ended_at=_maybe_utc(record.finished_at),
            history=history,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (times as ISO 8601, total in seconds)."""
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            data[name] = value.isoformat() if isinstance(value, datetime) else value
        data["history"] = [check.to_dict() for check in self.history]
        total = self.total
        data["total_seconds"] = None if total is None else total.total_seconds()
        return data


def _last_error_type(record: JobRecord) -> str:
    try:
        errors = decode(record.errors or b"[]")
        return str(errors[-1]["type"]) if errors else "unknown"
    except (ValueError, LookupError, TypeError):
        return "unknown"


def _utc(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _maybe_utc(value: Any) -> datetime | None:
    return None if not isinstance(value, int | float) else _utc(float(value))


class BoundWatch(BoundTask[P, R]):
    """A watch with its first check time set: ``watch.options(at=...).start(...)``."""

    def __init__(self, task: Watch[P, R], options: EnqueueOptions, replace: bool = False) -> None:
        super().__init__(task, options)
        self.watch = task
        self.replace = replace

    def start(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Start this watch (or return the one already watching these arguments);
        ``replace=True`` (a keyword of ``start`` or of ``options``) moves an active watch's
        next check to this time instead."""
        if not self.watch.replacing(self.replace, kwargs):
            return self.enqueue(*args, **kwargs)
        return self.watch.app.run_sync(self.watch.replace_async(self, args, kwargs))

    async def start_async(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Async twin of ``start``."""
        if not self.watch.replacing(self.replace, kwargs):
            return await self.enqueue_async(*args, **kwargs)
        return await self.watch.replace_async(self, args, kwargs)


class Watch(Task[P, R]):
    """A registered watch (``@app.watch``): a task whose one job checks until done.

    ``start(...)`` begins watching these arguments (first check now, or at ``options(at=...)``
    / ``options(delay=...)``); ``stop(...)`` ends it. One watch per (watch, arguments).
    """

    def __init__(self, app: AppPort, fn: Any, config: TaskConfig, watch: WatchConfig) -> None:
        super().__init__(app, fn, config)
        self.watch = watch
        try:  # a function with an argument named `replace` keeps it (options(replace=) then)
            self._own_replace = "replace" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            self._own_replace = False

    def __repr__(self) -> str:
        return f"<Watch {self.name}>"

    def success_outcome(
        self, record: JobRecord, value: Any, now: float, expire_at: float
    ) -> Outcome:
        """A check returned the next time or None: run ``again`` then, or end the watch."""
        return check_outcome(self.watch, record, value, now, expire_at)

    def decode_result(self, data: bytes) -> Any:
        """A watch's result is its progress summary (plain JSON), not a return value."""
        return decode(data)

    def options(  # type: ignore[override]
        self,
        *,
        at: datetime | None = None,
        delay: float | timedelta | None = None,
        priority: int | None = None,
        queue: str | None = None,
        connection: Any = None,
        on_commit: bool = False,
        replace: bool = False,
    ) -> BoundWatch[P, R]:
        """When the first check runs (``at`` an aware datetime, or ``delay``), rounded up to
        the slot; ``priority`` and ``queue`` of its checks; ``connection`` / ``on_commit``:
        start it inside / after the caller's transaction, as ``Task.options``; ``replace``:
        an active watch of the same arguments has its next check moved to that time."""
        if not isinstance(replace, bool):
            raise ConfigurationTypeError(f"replace must be True or False, got {replace!r}")
        if replace and (connection is not None or on_commit):
            raise ConfigurationError("replace=True moves a watch now: no connection=/on_commit")
        if at is not None and delay is not None:
            raise ValueError("give either delay= or at=, not both")
        first: datetime | None = at
        if delay is not None:
            first = datetime.fromtimestamp(self.app.clock.now(), UTC) + timedelta(
                seconds=seconds(delay, "delay")
            )
        if first is not None:
            if first.tzinfo is None:
                raise ValueError("at= must be timezone-aware (e.g. datetime.now(UTC) + ...)")
            first = _utc(self.watch.round_up(first.timestamp()))
        options = EnqueueOptions(
            at=first, priority=priority, queue=queue, connection=connection, on_commit=on_commit
        )
        return BoundWatch(self, options, replace)

    def start(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Start watching these arguments, first check now; if a watch of the same arguments is
        active, return its job (``job.deduplicated``) instead, or with ``replace=True`` move
        its next check to now."""
        return self.options().start(*args, **kwargs)

    async def start_async(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Async twin of ``start``."""
        return await self.options().start_async(*args, **kwargs)

    def replacing(self, replace: bool, kwargs: dict[str, Any]) -> bool:
        """Whether this start replaces: ``options(replace=)``, or a ``replace=`` keyword of
        ``start`` (taken out of ``kwargs``) unless the function has an argument of that name."""
        if "replace" in kwargs and not self._own_replace:
            given = kwargs.pop("replace")
            if not isinstance(given, bool):
                raise ConfigurationTypeError(f"replace must be True or False, got {given!r}")
            replace = replace or given
        return replace

    async def replace_async(
        self, bound: BoundWatch[P, R], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Job:
        """Move the active watch of these arguments to the bound time (now if none), or
        start one there: each step atomic; a watch that ends or starts in between is seen by
        the next round."""
        key = self.key_of(args, kwargs)
        store = WATCHES.of(await self.app.backend())
        first = bound._options.at
        job: Job | None = None
        for _ in range(3):
            now = self.app.clock.now()
            moved = await store.move(key, now if first is None else first.timestamp(), now)
            if moved is not None:
                return Job(self.app, moved[0], deduplicated=True)
            job = await bound.enqueue_async(*args, **kwargs)
            if not job.deduplicated:
                return job
        assert job is not None
        return job

    def stop(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Stop watching these arguments (the awaited event happened); False if no such watch
        is active. A check running now finishes, but the watch does not continue, and that
        check is not counted in its history (the run's outcome is not kept, as for any job
        cancelled while it runs)."""
        return self.app.run_sync(self.stop_async(*args, **kwargs))

    async def stop_async(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Async twin of ``stop``."""
        key = self.key_of(args, kwargs)
        stopped = False
        for info in await self.app.jobs_async(key=key, limit=20):
            if info.task == self.name and not info.finished:
                stopped = await self.app.cancel_async(info.id) or stopped
        return stopped

    def key_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The key (and unique key) of the watch of these arguments."""
        limits = self.config.limits
        assert limits is not None
        return limits.unique_key(args, kwargs)
