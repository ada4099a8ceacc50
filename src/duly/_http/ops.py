"""Queues, workers, per-minute stats, the caller's session, health and metrics."""

from __future__ import annotations

from typing import Final

from starlette.responses import Response

from duly._errors import BackendUnavailable, ConfigurationError
from duly._http.api import (
    CURSOR,
    LIMIT,
    ApiError,
    Call,
    Endpoint,
    Param,
    json_response,
    page_by_name,
)
from duly._http.auth import csrf_value
from duly._http.models import (
    Health,
    QueueList,
    QueueOut,
    QueuePause,
    Session,
    StatRowOut,
    Stats,
    StatTotals,
    WorkerList,
    WorkerOut,
)
from duly._http.views import maybe_utc, utc
from duly._records import QueueStats, WorkerRecord

__all__ = ["ENDPOINTS"]


async def queues(call: Call) -> QueueList:
    """Every queue with its counts, by name."""
    found, next_page = page_by_name(await call.app.queues_async(), _queue_name, call)
    return QueueList(
        queues=[
            QueueOut(
                name=q.name,
                queued=q.queued,
                scheduled=q.scheduled,
                running=q.running,
                parked=q.parked,
                oldest_ready_at=maybe_utc(q.oldest_ready_at),
                paused=q.paused,
            )
            for q in found
        ],
        next=next_page,
    )


async def pause_queue(call: Call) -> QueuePause:
    """Pause a queue: workers start none of its jobs (running ones finish)."""
    name = call.path["name"]
    try:
        changed = await call.app.pause_async(name)
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    return QueuePause(name=name, paused=True, changed=changed)


async def resume_queue(call: Call) -> QueuePause:
    """Resume a paused queue."""
    name = call.path["name"]
    try:
        changed = await call.app.resume_async(name)
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    return QueuePause(name=name, paused=False, changed=changed)


def _queue_name(queue: QueueStats) -> str:
    return queue.name


def _worker_id(worker: WorkerRecord) -> str:
    return worker.id


async def workers(call: Call) -> WorkerList:
    """The registered worker processes."""
    found, next_page = page_by_name(await call.app.workers_async(), _worker_id, call)
    return WorkerList(
        workers=[
            WorkerOut(
                id=w.id,
                started_at=utc(w.started_at),
                last_seen=utc(w.last_seen),
                info=dict(w.info),
            )
            for w in found
        ],
        next=next_page,
    )


async def stats(call: Call) -> Stats:
    """Per-minute succeeded / failed / retried counters."""
    minutes: int = call.query["minutes"]
    try:
        rows = await call.app.stats_async(minutes)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    out = [
        StatRowOut(
            minute=utc(r.minute * 60),
            task=r.task,
            queue=r.queue,
            succeeded=r.succeeded,
            failed=r.failed,
            retried=r.retried,
        )
        for r in rows
    ]
    totals = StatTotals(
        succeeded=sum(r.succeeded for r in rows),
        failed=sum(r.failed for r in rows),
        retried=sum(r.retried for r in rows),
    )
    return Stats(minutes=minutes, rows=out, totals=totals)


async def session(call: Call) -> Session:
    """The caller's role, and the CSRF value of its cookie session."""
    token = (
        call.request.cookies.get("duly_session")
        if "authorization" not in call.request.headers
        else None
    )
    return Session(
        role="admin" if call.role == "admin" else "read", csrf=csrf_value(token) if token else ""
    )


async def healthz(call: Call) -> Response:
    """200 when the backend answers, else 503."""
    try:
        await (await call.app.backend()).ping()
    except BackendUnavailable as exc:
        return json_response(Health(status="unavailable", error=str(exc)), 503)
    return json_response(Health(status="ok"))


async def metrics(call: Call) -> Response:
    """The backend-wide Prometheus metrics (queue depths, workers, freshness...)."""
    from duly.observability import metrics_text_async

    text = await metrics_text_async(call.app)
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")


ENDPOINTS: Final = (
    Endpoint("GET", "/api/v1/session", session, Session, "The caller's session", tags=("auth",)),
    Endpoint(
        "GET",
        "/api/v1/queues",
        queues,
        QueueList,
        "List queues",
        params=(LIMIT, CURSOR),
        errors=(400,),
        tags=("queues",),
    ),
    Endpoint(
        "POST",
        "/api/v1/queues/{name}/pause",
        pause_queue,
        QueuePause,
        "Pause a queue",
        access="admin",
        errors=(400,),
        tags=("queues",),
    ),
    Endpoint(
        "POST",
        "/api/v1/queues/{name}/resume",
        resume_queue,
        QueuePause,
        "Resume a queue",
        access="admin",
        errors=(400,),
        tags=("queues",),
    ),
    Endpoint(
        "GET",
        "/api/v1/workers",
        workers,
        WorkerList,
        "List workers",
        params=(LIMIT, CURSOR),
        errors=(400,),
        tags=("workers",),
    ),
    Endpoint(
        "GET",
        "/api/v1/stats",
        stats,
        Stats,
        "Per-minute counters",
        params=(
            Param(
                "minutes",
                "int",
                "The last N minutes (1 to 1440).",
                default=60,
                minimum=1,
                maximum=1440,
            ),
        ),
        errors=(400,),
        tags=("stats",),
    ),
    Endpoint(
        "GET",
        "/healthz",
        healthz,
        Health,
        "Health",
        access="public",
        errors=(503,),
        tags=("health",),
    ),
    Endpoint(
        "GET",
        "/metrics",
        metrics,
        None,
        "Prometheus metrics",
        media="text/plain",
        tags=("health",),
    ),
)
