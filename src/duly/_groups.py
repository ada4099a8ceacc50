"""Groups (PRODUCT §8): jobs fanned out together, with one ``on_complete`` job when all are done.

``app.group([...], on_complete=..., key=..., id=...)`` stores the group, its members and its
callback in one atomic backend step (``duly.backends.groups``). The callback job exists from the
start, ``scheduled`` with no due time, under the group's generated id; the backend step that
records the outcome of the group's last member makes it ``queued``, so it runs exactly once
however the members finish (two at once on two workers, or a worker killed mid-finish: recovery
re-runs the member, whose outcome then counts once).

The group counts each member's *current* outcome: ``app.retry`` of a failed member takes its
failure back (it is pending while it runs again) and its new outcome counts. ``on_complete``
is not queued again: it ran when every member first had an outcome. ``completed_at`` is when
every member last had one (None while a retried member runs again); ``callback_job_id`` stays
set once the callback was queued.

``id=`` makes the group idempotent: while a group of that id is stored (until its retention
ends), ``app.group(..., id=)`` stores nothing and returns it (``Group.deduplicated``), atomically
on every backend. The generated id (a ULID followed by ``g``, never a plain job id, which is
upper-case) stays the callback job's id, so a worker knows without a lookup that a job is a
group's callback and gives it ``current_job().group``; ``app.get_group`` takes either.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from duly._errors import ConfigurationError, ConfigurationTypeError
from duly._ids import new_id
from duly._job import Job
from duly._limits import refuse_nul
from duly._records import EnqueueResult, GroupRecord, NewGroup, NewJob
from duly._task import Signature, build_all
from duly.backends.groups import GROUPS

if TYPE_CHECKING:
    from duly._ports import AppPort

__all__ = [
    "GROUP_SUFFIX",
    "Group",
    "GroupInfo",
    "build_group",
    "check_group_name",
    "is_group_id",
    "load_group",
    "prepare_group",
    "store_group",
]

#: The last character of every group id (and so of every callback job's id).
GROUP_SUFFIX: Final = "g"

#: The longest ``app.group(id=...)``.
MAX_GROUP_NAME: Final = 200
_NAME = re.compile(r"[A-Za-z0-9._:@-]+")
_GENERATED = re.compile(r"[0-9A-Z]{26}g")


def is_group_id(job_id: str) -> bool:
    """Whether ``job_id`` is a group's id (the id of its ``on_complete`` job)."""
    return len(job_id) == 27 and job_id.endswith(GROUP_SUFFIX)


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A group's state: how many members have each outcome now, and whether it completed."""

    #: The caller's ``id=`` of the group, else its generated id.
    id: str
    key: str | None
    total: int
    succeeded: int
    failed: int
    cancelled: int
    #: Members without an outcome yet.
    pending: int
    created_at: datetime
    #: When every member last had an outcome (aware UTC), else None: None again while a
    #: member retried after the group completed runs again, then the time of its new outcome.
    completed_at: datetime | None
    #: The id of the ``on_complete`` job once enqueued (when the group first completed; it
    #: stays set, and the callback is never enqueued again), else None.
    callback_job_id: str | None

    @classmethod
    def from_record(cls, record: GroupRecord) -> GroupInfo:
        """The public view of a stored group."""
        settled = record.succeeded + record.failed + record.cancelled
        fired = record.first_completed_at is not None or record.completed_at is not None
        return cls(
            id=record.name or record.id,
            key=record.key,
            total=record.total,
            succeeded=record.succeeded,
            failed=record.failed,
            cancelled=record.cancelled,
            pending=record.total - settled,
            created_at=datetime.fromtimestamp(record.created_at, UTC),
            completed_at=_time(record.completed_at),
            callback_job_id=record.id if fired and record.has_callback else None,
        )


@dataclass(frozen=True, slots=True)
class Group:
    """What ``app.group`` returns: the group's id and its member jobs, in order;
    ``deduplicated`` when a group of this ``id=`` was stored already (these are its)."""

    id: str
    jobs: list[Job]
    deduplicated: bool = False


def _check(signatures: Iterable[Signature], app: AppPort, what: str) -> list[Signature]:
    sigs = list(signatures)
    for sig in sigs:
        if not isinstance(sig, Signature):
            raise TypeError(f"{what} takes task.s(...) signatures, got {sig!r}")
        if sig.task.app is not app:
            raise ValueError(f"{sig!r} belongs to another App")
        if sig.options.connection is not None:
            raise ValueError(f"{what}: connection= (transactional enqueue) is not supported")
        if sig.options.on_commit:
            raise ValueError(f"{what}: on_commit=True is not supported")
        if sig.options.after:
            raise ValueError(f"{what}: after= is not supported (wait for the group instead)")
    return sigs


