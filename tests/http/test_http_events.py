"""``GET /api/v1/events`` over a real uvicorn: ids, resume, key filter, keep-alive, reset.

Every wait is on the stream itself (a read bounded by the socket timeout), never a sleep."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
from http_harness import ADMIN, AS_READ, Hub, Served, Stream

pytestmark = pytest.mark.timeout(90)


def test_events_carry_ids_and_resume_from_last_event_id(hub: Hub, served: Served) -> None:
    stream = Stream(served.port, "/api/v1/events", AS_READ)
    assert stream.status == 200
    assert stream.response.getheader("content-type", "").startswith("text/event-stream")
    assert stream.message() == {"retry": "2000", "comment": "connected"}
    job = hub.add.options(key="k1").enqueue(1, 2)
    first = stream.job_event()
    assert first["job_id"] == job.id and first["status"] == "queued" and first["key"] == "k1"
    assert first["_id"] == first["id"] and first["task"] == "add"
    stream.close()

    later = hub.add.enqueue(3, 4)
    hub.run(later.id)
    resumed = Stream(served.port, "/api/v1/events", {**AS_READ, "Last-Event-ID": first["id"]})
    seen = [resumed.job_event()]
    while (seen[-1]["job_id"], seen[-1]["status"]) != (later.id, "succeeded"):
        seen.append(resumed.job_event())  # the first job ran too
    assert [e["status"] for e in seen if e["job_id"] == later.id] == [
        "queued",
        "running",
        "succeeded",
    ]
    assert [int(e["id"]) for e in seen] == sorted(int(e["id"]) for e in seen)
    assert int(seen[0]["id"]) > int(first["id"])
    resumed.close()
    since = Stream(served.port, f"/api/v1/events?since={first['id']}", AS_READ)
    assert since.job_event()["id"] == seen[0]["id"]
    since.close()


def test_key_filter_and_keepalive(hub: Hub, served: Served) -> None:
    stream = Stream(served.port, "/api/v1/events?key=mine", AS_READ)
    hub.add.options(key="other").enqueue(1, 1)
    mine = hub.add.options(key="mine").enqueue(2, 2)
    event = stream.job_event()
    assert event["job_id"] == mine.id and event["key"] == "mine"
    comments = []
    while len(comments) < 2:  # keepalive=0.5 s in the fixture
        fields = stream.message()
        assert "event" not in fields, fields  # nothing else of key "mine" happens
        if "comment" in fields:
            comments.append(fields["comment"])
    assert "keep-alive" in comments
    stream.close()


def test_events_need_a_token_and_a_valid_id(hub: Hub, served: Served) -> None:
    assert Stream(served.port, "/api/v1/events", {}).status == 401
    for bad in ("abc", "-1", "9" * 300, "1.5"):
        stream = Stream(served.port, "/api/v1/events", {**AS_READ, "Last-Event-ID": bad})
        assert stream.status == 400, bad
        stream.close()
    cookie = {"Cookie": f"duly_session={ADMIN}"}
    assert Stream(served.port, "/api/v1/events", cookie).status == 200


def test_a_trimmed_resume_point_is_a_reset(hub: Hub, served: Served) -> None:
    hub.add.enqueue(1, 1)
    stream = Stream(served.port, "/api/v1/events", AS_READ)
    hub.add.enqueue(2, 2)
    old = stream.job_event()["id"]
    stream.close()

    async def purge() -> None:
        backend = await hub.app.backend()
        await backend.purge(time.time() + 3600, 10_000, keep=0.0)
        await hub.app.aclose()

    for _ in range(3):
        hub.add.enqueue(3, 3)
    asyncio.run(purge())
    hub.add.enqueue(4, 4)
    resumed = Stream(served.port, "/api/v1/events", {**AS_READ, "Last-Event-ID": old})
    assert resumed.status == 200
    fields = resumed.message()
    while fields.get("event") != "reset":
        assert fields.get("event") != "job", fields
        fields = resumed.message()
    assert "trimmed" in fields["data"]
    after = hub.add.enqueue(5, 5)
    assert resumed.job_event()["job_id"] == after.id
    resumed.close()


def test_the_stream_ends_when_the_client_leaves(hub: Hub, served: Served) -> None:
    state = served.server.server_state
    fanout = hub.client.app.state.event_fanout
    streams = [Stream(served.port, "/api/v1/events", AS_READ) for _ in range(3)]
    for stream in streams:
        assert stream.message()["retry"] == "2000"
    hub.app.enqueue_many([hub.add.s(i, i) for i in range(3000)])
    first = streams[0].job_event()["id"]
    # Two clients resume before a backlog they never read: the server must not build it.
    resumed = [
        Stream(served.port, f"/api/v1/events?since={int(first) - 1}", AS_READ) for _ in range(2)
    ]
    for stream in resumed:  # each is subscribed once its first message came (not before)
        assert stream.message()["retry"] == "2000"
    streams += resumed
    assert len(state.tasks) >= 5 and len(fanout.subscribers) == 5
    assert len(_readers()) == 1 and len(_streams()) == 5  # one backend reader for all
    for stream in streams:
        stream.close()
    deadline = time.monotonic() + 10  # the server notices at once; 10 s is for a busy machine
    while state.tasks or state.connections or _readers() or _streams() or fanout.subscribers:
        assert time.monotonic() < deadline, (state.tasks, state.connections, _streams())
        time.sleep(0.02)
    assert fanout.reader is None


def _tasks(name: str) -> list[asyncio.Task[None]]:
    """The running tasks whose coroutine is ``name``."""
    # type(), not isinstance(): isinstance reads __class__, which lazy proxies in the heap
    # (Django's settings, when a Django test ran in this process) answer by loading themselves.
    return [
        o
        for o in gc.get_objects()
        if issubclass(type(o), asyncio.Task) and not o.done() and o.get_coro().__qualname__ == name  # type: ignore[union-attr]
    ]


def _readers() -> list[asyncio.Task[None]]:
    """The backend readers (``Fanout._read`` tasks) still running."""
    return _tasks("Fanout._read")


def _streams() -> list[asyncio.Task[None]]:
    """The per-client streams (``EventStream._stream`` tasks) still running."""
    return _tasks("EventStream._stream")
