"""From duly's records to the API's Structs (``duly._http.models``).

Every job and watch passes through here on its way out, so this is where a task's ``secret=``
arguments are masked (``duly._secrets.redact_job``).
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from duly._http.models import (
    EventOut,
    GroupOut,
    ScopeOut,
    WatchOut,
)
from duly._serialization import to_builtins

if TYPE_CHECKING:
    from duly._app import App
    from duly._events import Event
    from duly._freshness import Freshness
    from duly._groups import GroupInfo
    from duly._job import JobInfo
    from duly._watch import WatchRecord

__all__ = [
    "event_out",
    "group_out",
    "job_out",
    "maybe_utc",
    "never_scope",
    "scope_out",
    "utc",
    "watch_out",
]


def utc(seconds: float) -> datetime:
    """Aware UTC datetime of POSIX ``seconds``."""
    return datetime.fromtimestamp(seconds, UTC)


def maybe_utc(seconds: float | None) -> datetime | None:
    """``utc``, None staying None."""
    return None if seconds is None else utc(seconds)


def job_out(app: App, info: JobInfo[Any]) -> JobInfo[Any]:
    """The API's view of a job: the JobInfo itself, secret arguments masked."""
    from duly._secrets import redact_job

    return redact_job(app, info)


def watch_out(app: App, record: WatchRecord, key: str | None) -> WatchOut:
    """The API's view of a watch (``key``: its job's), secret arguments masked."""
    from duly._secrets import redact_arguments

    args, kwargs = redact_arguments(app, record.watch, record.args, record.kwargs)
    values = {f.name: getattr(record, f.name) for f in fields(record)}
    values.update(args=to_builtins(args), kwargs=to_builtins(kwargs), key=key)
    return msgspec.convert(values, WatchOut, from_attributes=True)


def group_out(info: GroupInfo) -> GroupOut:
    """The API's view of a group."""
    return GroupOut(**{f.name: getattr(info, f.name) for f in fields(info)})


def scope_out(scope: Freshness) -> ScopeOut:
    """The API's view of a freshness scope (an infinite score as None)."""
    data = scope.to_dict()
    return ScopeOut(
        scope=scope.scope,
        state=scope.state,
        score=data["score"],
        last_synced_at=scope.last_synced_at,
        syncing=scope.syncing,
        job=data["job"],
        failures=scope.failures,
        last_error=scope.last_error,
        last_attempt_at=scope.last_attempt_at,
        next_due=scope.next_due,
        requested_by=scope.requested_by,
    )


def never_scope(scope: str) -> ScopeOut:
    """A scope that was never checked, requested nor synced."""
    return ScopeOut(
        scope=scope,
        state="never",
        score=None,
        last_synced_at=None,
        syncing=False,
        job=None,
        failures=0,
        last_error=None,
        last_attempt_at=None,
        next_due=None,
        requested_by=None,
    )


def event_out(event: Event) -> EventOut:
    """The API's view of an event."""
    return EventOut(
        id=event.id,
        job_id=event.job_id,
        task=event.task,
        queue=event.queue,
        key=event.key,
        status=event.status,
        at=event.at,
        progress=event.progress,
    )
