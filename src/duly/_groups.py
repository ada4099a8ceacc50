"""Groups (PRODUCT §8): jobs fanned out together, with one ``on_complete`` job when all are done.

``app.group([...], on_complete=..., key=...)`` stores the group, its members and its callback
in one atomic backend step (``duly.backends.groups``). The callback job exists from the start,
``scheduled`` with no due time, under the group's own id; the backend step that records the
outcome of the group's last member makes it ``queued``, so it runs exactly once however the
members finish (two at once on two workers, or a worker killed mid-finish: recovery re-runs the
member, whose outcome then counts once). Each member's FIRST outcome (succeeded, failed after its
retries, or cancelled) is final for the group: ``duly retry`` of a failed member re-runs it, but
the group neither counts it again nor re-fires the callback.

Group ids are a ULID followed by ``g`` (never a plain job id, which is upper-case), so a worker
knows without a lookup that a job is a group's callback and gives it ``current_job().group``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

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
    "is_group_id",
    "load_group",
    "prepare_group",
    "store_group",
]

#: The last character of every group id (and so of every callback job's id).
GROUP_SUFFIX: Final = "g"


def is_group_id(job_id: str) -> bool:
    """Whether ``job_id`` is a group's id (the id of its ``on_complete`` job)."""
    return len(job_id) == 27 and job_id.endswith(GROUP_SUFFIX)


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A group's state: how many members reached each outcome, and whether it completed."""

    id: str
    key: str | None
    total: int
    succeeded: int
    failed: int
    cancelled: int
    #: Members without an outcome yet.
    pending: int
    created_at: datetime
    #: When the last member's outcome was recorded (aware UTC), else None.
    completed_at: datetime | None
    #: The id of the ``on_complete`` job once enqueued (the group completed), else None.
    callback_job_id: str | None

    @classmethod
    def from_record(cls, record: GroupRecord) -> GroupInfo:
        """The public view of a stored group."""
        settled = record.succeeded + record.failed + record.cancelled
        completed = record.completed_at is not None
        return cls(
            id=record.id,
            key=record.key,
            total=record.total,
            succeeded=record.succeeded,
            failed=record.failed,
            cancelled=record.cancelled,
            pending=record.total - settled,
            created_at=datetime.fromtimestamp(record.created_at, UTC),
            completed_at=_time(record.completed_at),
            callback_job_id=record.id if completed and record.has_callback else None,
        )


@dataclass(frozen=True, slots=True)
class Group:
    """What ``app.group`` returns: the group's id and its member jobs, in order."""

    id: str
    jobs: list[Job]


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


def build_group(
    app: AppPort,
    signatures: Iterable[Signature],
    on_complete: Signature | None,
    key: str | None,
    now: float,
) -> tuple[NewGroup, list[NewJob]]:
    """Validate and build a group's records (nothing stored)."""
    sigs = _check(signatures, app, "group")
    if not sigs:
        raise ValueError("a group needs at least one job")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str, got {key!r}")
    if key is not None:
        refuse_nul(key, "key=")
    group_id = new_id() + GROUP_SUFFIX
    if key is None:
        key = group_id  # so app.jobs(key=...) and app.events(key=...) find the group's jobs
    members = [_member(job, key, "group") for job in build_all(sigs, now)]
    callback = None
    if on_complete is not None:
        [sig] = _check([on_complete], app, "on_complete")
        built = _member(sig.build(now), key, "on_complete")
        # Runs when the group completes: its own delay would be meaningless.
        callback = dataclasses.replace(built, id=group_id, scheduled_for=built.enqueued_at)
    # Kept as long as a member may be (a failed one): its retry must still find it counted.
    retention = max(app.retention, app.failed_retention)
    group = NewGroup(group_id, key, now, retention, callback)
    return group, members


def prepare_group(
    app: AppPort, signatures: Iterable[Signature], on_complete: Signature | None, key: str | None
) -> tuple[NewGroup, list[NewJob]]:
    """Build a group's records and show them to ``enqueuing`` hooks, in the caller's thread
    and context (a trace context travels with them); nothing stored yet."""
    group, members = build_group(app, signatures, on_complete, key, app.clock.now())
    if app.hooks.watching("enqueuing"):
        app.hooks.enqueuing(_stored(group, members))
    return group, members


def _stored(group: NewGroup, members: list[NewJob]) -> list[NewJob]:
    return members if group.callback is None else [*members, group.callback]


async def store_group(app: AppPort, group: NewGroup, members: list[NewJob]) -> Group:
    """Store a group built by ``prepare_group`` in one atomic step (see ``App.group``)."""
    await GROUPS.of(await app.backend()).store(group, members)
    if app.hooks.watching("enqueued"):
        stored = _stored(group, members)
        await app.hooks.emit("enqueued", stored, [EnqueueResult(j.id) for j in stored])
    return Group(group.id, [Job(app, job.id) for job in members])


async def load_group(app: AppPort, group_id: str) -> GroupInfo | None:
    """The group with this id, or None (see ``App.get_group``)."""
    if not isinstance(group_id, str):
        raise TypeError(f"a group id is a str, got {group_id!r}")
    record = await GROUPS.of(await app.backend()).get(group_id)
    return None if record is None else GroupInfo.from_record(record)
