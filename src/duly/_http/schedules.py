"""Periodic tasks, watches, groups and freshness mirrors."""

from __future__ import annotations

from typing import Final

from duly._freshness import Freshness, Mirror
from duly._http.api import (
    CURSOR,
    LIMIT,
    ApiError,
    Call,
    Endpoint,
    Param,
    encode_cursor,
    page_by_name,
)
from duly._http.models import (
    FreshnessList,
    FreshnessOut,
    GroupOut,
    LastJob,
    PeriodicList,
    PeriodicOut,
    ScheduleIn,
    ScheduleList,
    ScheduleRemoved,
    ScopeForgotten,
    ScopeList,
    ScopeRefreshed,
    WatchList,
    WatchOut,
)
from duly._http.views import group_out, never_scope, scope_out, utc, watch_out
from duly._records import JobFilter
from duly._schedule import Schedule
from duly._schedules import ScheduleInfo
from duly._watch import WatchRecord
from duly.backends.freshness import FRESHNESS

__all__ = ["ENDPOINTS"]

#: With ``key=``, the newest watches read per watch and state (then filtered here).
WATCH_KEY_SCAN: Final = 500
#: The deepest scope a page of ``freshness/{name}/scopes`` reaches (its cursor is an offset).
MAX_SCOPE_OFFSET: Final = 10_000
#: Longest scope a freshness takes (``app.freshness``'s own limit); the path allows more.
MAX_SCOPE: Final = 400
#: A freshness name and a scope may hold "/".
_SLASHES: Final = ("name", "scope")
_ACTIVE: Final = ("scheduled", "queued", "running", "retrying")
_ENDED: Final = ("succeeded", "failed", "cancelled")


def _schedule_task(schedule: Schedule) -> str:
    return schedule.task


async def periodic(call: Call) -> PeriodicList:
    """Every periodic task: its schedule, next tick and newest job."""
    app = call.app
    found, next_page = page_by_name(list(app.registry.schedules.values()), _schedule_task, call)
    backend = await app.backend()
    now = app.clock.now()
    out = []
    for schedule in found:
        newest = await backend.list_jobs(JobFilter(key=schedule.key), 1)
        last = (
            LastJob(
                id=newest[0].id, status=newest[0].status, enqueued_at=utc(newest[0].enqueued_at)
            )
            if newest
            else None
        )
        out.append(
            PeriodicOut(
                task=schedule.task,
                every=schedule.every,
                cron=schedule.cron,
                tz=schedule.tz,
                catch_up=schedule.catch_up,
                next_run_at=utc(schedule.next_tick(now)),
                last_job=last,
            )
        )
    return PeriodicList(periodic=out, next=next_page)


def _schedule_name(info: ScheduleInfo) -> str:
    return info.name


async def schedules_list(call: Call) -> ScheduleList:
    """Every schedule, decorated (``@app.periodic``) and stored (``app.schedule``), by name:
    its next and last tick, and the ticks it skipped while its previous job still ran."""
    found, next_page = page_by_name(await call.app.schedules_async(), _schedule_name, call)
    return ScheduleList(schedules=found, next=next_page)


async def put_schedule(call: Call) -> ScheduleInfo:
    """Store the schedule ``name`` (replacing the one of that name): it ticks from its next
    tick on, in every scheduler."""
    app = call.app
    body: ScheduleIn = call.body
    task = app.tasks.get(body.task)
    if task is None:
        raise ApiError(400, f"no task named {body.task!r} is registered here")
    try:
        bound = task.options(queue=body.queue, priority=body.priority)
        return await app.schedule_async(
            call.path["name"],
            bound.s(*body.args, **body.kwargs),
            every=body.every,
            cron=body.cron,
            tz=body.tz,
            catch_up=body.catch_up,
            overlap=body.overlap,
        )
    except (ValueError, TypeError) as exc:  # ConfigurationError, arguments that do not bind
        raise ApiError(400, str(exc)) from None


async def delete_schedule(call: Call) -> ScheduleRemoved:
    """Remove the stored schedule ``name``: it ticks no more."""
    name = call.path["name"]
    if not await call.app.unschedule_async(name):
        raise ApiError(404, f"no stored schedule named {name!r}")
    return ScheduleRemoved(name=name, removed=True)


