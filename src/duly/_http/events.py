"""``GET /api/v1/events``: the event stream (``app.events``) as Server-Sent Events.

Each job state change is one message (``id:`` the event id, ``event: job``, ``data:`` the
event as JSON); a running job's progress is one message ``event: progress`` (its ``data`` has
``progress`` set), which a client listening for ``job`` messages never sees. A client resumes
after the last id it saw with ``Last-Event-ID`` (browsers send it when they reconnect) or
``since=``. A comment line keeps idle connections open. If the resume point was trimmed by
retention, one ``event: reset`` message says so and the stream goes on from the newest event.
The stream ends when the client leaves.

Every stream of a served app shares one backend reader (``duly._http.fanout``); what is ready
for a client goes out in one write. The answer watches for the client's disconnect itself and
stops its stream at once (no ``asyncio.wait_for``, which on Python 3.11 can swallow the
cancellation and keep building a backlog for nobody).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from duly._errors import EventsTrimmed
from duly._http.api import API_HEADERS, ApiError, Call, Endpoint, Param
from duly._http.fanout import Fanout, Subscriber, catch_up, reset, take
from duly._http.models import EventOut
from duly.backends.events import EVENTS, EventStore

__all__ = ["KEEPALIVE", "events_endpoint"]

#: Seconds between keep-alive comments on an idle stream.
KEEPALIVE: Final = 15.0
_HELLO: Final = b"retry: 2000\n: connected\n\n"
_KEEPALIVE: Final = b": keep-alive\n\n"


class EventStream(Response):
    """The SSE answer of one client: its subscription to the app's ``Fanout``."""

    media_type = "text/event-stream"

    def __init__(
        self, fanout: Fanout, call: Call, store: EventStore, since: str, keepalive: float
    ) -> None:
        # No Response.__init__: it would render an empty body and announce its length.
        self.status_code, self.background = 200, None
        self.init_headers({**API_HEADERS, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.fanout, self.call, self.store = fanout, call, store
        self.since, self.keepalive = since, keepalive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        sub = self.fanout.join(self.call.app, self.call.query["key"])
        stream = asyncio.create_task(self._stream(sub, send))
        gone = asyncio.create_task(_disconnect(receive))
        try:
            await asyncio.wait({stream, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.fanout.leave(sub)  # first: the reader stops with the last client
            for task in (stream, gone):
                task.cancel()
            # gather, not a suppress(BaseException): a cancellation of this answer itself
            # (the server shutting down) must go on up.
            await asyncio.gather(stream, gone, return_exceptions=True)
        with contextlib.suppress(OSError):  # the client may be gone already
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream(self, sub: Subscriber, send: Send) -> None:
        async def write(data: bytes) -> None:
            if sub.gone:
                raise asyncio.CancelledError  # see Subscriber.gone
            await send({"type": "http.response.body", "body": data, "more_body": True})

        await write(_HELLO)
        await sub.started.wait()
        key, cursor = sub.key, self.since
        last, behind = int(self.since), True  # first read what followed since= ourselves
        loop = asyncio.get_running_loop()
        while sub.failed is None and not sub.gone:
            if behind or sub.behind:
                if sub.behind:  # the buffer overflowed: read from what was sent last
                    sub.behind, cursor = False, str(last)
                    sub.pending.clear()
                try:
                    data, cursor, last, behind = await catch_up(self.store, cursor, key, last)
                except Exception as exc:  # the backend failed: say so, the client reconnects
                    sub.failed = f"the event stream stopped: {exc!r}"
                    break
            else:
                data, last = take(sub, last)
            if data:
                await write(data)
                continue
            if behind or sub.behind or sub.pending:
                continue
            sub.wake.clear()
            timer = loop.call_later(self.keepalive, sub.wake.set)
            try:
                await sub.wake.wait()
            finally:
                timer.cancel()
            if not (sub.pending or sub.behind or sub.failed):
                await write(_KEEPALIVE)
        if sub.failed is not None:  # the backend failed: end, the client reconnects
            await write(reset(sub.failed))


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def events_endpoint(keepalive: float, fanout: Fanout | None = None) -> Endpoint:
    """The SSE endpoint, with keep-alive comments every ``keepalive`` seconds; its streams
    share ``fanout`` (one per built app)."""
    fanout = fanout or Fanout()

    async def events(call: Call) -> Response:
        """Job state changes as Server-Sent Events (``event: job``), and running jobs'
        progress (``event: progress``)."""
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
        return EventStream(fanout, call, store, since, keepalive)

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
