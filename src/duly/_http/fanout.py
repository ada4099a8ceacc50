"""One reader of the event stream per served app, fanned out to every SSE client.

Before, each ``GET /api/v1/events`` read the backend on its own: on Redis one blocking ``XREAD``
per client held a pooled connection, so 100 idle dashboard tabs starved the API (issue 28, 8b).
Now a ``Fanout`` runs one reader task (``EventStore.read`` in batches, ``EventStore.wait`` when
idle: on Redis one blocking connection, on SQLite one poller, on PostgreSQL one LISTEN) while
at least one client listens, and stops with the last one. Each event is encoded once and its
bytes appended to every interested subscriber's buffer.

A subscriber that resumes (``since=``) or falls behind (its buffer full: a slow client) reads
the backend itself, a batch at a time, until it has caught up, then takes its buffer again,
skipping what it already sent (event ids increase, and an event once read is final). Nothing
is missed: the reader's first cursor is fixed before any subscriber's catch-up read, and a
subscriber is in the set before its first catch-up read, so every later event reaches its
buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import msgspec

from duly._errors import EventsTrimmed
from duly._events import Event
from duly._http.models import ErrorBody
from duly._http.views import event_out
from duly.backends.events import EVENTS, EventStore

if TYPE_CHECKING:
    from duly._app import App
    from duly._records import EventRecord

__all__ = ["BATCH", "BUFFER", "Fanout", "Subscriber", "catch_up", "message", "reset", "take"]

#: Events per backend read (the reader's and a catching-up subscriber's).
BATCH: Final = 500
#: Messages a subscriber may have waiting before it counts as behind (and reads for itself).
BUFFER: Final = 5000
#: Longest wait of the reader between reads when idle (a missed wake-up costs at most this).
_WAIT: Final = 1.0
_ENCODER: Final = msgspec.json.Encoder()


def message(record: EventRecord) -> bytes:
    """One event as an SSE message: ``event: job`` for a state change, ``event: progress``
    for a running job's progress (a client that listens for ``job`` never sees those)."""
    event = event_out(Event.from_record(record))
    kind = b"job" if record.progress is None else b"progress"
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event.id.encode(), kind, _ENCODER.encode(event))


def reset(error: str) -> bytes:
    """The ``event: reset`` message."""
    return b"event: reset\ndata: %s\n\n" % _ENCODER.encode(ErrorBody(error))


@dataclass(eq=False, slots=True)
class Subscriber:
    """One client's place in the fan-out: its filter and what waits to be sent to it."""

    key: str | None
    started: asyncio.Event
    pending: list[tuple[int, bytes]] = field(default_factory=list)
    #: Its buffer overflowed: what it missed must be read from the backend.
    behind: bool = False
    #: Why the reader stopped (the stream ends with a reset), or None.
    failed: str | None = None
    #: Its client left: the stream ends at its next step even if a library it awaited
    #: swallowed the cancellation (seen on Python 3.11 with a read in flight).
    gone: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, event_id: int, data: bytes) -> None:
        if self.behind:
            return
        if len(self.pending) >= BUFFER:
            self.behind = True
            self.pending.clear()
        else:
            self.pending.append((event_id, data))
        self.wake.set()

    def fail(self, error: str) -> None:
        self.failed = error
        self.started.set()
        self.wake.set()


class Fanout:
    """The reader of one served app and its subscribers (no module state: one per app)."""

    def __init__(self) -> None:
        self.subscribers: set[Subscriber] = set()
        self.reader: asyncio.Task[None] | None = None
        self._started = asyncio.Event()

    def join(self, app: App, key: str | None) -> Subscriber:
        """A new subscriber; starts the reader if it is the first."""
        reader = self.reader
        if reader is not None and reader.get_loop() is not asyncio.get_running_loop():
            self.subscribers = set()  # another event loop's (a test client's that ended)
            reader = None
        if reader is None or reader.done():
            self._started = asyncio.Event()
            self.reader = asyncio.create_task(self._read(app, self._started))
        sub = Subscriber(key, self._started)
        self.subscribers.add(sub)
        return sub

    def leave(self, sub: Subscriber) -> None:
        """``sub`` is gone; the last one out stops the reader."""
        sub.gone = True
        sub.wake.set()
        self.subscribers.discard(sub)
        if not self.subscribers and self.reader is not None:
            self.reader.cancel()
            self.reader = None

    async def _read(self, app: App, started: asyncio.Event) -> None:
        # "while I am the reader", not only cancel(): a backend read in flight may swallow the
        # cancellation (redis-py on Python 3.11), and a stale reader must not dispatch twice.
        me = asyncio.current_task()
        try:
            store = EVENTS.of(await app.backend())
            _, cursor = await store.read(None, None, 0)
            started.set()  # from here on, every event after cursor reaches the buffers
            while self.reader is me:
                try:
                    records, cursor = await store.read(cursor, None, BATCH)
                except EventsTrimmed:  # the reader fell behind retention: all of them did
                    _, cursor = await store.read(None, None, 0)
                    for sub in self.subscribers:
                        sub.behind = True
                        sub.wake.set()
                    continue
                if self.reader is not me:
                    return
                self._dispatch(records)
                if len(records) < BATCH:
                    await store.wait(cursor, None, _WAIT)
        except Exception as exc:  # the backend failed: end every stream
            if self.reader is not me:
                return
            for sub in list(self.subscribers):
                sub.fail(f"the event stream stopped: {exc!r}")
            self.subscribers.clear()

    def _dispatch(self, records: list[EventRecord]) -> None:
        for record in records:
            data = message(record)  # encoded once, whatever the number of clients
            event_id = int(record.id)
            for sub in self.subscribers:
                if sub.key is None or sub.key == record.key:
                    sub.push(event_id, data)


async def catch_up(
    store: EventStore, cursor: str, key: str | None, last: int
) -> tuple[bytes, str, int, bool]:
    """One batch read by a subscriber itself: its messages after event ``last``, the cursor to
    read on from, the new ``last``, and whether it is still behind."""
    try:
        records, cursor = await store.read(cursor, key, BATCH)
    except EventsTrimmed as exc:
        # "now" is fixed before the client hears of the reset: nothing after it is missed.
        _, cursor = await store.read(None, key, 0)
        return reset(str(exc)), cursor, max(last, _number(cursor, last)), True
    chunks = []
    for record in records:
        event_id = int(record.id)
        if event_id > last:
            chunks.append(message(record))
            last = event_id
    return b"".join(chunks), cursor, last, len(records) >= BATCH


def take(sub: Subscriber, last: int) -> tuple[bytes, int]:
    """The subscriber's buffered messages after event ``last`` (emptying the buffer)."""
    pending, sub.pending = sub.pending, []
    chunks = []
    for event_id, data in pending:
        if event_id > last:
            chunks.append(data)
            last = event_id
    return b"".join(chunks), last


def _number(cursor: str, default: int) -> int:
    with contextlib.suppress(ValueError):
        return int(cursor)
    return default