async def watches(call: Call) -> WatchList:
    """Active watches (or, ``active=false``, ended ones), newest first."""
    app = call.app
    q = call.query
    names = app.registry.watches()
    if q["watch"] is not None:
        if q["watch"] not in names:
            raise ApiError(404, f"no watch named {q['watch']!r}")
        names = [q["watch"]]
    limit: int = q["limit"]
    key: str | None = q["key"]
    backend = await app.backend()
    read = limit + 1 if key is None else WATCH_KEY_SCAN
    records = [
        record
        for name in names
        for status in (_ACTIVE if q["active"] else _ENDED)
        for record in await backend.list_jobs(
            JobFilter(task=name, status=status, before=q["before"]), read
        )
    ]
    records.sort(key=lambda r: r.id, reverse=True)
    found = [watch_out(app, WatchRecord.from_record(r), r.key) for r in records]
    if key is not None:
        found = [w for w in found if _of_key(w, key)]
    more = len(found) > limit
    found = found[:limit]
    return WatchList(watches=found, next=encode_cursor(found[-1].job_id) if more else None)


def _of_key(watch: WatchOut, key: str) -> bool:
    """``watch`` has this key, or an argument (secret ones masked) equal to it."""
    values = [*watch.args, *watch.kwargs.values()]
    return watch.key == key or any(str(v) == key for v in values if v is not None)


async def group(call: Call) -> GroupOut:
    """A group's progress."""
    info = await call.app.get_group_async(call.path["id"])
    if info is None:
        raise ApiError(404, f"no group {call.path['id']!r} (unknown, or removed by retention)")
    return group_out(info)


def _mirror_name(mirror: Mirror) -> str:
    return mirror.name


async def freshness(call: Call) -> FreshnessList:
    """Every freshness mirror and how many of its scopes are stale."""
    app = call.app
    found, next_page = page_by_name(list(app.mirrors.values()), _mirror_name, call)
    backend = await app.backend()
    now = app.clock.now()
    return FreshnessList(
        freshness=[
            FreshnessOut(
                name=m.name,
                task=m.task.name,
                stale=await FRESHNESS.of(backend).stale_count(m.name, now),
            )
            for m in found
        ],
        next=next_page,
    )


def _mirror(call: Call) -> Mirror:
    mirror = call.app.mirrors.get(call.path["name"])
    if mirror is None:
        raise ApiError(404, f"no freshness named {call.path['name']!r}")
    return mirror


def _mirror_and_scope(call: Call) -> tuple[Mirror, str]:
    """The mirror and scope of ``freshness/{name}/scopes/{scope}``. Both may hold ``/`` (sent
    as is or as ``%2F``): the router splits at the last ``/scopes/``, so when that name is not
    a mirror, the split after a registered name is the one meant."""
    name, scope = call.path["name"], call.path["scope"]
    mirrors = call.app.mirrors
    if name not in mirrors:
        joined = f"{name}/scopes/{scope}"
        for known in sorted(mirrors, key=len, reverse=True):
            if joined.startswith(f"{known}/scopes/"):
                call.path["name"], scope = known, joined[len(known) + len("/scopes/") :]
                break
    mirror = _mirror(call)
    if not scope:
        raise ApiError(400, "a scope is a non-empty string")
    if len(scope) > MAX_SCOPE:
        raise ApiError(400, f"a scope is at most {MAX_SCOPE} characters, got {len(scope)}")
    return mirror, scope


async def scopes(call: Call) -> ScopeList:
    """A mirror's scopes, stalest first (``stale=true``: only those past their SLA)."""
    mirror = _mirror(call)
    q = call.query
    offset = 0
    if q["cursor"] is not None:
        try:
            offset = int(q["cursor"])
        except ValueError:
            raise ApiError(400, "cursor is not a cursor this API returned") from None
    limit: int = q["limit"]
    if not 0 <= offset <= MAX_SCOPE_OFFSET:
        raise ApiError(400, f"pages of scopes reach {MAX_SCOPE_OFFSET} scopes deep at most")
    found = await mirror.scopes_async(stale_only=q["stale"], limit=offset + limit + 1)
    page = found[offset : offset + limit]
    more = len(found) > offset + limit and offset + limit < MAX_SCOPE_OFFSET
    return ScopeList(
        scopes=[scope_out(s) for s in page],
        next=encode_cursor(str(offset + limit)) if more else None,
    )


async def one_scope(call: Call) -> ScopeRefreshed:
    """One scope (never seen: state ``never``), without enqueueing anything."""
    mirror, scope = _mirror_and_scope(call)
    app = call.app
    row = await FRESHNESS.of(await app.backend()).scope(mirror.name, scope)
    if row is None:
        return ScopeRefreshed(scope=never_scope(scope))
    return ScopeRefreshed(scope=scope_out(Freshness.from_state(app, row, app.clock.now())))