def _member(job: NewJob, key: str | None, what: str) -> NewJob:
    if job.unique_key is not None:
        raise ValueError(f"{what}: task {job.task!r} is unique; a group's jobs cannot be")
    return job if job.key is not None or key is None else dataclasses.replace(job, key=key)


def check_group_name(name: object) -> str:
    """``name`` if it is a valid ``app.group(id=...)``: 1 to 200 letters, digits and
    ``._:@-``, and not of the form of a generated group id; else ConfigurationError."""
    if not isinstance(name, str):
        raise ConfigurationTypeError(f"a group's id= is a str, got {name!r}")
    if not 0 < len(name) <= MAX_GROUP_NAME:
        raise ConfigurationError(
            f"a group's id= has 1 to {MAX_GROUP_NAME} characters, got {len(name)}"
        )
    if not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"a group's id= takes letters, digits and . _ : @ - only, got {name!r}"
        )
    if _GENERATED.fullmatch(name):
        raise ConfigurationError(f"a group's id= cannot look like a generated id: {name!r}")
    return name


def build_group(
    app: AppPort,
    signatures: Iterable[Signature],
    on_complete: Signature | None,
    key: str | None,
    now: float,
    name: str | None = None,
) -> tuple[NewGroup, list[NewJob]]:
    """Validate and build a group's records (nothing stored)."""
    sigs = _check(signatures, app, "group")
    if not sigs:
        raise ValueError("a group needs at least one job")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str, got {key!r}")
    if key is not None:
        refuse_nul(key, "key=")
    if name is not None:
        check_group_name(name)
    group_id = new_id() + GROUP_SUFFIX
    if key is None:
        # So app.jobs(key=...) and app.events(key=...) find the group's jobs by its id.
        key = name or group_id
    members = [_member(job, key, "group") for job in build_all(sigs, now)]
    callback = None
    if on_complete is not None:
        [sig] = _check([on_complete], app, "on_complete")
        built = _member(sig.build(now), key, "on_complete")
        # Runs when the group completes: its own delay would be meaningless.
        callback = dataclasses.replace(built, id=group_id, scheduled_for=built.enqueued_at)
    # Kept as long as a member may be (a failed one): its retry must still find it counted.
    retention = max(app.retention, app.failed_retention)
    group = NewGroup(group_id, key, now, retention, callback, name=name)
    return group, members


def prepare_group(
    app: AppPort,
    signatures: Iterable[Signature],
    on_complete: Signature | None,
    key: str | None,
    name: str | None = None,
) -> tuple[NewGroup, list[NewJob]]:
    """Build a group's records and show them to ``enqueuing`` hooks, in the caller's thread
    and context (a trace context travels with them); nothing stored yet."""
    group, members = build_group(app, signatures, on_complete, key, app.clock.now(), name)
    if app.hooks.watching("enqueuing"):
        app.hooks.enqueuing(_stored(group, members))
    return group, members


def _stored(group: NewGroup, members: list[NewJob]) -> list[NewJob]:
    return members if group.callback is None else [*members, group.callback]


async def store_group(app: AppPort, group: NewGroup, members: list[NewJob]) -> Group:
    """Store a group built by ``prepare_group`` in one atomic step (see ``App.group``); a
    group of the same ``id=`` stored already is returned instead (nothing stored, no hook)."""
    stored = await GROUPS.of(await app.backend()).store(group, members)
    jobs = [Job(app, job_id) for job_id in stored.members]
    if stored.deduplicated:
        return Group(group.name or stored.id, jobs, deduplicated=True)
    if app.hooks.watching("enqueued"):
        new = _stored(group, members)
        await app.hooks.emit("enqueued", new, [EnqueueResult(j.id) for j in new])
    return Group(group.name or group.id, jobs)


async def load_group(app: AppPort, group_id: str) -> GroupInfo | None:
    """The group with this id, or None (see ``App.get_group``)."""
    if not isinstance(group_id, str):
        raise TypeError(f"a group id is a str, got {group_id!r}")
    record = await GROUPS.of(await app.backend()).get(group_id)
    return None if record is None else GroupInfo.from_record(record)
