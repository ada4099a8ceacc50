"""Runtime schedules: periodic schedules stored in the backend (PRODUCT §15).

    app.schedule("nightly", report.s(kind="daily"), cron="0 3 * * *", tz="Europe/Berlin")
    app.schedules()          # -> [duly.ScheduleInfo]: the stored ones and the decorated ones
    app.unschedule("nightly")   # True; the schedule ticks no more

A stored schedule is a record (``duly.backends.schedules``) upserted by name; every scheduler
reads them on each lap and ticks them like a decorated one (exactly once per tick however many
run, ``overlap="skip"`` by default; see ``duly._scheduler.periodic``). Its jobs have the key
``schedule:<name>`` (a decorated schedule's: ``periodic:<task>``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import msgspec

from duly._errors import ConfigurationError, ConfigurationTypeError
from duly._ids import ulid_time
from duly._payload import decode_payload
from duly._records import JobFilter, JobStatus
from duly._schedule import CatchUp, Overlap, Schedule
from duly._scheduler.periodic import Ticking, stored_schedule
from duly._task import Signature, seconds
from duly._watch import Watch
from duly.backends.schedules import SCHEDULES, ScheduleRecord, SkippedTicks

if TYPE_CHECKING:
    from duly._ports import AppPort
    from duly.backends.base import Backend

__all__ = [
    "MAX_SCHEDULE_NAME",
    "ScheduleInfo",
    "ScheduleKind",
    "list_schedules",
    "put_schedule",
    "remove_schedule",
]

#: The longest schedule name.
MAX_SCHEDULE_NAME: Final = 200
_BAD_NAME: Final = re.compile("[\x00-\x1f\x7f/]")

ScheduleKind = Literal["decorated", "stored"]


def _utc(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


class ScheduleInfo(msgspec.Struct, frozen=True):
    """One periodic schedule as ``app.schedules()`` (and ``GET /api/v1/schedules``) show it.

    ``kind``: ``"decorated"`` (``@app.periodic``, named after its task) or ``"stored"``
    (``app.schedule``); ``every`` (seconds) or ``cron`` in ``tz``; the call each tick enqueues
    (``task``, ``args``, ``kwargs``, ``queue``, ``priority``) under ``key``; ``next_tick``;
    ``last_tick`` (the newest tick enqueued) and ``last_job_id`` / ``last_status`` (its job,
    while retained); ``skipped`` ticks (``overlap="skip"``: the previous job still waited or
    ran) and the latest of them; ``updated_at``: when a stored schedule was last stored.
    """

    name: str
    kind: ScheduleKind
    task: str
    every: float | None
    cron: str | None
    tz: str
    catch_up: CatchUp
    overlap: Overlap
    args: list[Any]
    kwargs: dict[str, Any]
    queue: str
    priority: int
    key: str
    next_tick: datetime
    last_tick: datetime | None
    last_job_id: str | None
    last_status: JobStatus | None
    skipped: int
    last_skipped_tick: datetime | None
    updated_at: datetime | None


def _check_name(app: AppPort, name: object) -> str:
    if not isinstance(name, str):
        raise ConfigurationTypeError(f"a schedule name is a str, got {name!r}")
    if not name.strip() or len(name) > MAX_SCHEDULE_NAME or _BAD_NAME.search(name):
        raise ConfigurationError(
            f"a schedule name is 1 to {MAX_SCHEDULE_NAME} characters, without '/' or control "
            f"characters, got {name!r}"
        )
    if name in app.registry.schedules:
        raise ConfigurationError(f"{name!r} is a periodic task of this app (@app.periodic)")
    return name


def _record(
    app: AppPort,
    name: object,
    sig: Signature,
    every: float | timedelta | None,
    cron: str | None,
    tz: str,
    catch_up: CatchUp,
    overlap: Overlap,
) -> ScheduleRecord:
    """The record of ``app.schedule(...)``, every argument checked (nothing stored yet)."""
    name = _check_name(app, name)
    if not isinstance(sig, Signature):
        raise ConfigurationTypeError(f"app.schedule takes a signature (task.s(...)), got {sig!r}")
    task = sig.task
    if task.app is not app or app.tasks.get(task.name) is not task:
        raise ConfigurationError(f"the task {task.name!r} is not registered in this app")
    if isinstance(task, Watch):
        raise ConfigurationError(f"{task.name!r} is a watch: start it, do not schedule it")
    options = sig.options
    if (
        options.at is not None
        or options.delay is not None
        or options.key is not None
        or options.connection is not None
        or options.on_commit
    ):
        raise ConfigurationError(
            "a schedule's job takes queue= and priority= but not at=, delay=, key=, "
            "connection= or on_commit= (its key is schedule:<name>, its time the tick)"
        )
    if cron is not None and not isinstance(cron, str):
        raise ConfigurationTypeError(f"cron= is a str, got {cron!r}")
    if not isinstance(tz, str):
        raise ConfigurationTypeError(f"tz= is a str, got {tz!r}")
    every_s = None if every is None else seconds(every, "every")
    schedule = Schedule(task.name, every_s, cron, tz, catch_up, overlap, name)  # validates it
    now = app.clock.now()
    try:
        datetime.fromtimestamp(schedule.next_tick(now), UTC)
    except (ValueError, OverflowError, KeyError, OSError) as exc:  # e.g. cron "0 0 30 2 *"
        raise ConfigurationError(f"the schedule never ticks: {exc}") from None
    job = sig.build(now)  # validates and encodes the arguments
    return ScheduleRecord(
        name=name,
        task=task.name,
        queue=job.queue,
        payload=job.payload,
        priority=job.priority,
        every=every_s,
        cron=cron,
        tz=tz,
        catch_up=catch_up,
        overlap=overlap,
        updated_at=now,
    )


async def put_schedule(
    app: AppPort,
    name: str,
    sig: Signature,
    *,
    every: float | timedelta | None = None,
    cron: str | None = None,
    tz: str = "UTC",
    catch_up: CatchUp = "one",
    overlap: Overlap = "skip",
) -> ScheduleInfo:
    """Store (or replace) the schedule ``name``; see ``App.schedule``."""
    record = _record(app, name, sig, every, cron, tz, catch_up, overlap)
    backend = await app.backend()
    await SCHEDULES.of(backend).put(record)
    skipped = await SCHEDULES.of(backend).skipped()
    return await _info(app, backend, stored_schedule(record), skipped, record.updated_at)


async def remove_schedule(app: AppPort, name: str) -> bool:
    """Delete the stored schedule ``name``; False if there was none."""
    if not isinstance(name, str):
        raise ConfigurationTypeError(f"a schedule name is a str, got {name!r}")
    return await SCHEDULES.of(await app.backend()).delete(name)


async def list_schedules(app: AppPort) -> list[ScheduleInfo]:
    """Every schedule, decorated and stored, by name (a decorated one first on a tie)."""
    backend = await app.backend()
    store = SCHEDULES.of(backend)
    records = await store.all()
    skipped = await store.skipped()
    found = [
        await _info(app, backend, Ticking(s), skipped) for s in app.registry.schedules.values()
    ]
    for record in records:
        try:
            ticking = stored_schedule(record)
        except ConfigurationError:  # stored by a host that knows a time zone this one lacks
            continue
        found.append(await _info(app, backend, ticking, skipped, record.updated_at))
    found.sort(key=lambda info: (info.name, info.kind))
    return found


async def _info(
    app: AppPort,
    backend: Backend,
    ticking: Ticking,
    skipped: dict[str, SkippedTicks],
    updated_at: float | None = None,
) -> ScheduleInfo:
    schedule = ticking.schedule
    task = app.tasks.get(schedule.task)
    newest = await backend.list_jobs(JobFilter(key=schedule.key), 1)
    gone = skipped.get(schedule.key)
    args, kwargs = decode_payload(ticking.payload)
    return ScheduleInfo(
        name=schedule.label,
        kind="stored" if schedule.name else "decorated",
        task=schedule.task,
        every=schedule.every,
        cron=schedule.cron,
        tz=schedule.tz,
        catch_up=schedule.catch_up,
        overlap=schedule.overlap,
        args=args,
        kwargs=kwargs,
        queue=ticking.queue or (task.config.queue if task is not None else "default"),
        priority=ticking.priority
        if ticking.priority is not None
        else (task.config.priority if task is not None else 0),
        key=schedule.key,
        next_tick=datetime.fromtimestamp(schedule.next_tick(app.clock.now()), UTC),
        last_tick=_utc(ulid_time(newest[0].id)) if newest else None,
        last_job_id=newest[0].id if newest else None,
        last_status=cast(JobStatus, newest[0].status) if newest else None,
        skipped=0 if gone is None else gone.count,
        last_skipped_tick=None if gone is None else _utc(gone.last),
        updated_at=_utc(updated_at),
    )
