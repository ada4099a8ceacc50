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

from duly._errors import EventsTrimmed
from duly._http.api import ApiError, Call, Endpoint, Param
from duly._http.models import ErrorBody, EventOut
from duly._http.views import event_out
from duly.backends.events import EVENTS

__all__ = ["KEEPALIVE", "events_endpoint"]

#: Seconds between keep-alive comments on an idle stream.
KEEPALIVE: Final = 15.0
_ENCODER: Final = msgspec.json.Encoder()
_QUEUE_SIZE: Final = 1000
_ID_MAX: Final = 200


def _message(event: EventOut) -> bytes:
    return b"id: %s\nevent: job\ndata: %s\n\n" % (event.id.encode(), _ENCODER.encode(event))


def _reset(error: str) -> bytes:
    return b"event: reset\ndata: %s\n\n" % _ENCODER.encode(ErrorBody(error))


async def _pump(call: Call, since: str, key: str | None, out: asyncio.Queue[bytes]) -> None:
    """Put every event after ``since`` (and a reset where some were trimmed) into ``out``."""
    events = EVENTS.of(await call.app.backend())
    while True:
        try:
            async for event in call.app.events(since=since, key=key):
                await out.put(_message(event_out(event)))
                since = event.id
        except EventsTrimmed as exc:
            # "now" is fixed before the client hears of the reset: nothing after it is missed.
            _, since = await events.read(None, key, 0)
            await out.put(_reset(str(exc)))


async def _stream(
    call: Call, since: str, key: str | None, keepalive: float
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
        if since is not None and not (since.isascii() and since.isdigit() and len(since) <= 18):
            raise ApiError(400, "Last-Event-ID / since is not an event id")
        store = EVENTS.of(await call.app.backend())
        if since is None:
            # "now" is fixed before the answer starts: an event stored once the client has the
            # first line is never missed.
            _, since = await store.read(None, key, 0)
        else:
            try:
                await store.read(since, key, 1)  # checks the id
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