async def refresh(call: Call) -> ScopeRefreshed:
    """Ask for a sync of one scope now (one runs at a time: an active one is returned)."""
    mirror, scope = _mirror_and_scope(call)
    try:
        requested = await mirror.request_async(scope)
    except ValueError as exc:  # a scope the freshness refuses: the caller's, not a 500
        raise ApiError(400, str(exc)) from None
    return ScopeRefreshed(scope=scope_out(requested))


async def forget(call: Call) -> ScopeForgotten:
    """Forget one scope (e.g. a deleted team): its state and its baseline syncs. Answers
    ``forgotten: false`` for a scope that was not known; a later check starts it anew."""
    mirror, scope = _mirror_and_scope(call)
    try:
        forgotten = await mirror.forget_async(scope)
    except ValueError as exc:  # a scope the freshness refuses: the caller's, not a 500
        raise ApiError(400, str(exc)) from None
    return ScopeForgotten(scope=scope, forgotten=forgotten)


ENDPOINTS: Final = (
    Endpoint(
        "GET",
        "/api/v1/periodic",
        periodic,
        PeriodicList,
        "List periodic tasks",
        params=(LIMIT, CURSOR),
        errors=(400,),
        tags=("periodic",),
    ),
    Endpoint(
        "GET",
        "/api/v1/schedules",
        schedules_list,
        ScheduleList,
        "List schedules",
        params=(LIMIT, CURSOR),
        errors=(400,),
        tags=("periodic",),
    ),
    Endpoint(
        "PUT",
        "/api/v1/schedules/{name}",
        put_schedule,
        ScheduleInfo,
        "Store a schedule",
        access="admin",
        errors=(400,),
        tags=("periodic",),
        body=ScheduleIn,
    ),
    Endpoint(
        "DELETE",
        "/api/v1/schedules/{name}",
        delete_schedule,
        ScheduleRemoved,
        "Remove a stored schedule",
        access="admin",
        errors=(404,),
        tags=("periodic",),
    ),
    Endpoint(
        "GET",
        "/api/v1/watches",
        watches,
        WatchList,
        "List watches",
        params=(
            Param("active", "bool", "Active watches (default) or ended ones.", default=True),
            Param("watch", description="Only this watch (its task name)."),
            Param(
                "key",
                description="Only watches of this key, or with an argument equal to it "
                "(among the newest 500 per watch and state).",
            ),
            LIMIT,
            Param("before", "cursor", "The `next` of the previous page."),
        ),
        errors=(400, 404),
        tags=("watches",),
    ),
    Endpoint(
        "GET",
        "/api/v1/groups/{id}",
        group,
        GroupOut,
        "Get a group",
        errors=(404,),
        tags=("groups",),
    ),
    Endpoint(
        "GET",
        "/api/v1/freshness",
        freshness,
        FreshnessList,
        "List freshness mirrors",
        params=(LIMIT, CURSOR),
        errors=(400,),
        tags=("freshness",),
    ),
    Endpoint(
        "GET",
        "/api/v1/freshness/{name}/scopes/{scope}",
        one_scope,
        ScopeRefreshed,
        "Get one scope",
        errors=(404,),
        tags=("freshness",),
        slashes=_SLASHES,
    ),
    Endpoint(
        "GET",
        "/api/v1/freshness/{name}/scopes",
        scopes,
        ScopeList,
        "List a mirror's scopes",
        params=(
            Param("stale", "bool", "Only scopes past their SLA.", default=False),
            LIMIT,
            CURSOR,
        ),
        errors=(400, 404),
        tags=("freshness",),
        slashes=_SLASHES,
    ),
    Endpoint(
        "POST",
        "/api/v1/freshness/{name}/scopes/{scope}/refresh",
        refresh,
        ScopeRefreshed,
        "Refresh a scope now",
        access="admin",
        status=202,
        errors=(400, 404),
        tags=("freshness",),
        slashes=_SLASHES,
    ),
    Endpoint(
        "DELETE",
        "/api/v1/freshness/{name}/scopes/{scope}",
        forget,
        ScopeForgotten,
        "Forget a scope",
        access="admin",
        errors=(400, 404),
        tags=("freshness",),
        slashes=_SLASHES,
    ),
)
