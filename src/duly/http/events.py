"""``GET /api/v1/events``: the event stream (``app.events``) as Server-Sent Events.

Each job state change is one message (``id:`` the event id, ``event: job``, ``data:`` the
event as JSON). A client resumes after the last id it saw with ``Last-Event-ID`` (browsers
send it when they reconnect) or ``since=``. A comment line keeps idle connections open. If the
resume point was trimmed by retention, one ``event: reset`` message says so and the stream
goes on from the newest event. The stream ends when the client leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final

import msgspec
from starlette.responses import Response, StreamingResponse

from duly.errors import EventsTrimmed
from duly.http.api import ApiError, Call, Endpoint, Param
from duly.http.models import ErrorBody, EventOut
from duly.http.views import event_out

__all__ = ["ENDPOINTS", "KEEPALIVE"]

#: Seconds between keep-alive comments on an idle stream.
KEEPALIVE: Final = 15.0
_ENCODER: Final = msgspec.json.Encoder()
_QUEUE_SIZE: Final = 1000
_ID_MAX: Final = 200


def _message(event: EventOut) -> bytes:
    return b"id: %s\nevent: job\ndata: %s\n\n" % (event.id.encode(), _ENCODER.encode(event))


def _reset(error: str) -> bytes:
    return b"event: reset\ndata: %s\n\n" % _ENCODER.encode(ErrorBody(error))


async def _pump(call: Call, since: str | None, key: str | None, out: asyncio.Queue[bytes]) -> None:
    """Put every event (and resets) into ``out``, for ever."""
    while True:
        try:
            async for event in call.app.events(since=since, key=key):
                await out.put(_message(event_out(event)))
                since = event.id
            return  # pragma: no cover - the stream never ends by itself
        except EventsTrimmed as exc:
            await out.put(_reset(str(exc)))
            since = None


async def _stream(
    call: Call, since: str | None, key: str | None, keepalive: float
) -> AsyncIterator[bytes]:
    out: asyncio.Queue[bytes] = asyncio.Queue(_QUEUE_SIZE)
    pump = asyncio.create_task(_pump(call, since, key, out))
    try:
        yield b"retry: 2000\n: connected\n\n"
        while True:
            if pump.done():  # the backend failed: end the stream, the client reconnects
                yield _reset(f"the event stream stopped: {pump.exception()!r}")
                return
            try:
                message = await asyncio.wait_for(out.get(), keepalive)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            yield message
    finally:
        pump.cancel()
        with contextlib.suppress(BaseException):
            await pump


def events_endpoint(keepalive: float) -> Endpoint:
    """The SSE endpoint, with keep-alive comments every ``keepalive`` seconds."""

    async def events(call: Call) -> Response:
        """Job state changes as Server-Sent Events."""
        since = call.request.headers.get("last-event-id") or call.query["since"]
        key = call.query["key"]
        if since is not None and (len(since) > _ID_MAX or not since.isascii() or not since.strip()):
            raise ApiError(400, "Last-Event-ID / since is not an event id")
        if since is not None:
            backend = await call.app.backend()
            try:
                await backend.read_events(since, key, 1)  # validates the id
            except EventsTrimmed:
                pass  # the stream starts with a reset
            except (ValueError, TypeError):
                raise ApiError(400, f"{since!r} is not an event id") from None
        return StreamingResponse(
            _stream(call, since, key, keepalive),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return Endpoint(
        "GET",
        "/api/v1/events",
        events,
        EventOut,
        "Event stream (SSE)",
        params=(
            Param("key", description="Only the events of this key's jobs."),
            Param("since", description="Resume after this event id (or send Last-Event-ID)."),
        ),
        errors=(400,),
        media="text/event-stream",
        tags=("events",),
    )


ENDPOINTS: Final = ()
